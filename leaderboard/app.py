"""The leaderboard: ``harness leaderboard``, or ``streamlit run`` this file with ``HARNESS_DB`` set.

Opens on the overview (a row per method configuration, a column per suite), then one chart at a
time with its tabs. Reads the results database read-only and never writes. Answers are cached until the file changes,
so page views rarely open it; a database held by a running writer is retried briefly, and if it
stays busy the page says so and shows what it read last in this session.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st
from harness.leaderboard import frames, landing, overview, pages, plots, queries
from harness.leaderboard.main_job import MAIN_JOB
from harness.leaderboard.reads import groups, read

from harness.results.store import default_path

TITLE = "Compressed-embedding leaderboard"
TABS = ["Pareto", "Recovery", "Table", "Languages", "Efficiency", "Run detail"]  # below the overview, for the chart picked


def first_run(path: Path, paper_rows: int = 0) -> None:
    papers = f" ({paper_rows} paper rows are loaded)" if paper_rows else ""
    st.info(
        f"No runs in `{path}` yet{papers}. Run a method on a suite (its baseline runs too), load the papers' "
        "reported numbers, then reload this page:\n\n"
        f"```bash\nharness run --suite {MAIN_JOB.suite} --adapter {MAIN_JOB.adapter} --db {path}\nharness reference load --db {path}\n```"
    )


def chart_tabs(path: Path, summary: pd.DataFrame, chart: pd.Series, cell: landing.Cell | None, paper_rows: int, failed: int,
               axis: frames.Axis) -> None:
    """The chart on screen and its views as tabs, on the compression ``axis``; only the open tab reads and
    draws (its tab is in the URL)."""
    view = queries.View(chart.suite, chart.model, chart.profile)
    same = (summary.suite == chart.suite) & (summary.model == chart.model) & (summary.profile == chart.profile)
    rows = summary[same & summary.task.eq(chart.task) & summary.metric.eq(chart.metric) & summary.setting.fillna("").eq(chart.setting or "")]
    points = frames.over_seeds(rows).assign(setting=lambda d: d.setting.fillna(""))
    loaded, regimes = read("papers", path, (chart.suite,)), set(rows.regime)
    papers = frames.matching_papers(loaded, chart.suite, chart.task, chart.metric, chart.shots, chart.setting or "", regimes)
    others = frames.other_papers(loaded, chart.suite, chart.task, chart.metric, chart.shots, chart.setting or "", regimes)
    colours = plots.adapter_colours([*summary.adapter, *papers.method])
    selected = summary.set_index("run_id").variant.get(cell.run_id) if cell else None
    pareto, recovery, table, languages, efficiency, detail = st.tabs(TABS, key="tab", on_change="rerun", bind="query-params")
    if pareto.open:
        with pareto:
            pages.pareto(points, papers, colours, paper_rows, lambda: groups(path, rows, axis.column), selected, others, axis)
    if recovery.open:
        with recovery:
            pages.recovery(points, colours)

    def shown(frame: pd.DataFrame) -> pd.DataFrame:  # the runs the sidebar's filters keep
        return frame[frame.run_id.isin(summary.run_id)]

    if table.open:
        with table:
            pages.table(summary[same], read("efficiency", path, view), failed, groups(path, rows, axis.column))
    if languages.open:
        with languages:
            pages.languages(shown(read("scores", path, view)))
    if efficiency.open:
        with efficiency:
            pages.efficiency(read("efficiency", path, view), summary.run_id, colours)
    if detail.open:
        with detail:
            pages.run_detail(read("runs", path, view), lambda run_id: read("run", path, run_id), papers, cell.run_id if cell else None)


def main() -> None:
    st.set_page_config(page_title=TITLE, layout="wide")
    st.title(TITLE)
    st.caption("How much of the base model's quality survives at what compression, speed and memory.")
    path = default_path()
    data = read("landing", path)  # a path `harness results` refuses is refused here with its line
    if data.runs == 0 or data.summary.empty:
        first_run(path, data.paper_rows)
        return
    kept = landing.filtered(data.summary)
    summary = kept.summary
    hidden = (f"{data.stale} stale runs (made by other code than the installed one) are hidden: "
              "**Include stale runs** in the sidebar shows them.") if kept.stale_hidden else ""
    st.sidebar.caption(f"{data.runs} runs ({data.failed} failed, {data.stale} stale), {data.paper_rows} paper rows, read-only from `{path}`")
    rows, columns = landing.rows_of(summary, MAIN_JOB)
    table = overview.build(rows, kept.aggregate, kept.axis, columns)
    if table.display.empty:
        st.info(f"{pages.NO_MATCH} {hidden}".rstrip())
        return
    if hidden:
        st.caption(hidden)
    headlines = summary.drop_duplicates("suite").set_index("suite").apply(lambda r: f"{r.task} {r.metric}", axis=1).to_dict()
    cell = landing.table(table, headlines, kept.axis)
    chart = landing.chart_picker(landing.views(summary, table.suites), cell, summary, MAIN_JOB)
    chart_tabs(path, summary, chart, cell, data.paper_rows, data.failed, kept.axis)


if __name__ == "__main__":  # streamlit runs this file as __main__; importing it draws nothing
    main()
