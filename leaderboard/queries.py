"""What the leaderboard reads, through the typed reads of :mod:`harness.results.queries` (the one
module that holds SQL): the summary of every run for the landing page, and for the one chart on
screen its scores, efficiency and runs with configs as resolved; the papers' points and per-item
outputs come from there as they are (:func:`~harness.results.queries.paper_points`,
:func:`~harness.results.queries.headline_items`).

Each read opens the database read-only, runs its statements and closes it, so a ``harness run``
that wants to write is never kept waiting for long; a database held by a writer raises
``StoreBusyError`` after the store's short retry.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.results import queries, summary
from harness.results.store import Store


@dataclass(frozen=True)
class View:
    """The suite, model and profile of the chart on screen: what the detail queries read."""

    suite: str
    model: str
    profile: str

    def runs(self) -> queries.RunFilter:
        return queries.RunFilter(suite=self.suite, model=self.model, profile=self.profile)


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
    runs, failed, papers = queries.counts(store, papers="paper_results" in tables)
    return Landing(summary.read(store), runs, failed, papers)


def scores(store: Store, v: View) -> pd.DataFrame:
    """The view's finished runs' scores, every language (:func:`harness.results.queries.scores`), configs as resolved."""
    return summary.with_resolved_config(queries.scores(store, v.runs()))


def efficiency(store: Store, v: View) -> pd.DataFrame:
    """Timed phases of the view's finished runs, each beside the unchanged model's
    (:func:`harness.results.queries.efficiency`), with the device each run was timed on (not part of
    a run's identity: a ``--device cuda`` run may reuse a CPU run); configs as resolved."""
    return summary.with_resolved_config(queries.efficiency(store, v.runs()))


def runs(store: Store, v: View) -> pd.DataFrame:
    """The view's runs (running, finished, failed), newest first; configs as resolved."""
    return summary.with_resolved_config(queries.runs(store, v.runs()).drop(columns="wall_s"))
