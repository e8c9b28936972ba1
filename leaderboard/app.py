"""The leaderboard: ``harness leaderboard``, or ``streamlit run`` this file with ``HARNESS_DB`` set.

Opens on the overview (a row per method configuration, a column per suite), then one chart at a
time with its tabs. Reads the results database read-only and never writes. Answers are cached until the file changes,
so page views rarely open it; a database held by a running writer is retried briefly, and if it
stays busy the page says so and shows what it read last in this session.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st
from harness.leaderboard import frames, landing, overview, pages, plots, queries, significance

from harness.errors import StoreBusyError, StoreError
from harness.results.store import default_path

TITLE = "Compressed-embedding leaderboard"
TABS = ["Pareto", "Table", "Languages", "Efficiency", "Run detail"]  # below the overview, for the chart picked


def first_run(path: Path, paper_rows: int = 0) -> None:
    papers = f" ({paper_rows} paper rows are loaded)" if paper_rows else ""
    st.info(
        f"No runs in `{path}` yet{papers}. Run a method on a suite (its baseline runs too), load the papers' "
        "reported numbers, then reload this page:\n\n"
        f"```bash\nharness run --suite xnli --adapter asg --db {path}\nharness reference load --db {path}\n```"
    )


QUERIES: dict[str, Callable] = {
    "landing": queries.landing,
    "scores": queries.scores,
    "efficiency": queries.efficiency,
    "runs": queries.runs,
    "papers": queries.paper_points,
    "items": queries.items,
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
def significance_groups(path: str, version: tuple, points: pd.DataFrame) -> pd.Series:
    """The chart's significance groups by variant (per-item outputs of the compared runs only), cached
    until the database changes."""
    pairs = significance.plan(points)
    if pairs.empty:
        return pd.Series(dtype=object)
    r = points.iloc[0]
    needed = tuple(sorted(set(pairs.run_id.dropna()) | set(pairs.best)))
    items = QUERIES["items"](queries.reader(path), needed, r.task, r.metric)
    return significance.groups(pairs, items, np.random.default_rng(0), r.task, r.language, r.metric, bool(r.higher_is_better))


def groups(path: Path, rows: pd.DataFrame) -> pd.Series:
    """The chart's significance groups; none (every point a plain marker) while a writer holds the database."""
    try:
        return significance_groups(str(path), stamp(path), rows)
    except StoreBusyError:
        st.caption("Significance groups are computed once the database is free again.")
        return pd.Series(dtype=object)


def chart_tabs(path: Path, summary: pd.DataFrame, chart: pd.Series, cell: landing.Cell | None, paper_rows: int, failed: int) -> None:
    """The chart on screen and its views as tabs; only the open tab reads and draws (its tab is in the URL)."""
    view = queries.View(chart.suite, chart.model, chart.profile)
    same = (summary.suite == chart.suite) & (summary.model == chart.model) & (summary.profile == chart.profile)
    rows = summary[same & summary.task.eq(chart.task) & summary.metric.eq(chart.metric)]
    points = frames.over_seeds(rows).assign(setting=lambda d: d.setting.fillna(""))
    papers = frames.matching_papers(read("papers", path, (chart.suite,)), chart.suite, chart.task, chart.metric, chart.shots, chart.setting or "")
    colours = plots.adapter_colours([*summary.adapter, *papers.method])
    selected = summary.set_index("run_id").variant.get(cell.run_id) if cell else None
    pareto, table, languages, efficiency, detail = st.tabs(TABS, key="tab", on_change="rerun", bind="query-params")
    if pareto.open:
        with pareto:
            pages.pareto(points, papers, colours, paper_rows, lambda: groups(path, rows), selected)
    if table.open:
        with table:
            pages.table(summary[same], read("efficiency", path, view), failed)
    if languages.open:
        with languages:
            pages.languages(read("scores", path, view))
    if efficiency.open:
        with efficiency:
            pages.efficiency(read("efficiency", path, view), colours)
    if detail.open:
        with detail:
            pages.run_detail(read("runs", path, view), lambda run_id: read("run", path, run_id), papers, cell.run_id if cell else None)


def main() -> None:
    st.set_page_config(page_title=TITLE, layout="wide")
    st.title(TITLE)
    st.caption("How much of the base model's quality survives at what compression, speed and memory.")
    path = default_path()
    if not path.exists() or path.stat().st_size == 0:
        first_run(path)
        return
    data = read("landing", path)
    if data.runs == 0 or data.summary.empty:
        first_run(path, data.paper_rows)
        return
    summary, aggregate = landing.filtered(data.summary)
    st.sidebar.caption(f"{data.runs} runs ({data.failed} failed), {data.paper_rows} paper rows, read-only from `{path}`")
    table = overview.build(summary, aggregate)
    if table.display.empty:
        st.info(pages.NO_MATCH)
        return
    headlines = summary.drop_duplicates("suite").set_index("suite").apply(lambda r: f"{r.task} {r.metric}", axis=1).to_dict()
    cell = landing.table(table, headlines)
    chart = landing.chart_picker(landing.views(summary, table.suites), cell, summary)
    chart_tabs(path, summary, chart, cell, data.paper_rows, data.failed)


if __name__ == "__main__":  # streamlit runs this file as __main__; importing it draws nothing
    main()
