"""The leaderboard's tabs: each renders one view of the snapshot read for this page view."""

from __future__ import annotations

import dataclasses
from typing import Callable

import pandas as pd
import streamlit as st
from harness.leaderboard import frames, plots

from harness.results import summary
from harness.results.records import RunRecord
from harness.results.reference import run_regime, scale_free

NO_MATCH = "No finished runs match the filters in the sidebar."
TABLE_FORMATS = {
    "score": st.column_config.NumberColumn(format="%.4f"),
    "CI low": st.column_config.NumberColumn(format="%.4f"),
    "CI high": st.column_config.NumberColumn(format="%.4f"),
    "%Base": st.column_config.NumberColumn(format="%.1f"),
    "%Base CI low": st.column_config.NumberColumn(format="%.1f", help="paired bootstrap: items resampled jointly with the baseline"),
    "%Base CI high": st.column_config.NumberColumn(format="%.1f"),
    "chance-adj. %Base": st.column_config.NumberColumn(format="%.1f", help="(score - chance) / (baseline - chance) x 100"),
    "significance": st.column_config.TextColumn(help="the chart's significance group (its task and metric): see below the chart"),
    "no paired interval because": st.column_config.TextColumn(help="why %Base has no paired interval: the runs share no items"),
    "stale": st.column_config.CheckboxColumn(help="made by other code than the installed one (shown with Include stale runs)"),
    "baseline at chance": st.column_config.CheckboxColumn(help="the baseline's 95% CI reaches the chance level: %Base is not meaningful"),
    "p (McNemar)": st.column_config.NumberColumn(format="%.3g"),
    "flips": st.column_config.NumberColumn(format="%.3f", help="share of items whose correctness changed"),
    "score sd": st.column_config.NumberColumn(format="%.4f", help="over seeds"),
    "%Base sd": st.column_config.NumberColumn(format="%.1f", help="over seeds"),
    "params kept": st.column_config.NumberColumn(format="%.5f", help="embedding parameters kept / the base's"),
    "bytes kept": st.column_config.NumberColumn(format="%.5f", help="embedding storage (token tables, id maps, any untied output head) / the base's"),
    "storage MB": st.column_config.NumberColumn(format="%.2f", help="embedding storage incl. fixed id maps and any untied output head"),
    "latency × base": st.column_config.NumberColumn(format="%.2f", help="p50 latency / the unchanged model's, timed in the same process"),
    "budget disclosed": st.column_config.TextColumn(help="a budget change made after a method's score was seen, which this row rests on"),
}
EFFICIENCY_FORMATS = {
    "latency × base": TABLE_FORMATS["latency × base"],
    "tokens/s × base": st.column_config.NumberColumn(format="%.2f", help="throughput / the base's, timed in the same process"),
    "memory × base": st.column_config.NumberColumn(format="%.2f", help="peak memory / the base's, timed in the same process"),
}


def _key(*parts) -> str:
    return "-".join(str(p) for p in parts)


PAPER_OTHER_COLUMNS = {
    "paper": "paper", "table": "table", "method": "method", "config": "config", "base_model": "base model", "family": "family",
    "regime": "regime", "setting": "setting", "metric": "metric", "value": "reported", "pct_base": "%Base", "reason": "differs by",
}


def pareto(points: pd.DataFrame, papers: pd.DataFrame, colours: dict[str, str], paper_rows: int,
           groups: Callable[[], pd.Series] | None, selected: str | None, others: pd.DataFrame | None = None,
           axis: frames.Axis = frames.AXES["parameters"]) -> None:
    """The chart of one view (suite, model, profile, task, metric) on the compression ``axis``: drawn at
    once, then redrawn with the significance groups as marker shapes once they are computed (``groups``,
    by variant); below it the papers' points of the same task that another regime, setting or metric keeps off it."""
    show_papers = st.toggle("Show the papers' reported points (hollow markers)", value=True, key="papers", bind="query-params")
    include_at_chance = st.toggle("Let runs whose baseline is at chance (x markers) onto the frontier", value=False)
    if not paper_rows:
        st.caption("No paper rows in this database: `harness reference load --db PATH` adds them.")
    r = points.iloc[0]
    prompted = "" if pd.isna(r.shots) else f", {int(r.shots)}-shot"
    hollow = (f"Hollow: {len(papers)} points the papers report in the same training regime "
              f"({', '.join(sorted(set(points.regime)))}), setting and metric for their own base models (named in the legend, "
              "a shape per base model; family in the hover), %Base against their own baselines." if axis.column == "emb_param_fraction" else
              "The papers print parameter shares, not bytes: their points show on the parameters axis (sidebar).")
    st.caption(
        f"%Base of {r.metric} on {r.task}{prompted} (average over languages where scored per language; mean over seeds) with its paired 95% "
        f"interval as error bars (the same items resampled for both runs; sd over seeds in the hover) "
        f"against the {axis.what}. Dashed: the Pareto frontier of the measured runs. "
        "x: the baseline is not significantly above chance, so %Base divides by noise (off the frontier unless "
        f"toggled). {hollow} Ring: the cell selected in the overview."
    )
    chart = st.empty()
    draw = lambda pts: chart.plotly_chart(  # noqa: E731
        plots.pareto_figure(pts, papers if show_papers else None, colours, include_at_chance, selected, axis),
        key=f"pareto-{len(pts.columns)}",
    )
    note = st.empty()  # the marker shapes' meaning, once the groups are drawn
    draw(points)
    if groups is not None:
        draw(points.assign(group=points.variant.map(groups())))
        note.caption(SIGNIFICANCE)
    if others is not None and len(others):
        with st.expander(f"Paper, other setting: {len(others)} points of this task not beside these runs, and why"):
            st.dataframe(others[list(PAPER_OTHER_COLUMNS)].rename(columns=PAPER_OTHER_COLUMNS), hide_index=True)


