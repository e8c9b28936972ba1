"""Typed results that cross module boundaries: scores, latency, run specs and run records."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from harness.results.fingerprint import code_fingerprint


@dataclass(frozen=True)
class EmbeddingFootprint:
    """Parameters and bytes of a model's token-embedding modules (input and output side)."""

    embedding_params: int
    storage_bytes: int
    total_params: int


@dataclass(frozen=True)
class CompressionReport:
    """Embedding parameters and storage before/after an adapter, id maps included."""

    embedding_params_before: int
    embedding_params_after: int
    storage_bytes_before: int
    storage_bytes_after: int
    total_params_before: int
    total_params_after: int
    vocab_size_before: int | None = None  # rows the base model stores a vector for
    vocab_size_after: int | None = None   # rows the compressed model stores (or composes) a vector for
    freed_slots: int = 0                  # vocabulary slots the method freed (Vocab Diet's removed forms)

    @classmethod
    def between(
        cls, before: EmbeddingFootprint, after: EmbeddingFootprint, vocab_before: int | None = None,
        vocab_after: int | None = None, freed_slots: int = 0,
    ) -> CompressionReport:
        return cls(
            embedding_params_before=before.embedding_params,
            embedding_params_after=after.embedding_params,
            storage_bytes_before=before.storage_bytes,
            storage_bytes_after=after.storage_bytes,
            total_params_before=before.total_params,
            total_params_after=after.total_params,
            vocab_size_before=vocab_before,
            vocab_size_after=vocab_after,
            freed_slots=freed_slots,
        )

    @property
    def emb_param_fraction(self) -> float:
        """Embedding parameters kept: after / before (ASG: k/V, paper 000 Appendix B)."""
        return self.embedding_params_after / self.embedding_params_before

    @property
    def storage_fraction(self) -> float:
        return self.storage_bytes_after / self.storage_bytes_before


@dataclass(frozen=True)
class Score:
    task: str
    language: str
    split: str
    metric: str
    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    higher_is_better: bool = True
    pct_base: float | None = None  # filled by the runner from the baseline run
    chance: float | None = None    # the metric's chance level where defined (suites state which: uniform or majority class)
    shots: int | None = None       # in-context examples per prompt (lm-eval tasks); None: not a prompted task
    setting: str = ""              # the protocol, as the papers name it: "zero-shot", "multilingual", "post-hoc", "0-shot" ...


@dataclass(frozen=True)
class ItemOutputs:
    """Per-item outputs behind one score (task x language x split x metric), so that any two runs on
    the same items can be compared after the fact (paired statistics).

    The score is ``sum(values) / sum(weights)`` over the items (``weights`` empty: 1 each, so the
    score is the mean of ``values``); a macro average over languages (language ``avg``) is the mean
    of that over the ItemOutputs of its languages. ``metric`` is the score's metric. Examples:
    accuracy: values = correctness 0/1; bits per byte: values = a document's NLL in bits, weights =
    its UTF-8 bytes; bytes per token: values = a text's bytes, weights = its tokens; entity F1
    (seqeval): values = 2 TP, weights = 2 TP + FP + FN of a sentence. A corpus statistic that is no
    ratio (Spearman, MCC, macro F1) names itself in ``metric`` (``spearman@spearman``, ``f1@macro_f1``:
    :mod:`harness.measure.compare`): values = each item's prediction, gold = its gold value as a number.
    ``ids`` are stable item ids (the row in the source file or the dataset's own id) shared by every
    run that scores the same items. ``clusters`` (optional, one per item) name the unit an item is
    resampled with across the groups of an average: the same id in every XNLI language (one row,
    translated), an MLQA question id, a word pair in several word-similarity sets, a GLUE task's item
    under each of its metrics. Groups linked by shared clusters are resampled jointly, by cluster
    (:func:`harness.measure.metrics.resampled_parts`); empty: each item on its own.
    """

    task: str
    language: str
    split: str
    metric: str
    ids: tuple[str, ...]
    values: tuple[float, ...]
    predictions: tuple[str, ...] = ()
    gold: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    clusters: tuple[str, ...] = ()

    def key(self) -> tuple[str, str, str, str]:
        return (self.task, self.language, self.split, self.metric)


