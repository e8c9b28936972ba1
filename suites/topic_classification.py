"""Single-text topic classification (paper 002's AG News and DBpedia-14), shared by the ``ag_news``
and ``dbpedia14`` suites: the Zhang et al. (2015) CSV release reader, the hub reader, a deterministic
carve of one file into train and eval rows, and the suite protocol (the shared fine-tuning protocol,
then accuracy and macro F1 / precision / recall with bootstrap CIs, paper 002 Tables 1, 3 and 4).
Per-item outputs: correctness with predicted and gold labels (accuracy), and for the macro scores
the predicted and gold class ids (:func:`harness.suite.statistic_items`), so every score gets the
runner's paired CI. Setting: ``fine-tuned``.

Splits (``--set split=``):

* ``carve`` (default): train and eval rows are drawn, stratified by class and disjoint, from the
  release's test file, the same rows for every run (a fixed seed, not the run's). AG News' train
  file is not on hand here (only the 7,600-row test file), so this is what runs offline; the sizes
  come from the profile's budget and are stored in the run's details.
* ``release``: train on the release's train file, score its test file, as the paper does; from the
  data directory, else the hub id when online. The ``paper`` profile needs it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from harness.suites.finetune import FinetuneBudget, finetune, padding_collator, predict, sentence_features

from harness.errors import ConfigError, DataError
from harness.measure import chance
from harness.measure.metrics import Part, bootstrap_intervals
from harness.measure.statistics import CLASSIFICATION_METRICS, classification_metrics, confusion_statistic
from harness.results.records import Score
from harness.sources.data import DataSource, local_or_hub
from harness.suite import Suite, SuiteContext, SuiteData, SuiteResult, Task, correctness, statistic_items

CARVE_SEED = 0  # the carve is a property of the suite, not of the run
SETTING = "fine-tuned"  # paper 002 fine-tunes the whole classifier on the task
MACRO_METRICS = ("f1", "precision", "recall")  # corpus statistics over classes (harness.measure.statistics' macro_*)


@dataclass(frozen=True)
class TextSet:
    """Texts with integer labels in [0, C) and their row in the source file (stable item ids)."""

    text: list[str]
    label: np.ndarray  # (n,) int64
    row: np.ndarray    # (n,) int64

    def __len__(self) -> int:
        return len(self.label)

    def take(self, idx: np.ndarray) -> TextSet:
        return TextSet([self.text[i] for i in idx], self.label[idx], self.row[idx])


@dataclass(frozen=True)
class TopicConfig:
    split: Literal["carve", "release"] = "carve"  # carve train/eval from the test file, or the release's train + test


def join(title: str, body: str) -> str:
    """One text from a title and a body, joined by a space as the hub builders of ag_news and
    dbpedia_14 do; the release's backslash line breaks are kept, as on the hub."""
    return f"{title} {body}"


def read_release_csv(path: Path, n_classes: int) -> TextSet:
    """A release CSV: no header, rows ``"class index (1-based)","title","body"``."""
    texts, labels = [], []
    with path.open(encoding="utf-8", newline="") as f:
        for line, row in enumerate(csv.reader(f), start=1):
            if len(row) != 3 or not row[0].isdigit() or not 1 <= int(row[0]) <= n_classes:
                raise DataError(f"{path}:{line}: malformed row (need \"class 1-{n_classes}\",\"title\",\"body\"); restore the release file")
            labels.append(int(row[0]) - 1)
            texts.append(join(row[1], row[2]))
    if not labels:
        raise DataError(f"{path}: no rows; restore the release file")
    return TextSet(texts, np.array(labels, dtype=np.int64), np.arange(len(labels)))


def read_hub(hub_id: str, split: str, body: str) -> TextSet:
    """A split of a hub dataset with fields ``label`` (0-based), ``title`` and ``body``."""
    from datasets import load_dataset

    ds = load_dataset(hub_id, split=split)
    return TextSet([join(t, b) for t, b in zip(ds["title"], ds[body])], np.array(ds["label"], dtype=np.int64), np.arange(len(ds)))


def carve(data: TextSet, train_per_class: int, eval_per_class: int, seed: int = CARVE_SEED) -> tuple[TextSet, TextSet]:
    """Disjoint stratified train and eval sets from one file, the same for every run."""
    rng = np.random.default_rng(seed)
    train_idx, eval_idx = [], []
    for c in np.unique(data.label):
        rows = rng.permutation(np.flatnonzero(data.label == c))
        if len(rows) < train_per_class + eval_per_class:
            raise DataError(f"class {c} has {len(rows)} rows, fewer than {train_per_class} train + {eval_per_class} eval; use a smaller profile")
        train_idx.append(rows[:train_per_class])
        eval_idx.append(rows[train_per_class:train_per_class + eval_per_class])
    return data.take(np.sort(np.concatenate(train_idx))), data.take(np.sort(np.concatenate(eval_idx)))