def recovery(points: pd.DataFrame, colours: dict[str, str]) -> None:
    """The Recovery tab: where the chart's view holds a sweep over recovery training, %Base
    by recovery steps, a line per configuration (from the chart's points: nothing more is read); else
    how to make one. A tab of its own, so the landing view draws one figure."""
    curves = frames.recovery_curves(points)
    if curves.empty:
        st.info(
            "No sweep over recovery training in this view: run one configuration at several step counts, e.g. "
            "`harness sweep --adapter asg --suite bpb --model smollm2 --grid recover=0,100,300`."
        )
        return
    st.caption(
        "The same configurations after 0 (post hoc), then more steps of recovery training toward the unchanged model "
        "(`harness run --recover N`, `harness sweep --grid recover=...`): %Base with its paired 95% interval; "
        "dashed: recovery with LoRA on the top layers too; ✕: the baseline is not above chance, so %Base there is not meaningful."
    )
    st.plotly_chart(plots.recovery_figure(curves, colours), key="recovery")


SIGNIFICANCE = (
    "Marker shape: ★ the best configuration of its compression budget (a factor of two in the fraction kept on the "
    "chosen axis, bytes or parameters) among those on the same baseline, ● not significantly different from it, ▼ significantly below it (paired bootstrap over the same "
    "items, two-sided, Holm-corrected within the budget, α = 0.05), ■ not compared: measured on other items "
    "(another seed's baseline run) or without per-item outputs."
)


def table(summary: pd.DataFrame, eff: pd.DataFrame, failed: int, groups: pd.Series) -> None:
    """The chart's suite, model and profile as a table, with the chart's significance groups (by variant)."""
    rows = frames.leaderboard_table(summary, eff, groups.map(lambda g: f"{plots.GROUP_GLYPHS[g]} {g}"))
    if rows.empty:
        st.info(NO_MATCH)
        return
    st.caption(
        "One row per configuration: its headline score with the 95% bootstrap CI (mean over seeds, with sd when there "
        "are several), %Base with the paired CI, the chart's significance group, chance-adjusted %Base, McNemar's p "
        "and the flip rate against the baseline. Click a column header to sort."
    )
    for suite, part in rows.groupby("suite", sort=False):
        st.subheader(suite)
        st.dataframe(part.drop(columns="suite"), hide_index=True, column_config=TABLE_FORMATS, key=_key("table", suite), placeholder="")
    st.caption(SIGNIFICANCE)
    st.caption("Downloads hold the rows shown (the sidebar's filters applied).")
    st.download_button("Download CSV", rows.to_csv(index=False), file_name="leaderboard.csv", mime="text/csv")
    st.download_button("Download Parquet", frames.parquet_bytes(rows), file_name="leaderboard.parquet", mime="application/vnd.apache.parquet")
    if failed:
        st.caption(f"{failed} failed run(s) are not in the table; the Run detail tab shows their errors.")


def languages(scores: pd.DataFrame) -> None:
    shown = 0
    scores = scores.assign(setting=scores.setting.fillna(""))
    for (suite, model, profile, task, metric, setting), part in scores.groupby(frames.GROUP, sort=False):
        if part.language[part.language.ne("avg")].nunique() < 2:
            continue
        shown += 1
        st.subheader(f"{suite} · {model} · {profile} profile: %Base of {metric} per language")
        fig = plots.language_heatmap(frames.language_matrix(part))
        st.plotly_chart(fig, key=_key("languages", suite, model, profile, task, metric, setting))
    if not shown:
        st.info("This chart's suite scores one language (xnli scores 15): pick a multilingual one above.")


