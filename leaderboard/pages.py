"""The leaderboard's tabs: each renders one view of the snapshot read for this page view."""

from __future__ import annotations

import dataclasses
from typing import Callable

import pandas as pd
import streamlit as st
from harness.leaderboard import frames, plots
from harness.leaderboard.queries import Snapshot

from harness.results.records import RunRecord

NO_MATCH = "No finished runs match the filters in the sidebar."
TABLE_FORMATS = {
    "score": st.column_config.NumberColumn(format="%.4f"),
    "CI low": st.column_config.NumberColumn(format="%.4f"),
    "CI high": st.column_config.NumberColumn(format="%.4f"),
    "%Base": st.column_config.NumberColumn(format="%.1f"),
    "emb. fraction": st.column_config.NumberColumn(format="%.5f", help="embedding parameters kept / base"),
    "storage MB": st.column_config.NumberColumn(format="%.2f", help="embedding storage incl. fixed id maps"),
    "latency × base": st.column_config.NumberColumn(format="%.2f", help="p50 latency / the baseline's"),
}
EFFICIENCY_FORMATS = {
    "latency × base": TABLE_FORMATS["latency × base"],
    "tokens/s × base": st.column_config.NumberColumn(format="%.2f"),
    "memory × base": st.column_config.NumberColumn(format="%.2f"),
    "p50 ms": st.column_config.NumberColumn(format="%.1f"),
    "p95 ms": st.column_config.NumberColumn(format="%.1f"),
    "tokens/s": st.column_config.NumberColumn(format="%.0f"),
    "peak MB": st.column_config.NumberColumn(format="%.0f"),
}


def _key(*parts) -> str:
    return "-".join(str(p) for p in parts)


def pareto(data: Snapshot, colours: dict[str, str], paper_rows: int) -> None:
    heads = frames.headline(data.scores)
    if heads.empty:
        st.info(NO_MATCH)
        return
    show_papers = st.toggle("Show the papers' reported points (hollow markers)", value=True)
    if not paper_rows:
        st.caption("No paper rows in this database: `harness reference load --db PATH` adds them.")
    for (suite, model, profile, task, metric, shots), points in heads.groupby([*frames.GROUP, "shots"], sort=False, dropna=False):
        papers = frames.matching_papers(data.papers, suite, task, metric, shots)
        prompted = "" if pd.isna(shots) else f", {int(shots)}-shot"
        st.subheader(f"{suite} · {model} · {profile} profile")
        st.caption(
            f"%Base of {metric} on {task}{prompted} (average over languages where scored per language) against the share of "
            f"embedding parameters kept. Dashed: the Pareto frontier of the measured runs. Hollow: {len(papers)} "
            "points the papers report for their own base models, %Base against their own baselines."
        )
        fig = plots.pareto_figure(points, papers if show_papers else None, colours)
        st.plotly_chart(fig, key=_key("pareto", suite, model, profile, task, metric, shots))


def table(data: Snapshot, failed: int) -> None:
    rows = frames.leaderboard_table(data.scores, data.efficiency)
    if rows.empty:
        st.info(NO_MATCH)
        return
    st.caption("One row per run: its headline score with the 95% bootstrap CI. Click a column header to sort.")
    for suite, part in rows.groupby("suite", sort=False):
        st.subheader(suite)
        st.dataframe(part.drop(columns="suite"), hide_index=True, column_config=TABLE_FORMATS, key=_key("table", suite))
    st.download_button("Download CSV", rows.to_csv(index=False), file_name="leaderboard.csv", mime="text/csv")
    if failed:
        st.caption(f"{failed} failed run(s) are not in the table; the Run detail tab shows their errors.")


def languages(data: Snapshot) -> None:
    shown = 0
    for (suite, model, profile, task, metric), part in data.scores.groupby(frames.GROUP, sort=False):
        if part.language[part.language.ne("avg")].nunique() < 2:
            continue
        shown += 1
        st.subheader(f"{suite} · {model} · {profile} profile: %Base of {metric} per language")
        fig = plots.language_heatmap(frames.language_matrix(part))
        st.plotly_chart(fig, key=_key("languages", suite, model, profile, task, metric))
    if not shown:
        st.info("No multilingual suite among the filtered runs (xnli scores 15 languages).")


def efficiency(data: Snapshot, colours: dict[str, str]) -> None:
    if data.efficiency.empty:
        st.info(NO_MATCH)
        return
    st.caption(
        "Forward passes over synthetic token ids. Each run is timed in its own process and the baseline is "
        "usually an earlier, reused run, so the ratios (compressed / baseline) also carry differences in machine load."
    )
    for (phase, batch, seq_len), part in data.efficiency.groupby(["phase", "batch", "seq_len"], sort=False):
        st.subheader(f"{phase}: batch {batch} × {seq_len} tokens")
        st.plotly_chart(plots.efficiency_figure(part, colours), key=_key("efficiency", phase, batch, seq_len))
        st.dataframe(
            frames.efficiency_table(part), hide_index=True, column_config=EFFICIENCY_FORMATS,
            key=_key("efficiency-table", phase, batch, seq_len),
        )


def run_detail(data: Snapshot, load: Callable[[str], RunRecord]) -> None:
    if data.runs.empty:
        st.info("No runs match the filters in the sidebar.")
        return
    run_ids = {
        f"{r.run_id} · {r.status} · {frames.run_label(r.adapter, r.config)} · {r.suite}/{r.profile}": r.run_id
        for r in data.runs.itertuples()
    }
    record = load(run_ids[st.selectbox("Run (newest first)", list(run_ids))])
    _status(record)
    left, right = st.columns(2)
    with left:
        st.markdown("**Configuration**")
        st.json(dataclasses.asdict(record.spec))
        st.markdown("**Compression**")
        st.json(dataclasses.asdict(record.compression) if record.compression else {})
    with right:
        st.markdown("**Provenance** (versions, hardware, data files)")
        st.json(dataclasses.asdict(record.provenance), expanded=1)
        st.markdown("**Suite details**")
        st.json(record.details)
    if record.scores:
        st.markdown("**Scores**")
        st.dataframe(pd.DataFrame(record.scores), hide_index=True)
    if record.efficiency:
        st.markdown("**Efficiency**")
        st.dataframe(pd.DataFrame(record.efficiency).drop(columns="samples_ms"), hide_index=True)


def _status(record: RunRecord) -> None:
    wall = "-" if record.wall_s is None else f"{record.wall_s:.1f} s"
    line = f"**{record.status}** · started {record.started_at} · finished {record.finished_at or '-'} · wall {wall} · {record.device}"
    st.markdown(line)
    if record.status == "failed":
        st.error(f"This run failed: {record.error}")
    elif record.status == "running":
        st.info("Still running, or its process died (the next `harness run` marks it failed).")
