"""The leaderboard: ``harness leaderboard``, or ``streamlit run`` this file with ``HARNESS_DB`` set.

Reads the results database read-only and never writes. Answers are cached until the file changes,
so page views rarely open it; a database held by a running writer is retried briefly, and if it
stays busy the page says so and shows what it read last in this session.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import streamlit as st
from harness.leaderboard import pages, plots, queries

from harness.errors import StoreBusyError, StoreError
from harness.results.store import default_path

TITLE = "Compressed-embedding leaderboard"
TABS = ["Pareto", "Table", "Languages", "Efficiency", "Run detail"]


def first_run(path: Path, paper_rows: int = 0) -> None:
    papers = f" ({paper_rows} paper rows are loaded)" if paper_rows else ""
    st.info(
        f"No runs in `{path}` yet{papers}. Run a method on a suite (its baseline runs too), load the papers' "
        "reported numbers, then reload this page:\n\n"
        f"```bash\nharness run --suite xnli --adapter asg --db {path}\nharness reference load --db {path}\n```"
    )


QUERIES: dict[str, Callable] = {
    "overview": queries.overview,
    "snapshot": queries.snapshot,
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


def sidebar(overview: queries.Overview, path: Path) -> queries.Filters:
    st.sidebar.header("Filters")
    chosen = [
        tuple(st.sidebar.multiselect(label, values, default=values))
        for label, values in zip(("model", "suite", "profile"), (overview.options.models, overview.options.suites, overview.options.profiles))
    ]
    st.sidebar.caption(
        f"{overview.runs} runs ({overview.failed} failed), {overview.paper_rows} paper rows, read-only from `{path}`"
    )
    return queries.Filters(*chosen)


def main() -> None:
    st.set_page_config(page_title=TITLE, layout="wide")
    st.title(TITLE)
    st.caption("How much of the base model's quality survives at what compression, speed and memory.")
    path = default_path()
    if not path.exists() or path.stat().st_size == 0:
        first_run(path)
        return
    overview = read("overview", path)
    if overview.runs == 0:
        first_run(path, overview.paper_rows)
        return
    filters = sidebar(overview, path)
    data = read("snapshot", path, filters)
    colours = plots.adapter_colours([*data.runs.adapter, *data.papers.method])
    pareto, table, languages, efficiency, detail = st.tabs(TABS)
    with pareto:
        pages.pareto(data, colours, overview.paper_rows)
    with table:
        pages.table(data, overview.failed)
    with languages:
        pages.languages(data)
    with efficiency:
        pages.efficiency(data, colours)
    with detail:
        pages.run_detail(data, lambda run_id: read("run", path, run_id))


if __name__ == "__main__":  # streamlit runs this file as __main__; importing it draws nothing
    main()
