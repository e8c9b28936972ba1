"""The schema of the seed papers' claims (``harness/results/claims.yaml``): pydantic models that
reject unknown fields, so a claim is data that is checked, not a dict spread in code.

A claim names two quantities, the paper's and the harness's (:class:`Quantity`: suite, tasks,
language, metric per task, and the aggregation over the tasks), the configurations it is about
(:class:`Side`: the paper's rows and the harness's runs; a second side makes it a contrast, the
first as a % of the second) and the figure's threshold. :mod:`harness.results.claims` reads them.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.errors import DataError

Aggregation = Literal["score", "mean of scores", "mean of %Base"]
"""How a quantity combines its tasks: ``score``, one task's score (a level claim's figure is its %Base);
``mean of scores``, the unweighted mean of the tasks' scores (its %Base is the ratio of the means);
``mean of %Base``, the mean over the tasks of each task's %Base."""

PAPERS = ("asg", "ksub", "ade", "vocabdiet", "multisense")  # the CSV's names of the seed papers 000-004


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Quantity(_Strict):
    """What a figure measures. ``language``: the scores' language (``avg``: a suite's or a paper's
    average over its languages; a paper's row that prints none is its overall number, read as ``avg``)."""

    suite: str                                 # the harness's name of the suite (the CSV's, as reference maps it)
    tasks: tuple[str, ...] = Field(min_length=1)
    language: str
    metric: str | dict[str, str]               # one metric for every task, or task -> metric
    aggregation: Aggregation = "score"

    @model_validator(mode="after")
    def _consistent(self) -> Quantity:
        if self.aggregation == "score" and len(self.tasks) != 1:
            raise ValueError(f"aggregation 'score' reads one task, not {len(self.tasks)}")
        if isinstance(self.metric, dict) and set(self.metric) != set(self.tasks):
            raise ValueError(f"metric names tasks {sorted(self.metric)}, the quantity's are {sorted(self.tasks)}")
        return self

    def metric_of(self, task: str) -> str:
        return self.metric[task] if isinstance(self.metric, dict) else self.metric


class StoredScore(_Strict):
    """A score a suite stores for an aggregate of its tasks (lm_eval's ``paper003_avg6``/``avg``)."""

    task: str
    language: str


class HarnessQuantity(Quantity):
    """The harness's side: which runs (``profile``) and, for a mean of scores, the stored row holding it."""

    profile: Literal["quick", "paper"]         # never smoke: smoke budgets only exercise the code
    stored: StoredScore | None = None

    @model_validator(mode="after")
    def _stored_where_averaged(self) -> HarnessQuantity:
        if (self.aggregation == "mean of scores") != (self.stored is not None):
            raise ValueError("a 'mean of scores' is read from the suite's stored average: give `stored` (and only then)")
        if self.stored is not None and isinstance(self.metric, dict):
            raise ValueError("a stored average has one metric")
        return self


class Quantities(_Strict):
    paper: Quantity
    harness: HarnessQuantity


class PaperRows(_Strict):
    """The paper's rows of one configuration (with the quantity's suite, tasks, language and metric)."""

    method: str
    base_model: str | None = None
    config: str | None = None
    setting: str | None = None                 # the CSV's setting as printed ("cross-lingual-transfer" ...)


class Runs(_Strict):
    """The harness's runs of one configuration: the adapter and the settings its config must hold."""

    adapter: str
    settings: dict[str, bool | int | float | str] = Field(default_factory=dict)


class Side(_Strict):
    paper: PaperRows
    harness: Runs


class Claim(_Strict):
    paper: str
    table: str
    text: str                                  # the claim, as the paper makes it
    threshold: float                           # the figure must reach it (%Base, or the first side as % of the second)
    quantity: Quantities
    first: Side
    second: Side | None = None                 # a contrast's reference configuration
    emb_range: tuple[float, float] | None = None  # the embedding fractions the claim is about
    min_freed: float | None = None             # the share of vocabulary rows the run must free

    @field_validator("paper")
    @classmethod
    def _seed_paper(cls, paper: str) -> str:
        if paper not in PAPERS:
            raise ValueError(f"unknown paper {paper!r}; the seed papers: {', '.join(PAPERS)}")
        return paper


class Claims(_Strict):
    claims: tuple[Claim, ...]


def packaged_claims() -> Path:
    return Path(str(files("harness.results") / "claims.yaml"))


def load(path: Path | None = None) -> tuple[Claim, ...]:
    """The claims of ``path`` (default: the packaged ``claims.yaml``), validated; a file that does not
    parse or fit the schema is a DataError naming the file and the first problem."""
    path = path or packaged_claims()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Claims(claims=raw).claims
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise DataError(f"{path} is not YAML: {err}") from None
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "the file"  # the first part is the list's name
        raise DataError(f"{path}: {where}: {first['msg']} ({err.error_count()} problem(s); the fields: harness/results/claim_schema.py)") from None
