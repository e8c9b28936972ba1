"""Read-only, parameterised queries the leaderboard runs (through ``Store.query``): the summary of
every run for the landing page, and for the one chart on screen its scores, efficiency, runs, the
papers' points and per-item outputs.

Each call opens the database read-only, runs one statement and closes it, so a ``harness run``
that wants to write is never kept waiting for long; a database held by a writer raises
``StoreBusyError`` after the store's short retry.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.results import reference, summary
from harness.results.records import ItemOutputs
from harness.results.store import Store

# One chart's runs: `?` parameters, never text pasted into SQL.
_VIEW = "suite = ? AND model = ? AND profile = ?"


PAPER_COLUMNS = (
    "paper", "table", "method", "base_model", "config", "suite", "task", "setting", "paper_setting", "metric", "value",
    "pct_base", "emb_param_fraction", "notes",
)
_PAPER_SELECT = ", ".join(f'"{c}"' for c in PAPER_COLUMNS)  # quoted: "table" is a keyword


@dataclass(frozen=True)
class View:
    """The suite, model and profile of the chart on screen: what the detail queries read."""

    suite: str
    model: str
    profile: str

    def params(self) -> list[str]:
        return [self.suite, self.model, self.profile]


@dataclass(frozen=True)
class Landing:
    """What the landing page reads: every finished run's headline row and the store's counts."""

    summary: pd.DataFrame
    runs: int
    failed: int
    paper_rows: int


def reader(path) -> Store:
    """A store whose connections retry for about two seconds when a writer holds the file."""
    return Store(path, retries=8, wait_s=0.25)


def landing(store: Store) -> Landing:
    tables = store.tables()
    if "runs" not in tables:
        return Landing(pd.DataFrame(), 0, 0, 0)
    papers = "(SELECT count(*) FROM paper_results)" if "paper_results" in tables else "0"
    counts = store.query(f"SELECT count(*) AS runs, count(*) FILTER (status = 'failed') AS failed, {papers} AS papers FROM runs")
    return Landing(summary.read(store), int(counts.runs[0]), int(counts.failed[0]), int(counts.papers[0]))


def scores(store: Store, v: View) -> pd.DataFrame:
    """The view's finished runs' scores, every language (the ``results`` view), configs as resolved."""
    return summary.with_resolved_config(store.query(
        "SELECT run_id, model, adapter, config, suite, profile, seed, variant, task, language, metric, setting, shots, value, "
        "pct_base, emb_param_fraction, finished_at, (SELECT CAST(fit_details AS VARCHAR) FROM runs r WHERE r.run_id = results.run_id) AS fit_details, "
        "(SELECT CAST(recipe AS VARCHAR) FROM runs r WHERE r.run_id = results.run_id) AS recipe "
        "FROM results WHERE " + _VIEW + " ORDER BY finished_at, run_id, task, language, metric",
        v.params(),
    ))


def efficiency(store: Store, v: View) -> pd.DataFrame:
    """Timed phases of the view's finished runs, each beside the unchanged model's (same phase and
    shape): timed inside the same run (phase ``base:<phase>``) where recorded, else the baseline run's;
    with the device each run was timed on (not part of a run's identity: a ``--device cuda`` run may reuse a CPU run)."""
    base = "coalesce(s.{0}, b.{0}) AS base_{0}"
    return summary.with_resolved_config(store.query(
        "SELECT r.run_id, r.model, r.adapter, CAST(r.adapter_config AS VARCHAR) AS config, CAST(r.fit_details AS VARCHAR) AS fit_details, "
        "CAST(r.recipe AS VARCHAR) AS recipe, r.suite, r.profile, r.seed, r.device, e.phase, e.batch, e.seq_len, e.p50_ms, e.p95_ms, e.throughput, e.peak_mem_mb, "
        f"{base.format('p50_ms')}, {base.format('throughput')}, {base.format('peak_mem_mb')} "
        "FROM efficiency e JOIN runs r USING (run_id) "
        "LEFT JOIN efficiency s ON s.run_id = e.run_id AND s.phase = 'base:' || e.phase "
        "AND s.batch = e.batch AND s.seq_len = e.seq_len "
        "LEFT JOIN efficiency b ON b.run_id = coalesce(r.baseline_run_id, r.run_id) "
        "AND b.phase = e.phase AND b.batch = e.batch AND b.seq_len = e.seq_len "
        "WHERE r.status = 'finished' AND e.phase NOT LIKE 'base:%' AND r.suite = ? AND r.model = ? AND r.profile = ? "
        "ORDER BY r.finished_at, e.phase",
        v.params(),
    ))


def runs(store: Store, v: View) -> pd.DataFrame:
    """The view's runs (running, finished, failed), newest first."""
    return summary.with_resolved_config(store.query(
        "SELECT run_id, status, model, adapter, CAST(adapter_config AS VARCHAR) AS config, CAST(fit_details AS VARCHAR) AS fit_details, "
        f"CAST(recipe AS VARCHAR) AS recipe, suite, profile, seed, started_at, error FROM runs WHERE {_VIEW} ORDER BY started_at DESC",
        v.params(),
    ))


def items(store: Store, run_ids: tuple[str, ...], task: str, metric: str) -> dict[str, list[ItemOutputs]]:
    """The per-item outputs behind one headline (``task``, ``metric``) of the given runs only, in one
    query (the significance groups of the chart on screen); predictions are left out."""
    rows = store.query(
        "SELECT run_id, task, language, split, metric, list(item ORDER BY rowid) AS ids, list(value ORDER BY rowid) AS vals, "
        "list(gold ORDER BY rowid) FILTER (gold IS NOT NULL) AS gold, list(weight ORDER BY rowid) FILTER (weight IS NOT NULL) AS weights "
        "FROM items WHERE list_contains(?, run_id) AND task = ? AND split_part(metric, '@', 1) = ? "
        "GROUP BY run_id, task, language, split, metric ORDER BY run_id, min(rowid)",
        [list(run_ids), task, metric],
    )
    out: dict[str, list[ItemOutputs]] = {}
    for r in rows.itertuples(index=False):
        extra = tuple(() if v is None or v is pd.NA else tuple(v) for v in (r.gold, r.weights))
        out.setdefault(r.run_id, []).append(ItemOutputs(r.task, r.language, r.split, r.metric, tuple(r.ids), tuple(r.vals), (), *extra))
    return out


def paper_points(store: Store, suites: tuple[str, ...], pareto: bool = True) -> pd.DataFrame:
    """Papers' headline numbers: the overall or ``avg`` row, or the only language printed (baselines
    left out: they sit at 100% and 1.0 by definition), with their training regime and model family
    (:func:`harness.results.reference.annotate`); those with Pareto coordinates (%Base and an
    embedding fraction), or with ``pareto=False`` every quality metric's row (``harness results --paper``)."""
    if "paper_results" not in store.tables():
        return reference.annotate(pd.DataFrame(columns=list(PAPER_COLUMNS)))
    plotted = "pct_base IS NOT NULL AND emb_param_fraction IS NOT NULL" if pareto else "list_contains(?, metric)"
    quality = [] if pareto else [sorted(reference.HIGHER_IS_BETTER | reference.LOWER_IS_BETTER)]
    return reference.annotate(store.query(
        f"SELECT {_PAPER_SELECT} FROM (SELECT *, count(*) OVER (PARTITION BY paper, \"table\", method, base_model, "
        "config, suite, task, setting, metric) AS languages FROM paper_results) "
        f"WHERE list_contains(?, suite) AND method <> 'baseline' AND {plotted} "
        "AND (coalesce(language, 'avg') = 'avg' OR languages = 1) "
        'ORDER BY paper, "table", base_model, method, config',
        [list(suites), *quality],
    ))
