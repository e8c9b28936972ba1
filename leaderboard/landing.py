"""The landing page's widgets: the sidebar filters (held in the URL's query parameters, so a view can
be shared), the overview table (issue 35) with its selectable cells, and the chart selector."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st
from harness.leaderboard import overview
from harness.leaderboard.plots import log_ticks
from plotly.colors import sample_colorscale

SHOWN_ROWS = 200  # overview rows sent to the page (sorted best first); colouring 666 rows took 1.6 s of a 10,000-run store's load
FILTERS = {"model": "model", "suite": "suite", "method": "adapter", "setting": "setting", "profile": "profile"}


@dataclass(frozen=True)
class Cell:
    """The overview cell a user selected: its suite column and the newest run behind it."""

    suite: str
    run_id: str


def fraction_label(fraction: float) -> str:
    """A stop of the compression slider, as shown and as kept in the URL (``?fraction=0.005&fraction=0.1``)."""
    return f"{fraction:.3g}"


def _fraction_range(summary: pd.DataFrame) -> tuple[float, float] | None:
    known = summary.emb_param_fraction.dropna()
    if known.empty:
        return None
    ticks = sorted({*log_ticks(known.min(), known.max()), float(known.min()), float(known.max())})
    if len(ticks) < 2:
        return None
    low, high = st.sidebar.select_slider(
        "embedding parameters kept (fraction)", ticks, value=(ticks[0], ticks[-1]), key="fraction", bind="query-params",
        format_func=fraction_label,
    )
    return low, high


@dataclass(frozen=True)
class Filtered:
    """The summary rows the sidebar keeps, whether seeds are averaged, and how many stale runs it hid."""

    summary: pd.DataFrame
    aggregate: bool
    stale_hidden: int


def filtered(summary: pd.DataFrame) -> Filtered:
    """The summary rows the sidebar's filters keep (baselines always kept: every %Base needs one; stale
    runs only when asked, as ``harness results --include-stale``), and whether seeds are averaged."""
    st.sidebar.header("Filters")
    keep = pd.Series(True, index=summary.index)
    for key, column in FILTERS.items():
        values = sorted(summary[column].fillna("").unique())
        if len(values) > 1:
            chosen = st.sidebar.multiselect(key, values, default=[], placeholder=f"all {len(values)}", key=key, bind="query-params")
            if chosen:  # none chosen: all (a chip per value took Chromium 0.5 s of the committed store's page)
                keep &= summary[column].fillna("").isin(chosen) | (column == "adapter") & summary.adapter.eq("none")
    span = _fraction_range(summary)
    if span is not None:
        keep &= summary.emb_param_fraction.between(*span) | summary.adapter.eq("none")
    aggregate = st.sidebar.toggle("Mean ± sd over seeds", value=True, key="seeds", bind="query-params")
    stale = st.sidebar.toggle(
        "Include stale runs", value=False, key="stale", bind="query-params",
        help=f"{overview.SYMBOLS['stale']} runs {overview.MEANINGS['stale']}",
    )
    hidden = summary.stale & keep & (not stale)  # `~` on a bool is -1 or -2 (deprecated from Python 3.12 on)
    return Filtered(summary[keep & ~hidden], aggregate, int(hidden.sum()))


def _colours(pct: pd.DataFrame, suites: list[str], columns: list[str]) -> pd.DataFrame:
    """A background per suite cell by its %Base on the heatmap's red-yellow-green scale, 80 to 100
    (sampled in one call: a call per cell, 1,000 of them for the 10,000-run store's 200 rows shown, took
    3.1 s under the profiler)."""
    cells = pct[suites].stack().dropna()
    colours = sample_colorscale("RdYlGn", list(np.clip((cells.to_numpy(dtype=float) - 80) / 20, 0, 1)))
    styles = pd.DataFrame("", index=pct.index, columns=columns)
    styles[suites] = pd.Series([f"background-color: {c}" for c in colours], index=cells.index, dtype=object).unstack().reindex(
        index=pct.index, columns=suites).fillna("")
    return styles


def table(view: overview.Overview, headlines: dict[str, str]) -> Cell | None:
    """The overview table, coloured by %Base; returns the cell the user selected, if any."""
    st.caption(
        "One row per method configuration and model; per suite the headline %Base (method / baseline × 100) "
        "with its paired 95% interval, mean over seeds (± sd where there are several). Sorted by the mean %Base "
        "over the suites a row covers; **avg %Base** is shown only where another row covers the same suites "
        "(an average over different suites compares nothing). Select a cell for its chart and run."
    )
    shown = view.display.drop(columns=["adapter"]).head(SHOWN_ROWS)
    if len(view.display) > SHOWN_ROWS:
        st.caption(f"The first {SHOWN_ROWS} of {len(view.display)} rows; the sidebar's filters narrow them.")
    styled = shown.style.apply(lambda _: _colours(view.pct_base.head(SHOWN_ROWS), view.suites, list(shown.columns)), axis=None)
    formats = {
        "emb. fraction": st.column_config.NumberColumn(format="%.4f", help="embedding parameters kept / base"),
        "storage MB": st.column_config.NumberColumn(format="%.2f", help="embedding storage incl. fixed id maps"),
        "avg %Base": st.column_config.NumberColumn(format="%.1f"),
        **{s: st.column_config.TextColumn(help=f"headline: {headlines.get(s, s)}", width="medium") for s in view.suites},
    }
    event = st.dataframe(
        styled, hide_index=True, column_config=formats, on_select="rerun", selection_mode="single-cell", key="overview",
        column_order=[c for c in shown.columns if c != "settings"] + ["settings"],  # the full configuration last: it is long
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


def chart_picker(charts: pd.DataFrame, cell: Cell | None, summary: pd.DataFrame) -> pd.Series:
    """The chart selector (in the URL as ``chart``); a newly selected overview cell switches it to that cell's chart."""
    labels = list(charts.label)
    if cell is not None and st.session_state.get("picked") != cell:
        st.session_state["picked"] = cell
        run = summary.set_index("run_id").loc[cell.run_id]
        st.session_state["chart"] = charts[(charts.suite == run.suite) & (charts.model == run.model)
                                           & (charts.profile == run.profile) & (charts.task == run.task)].label.iloc[0]
    label = st.selectbox("Chart (one suite, model and profile at a time)", labels, key="chart", bind="query-params")
    return charts[charts.label == label].iloc[0]
