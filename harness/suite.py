"""The suite contract: data, the heads it fine-tunes, a budget table, and a protocol in two steps.

A suite declares as data what the runner needs to build models for it: its tasks, each with the
:class:`Head` (the model class and labels) it fine-tunes or scores, and a :class:`~harness.budgets.Budgets`
table per profile. The runner then drives every suite the same way, per task::

    load(head) -> adapter (before_finetune) -> efficiency -> suite.train -> adapter (after_finetune) -> suite.score

so a method that acts on a fine-tuned model (paper 004's sense dictionary) needs no special case, and
evaluation-only suites (bpb, mteb_clf, word_sim) simply do not override :meth:`Suite.train`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from torch import nn

from harness.adapter import ProgressFn, no_progress
from harness.budgets import Budgets, Profile
from harness.results.records import ItemOutputs, Score
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

    def tasks(self, config: Any) -> tuple[Task, ...]:
        """The suite's tasks under ``config``; default: one task named after the suite, with ``head``."""
        return (Task(self.name, self.head),)

    @abstractmethod
    def sources(self, config: Any) -> tuple[DataSource, ...]:
        """The data this configuration reads, declared before anything runs (identity and validation)."""

    @abstractmethod
    def prepare(self, data_dir: Path | None, config: Any) -> SuiteData:
        """Load and validate the data (raises DataError naming the file, and the line where it can)."""

    def train(self, task: Task, model: nn.Module, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> nn.Module:
        """Fine-tune ``model`` for ``task`` and return it; evaluation-only suites keep the default."""
        return model

    @abstractmethod
    def score(self, task: Task, model: nn.Module, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        """Evaluate ``model`` on ``task``: scores with CIs, and per-item outputs."""

    def train_texts(self, task: Task, data: SuiteData, config: Any) -> list[str]:
        """The texts ``task`` fine-tunes on (never the scored ones): the ``task_train`` fit corpus of
        adapters that build from task data. Suites without training texts keep the default, and the
        plan refuses ``task_train`` for them."""
        raise NotImplementedError

    def summarize(self, scores: list[Score], ctx: SuiteContext) -> list[Score]:
        """Scores across tasks (an average as the papers compute it); default none."""
        return []