def efficiency(eff: pd.DataFrame, kept: pd.Series, colours: dict[str, str]) -> None:
    """Each method run's speed and memory as ratios to the unchanged model timed in the same process
    (:func:`harness.leaderboard.frames.in_run_ratios`), of the runs ``kept`` (the sidebar's filters);
    absolute figures only in a run's own detail."""
    ratios = frames.in_run_ratios(eff)
    eff, ratios = eff[eff.run_id.isin(kept)], ratios[ratios.run_id.isin(kept)]
    if ratios.empty:
        st.info("No method run of this view timed the unchanged model in its own process: speed and memory are shown "
                "only as ratios to the base timed beside the compressed model.")
        return
    st.caption(
        "Each run timed the compressed model and the unchanged one in the same process, in alternating rounds, on synthetic "
        "token ids: bars are compressed / unchanged for p50 latency, throughput and peak memory of each configuration's newest run "
        "(1 = the same; latency and memory "
        "below 1 are better, throughput above 1). Runs timed without the base beside them are left out, and so are absolute "
        "milliseconds: one run's figures are not comparable with another's (other load, another day). The **Run detail** tab "
        "gives a run's own timings with its machine and date."
    )
    configurations = ["adapter", "config"]
    left_out = len(eff[eff.adapter.ne("none")].drop_duplicates(configurations)) - len(ratios.drop_duplicates(configurations))
    if left_out:
        st.caption(f"{left_out} configuration(s) of this view: the newest run timed no base beside it, so no ratio.")
    for (phase, batch, seq_len), part in ratios.groupby(frames.TIMING_KEYS, sort=False):
        st.subheader(f"{phase}: batch {batch} × {seq_len} tokens")
        st.plotly_chart(plots.efficiency_figure(part, colours), key=_key("efficiency", phase, batch, seq_len))
        st.dataframe(
            frames.efficiency_table(part), hide_index=True, column_config=EFFICIENCY_FORMATS,
            key=_key("efficiency-table", phase, batch, seq_len),
        )


def run_detail(runs: pd.DataFrame, load: Callable[[str], RunRecord], papers: pd.DataFrame, selected: str | None) -> None:
    """One run of the chart's suite and model (the overview's selected cell first): status, export
    command, configuration and recipe, per-language or per-task scores, the papers' points in its setting."""
    if runs.empty:
        st.info("No runs match the filters in the sidebar.")
        return
    run_ids = {
        f"{r.run_id} · {r.status} · {frames.run_label(r.adapter, r.config)} · {r.suite}/{r.profile}": r.run_id
        for r in runs.itertuples()
    }
    labels = list(run_ids)
    first = next((i for i, label in enumerate(labels) if run_ids[label] == selected), 0)
    run_id = run_ids[st.selectbox("Run (newest first)", labels, index=first)]
    record = load(run_id)
    _status(record)
    st.markdown(f"**Settings** (as the fit resolved them): `{summary.settings_label(runs.set_index('run_id').config[run_id])}`")
    if record.status == "finished":
        st.markdown("**Export** (the compressed model for `harness.load_compressed`, lm-eval and MTEB)")
        st.code(frames.export_command(record.run_id), language="bash")
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
        st.markdown("**Scores** (per language or task)")
        st.dataframe(pd.DataFrame(record.scores), hide_index=True)
    mine = papers[papers.regime.eq(scale_free(run_regime(record.spec.recipe, record.spec.adapter, record.spec.adapter_config)))] if len(papers) else papers
    if len(mine):
        st.markdown("**The papers' points in this run's regime and setting**")
        st.dataframe(mine, hide_index=True)
    if record.efficiency:
        _timings(record)


TIMINGS = {"phase": "phase", "batch": "batch", "seq_len": "tokens", "p50_ms": "p50 ms", "p95_ms": "p95 ms",
           "throughput": "tokens/s", "peak_mem_mb": "peak MB"}


def _timings(record: RunRecord) -> None:
    """The run's own timings, labelled with the machine and day they were taken on: absolute figures,
    comparable only with the unchanged model's timed in the same run (phases ``base:...``)."""
    hardware = record.provenance.hardware
    machine = ", ".join(str(v) for v in (record.device, hardware.get("processor"), hardware.get("cpu_count") and f"{hardware['cpu_count']} cores",
                                          record.provenance.host) if v)
    st.markdown(f"**Timings** on {machine}, {(record.finished_at or record.started_at)[:10]}: compare only with this run's "
                "`base:` rows (the unchanged model, timed in the same process), never with another run's figures")
    rows = pd.DataFrame(record.efficiency)[list(TIMINGS)].rename(columns=TIMINGS)
    st.dataframe(rows.round({"p50 ms": 1, "p95 ms": 1, "tokens/s": 0, "peak MB": 0}), hide_index=True)


def duration(seconds: float | None) -> str:
    """A wall time rounded for reading: ``8.4 s``, ``9 min 12 s``, ``2 h 05 min``."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes = round(seconds) // 60
    return f"{minutes} min {round(seconds) % 60} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def _status(record: RunRecord) -> None:
    wall = duration(record.wall_s)
    line = f"**{record.status}** · started {record.started_at} · finished {record.finished_at or '-'} · wall {wall} · {record.device}"
    st.markdown(line)
    if record.status == "failed":
        st.error(f"This run failed: {record.error}")
    elif record.status == "running":
        st.info("Still running, or its process died (the next `harness run` marks it failed).")
