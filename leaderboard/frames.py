"""Pure table transforms behind the pages: headline scores' mean and sd over seeds, the papers'
points per chart (same setting only), the Pareto frontier, the leaderboard table, per-language %Base
and efficiency ratios. DataFrames in, DataFrames out; no I/O."""

from __future__ import annotations

import io
import json
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.results.reference import placement
from harness.results.summary import setting_text, settings_label
from harness.results.queries import MARKERS

GROUP = ["suite", "model", "profile", "task", "metric", "setting"]  # one Pareto chart / heatmap each
TABLE_COLUMNS = {
    "adapter": "adapter", "config": "config", "value": "score", "ci_low": "CI low", "ci_high": "CI high",
    "pct_base": "%Base", "pct_base_ci_low": "%Base CI low", "pct_base_ci_high": "%Base CI high", "disclosure": "budget disclosed",
    "group": "significance", "unpaired_reason": "no paired interval because", "stale": "stale",
    "chance_adjusted_pct_base": "chance-adj. %Base", "at_chance": "baseline at chance", "p_value": "p (McNemar)",
    "flip_rate": "flips", "seeds": "seeds", "value_sd": "score sd", "pct_base_sd": "%Base sd",
    "emb_param_fraction": "params kept", "storage_fraction": "bytes kept", "storage_mb": "storage MB", "latency_ratio": "latency × base",
    "model": "model", "profile": "profile", "task": "task", "metric": "metric", "setting": "setting", "shots": "shots",
    "run_id": "run_id",
}
# averaged over a configuration's seeds (the variant: config hash without the seed); the rest is the newest run's
SEED_MEANS = ["value", "ci_low", "ci_high", "pct_base", "pct_base_ci_low", "pct_base_ci_high", "chance_adjusted_pct_base", "p_value", "flip_rate"]
EFFICIENCY_COLUMNS = {
    "adapter": "adapter", "config": "config", "latency_ratio": "latency × base", "throughput_ratio": "tokens/s × base",
    "memory_ratio": "memory × base", "device": "timed on", "suite": "suite", "model": "model", "profile": "profile", "run_id": "run_id",
}


@dataclass(frozen=True)
class Axis:
    """A compression axis: the summary column it reads and what it counts."""

    key: str     # the sidebar's choice, and in the URL (``?axis=parameters``)
    column: str  # the summary's column: a fraction of the base model's
    label: str   # the tables' name
    what: str    # what it counts, in words (the chart's axis title, the captions)

    @property
    def title(self) -> str:
        return f"{self.what} (log scale)"


AXES = {axis.key: axis for axis in (
    Axis("bytes", "storage_fraction", "bytes stored",
         "embedding storage kept: bytes of the token tables, id maps and any untied output head, fraction of the base's"),
    Axis("parameters", "emb_param_fraction", "parameters kept", "embedding parameters kept, fraction of the base model's"),
)}


def budget_bins(fractions: pd.Series) -> pd.Series:
    """A compression budget per fraction kept: bins of a factor of two (``floor(log2 fraction)``: -8 holds
    0.39-0.78%); NaN where the fraction is unknown."""
    return np.floor(np.log2(fractions.clip(lower=1e-12)))


def budget_label(budget: float) -> str:
    """A budget bin as its range of fractions kept, ``0.39-0.78%``; ``""`` for NaN."""
    if pd.isna(budget):
        return ""
    low, high = (100 * 2.0**b for b in (budget, budget + 1))
    return "–".join(f"{v:.0f}" if v >= 10 else f"{v:.2g}" for v in (low, high)) + "%"


def run_label(adapter: str, config: str | None) -> str:
    label = settings_label(config)
    return adapter if label == "-" else f"{adapter} {label}"


def key_settings(rows: pd.DataFrame) -> pd.Series:
    """An adapter and the settings that vary among its stored configurations (``asg k=1024``); the
    full configuration is in its own column."""
    configs = rows.config.map(lambda c: json.loads(c or "{}"))
    varying = {
        adapter: {k for k in set().union(*part) if len({json.dumps(c.get(k)) for c in part}) > 1}
        for adapter, part in configs.groupby(rows.adapter)
    }
    return pd.Series([
        " ".join([a, *(setting_text(k, v) for k, v in c.items() if k in varying[a])])
        for a, c in zip(rows.adapter, configs)
    ], index=rows.index)


