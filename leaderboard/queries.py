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

import contextlib
from dataclasses import dataclass

import pandas as pd

from harness.errors import EmptyStoreError, StoreBusyError
from harness.results import queries, summary
from harness.results.disclosure import disclosures
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
    """What the landing page reads: every finished run's headline row (:func:`headline_rows`) and the
    store's counts; ``stale`` counts every run made by other code, as ``harness list runs`` does."""

    summary: pd.DataFrame
    runs: int
    failed: int
    paper_rows: int
    stale: int = 0


def reader(path) -> Store:
    """A store whose connections retry for about two seconds when a writer holds the file."""
    return Store(path, retries=8, wait_s=0.25)


def check(path) -> None:
    """Refuse a path every reader refuses, with the StoreError ``harness results`` prints (no file there,
    a folder, not DuckDB, another schema); a DuckDB file without the harness's tables (no runs yet) and
    one a writer holds now (the page says so) are not refused."""
    with contextlib.suppress(EmptyStoreError, StoreBusyError):
        queries.counts(Store(path, retries=1), papers=False)


def landing(store: Store) -> Landing:
    """The landing page's read; a path every reader refuses (none there, a folder, not DuckDB, another
    schema) raises the StoreError ``harness results`` prints."""
    try:
        runs, failed, papers = queries.counts(store, papers="paper_results" in store.tables())
    except EmptyStoreError:  # a DuckDB file without the harness's tables: no runs yet
        return Landing(pd.DataFrame(), 0, 0, 0)
    if runs == 0:
        return Landing(pd.DataFrame(), 0, 0, papers)
    return Landing(headline_rows(store), runs, failed, papers, len(queries.stale_run_ids(store)))


def headline_rows(store: Store) -> pd.DataFrame:
    """The summary (:func:`harness.results.summary.read`) with, per run, ``baseline_variant`` (the
    configuration its %Base divides by: its baseline's variant; a baseline's own) and ``disclosure``
    (the budget changes made after a method's score was seen that its %Base rests on: its own recipe's
    and adapter budget's, then its baseline's, :func:`harness.results.disclosure.disclosures`; "" for none)."""
    rows = queries.headlines(store)
    notes = {r: disclosures(recipe, budget) for r, recipe, budget in zip(rows.run_id, rows.recipe, rows.adapter_budget)}
    out = summary.with_run_facts(rows)
    variants = dict(zip(out.run_id, out.variant))
    base = out.baseline_run_id.fillna(out.run_id)
    return out.assign(
        baseline_variant=[variants.get(b, b) for b in base],
        disclosure=["; ".join(dict.fromkeys([*notes[r], *notes.get(b, ())])) for r, b in zip(out.run_id, base)],
    )


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
