"""The suite contract: data, the heads it fine-tunes, a budget table, and a protocol in two steps.

A suite declares as data what the runner needs to build models for it: its tasks, each with the
:class:`Head` (the model class and labels) it fine-tunes or scores, and a :class:`~harness.budgets.Budgets`
table per profile. The runner then drives every suite the same way, per task::

    load(head) -> adapter (before_finetune) -> efficiency -> suite.train -> adapter (after_finetune) -> suite.score

so a method that acts on a fine-tuned model (paper 004's sense dictionary) needs no special case, and
evaluation-only suites (bpb, mteb_clf, word_sim) simply do not override :meth:`Suite.train`.

Scores and per-item outputs. ``score`` returns :class:`~harness.results.records.Score` s and, behind
each, the per-item outputs it is computed from (:class:`~harness.results.records.ItemOutputs`, keyed
by stable item ids), so the runner can compare a method with its baseline item by item: paired
bootstrap CIs of %Base and of the difference, McNemar's exact test, flip rate, agreement
(:mod:`harness.measure.compare`). A score is ``sum(values) / sum(weights)`` over its items, and a language
``avg`` is the mean over the task's languages; the helpers below build both sides consistently::

    items = [correctness("xnli", lang, "test", ids[lang], predicted[lang], gold[lang]) for lang in languages]
    scores = [score_items([i], rng, chance=chance.majority(i.gold), setting="zero-shot") for i in items]
    scores.append(score_items(items, rng, chance=mean_of_chances, setting="zero-shot"))   # language "avg"

A ratio metric gives the per-item numerator as values and the denominator as weights
(``ItemOutputs(..., metric="bits_per_byte", values=bits, weights=bytes)``; entity F1: 2 TP over
2 TP + FP + FN per sentence). A corpus-level statistic that is no ratio of sums (Spearman, Pearson,
MCC, binary or macro F1) names itself in its items' metric, ``<metric>@<statistic>`` with the
statistic a key of :data:`harness.measure.statistics.STATISTICS` (:func:`statistic_items` builds them:
values = each item's prediction, gold = its gold value, both numbers); the runner's paired bootstrap
then recomputes that statistic on both runs' resampled items (:mod:`harness.measure.compare`). Every
headline score has items behind it.

Every score of a higher-is-better metric with a trivial level declares it in ``Score.chance``, by the
one rule per metric kind of :mod:`harness.measure.chance` (a label: the majority class of the scored
gold; an item's own options: a uniform guess; correlations, MCC, entity and QA F1: 0): the runner reports (method - chance) /
(baseline - chance) beside %Base and flags runs whose baseline is not significantly above chance.
``Score.setting`` names the protocol as the papers do (``zero-shot`` cross-lingual transfer,
``multilingual``, ``post-hoc``, ``5-shot`` ...); the leaderboard shows a paper's point only beside runs
of the same setting.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np
from torch import nn

from harness.adapter import Adapter, ProgressFn, no_progress
from harness.budgets import Budgets, Profile
from harness.measure.compare import AVERAGE, parts_of, split_metric, statistic_metric, value_of
from harness.measure.metrics import percentile_interval, resampled_parts
from harness.results.records import ItemOutputs, Score
from harness.sources.corpora import Text
from harness.sources.data import DataSource
from harness.sources.heads import Head


@dataclass(frozen=True)
class Task:
    """One fine-tuned head (or one scoring pass) of a suite."""

    name: str
    head: Head


@dataclass(frozen=True)
class SuiteContext:
    """What the runner gives a suite."""

    profile: Profile
    seed: int
    device: str
    config: Any                       # the suite's own frozen config
    budget: Any                       # the suite's budget for this profile and model size
    workdir: Path                     # scratch space for this run
    model: str = ""                   # the --model name, for clients that label the model (MTEB)
    config_hash: str = ""             # the run's config hash: the compressed model's revision
    progress: ProgressFn = field(default=no_progress, compare=False)
    reference: nn.Module | None = field(default=None, compare=False)  # the unchanged model, for suites that want it
    reference_tokenizer: Any = field(default=None, compare=False)     # its tokenizer
    adapter: Adapter | None = field(default=None, compare=False)  # the run's adapter, for what it declares
    # to suites (Adapter.word_senses); None outside a run


@dataclass(frozen=True)
class SuiteData:
    """A suite's loaded and validated data, shared by the baseline and the method run."""

    splits: dict[str, Any]            # split name -> the suite's own data type
    files: dict[str, str]             # file -> revision (sha256 prefix), or hub id -> "hub"


@dataclass(frozen=True)
class SuiteResult:
    scores: list[Score]
    details: dict[str, Any] = field(default_factory=dict)   # facts a reader needs: sizes used, recipe
    items: list[ItemOutputs] = field(default_factory=list)  # per-item outputs behind the scores