def over_seeds(rows: pd.DataFrame, by_seed: bool = False) -> pd.DataFrame:
    """One row per configuration (variant), task, language and metric of summary rows
    (:mod:`harness.results.summary`): the mean over its seeds of scores, %Base and the comparison
    (newest run per seed), their sd (NaN for one seed), the number of seeds, each marker of
    :data:`~harness.results.queries.MARKERS` when any seed has it (with the first unpaired seed's
    reason), and the newest run's other columns (run_id, config ...). ``by_seed``: one row per seed
    instead (nothing averaged)."""
    keys = ["variant", "task", "language", "metric"] + (["seed"] if by_seed else [])
    newest = rows.sort_values("finished_at").drop_duplicates([*keys, "seed"], keep="last")
    grouped = newest.groupby(keys, sort=False)
    stats = grouped[SEED_MEANS].mean().join(grouped[["value", "pct_base"]].std().add_suffix("_sd"))
    stats = stats.join(grouped.agg(seeds=("seed", "nunique"), unpaired_reason=("unpaired_reason", "first"), **{m: (m, "any") for m in MARKERS}))
    last = grouped.tail(1).set_index(keys).drop(columns=[*SEED_MEANS, *MARKERS, "unpaired_reason"] + ([] if by_seed else ["seed"]))
    return last.join(stats).reset_index()


def matching_papers(
    papers: pd.DataFrame, suite: str, task: str, metric: str, shots: float | None = None, setting: str | None = None,
    regimes: Collection[str] | None = None,
) -> pd.DataFrame:
    """The papers' points for one chart: those :func:`harness.results.reference.placement` puts beside
    its runs (same task and metric; same shot count for a prompted task, else the suite's declared
    setting; same training regime where the chart's ``regimes`` are given)."""
    placed = placement(papers, suite, task, metric, shots, setting, regimes)
    return placed[placed.reason.eq("")]


def other_papers(
    papers: pd.DataFrame, suite: str, task: str, metric: str, shots: float | None, setting: str | None, regimes: Collection[str],
) -> pd.DataFrame:
    """The papers' points of the chart's suite and task that do not sit beside its runs, with the reason."""
    placed = placement(papers, suite, task, metric, shots, setting, regimes)
    return placed[placed.reason.ne("")]


def pareto_frontier(points: pd.DataFrame, include_at_chance: bool = False, x: str = "emb_param_fraction") -> pd.DataFrame:
    """Points no other point beats with a smaller-or-equal fraction kept (column ``x``: parameters or
    bytes) and a higher %Base, ordered by fraction (the staircase to draw). Points whose baseline is at
    chance (``at_chance``) are left out unless asked for: their %Base divides by noise."""
    if not include_at_chance and "at_chance" in points:
        points = points[~points.at_chance.astype(bool)]
    ordered = points.dropna(subset=[x, "pct_base"]).sort_values([x, "pct_base"], ascending=[True, False])
    best_before = ordered.pct_base.cummax().shift(fill_value=float("-inf"))
    return ordered[ordered.pct_base > best_before]


CURVE_COLUMNS = ["line", "adapter", "lora", "steps", "pct_base", "pct_base_ci_low", "pct_base_ci_high", "at_chance", "config", "run_id"]


def recovery_curves(points: pd.DataFrame) -> pd.DataFrame:
    """A sweep over recovery training as curves: one line per method configuration (adapter
    and settings apart from ``recover`` / ``recover_lora``, which the summary's resolved config carries,
    :func:`harness.results.summary.resolved_config`) and recovery kind, its points (one per
    configuration, seeds averaged as in ``points``) by recovery steps, 0 = post hoc. A +LoRA line
    starts from the same post-hoc point. Only lines with two step counts or more; empty when the view
    holds no such sweep."""
    configs = points.config.map(lambda c: json.loads(c or "{}"))
    steps = configs.map(lambda c: int(c.pop("recover", 0)))  # pop: what remains is the configuration
    lora = configs.map(lambda c: bool(c.pop("recover_lora", False)))
    frame = points.assign(steps=steps, lora=lora, config=configs.map(json.dumps))
    post_hoc = frame[frame.steps.eq(0)]
    lines = pd.concat([frame[~frame.lora], frame[frame.lora], post_hoc.assign(lora=True)[post_hoc.config.isin(frame.config[frame.lora])]])
    lines = lines[lines.adapter.ne("none")]
    swept = lines.groupby(["adapter", "config", "lora"]).steps.transform("nunique") >= 2
    lines = lines[swept].sort_values(["adapter", "config", "lora", "steps"], kind="stable")
    if lines.empty:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    names = key_settings(lines) + lines.lora.map({True: " + LoRA", False: ""})
    return lines.assign(line=names)[CURVE_COLUMNS].reset_index(drop=True)


