"""The suite contract: a data spec, a protocol, metrics and a budget per profile."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from torch import nn

from harness.adapter import ProgressFn, no_progress
from harness.results.records import Score
from harness.sources.models import Head, Kind

Profile = Literal["smoke", "quick", "paper"]
PROFILES: tuple[Profile, ...] = ("smoke", "quick", "paper")


@dataclass(frozen=True)
class FinetuneBudget:
    """How much data and training a fine-tuning suite spends under one profile."""

    train_examples: int | None  # None = all available
    eval_examples: int | None   # per language / eval set; None = all
    epochs: float
    learning_rate: float
    batch_size: int
    weight_decay: float = 0.01
    max_length: int = 128
    eval_batch_size: int = 64


@dataclass(frozen=True)
class SuiteContext:
    """What the runner gives a suite."""

    profile: Profile
    seed: int
    device: str
    config: Any                       # the suite's own frozen config
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
    details: dict[str, Any]           # facts a reader needs: sizes used, recipe


class Suite(ABC):
    """A benchmark: subclasses declare data, protocol and budgets, and implement ``evaluate``."""

    name: ClassVar[str]
    description: ClassVar[str]
    head: ClassVar[Head]               # which head the runner loads the model with
    kinds: ClassVar[tuple[Kind, ...]]  # model kinds the protocol supports
    default_model: ClassVar[str | tuple[str, ...]]  # an alias, or aliases by preference (models.preferred)
    num_labels: ClassVar[int | None] = None
    config_class: ClassVar[type]

    def for_model(self, model_config: Any) -> Suite:
        """This suite as run on one base model (its transformers config), for budgets that depend on
        the model's size; the runner calls it before ``recipe``. Default: the suite unchanged."""
        return self

    def recipe(self, profile: Profile, config: Any) -> dict[str, Any]:
        """The budget this profile spends (sizes, epochs, lr ...); part of the run's config hash."""
        return {}

    @abstractmethod
    def prepare(self, data_dir: Path | None, config: Any) -> SuiteData:
        """Load and validate the data (raises DataError naming the expected files)."""

    @abstractmethod
    def evaluate(self, model: nn.Module, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        """Train if the protocol needs it, evaluate, and return scores with CIs."""