@dataclass(frozen=True)
class Comparison:
    """One score of a run against the same score of its baseline run (the baseline itself included,
    against itself), computed by the runner from both runs' per-item outputs
    (:mod:`harness.measure.compare`). Fields that need paired items are None when the two runs have
    none in common, and then ``unpaired`` says why (``n_paired`` 0), so a %Base without its paired
    interval is never silent; ``p_value`` and ``flip_rate`` need 0/1 items (and no average over
    correlated groups), ``agreement`` stored predictions."""

    task: str
    language: str
    split: str
    metric: str
    baseline_run_id: str
    n_paired: int                                  # items scored by both runs (matched by id)
    pct_base_ci_low: float | None = None           # paired bootstrap (items resampled jointly)
    pct_base_ci_high: float | None = None
    difference: float | None = None                # method - baseline, metric units
    difference_ci_low: float | None = None
    difference_ci_high: float | None = None
    chance_adjusted_pct_base: float | None = None  # (method - chance) / (baseline - chance) x 100
    p_value: float | None = None                   # exact McNemar on the discordant items
    flip_rate: float | None = None                 # share of items whose correctness changed
    agreement: float | None = None                 # share of items with the same prediction
    baseline_above_chance: bool | None = None      # the baseline's 95% CI lies above chance; None: no chance level
    unpaired: str | None = None                    # why no item is paired (n_paired 0); None when paired

    def key(self) -> tuple[str, str, str, str]:
        return (self.task, self.language, self.split, self.metric)


@dataclass(frozen=True)
class FitReport:
    """How the adapter was fitted in a run: wall seconds and the method's own facts (counts, histograms)."""

    seconds: float
    details: dict[str, Any] = field(default_factory=dict)


BASE_PHASE = "base:"
"""Prefix of efficiency phases timed on the unchanged model inside a method's run, in rounds that
alternate with the compressed model's, so that compressed/base ratios come from one process under
one machine load."""


