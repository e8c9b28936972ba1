"""Pure table transforms behind the pages: headline scores, the papers' points per chart, the
Pareto frontier, the leaderboard table, per-language %Base and efficiency ratios. DataFrames in,
DataFrames out; no I/O."""

from __future__ import annotations

import json
import re

import pandas as pd

GROUP = ["suite", "model", "profile", "task", "metric"]  # one Pareto chart / heatmap each
TABLE_COLUMNS = {
    "adapter": "adapter", "config": "config", "value": "score", "ci_low": "CI low", "ci_high": "CI high",
    "pct_base": "%Base", "emb_param_fraction": "emb. fraction", "storage_mb": "storage MB",
    "latency_ratio": "latency × base", "model": "model", "profile": "profile", "task": "task", "metric": "metric",
    "shots": "shots", "run_id": "run_id",
}
EFFICIENCY_COLUMNS = {
    "adapter": "adapter", "config": "config", "latency_ratio": "latency × base", "throughput_ratio": "tokens/s × base",
    "memory_ratio": "memory × base", "p50_ms": "p50 ms", "p95_ms": "p95 ms", "throughput": "tokens/s",
    "peak_mem_mb": "peak MB", "suite": "suite", "model": "model", "profile": "profile", "run_id": "run_id",
}


def config_label(config: str | None) -> str:
    """``{"k": 256, "m": 48}`` -> ``k=256 m=48``; an empty config (the baseline) -> ``-``."""
    items = json.loads(config or "{}")
    return " ".join(f"{k}={json.dumps(v)}" for k, v in items.items()) or "-"


def run_label(adapter: str, config: str | None) -> str:
    label = config_label(config)
    return adapter if label == "-" else f"{adapter} {label}"


def task_key(task: str) -> str:
    """Case and punctuation folded, so a paper's ``XNLI`` / ``SST-2`` meet the suite's ``xnli`` / ``sst2``."""
    return re.sub(r"[^a-z0-9]", "", task.lower())


def headline(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per run, task and metric: the ``avg`` language row, or the only row there is."""
    keys = ["run_id", "task", "metric"]
    size = scores.groupby(keys)["language"].transform("size")
    has_avg = scores.assign(is_avg=scores.language.eq("avg")).groupby(keys)["is_avg"].transform("any")
    return scores[scores.language.eq("avg") | (~has_avg & size.eq(1))].reset_index(drop=True)


# A paper's name for what a suite scores under another name: lm-eval's ``acc`` is the papers'
# ``accuracy``; paper 003's "ARC" is ARC-Challenge (its values are Challenge levels, see suites/lm_eval.py).
METRIC_ALIASES = {"acc": "accuracy"}
TASK_ALIASES = {("lm_eval", "arc"): "arcchallenge"}
_SHOTS = re.compile(r"\b(\d+)-shot\b|\b(zero)-shot\b", re.IGNORECASE)


def paper_shots(setting: str | None, notes: str | None) -> int | None:
    """In-context examples a paper's row was scored with, read from its setting, else its notes
    ("5-shot in-context", "zero-shot"); None where neither says."""
    for text in (setting, notes):
        found = _SHOTS.search(text) if isinstance(text, str) else None
        if found:
            return 0 if found.group(2) else int(found.group(1))
    return None


def matching_papers(papers: pd.DataFrame, suite: str, task: str, metric: str, shots: float | None = None) -> pd.DataFrame:
    """The papers' points for one chart: same suite and metric, same task up to case and punctuation
    (and the aliases above); for a prompted task (``shots`` set), only rows scored with as many
    in-context examples, so that a 0-shot run never sits beside a paper's 5-shot point."""
    metrics = {metric, METRIC_ALIASES.get(metric, metric)}
    keys = papers.task.map(task_key)
    keys = keys.where(~papers.suite.eq(suite), keys.map(lambda k: TASK_ALIASES.get((suite, k), k)))
    same = papers.suite.eq(suite) & papers.metric.isin(metrics) & keys.eq(task_key(task))
    if shots is not None and not pd.isna(shots):
        same &= pd.Series([paper_shots(s, n) for s, n in zip(papers.setting, papers.notes)], index=papers.index, dtype=object).eq(int(shots))
    return papers[same]


def pareto_frontier(points: pd.DataFrame) -> pd.DataFrame:
    """Points no other point beats with a smaller-or-equal embedding fraction and a higher %Base,
    ordered by fraction (the staircase to draw)."""
    ordered = points.dropna(subset=["emb_param_fraction", "pct_base"]).sort_values(
        ["emb_param_fraction", "pct_base"], ascending=[True, False]
    )
    best_before = ordered.pct_base.cummax().shift(fill_value=float("-inf"))
    return ordered[ordered.pct_base > best_before]


def with_ratios(eff: pd.DataFrame) -> pd.DataFrame:
    """Efficiency rows plus compressed / base for p50 latency, throughput and peak memory."""
    return eff.assign(
        latency_ratio=eff.p50_ms / eff.base_p50_ms,
        throughput_ratio=eff.throughput / eff.base_throughput,
        memory_ratio=eff.peak_mem_mb / eff.base_peak_mem_mb,
    )


def leaderboard_table(scores: pd.DataFrame, eff: pd.DataFrame) -> pd.DataFrame:
    """Headline rows with storage in MB and the latency ratio, columns renamed for display."""
    latency = with_ratios(eff).drop_duplicates("run_id")[["run_id", "latency_ratio"]]  # first phase stored
    rows = headline(scores).merge(latency, on="run_id", how="left")
    rows["storage_mb"] = rows.storage_bytes / 1e6
    rows["config"] = rows.config.map(config_label)
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


def efficiency_table(eff: pd.DataFrame) -> pd.DataFrame:
    """One row per run: latency, throughput, memory and their ratios to the baseline's."""
    rows = with_ratios(eff).assign(config=eff.config.map(config_label))
    return rows[list(EFFICIENCY_COLUMNS)].rename(columns=EFFICIENCY_COLUMNS)
