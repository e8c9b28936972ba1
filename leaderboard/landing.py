"""The landing page's widgets: the sidebar filters (held in the URL's query parameters, so a view can
be shared), the overview's model and suite pickers, its table with selectable cells, and
the chart selector (opening on the main job's chart)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
from harness.leaderboard import overview
from harness.leaderboard.frames import AXES, Axis
from harness.leaderboard.main_job import MainJob
from harness.leaderboard.plots import log_ticks
from plotly.colors import sample_colorscale

SHOWN_ROWS = 200  # overview rows sent to the page (sorted best first); colouring 666 rows took 1.6 s of a 10,000-run store's load
SHOWN_SUITES = 3  # suite columns shown unless picked: with the first columns they fit a 1,280 px window beside the sidebar
GRID_ROWS = 12    # rows the grid shows before it scrolls
FILTERS = {"model": "model", "suite": "suite", "method": "adapter", "setting": "setting", "profile": "profile"}
# the overview's first columns in order, then each suite's: pixels (a fixed layout: the browser test finds a header by it)
WIDTHS = {"method": 160, "rank": 55, "budget": 75, "avg %Base": 70, "suite": 145}


@dataclass(frozen=True)
class Cell:
    """The overview cell a user selected: its suite column and the newest run behind it."""

    suite: str
    run_id: str


def fraction_label(fraction: float) -> str:
    """A stop of the compression slider, as shown and as kept in the URL (``?fraction=0.005&fraction=0.1``)."""
    return f"{fraction:.3g}"


def _fraction_range(summary: pd.DataFrame, axis: Axis) -> tuple[float, float] | None:
    known = summary[axis.column].dropna()
    if known.empty:
        return None
    ticks = sorted({*log_ticks(known.min(), known.max()), float(known.min()), float(known.max())})
    if len(ticks) < 2:
        return None
    low, high = st.sidebar.select_slider(
        f"{axis.label} (fraction of the base's)", ticks, value=(ticks[0], ticks[-1]), key="fraction", bind="query-params",
        format_func=fraction_label,
    )
    return low, high


@dataclass(frozen=True)
class Filtered:
    """The summary rows the sidebar keeps, whether seeds are averaged, how many stale runs it hid, and
    the compression axis chosen."""

    summary: pd.DataFrame
    aggregate: bool
    stale_hidden: int
    axis: Axis = AXES["bytes"]


def filtered(summary: pd.DataFrame) -> Filtered:
    """The summary rows the sidebar's filters keep (baselines always kept: every %Base needs one; stale
    runs only when asked, as ``harness results --include-stale``), whether seeds are averaged, and the
    compression axis (bytes stored by default: int8 keeps every parameter in a quarter of the bytes)."""
    st.sidebar.header("Filters")
    axis = AXES[st.sidebar.radio(  # the options as shown are the URL's values (?axis=parameters)
        "compression: what is kept", list(AXES), key="axis", bind="query-params", horizontal=True,
        help="What the budgets, the slider and the chart's x count: the embedding's bytes stored (token tables, id maps, any "
             "untied output head) or its parameters, each as a fraction of the base model's.",
    )]
    keep = pd.Series(True, index=summary.index)
    for key, column in FILTERS.items():
        values = sorted(summary[column].fillna("").unique())
        if len(values) > 1:
            chosen = st.sidebar.multiselect(key, values, default=[], placeholder=f"all {len(values)}", key=key, bind="query-params")
            if chosen:  # none chosen: all (a chip per value took Chromium 0.5 s of the committed store's page)
                keep &= summary[column].fillna("").isin(chosen) | (column == "adapter") & summary.adapter.eq("none")
    span = _fraction_range(summary, axis)
    if span is not None:
        keep &= summary[axis.column].between(*span) | summary.adapter.eq("none")
    aggregate = st.sidebar.toggle("Mean ± sd over seeds", value=True, key="seeds", bind="query-params")
    stale = st.sidebar.toggle(
        "Include stale runs", value=False, key="stale", bind="query-params",
        help=f"{overview.SYMBOLS['stale']} runs {overview.MEANINGS['stale']}",
    )
    hidden = summary.stale & keep & (not stale)  # `~` on a bool is -1 or -2 (deprecated from Python 3.12 on)
    return Filtered(summary[keep & ~hidden], aggregate, int(hidden.sum()), axis)


def _colours(pct: pd.DataFrame, suites: list[str], columns: list[str]) -> pd.DataFrame:
    """A background per suite cell by its %Base on the heatmap's red-yellow-green scale, 80 to 100
    (sampled in one call: a call per cell, 1,000 of them for the 10,000-run store's 200 rows shown, took
    3.1 s under the profiler)."""
    cells = pct[suites].stack().dropna()
    shade = np.clip((cells.to_numpy(dtype=float) - 80) / 20, 0, 1)
    colours = sample_colorscale("RdYlGn", list(shade))
    ink = np.where((shade < 0.15) | (shade > 0.85), "; color: white", "")  # the scale's dark ends: white text stays legible
    styles = pd.DataFrame("", index=pct.index, columns=columns)
    styles[suites] = pd.Series([f"background-color: {c}{i}" for c, i in zip(colours, ink)], index=cells.index, dtype=object).unstack().reindex(
        index=pct.index, columns=suites).fillna("")
    return styles


def _shown_as(styler, numbers: pd.DataFrame, texts: pd.DataFrame):
    """Each suite cell shown as its text (%Base with its interval and markers) while its value stays the
    number the grid sorts by: one formatter per column looking the text up by value; a cell whose value
    another cell of its column shares, or a run without a %Base ("-"), gets its own (a formatter per cell
    for all 2,600 cells of 200 rows took 3 s)."""
    for suite in texts.columns:
        known = numbers[suite].notna()
        lookup = dict(zip(numbers[suite][known], texts[suite][known]))
        styler = styler.format(lambda v, lookup=lookup: lookup.get(v, ""), subset=[suite], na_rep="")  # subset: leave the other columns' formats
        own = texts[suite].ne("") & (~known | numbers[suite].duplicated(keep=False))
        for row in texts.index[own]:
            styler = styler.format(lambda _, text=texts[suite][row]: text, subset=pd.IndexSlice[[row], [suite]])
    return styler


def rows_of(summary: pd.DataFrame, job: MainJob) -> tuple[pd.DataFrame, list[str]]:
    """The overview's pickers: the model whose rows it lists (the main job's first; in the URL as
    ``rows``) and its suite columns (the main job's suite, then the most covered; the first
    :data:`SHOWN_SUITES` unless picked, in the URL as ``columns-MODEL``); returns that model's summary
    rows and the suites to show."""
    main_model = job.model
    counts = summary[summary.adapter.ne("none")].model.value_counts()
    names = sorted(counts.index, key=lambda m: (m != main_model, -counts[m], m))
    if not names:
        return summary.iloc[:0], []
    model = st.segmented_control("Overview of model", names, default=names[0], required=True, key="rows", bind="query-params",
                                 format_func=lambda m: f"{m} (main job)" if m == main_model else m)
    rows = summary[summary.model.eq(model)]
    suites = sorted(overview.coverage(rows), key=lambda s: s != job.suite)  # stable: the rest stay most covered first
    picked = st.multiselect(
        "suite columns (most covered first)", suites, default=suites[:SHOWN_SUITES], key=f"columns-{model}", bind="query-params",
        placeholder=f"all {len(suites)}", help="The suites shown as columns; a row is ranked over the shown suites it covers.",
    )
    return rows, picked or suites


def table(view: overview.Overview, headlines: dict[str, str], axis: Axis = AXES["bytes"]) -> Cell | None:
    """The overview table, coloured by %Base; returns the cell the user selected, if any."""
    st.caption(
        "One row per method configuration; per suite the headline %Base (method / baseline × 100) with its paired 95% "
        "interval, mean over seeds (± sd where there are several). **rank** compares a row only with rows that cover the "
        "same shown suites with the same suite settings and baselines, inside one **budget** (a factor of two in "
        f"{axis.label}, as a share of the base's), by the mean %Base over those suites; such groups follow each other "
        "(most suites first) and are not ranked against each other. **avg %Base** is that mean where a row covers several "
        "suites. A column header sorts by it; select a cell for its chart and run."
    )
    shown = view.display.drop(columns=["adapter", "model"]).head(SHOWN_ROWS)
    if len(view.display) > SHOWN_ROWS:
        st.caption(f"The first {SHOWN_ROWS} of {len(view.display)} rows; the sidebar's filters narrow them.")
    styled = shown.style.apply(lambda _: _colours(view.pct_base.head(SHOWN_ROWS), view.suites, list(shown.columns)), axis=None)
    numbers = {"params kept": "{:.3%}", "bytes kept": "{:.2%}", "storage MB": "{:.2f}", "avg %Base": "{:.1f}"}
    styled = styled.format(numbers, subset=list(numbers), na_rep="")
    styled = _shown_as(styled, shown[view.suites], view.texts.head(SHOWN_ROWS))
    kept = {"bytes": "bytes kept", "parameters": "params kept"}[axis.key]
    formats = {
        "method": st.column_config.TextColumn(width=WIDTHS["method"], pinned=True),
        "rank": st.column_config.TextColumn(width=WIDTHS["rank"], help="among the rows of its group (same shown suites, suite settings and baselines) and budget"),
        "budget": st.column_config.TextColumn(width=WIDTHS["budget"], help=f"a factor of two in {axis.label}, as a share of the base model's"),
        "bytes kept": st.column_config.NumberColumn(help="embedding storage (token tables, id maps, any untied output head) / the base model's"),
        "params kept": st.column_config.NumberColumn(help="embedding parameters kept / the base model's"),
        "avg %Base": st.column_config.NumberColumn(width=WIDTHS["avg %Base"], help="mean %Base over the shown suites the row covers, where it covers several"),
        "storage MB": st.column_config.NumberColumn(help="embedding storage incl. fixed id maps and any untied output head"),
        **{s: st.column_config.NumberColumn(help=f"headline: {headlines.get(s, s)}", width=WIDTHS["suite"]) for s in view.suites},
    }
    first = [*list(WIDTHS)[:-1], *view.suites, kept]
    event = st.dataframe(
        styled, hide_index=True, column_config=formats, on_select="rerun", selection_mode="single-cell", key="overview",
        column_order=first + [c for c in shown.columns if c not in first and c != "settings"] + ["settings"],  # the full configuration last: it is long
        placeholder="",  # a suite a row has no run on: an empty cell
        height=min(len(shown), GRID_ROWS) * 35 + 38,
    )
    st.caption(f"Markers: {overview.legend(view)}.")
    cells = event.selection.cells if event is not None else []
    if cells and cells[0][1] in view.suites:
        row, suite = cells[0]
        run_id = view.run_ids.iloc[row][suite]
        return None if pd.isna(run_id) else Cell(suite, run_id)
    return None


def views(summary: pd.DataFrame, suites: list[str]) -> pd.DataFrame:
    """One row per chart: suite, model, profile, task, metric, setting, shots of the headline rows; the
    overview's column order first, the label to pick it by."""
    keys = ["suite", "model", "profile", "task", "metric", "setting", "shots"]
    charts = summary[keys].assign(setting=summary.setting.fillna(""))  # no setting: one chart, stored as NULL or ""
    charts = charts.astype(object).where(charts.notna(), None).drop_duplicates()
    order = {s: i for i, s in enumerate(suites)}
    charts = charts.assign(order=charts.suite.map(order).fillna(len(order))).sort_values(["order", "suite", "model"])
    ambiguous = charts.duplicated(["suite", "model", "profile"], keep=False)
    label = charts.suite + " · " + charts.model + " · " + charts.profile
    label = label.where(~ambiguous, label + " · " + charts.task + " " + charts.metric)
    label = label.where(~label.duplicated(keep=False), label + " · " + charts.setting.replace("", "no setting"))  # bpb with and without post-hoc
    return charts.assign(label=label).drop(columns="order")