@dataclass(frozen=True)
class LatencyStats:
    """Timed forward passes at a fixed shape; keeps the raw samples (milliseconds)."""

    phase: str
    batch: int
    seq_len: int
    samples_ms: tuple[float, ...]
    p50_ms: float
    p95_ms: float
    throughput: float       # tokens per second at p50
    peak_mem_mb: float      # model bytes + peak working set of one forward (CUDA: max allocated)

    @classmethod
    def from_samples(cls, phase: str, batch: int, seq_len: int, samples_ms: list[float], peak_mem_mb: float) -> LatencyStats:
        import numpy as np

        p50, p95 = (float(v) for v in np.percentile(samples_ms, [50, 95]))
        return cls(phase, batch, seq_len, tuple(samples_ms), p50, p95, batch * seq_len / (p50 / 1000.0), peak_mem_mb)


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines a run's result, the code that makes it included (``code``); its
    hash decides reuse, so a run made by other code is never reused (it reads as stale)."""

    model: str
    model_revision: str
    adapter: str
    adapter_config: dict[str, Any]
    suite: str
    suite_config: dict[str, Any]
    profile: str
    seed: int
    recipe: dict[str, Any] = field(default_factory=dict)  # the suite's budget for the profile; a changed budget is a new config
    adapter_budget: dict[str, Any] = field(default_factory=dict)  # the adapter's budget for the profile
    data: dict[str, str] = field(default_factory=dict)      # suite data: file -> sha256 prefix (or hub id -> "hub")
    fit_data: dict[str, str] = field(default_factory=dict)  # the adapter's fit corpora, likewise
    code: str = ""  # the code fingerprint of adapter + suite + protocol (harness.results.fingerprint); "" before fingerprints

    @property
    def config_hash(self) -> str:
        blob = json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def variant(self) -> str:
        """The config hash without the seed: runs of one configuration under several seeds share it."""
        blob = json.dumps({**dataclasses.asdict(self), "seed": None}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def baseline(self) -> RunSpec:
        """The same run with the unchanged model (adapter ``none``, no recovery training), fingerprinted by its own code."""
        code = code_fingerprint("none", self.suite) if self.code else ""
        recipe = {k: v for k, v in self.recipe.items() if k != "recovery"}
        return dataclasses.replace(self, adapter="none", adapter_config={}, adapter_budget={}, fit_data={}, recipe=recipe, code=code)


DIRTY = "+dirty"
"""In ``Provenance.git_sha``: the commit, then ``+dirty:<sha256 of the patch, 16 hex digits>`` for a tree
with uncommitted changes (the patch lies beside the run's record: ``Journal.patch_path``)."""


@dataclass(frozen=True)
class Provenance:
    """Where a result comes from, in typed fields."""

    git_sha: str                    # the commit ("unknown" outside a git checkout), ``+dirty:<digest>`` with changes
    adapter_package: str
    adapter_version: str
    host: str
    pid: int
    hardware: dict[str, Any]
    versions: dict[str, str]
    data_files: dict[str, str] = field(default_factory=dict)  # file -> sha256 prefix (or hub id -> "hub")

    @property
    def commit(self) -> str:
        """The commit the run was made from; "unknown" when it was made outside a git checkout."""
        return self.git_sha.partition(DIRTY)[0]

    @property
    def dirty(self) -> bool:
        """True when the tree had uncommitted changes (their patch: ``Journal.patch_path(run_id)``)."""
        return DIRTY in self.git_sha

    @property
    def patch_sha256(self) -> str:
        """The patch's sha256 (16 hex digits) as recorded; "" for a clean tree."""
        return self.git_sha.partition(DIRTY)[2].removeprefix(":")


@dataclass
class RunRecord:
    """One run as stored: spec, provenance, status, and (when finished) its results."""

    run_id: str
    spec: RunSpec
    status: str                     # running | finished | failed
    started_at: str
    device: str
    provenance: Provenance
    finished_at: str | None = None
    wall_s: float | None = None
    error: str | None = None
    baseline_run_id: str | None = None
    compression: CompressionReport | None = None
    fit: FitReport | None = None
    scores: list[Score] = field(default_factory=list)
    efficiency: list[LatencyStats] = field(default_factory=list)
    items: list[ItemOutputs] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # suite-specific facts (sizes used, ...)
    comparisons: list[Comparison] = field(default_factory=list)  # each score against the baseline's

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        raw = json.loads(text)
        raw["spec"] = RunSpec(**raw["spec"])
        raw["provenance"] = Provenance(**raw["provenance"])
        raw["compression"] = CompressionReport(**raw["compression"]) if raw["compression"] else None
        raw["fit"] = FitReport(**raw["fit"]) if raw.get("fit") else None
        raw["items"] = [ItemOutputs(**{k: tuple(v) if isinstance(v, list) else v for k, v in i.items()}) for i in raw.get("items", [])]
        raw["scores"] = [Score(**s) for s in raw["scores"]]
        raw["comparisons"] = [Comparison(**c) for c in raw.get("comparisons", [])]
        raw["efficiency"] = [LatencyStats(**{**e, "samples_ms": tuple(e["samples_ms"])}) for e in raw["efficiency"]]
        return cls(**raw)


@dataclass(frozen=True)
class RunOutcome:
    """A run as ``harness run`` came by it: made, or reused from the store."""

    record: RunRecord
    reused: bool
    stored: bool  # False when the DB was busy and only the JSON record was written


PART_TABLES = {"scores": Score, "comparisons": Comparison, "compression": CompressionReport, "efficiency": LatencyStats}
"""The tables holding a run's parts beside its ``runs`` row, each with its record class (columns: its fields)."""


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat(timespec="seconds")


def record_from_row(r: dict, parts: dict[type, list[tuple]]) -> RunRecord:
    """A RunRecord from its ``runs`` row (column -> value) and its rows of :data:`PART_TABLES`, by record class."""
    spec = RunSpec(
        r["model"], r["model_revision"], r["adapter"], json.loads(r["adapter_config"]), r["suite"],
        json.loads(r["suite_config"]), r["profile"], r["seed"], json.loads(r["recipe"]),
        json.loads(r["adapter_budget"] or "{}"), json.loads(r["data"] or "{}"), json.loads(r["fit_data"] or "{}"), r["code"] or "",
    )
    prov = Provenance(
        r["git_sha"], r["adapter_package"], r["adapter_version"], r["host"], r["pid"],
        json.loads(r["hardware"]), json.loads(r["versions"]), json.loads(r["data_files"]),
    )
    return RunRecord(
        run_id=r["run_id"], spec=spec, status=r["status"], started_at=_iso(r["started_at"]), device=r["device"],
        provenance=prov, finished_at=_iso(r["finished_at"]) if r["finished_at"] else None, wall_s=r["wall_s"],
        error=r["error"], baseline_run_id=r["baseline_run_id"],
        compression=CompressionReport(*parts[CompressionReport][0]) if parts[CompressionReport] else None,
        fit=FitReport(r["fit_seconds"], json.loads(r["fit_details"] or "{}")) if r["fit_seconds"] is not None else None,
        scores=[Score(*s) for s in parts[Score]],
        efficiency=[LatencyStats(*e[:3], tuple(e[3]), *e[4:]) for e in parts[LatencyStats]],
        details=json.loads(r["details"]) if r["details"] else {},
        comparisons=[Comparison(*c) for c in parts[Comparison]],
    )