def subsample(data: TextSet, size: int | None, seed: int) -> TextSet:
    """``size`` rows, stratified by class (all rows when None)."""
    if size is None:
        return data
    rng = np.random.default_rng(seed)
    per_class = size // len(np.unique(data.label))
    picks = [rng.permutation(np.flatnonzero(data.label == c))[:per_class] for c in np.unique(data.label)]
    return data.take(np.sort(np.concatenate(picks)))


def classification_scores(task: str, split: str, gold: np.ndarray, pred: np.ndarray, n_classes: int, rng: np.random.Generator) -> list[Score]:
    """Accuracy and macro F1 / precision / recall with 95% bootstrap CIs; chance = the majority-class
    predictor's score on the scored gold (:mod:`harness.measure.chance`; accuracy 1/classes on a balanced set)."""
    values = classification_metrics(gold, pred, n_classes)
    part = Part([pred, gold] * len(CLASSIFICATION_METRICS), tuple(confusion_statistic(m, n_classes) for m in CLASSIFICATION_METRICS))
    cis = dict(zip(CLASSIFICATION_METRICS, bootstrap_intervals([part], rng)))
    levels = {m: chance.majority(gold, lambda p, g, m=m: classification_metrics(g, p, n_classes)[m]) for m in CLASSIFICATION_METRICS}
    return [Score(task, "en", split, m, values[m], *cis[m], n=len(gold), chance=levels[m], setting=SETTING) for m in CLASSIFICATION_METRICS]


class TopicClassification(Suite):
    """Fine-tune a sequence classifier on a release's texts, score accuracy and macro P/R/F1.

    Subclasses name the dataset: its folder under the data directory, hub id and body field,
    labels and budgets.
    """

    folder: ClassVar[str]
    hub_id: ClassVar[str]
    hub_body: ClassVar[str]
    kinds = ("encoder",)
    default_model = "minilm"
    config_class = TopicConfig

    @property
    def labels(self) -> tuple[str, ...]:
        return self.head.labels

    def sources(self, config: TopicConfig, budget: FinetuneBudget) -> tuple[DataSource, ...]:
        files = ("test.csv",) if config.split == "carve" else ("train.csv", "test.csv")
        return tuple(DataSource((f"{self.folder}/{f}",), self.hub_id) for f in files)

    def prepare(self, data_dir: Path | None, config: TopicConfig, budget: FinetuneBudget) -> SuiteData:
        splits, files = {}, {}
        for source in self.sources(config, budget):
            name = Path(source.files[0]).stem  # train / test
            data, revision = local_or_hub(
                data_dir, source, lambda paths: read_release_csv(paths[0], len(self.labels)),
                lambda: read_hub(self.hub_id, name, self.hub_body),
            )
            splits[name] = data
            files.update(revision)
        return SuiteData(splits, files)

    def _split(self, data: SuiteData, ctx: SuiteContext) -> tuple[TextSet, TextSet, str]:
        """(train, eval, eval split name) for this profile."""
        budget, n = ctx.budget, len(self.labels)
        if ctx.config.split == "release":
            return subsample(data.splits["train"], budget.train_examples, ctx.seed), subsample(data.splits["test"], budget.eval_examples, ctx.seed + 1), "test"
        if budget.train_examples is None or budget.eval_examples is None:
            raise ConfigError(f"profile '{ctx.profile}' trains on the whole {self.folder} train file; add --set split=release "
                              f"({self.folder}/train.csv and test.csv under the data directory, or the hub {self.hub_id})")
        train, held = carve(data.splits["test"], budget.train_examples // n, budget.eval_examples // n)
        return train, held, "eval"

    def train(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> Any:
        train, _, _ = self._split(data, ctx)
        features = sentence_features(tokenizer, train.text, None, train.label, ctx.budget.max_length)
        return finetune(model, features, padding_collator(tokenizer), ctx.budget, ctx)

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        train, held, split = self._split(data, ctx)
        features = sentence_features(tokenizer, held.text, None, held.label, ctx.budget.max_length)
        logits = predict(model, features, padding_collator(tokenizer), ctx.budget, ctx)["logits"]
        pred = np.array([int(np.argmax(row)) for row in logits])
        scores = classification_scores(self.name, split, held.label, pred, len(self.labels), np.random.default_rng(ctx.seed + 2))
        ids = tuple(str(r) for r in held.row)
        items = [correctness(self.name, "en", split, ids, [self.labels[p] for p in pred], [self.labels[g] for g in held.label])]
        items += [statistic_items(self.name, "en", split, m, f"macro_{m}", ids, pred, held.label) for m in MACRO_METRICS]
        details = {
            "split": ctx.config.split,
            "train_source": f"{self.folder}/test.csv rows (carved, seed {CARVE_SEED})" if split == "eval" else f"{self.folder}/train.csv",
            "train_examples": len(train),
            "eval_examples": len(held),
            "eval_per_class": np.bincount(held.label, minlength=len(self.labels)).tolist(),
        }
        return SuiteResult(scores, details, items)
