"""Read-only, parameterised queries the leaderboard runs (through ``Store.query``).

Each call opens the database read-only, runs one statement and closes it, so a ``harness run``
that wants to write is never kept waiting for long; a database held by a writer raises
``StoreBusyError`` after the store's short retry.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.results.store import Store

# A filter is a list parameter: `list_contains(?, column)`, never text pasted into SQL.
_WHERE = "list_contains(?, model) AND list_contains(?, suite) AND list_contains(?, profile)"


PAPER_COLUMNS = (
    "paper", "table", "method", "base_model", "config", "suite", "task", "setting", "metric", "value",
    "pct_base", "emb_param_fraction", "notes",
)
_PAPER_SELECT = ", ".join(f'"{c}"' for c in PAPER_COLUMNS)  # quoted: "table" is a keyword


@dataclass(frozen=True)
class Filters:
    models: tuple[str, ...]
    suites: tuple[str, ...]
    profiles: tuple[str, ...]

    def params(self) -> list[list[str]]:
        return [list(self.models), list(self.suites), list(self.profiles)]


@dataclass(frozen=True)
class Overview:
    runs: int
    failed: int
    paper_rows: int
    options: Filters     # every model, suite and profile stored


def reader(path) -> Store:
    """A store whose connections retry for about two seconds when a writer holds the file."""
    return Store(path, retries=8, wait_s=0.25)


def _tables(store: Store) -> set[str]:
    return set(store.query("SELECT table_name FROM information_schema.tables").table_name)


def overview(store: Store) -> Overview:
    tables = _tables(store)
    if "runs" not in tables:
        return Overview(0, 0, 0, Filters((), (), ()))
    counts = store.query("SELECT count(*) AS runs, count(*) FILTER (status = 'failed') AS failed FROM runs")
    papers = store.query("SELECT count(*) AS n FROM paper_results").n[0] if "paper_results" in tables else 0
    options = Filters(*(
        tuple(store.query(f"SELECT DISTINCT {col} AS v FROM runs WHERE {col} IS NOT NULL ORDER BY v").v)
        for col in ("model", "suite", "profile")
    ))
    return Overview(int(counts.runs[0]), int(counts.failed[0]), int(papers), options)


def scores(store: Store, f: Filters) -> pd.DataFrame:
    """Finished runs' scores (the ``results`` view), every language."""
    return store.query(
        "SELECT run_id, model, adapter, config, suite, profile, seed, task, language, metric, shots, value, ci_low, "
        f"ci_high, pct_base, emb_param_fraction, storage_bytes, baseline_run_id, finished_at FROM results WHERE {_WHERE} "
        "ORDER BY suite, model, profile, finished_at, run_id, task, language, metric",
        f.params(),
    )


def efficiency(store: Store, f: Filters) -> pd.DataFrame:
    """Timed phases of finished runs, each beside the unchanged model's (same phase and shape):
    timed inside the same run (phase ``base:<phase>``) where recorded, else the baseline run's."""
    base = "coalesce(s.{0}, b.{0}) AS base_{0}"
    return store.query(
        "SELECT r.run_id, r.model, r.adapter, CAST(r.adapter_config AS VARCHAR) AS config, r.suite, r.profile, "
        "r.seed, e.phase, e.batch, e.seq_len, e.p50_ms, e.p95_ms, e.throughput, e.peak_mem_mb, "
        f"{base.format('p50_ms')}, {base.format('throughput')}, {base.format('peak_mem_mb')} "
        "FROM efficiency e JOIN runs r USING (run_id) "
        "LEFT JOIN efficiency s ON s.run_id = e.run_id AND s.phase = 'base:' || e.phase "
        "AND s.batch = e.batch AND s.seq_len = e.seq_len "
        "LEFT JOIN efficiency b ON b.run_id = coalesce(r.baseline_run_id, r.run_id) "
        "AND b.phase = e.phase AND b.batch = e.batch AND b.seq_len = e.seq_len "
        f"WHERE r.status = 'finished' AND e.phase NOT LIKE 'base:%' AND {_WHERE} "
        "ORDER BY r.suite, r.model, r.profile, r.finished_at, e.phase",
        f.params(),
    )


def runs(store: Store, f: Filters) -> pd.DataFrame:
    """Every run (running, finished, failed), newest first."""
    return store.query(
        "SELECT run_id, status, model, adapter, CAST(adapter_config AS VARCHAR) AS config, suite, profile, seed, "
        f"started_at, error FROM runs WHERE {_WHERE} ORDER BY started_at DESC",
        f.params(),
    )


def paper_points(store: Store, suites: tuple[str, ...]) -> pd.DataFrame:
    """Papers' headline numbers that have Pareto coordinates: the overall or ``avg`` row, or the
    only language printed (baselines left out: they sit at 100% and 1.0 by definition)."""
    if "paper_results" not in _tables(store):
        return pd.DataFrame(columns=list(PAPER_COLUMNS))
    return store.query(
        f"SELECT {_PAPER_SELECT} FROM (SELECT *, count(*) OVER (PARTITION BY paper, \"table\", method, base_model, "
        "config, suite, task, setting, metric) AS languages FROM paper_results) "
        "WHERE list_contains(?, suite) AND method <> 'baseline' AND pct_base IS NOT NULL "
        "AND emb_param_fraction IS NOT NULL AND (coalesce(language, 'avg') = 'avg' OR languages = 1) "
        'ORDER BY paper, "table", base_model, method, config',
        [list(suites)],
    )


@dataclass(frozen=True)
class Snapshot:
    """What one page view reads, under one set of filters."""

    scores: pd.DataFrame
    efficiency: pd.DataFrame
    runs: pd.DataFrame
    papers: pd.DataFrame


def snapshot(store: Store, f: Filters) -> Snapshot:
    return Snapshot(scores(store, f), efficiency(store, f), runs(store, f), paper_points(store, f.suites))