def main_chart(charts: pd.DataFrame, summary: pd.DataFrame, job: MainJob) -> int:
    """The chart the page opens on: the main job's suite on its model (the one holding the newest
    run of the main job's adapter there, else the first), else the first chart."""
    mine = charts[charts.suite.eq(job.suite) & charts.model.eq(job.model)]
    if mine.empty:
        return 0
    runs = summary[summary.suite.eq(job.suite) & summary.model.eq(job.model) & summary.adapter.eq(job.adapter)]
    newest = runs.sort_values("finished_at").tail(1)
    held = mine[mine.profile.isin(newest.profile) & mine.task.isin(newest.task) & mine.metric.isin(newest.metric)]
    return charts.index.get_loc((held if len(held) else mine).index[0])


def chart_picker(charts: pd.DataFrame, cell: Cell | None, summary: pd.DataFrame, job: MainJob) -> pd.Series:
    """The chart selector (in the URL as ``chart``; the main job's chart unless it names another); a newly
    selected overview cell switches it to that cell's chart."""
    labels = list(charts.label)
    if cell is not None and st.session_state.get("picked") != cell:
        st.session_state["picked"] = cell
        run = summary.set_index("run_id").loc[cell.run_id]
        st.session_state["chart"] = charts[(charts.suite == run.suite) & (charts.model == run.model)
                                           & (charts.profile == run.profile) & (charts.task == run.task)].label.iloc[0]
    label = st.selectbox("Chart (one suite, model and profile at a time)", labels, index=main_chart(charts, summary, job),
                         key="chart", bind="query-params")
    return charts[charts.label == label].iloc[0]