TIMING_KEYS = ["phase", "batch", "seq_len"]


def in_run_ratios(eff: pd.DataFrame) -> pd.DataFrame:
    """Timed phases of each method configuration's newest run (``eff`` in finishing order, as
    :func:`harness.results.queries.efficiency` gives it) whose base was timed in the same process, in
    alternating rounds (the run's ``base:<phase>``), with method / base for p50 latency, throughput and
    peak memory. Left out: the baselines' own phases (each is the base) and a phase timed with no base
    beside it (its base columns are NULL)."""
    methods = eff[eff.adapter.ne("none")]
    rows = methods.drop_duplicates(["adapter", "config", *TIMING_KEYS], keep="last")  # the newest run of a configuration (rows by finish time)
    return rows.assign(
        latency_ratio=rows.p50_ms / rows.base_p50_ms,
        throughput_ratio=rows.throughput / rows.base_throughput,
        memory_ratio=rows.peak_mem_mb / rows.base_peak_mem_mb,
    ).dropna(subset=["latency_ratio"])


def leaderboard_table(summary: pd.DataFrame, eff: pd.DataFrame, groups: pd.Series) -> pd.DataFrame:
    """Headline rows (mean over seeds) with their significance group (``groups``, by variant: those of
    the chart on screen, ``""`` for another task or metric), storage in MB, the latency ratio against
    the base timed in the same run (:func:`in_run_ratios`; none where there is none), and the budget
    changes disclosed that the row rests on; columns renamed for display."""
    latency = in_run_ratios(eff).drop_duplicates("run_id")[["run_id", "latency_ratio"]]  # first phase stored
    rows = over_seeds(summary).merge(latency, on="run_id", how="left")
    rows["group"] = rows.variant.map(groups).fillna("")
    rows["storage_mb"] = rows.storage_bytes / 1e6
    rows["config"] = rows.config.map(settings_label)
    return rows[["suite", *TABLE_COLUMNS]].rename(columns=TABLE_COLUMNS)


def language_matrix(scores: pd.DataFrame) -> pd.DataFrame:
    """%Base, one row per adapter config (newest run wins; the baseline first, then by embedding
    fraction, largest first), one column per language, avg last."""
    newest = scores.sort_values("finished_at").assign(label=lambda d: [run_label(a, c) for a, c in zip(d.adapter, d.config)])
    matrix = newest.pivot_table(index="label", columns="language", values="pct_base", aggfunc="last")
    order = newest.groupby("label").agg(base=("adapter", lambda a: a.iloc[-1] != "none"), frac=("emb_param_fraction", "last"))
    rows = order.sort_values(["base", "frac"], ascending=[True, False]).index
    languages = sorted(c for c in matrix.columns if c != "avg") + (["avg"] if "avg" in matrix.columns else [])
    return matrix.loc[rows, languages]


def efficiency_table(ratios: pd.DataFrame) -> pd.DataFrame:
    """One row per run of :func:`in_run_ratios`: its latency, throughput and memory against the base
    timed beside it."""
    return ratios.assign(config=ratios.config.map(settings_label))[list(EFFICIENCY_COLUMNS)].rename(columns=EFFICIENCY_COLUMNS)


def export_command(run_id: str) -> str:
    """The shell command that writes run ``run_id``'s compressed model for lm-eval, MTEB and
    ``harness.load_compressed`` (``harness export``)."""
    return f"harness export {run_id} --out exported/{run_id}"


def parquet_bytes(rows: pd.DataFrame) -> bytes:
    """The table as a Parquet file (pyarrow), for download."""
    buffer = io.BytesIO()
    rows.to_parquet(buffer, index=False)
    return buffer.getvalue()