class Suite(ABC):
    """A benchmark: declares data, tasks (heads) and budgets; implements ``prepare`` and ``score``
    (and ``train`` when its protocol fine-tunes)."""

    name: ClassVar[str]
    description: ClassVar[str]
    kinds: ClassVar[tuple[str, ...]]                # model kinds the protocol supports
    default_model: ClassVar[str | tuple[str, ...]]  # an alias, or aliases by preference (models.preferred)
    config_class: ClassVar[type]
    budgets: ClassVar[Budgets]
    head: ClassVar[Head] = Head("base")             # the head of the one task of single-task suites
    wants_reference: ClassVar[bool] = False         # score() of a method run gets the unchanged model as ctx.reference

    def tasks(self, config: Any) -> tuple[Task, ...]:
        """The suite's tasks under ``config``; default: one task named after the suite, with ``head``."""
        return (Task(self.name, self.head),)

    @abstractmethod
    def sources(self, config: Any, budget: Any) -> tuple[DataSource, ...]:
        """The data this configuration reads under this profile's budget (a recipe may name its own
        training data), declared before anything runs (identity and validation). A configuration the
        profile cannot honour raises ConfigError here."""

    @abstractmethod
    def prepare(self, data_dir: Path | None, config: Any, budget: Any) -> SuiteData:
        """Load and validate the data ``sources`` declared for this configuration and budget (raises
        DataError naming the file, and the line where it can)."""

    def train(self, task: Task, model: nn.Module, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> nn.Module:
        """Fine-tune ``model`` for ``task`` and return it; evaluation-only suites keep the default."""
        return model

    @abstractmethod
    def score(self, task: Task, model: nn.Module, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        """Evaluate ``model`` on ``task``: scores with CIs, and per-item outputs."""

    def train_texts(self, task: Task, data: SuiteData, config: Any) -> list[Text]:
        """The texts ``task`` fine-tunes on (never the scored ones): the ``task_train`` fit corpus of
        adapters that build from task data. Each is what the task's model reads as one input: a
        sentence pair is the tuple (first, second), never the two joined, so a method can encode it
        with its segments as the suite does (paper 004's sense dictionary). Suites without training
        texts keep the default, and the plan refuses ``task_train`` for them."""
        raise NotImplementedError

    def summarize(self, scores: list[Score], items: list[ItemOutputs], ctx: SuiteContext) -> SuiteResult:
        """Scores across tasks (an average as the papers compute it) from every task's scores and
        per-item outputs, with the items behind them (each task's items again under the average's
        task, so the runner pairs the average too); default none."""
        return SuiteResult([])


def correctness(
    task: str, language: str, split: str, ids: Sequence, predictions: Sequence, gold: Sequence, metric: str = "accuracy",
) -> ItemOutputs:
    """Per-item correctness (prediction == gold, 1.0 or 0.0) as the items of an accuracy score, with
    predicted and gold labels kept (agreement between runs is computed from them)."""
    predictions, gold = [str(p) for p in predictions], [str(g) for g in gold]
    values = tuple(float(p == g) for p, g in zip(predictions, gold, strict=True))
    return ItemOutputs(task, language, split, metric, tuple(str(i) for i in ids), values, tuple(predictions), tuple(gold))


def statistic_items(
    task: str, language: str, split: str, metric: str, statistic: str, ids: Sequence, predicted: Sequence[float], gold: Sequence[float],
) -> ItemOutputs:
    """The items of a corpus-level score (``metric`` computed by ``statistic``, a key of
    :data:`harness.measure.statistics.STATISTICS`): per item the prediction as value and the gold value
    (class ids, ratings, similarities) written exactly (``repr`` of the float)."""
    return ItemOutputs(
        task, language, split, statistic_metric(metric, statistic), tuple(str(i) for i in ids),
        tuple(float(p) for p in predicted), gold=tuple(repr(float(g)) for g in gold),
    )


def score_items(
    items: Sequence[ItemOutputs], rng: np.random.Generator, *, chance: float | None = None, higher_is_better: bool = True,
    setting: str = "", language: str | None = None,
) -> Score:
    """The score of per-item outputs with its 95% bootstrap CI: one ItemOutputs' ratio
    ``sum(values) / sum(weights)`` (or the corpus statistic its metric names), or the average of
    that over several groups (language ``avg`` unless given), groups linked by shared clusters
    resampled jointly (:func:`harness.measure.metrics.resampled_parts`). Task, split and the score's
    metric come from the items, which must share them."""
    first = items[0]
    metric = split_metric(first.metric)[0]
    if any((i.task, i.split, split_metric(i.metric)[0]) != (first.task, first.split, metric) for i in items):
        raise ValueError("score_items: the items must share task, split and metric")
    low, high = percentile_interval(resampled_parts(parts_of(items), rng)[:, 0])
    lang = language or (first.language if len(items) == 1 else AVERAGE)
    return Score(
        first.task, lang, first.split, metric, value_of(items), low, high, n=sum(len(i.ids) for i in items),
        higher_is_better=higher_is_better, chance=chance, setting=setting,
    )


def parallel(items: Sequence[ItemOutputs]) -> list[ItemOutputs]:
    """The items of parallel groups (translations: XNLI's languages, whose item id is the row in
    every language) with each item's cluster = its id, so an average over the groups resamples rows,
    not (row, language) pairs, and its interval is not narrowed by counting one row 15 times."""
    return [dataclasses.replace(i, clusters=i.ids) for i in items]
