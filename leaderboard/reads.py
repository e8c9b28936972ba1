"""What the page reads, cached across sessions until the database changes: the queries' answers and
the chart's significance groups. A module, not the script, so that ``harness leaderboard`` can fill
the landing page's entry while the browser connects (:mod:`harness.leaderboard.serve`): Streamlit
keys a cache by the function's module, and the script runs as ``__main__``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st
from harness.leaderboard import queries, significance

from harness.errors import StoreBusyError, StoreError
from harness.results.queries import headline_items, paper_points

QUERIES: dict[str, Callable] = {
    "landing": queries.landing,
    "scores": queries.scores,
    "efficiency": queries.efficiency,
    "runs": queries.runs,
    "papers": paper_points,
    "items": headline_items,
    "run": lambda store, run_id: store.load(run_id),
}


def stamp(path: Path) -> tuple:
    """Changes whenever a writer commits (to the file or its write-ahead log)."""
    return tuple((p.stat().st_mtime_ns, p.stat().st_size) if p.exists() else None for p in (path, path.with_name(path.name + ".wal")))


@st.cache_data(max_entries=64, show_spinner=False)
def cached(name: str, path: str, version: tuple, *args):
    """A query's answer, shared by every session until the database changes."""
    return QUERIES[name](queries.reader(path), *args)


def read(name: str, path: Path, *args):
    """A query's answer; when the database stays busy, this session's last answer with a note."""
    slot = f"read:{name}:{args}"
    try:
        value = cached(name, str(path), stamp(path), *args)
    except StoreBusyError:
        held = st.session_state.get(slot)
        when = f"showing what was read at {held[1]}" if held else "nothing read yet in this session"
        st.warning(
            f"The database is busy: another process (a `harness run`) is writing to it; {when}. "
            "Retry in a moment."
        )
        st.button("Retry", key=f"retry-{slot}")
        if held is None:
            st.stop()
        return held[0]
    except StoreError as err:
        st.error(str(err))
        st.stop()
    st.session_state[slot] = (value, time.strftime("%H:%M:%S"))
    return value


@st.cache_data(max_entries=64, show_spinner=False)
def significance_groups(path: str, version: tuple, points: pd.DataFrame, axis: str) -> pd.Series:
    """The chart's significance groups by variant (per-item outputs of the compared runs only), within
    budgets on the compression axis ``axis`` (a summary column), cached until the database changes."""
    pairs = significance.plan(points, axis)
    if pairs.empty:
        return pd.Series(dtype=object)
    r = points.iloc[0]
    needed = tuple(sorted(set(pairs.run_id.dropna()) | set(pairs.best)))
    items = QUERIES["items"](queries.reader(path), needed, r.task, r.metric)
    return significance.groups(pairs, items, np.random.default_rng(0), r.task, r.language, r.metric, bool(r.higher_is_better))


def groups(path: Path, rows: pd.DataFrame, axis: str) -> pd.Series:
    """The chart's significance groups; none (every point a plain marker) while a writer holds the database."""
    try:
        return significance_groups(str(path), stamp(path), rows, axis)
    except StoreBusyError:
        st.caption("Significance groups are computed once the database is free again.")
        return pd.Series(dtype=object)
