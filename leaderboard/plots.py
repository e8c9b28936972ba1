"""Plotly figures: the Pareto view, the recovery curve, the per-language heatmap and the efficiency bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from harness.leaderboard.frames import AXES, Axis, key_settings, pareto_frontier
from harness.leaderboard.significance import APART, BELOW, BEST, TIED
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from harness.results import disclosure
from harness.results.summary import settings_label

BASELINE_COLOUR = "#7f7f7f"
PAPER_COLOUR = "#222222"
FRONTIER_NAME = "Pareto frontier"
PAPERS_NAME = "papers (reported)"
PAPER_SYMBOLS = ["circle-open", "diamond-open", "square-open", "triangle-up-open", "pentagon-open", "hexagon-open", "star-open"]  # by base model


def adapter_colours(names) -> dict[str, str]:
    """One colour per adapter (and paper method), stable for a given set; the baseline is grey."""
    palette = list(qualitative.Plotly)
    others = sorted(a for a in set(names) if a != "none")
    return {"none": BASELINE_COLOUR, **{a: palette[i % len(palette)] for i, a in enumerate(others)}}


AT_CHANCE_SYMBOL = "x-thin-open"  # a measured point whose baseline is not significantly above chance
AT_CHANCE_NOTE = "<br><b>baseline not above chance: %Base is not meaningful</b>"  # ... and its hover line
# significance group (harness.leaderboard.significance) -> marker; the papers' points are hollow circles
GROUP_SYMBOLS = {BEST: "star", TIED: "circle", BELOW: "triangle-down", APART: "square"}
GROUP_GLYPHS = {BEST: "★", TIED: "●", BELOW: "▼", APART: "■"}  # the same shapes in text (the Table tab)
SELECTED_NAME = "selected"


def _symbol(at_chance: bool, group: str | None) -> str:
    return AT_CHANCE_SYMBOL if at_chance else GROUP_SYMBOLS.get(group, "circle")


def _measured_trace(adapter: str, rows: pd.DataFrame, colour: str, axis: Axis) -> go.Scatter:
    """One adapter's points (means over seeds, error bars: the paired 95% interval of %Base) at their
    fraction kept on ``axis``; a point whose baseline is at chance is drawn as an x and says so in its
    hover, as do a stale run and one resting on a disclosed budget change."""
    flagged = rows.at_chance.astype(bool)
    notes = [
        (AT_CHANCE_NOTE if chance else "")
        + ("<br><b>stale: made by other code than the installed one</b>" if stale else "")
        + (f"<br><b>{disclosure.LABEL}:</b> {note}" if note else "")
        for chance, stale, note in zip(flagged, rows.stale.astype(bool), rows.disclosure.fillna(""))
    ]
    sd = rows.pct_base_sd.map(lambda v: "" if pd.isna(v) else f", sd over seeds {v:.1f}")
    custom = list(zip(
        rows.config.map(settings_label), rows.value, rows.ci_low, rows.ci_high, rows.storage_bytes / 1e6, rows.run_id,
        rows.chance_adjusted_pct_base.map(lambda v: "-" if pd.isna(v) else f"{v:.1f}"), rows.setting.fillna("-"),
        rows.seeds, notes, [g if isinstance(g, str) else "-" for g in rows.group], rows.pct_base_ci_low, rows.pct_base_ci_high, sd,
    ))
    return go.Scatter(
        x=rows[axis.column], y=rows.pct_base, mode="markers", name=adapter, customdata=custom,
        error_y=dict(type="data", symmetric=False, array=(rows.pct_base_ci_high - rows.pct_base).clip(lower=0).fillna(0),
                     arrayminus=(rows.pct_base - rows.pct_base_ci_low).clip(lower=0).fillna(0), thickness=1.5, width=5),
        marker=dict(color=colour, size=12, symbol=[_symbol(f, g) for f, g in zip(flagged, rows.group)], line=dict(color=colour, width=2)),
        hovertemplate=(
            f"<b>{adapter}</b> %{{customdata[0]}}<br>score %{{customdata[1]:.4f}} "
            "[%{customdata[2]:.4f}, %{customdata[3]:.4f}] (95% CI)<br>%Base %{y:.1f} [%{customdata[11]:.1f}, %{customdata[12]:.1f}] "
            "(paired 95% CI%{customdata[13]}), chance-adjusted %{customdata[6]}<br>"
            "setting %{customdata[7]}, seeds %{customdata[8]}<br>"
            f"{axis.label} %{{x:.3%}}<br>storage %{{customdata[4]:.1f}} MB<br>significance: %{{customdata[10]}}<br>"
            "%{customdata[5]}%{customdata[9]}<extra></extra>"
        ),
    )


def paper_traces(papers: pd.DataFrame, colours: dict[str, str]) -> list[go.Scatter]:
    """The papers' points: hollow markers in the colour of the paper's method, a shape per base model,
    a trace per paper, method and base model named in the legend (group :data:`PAPERS_NAME`), where
    labels cannot overlap (text beside markers a few pixels apart would)."""
    models = sorted(papers.base_model.fillna("?").unique())
    traces = []
    for (paper, method, model), rows in papers.assign(base_model=papers.base_model.fillna("?")).groupby(["paper", "method", "base_model"]):
        custom = list(zip(rows.config.fillna("-"), rows.paper_setting.fillna("-"), rows.table, rows.value, rows.family, rows.regime))
        traces.append(go.Scatter(
            x=rows.emb_param_fraction, y=rows.pct_base, mode="markers", name=f"{method} · {model} ({paper} paper)", customdata=custom,
            legendgroup=PAPERS_NAME, legendgrouptitle_text=PAPERS_NAME,
            marker=dict(symbol=PAPER_SYMBOLS[models.index(model) % len(PAPER_SYMBOLS)], size=11, color=colours.get(method, PAPER_COLOUR), line=dict(width=2)),
            hovertemplate=(
                f"<b>{method} · {model}</b> ({paper} paper, %{{customdata[2]}})<br>%{{customdata[4]}}<br>%{{customdata[5]}}<br>"
                "%{customdata[0]}<br>setting %{customdata[1]}<br>reported %{customdata[3]}<br>%Base %{y:.1f}<br>"
                "embedding params kept %{x:.3%}<extra></extra>"
            ),
        ))
    return traces


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-5 ticks per decade inside [low, high]: Plotly's own log ticks crowd into unreadable
    labels (0.6%0.7%0.8%...) when the range spans two or three decades."""
    decades = range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)
    return [m * 10.0**e for e in decades for m in (1, 2, 5) if low <= m * 10.0**e <= high]


def pareto_figure(
    points: pd.DataFrame, papers: pd.DataFrame | None, colours: dict[str, str], include_at_chance: bool = False,
    selected: str | None = None, axis: Axis = AXES["parameters"],
) -> go.Figure:
    """%Base against the fraction kept on the compression ``axis`` (log x: embedding parameters, or
    bytes stored), one trace per adapter (marker: the point's significance group, column ``group``
    where given), the frontier of the measured points (without those whose baseline is at chance unless
    asked), the papers' points as hollow markers (the papers print parameter shares: on that axis only),
    and a ring around the configuration (variant) ``selected`` in the overview."""
    fig = go.Figure()
    points = points if "group" in points else points.assign(group=None)
    papers = papers if axis.column == "emb_param_fraction" else None
    frontier = pareto_frontier(points, include_at_chance, axis.column)
    fig.add_trace(go.Scatter(
        x=frontier[axis.column], y=frontier.pct_base, mode="lines", name=FRONTIER_NAME,
        line=dict(color="#999999", dash="dash", shape="hv"), hoverinfo="skip",
    ))
    for adapter, rows in points.groupby("adapter", sort=True):
        fig.add_trace(_measured_trace(adapter, rows, colours[adapter], axis))
    if papers is not None and len(papers):
        fig.add_traces(paper_traces(papers, colours))
    ring = points[points.variant.eq(selected)]
    if len(ring):
        fig.add_trace(go.Scatter(
            x=ring[axis.column], y=ring.pct_base, mode="markers", name=SELECTED_NAME, hoverinfo="skip",
            marker=dict(symbol="circle-open", size=26, color="#000000", line=dict(width=3)),
        ))
    fig.add_hline(y=100, line=dict(color="#cccccc", width=1, dash="dot"))
    shown = pd.concat([points[axis.column], papers.emb_param_fraction if papers is not None else None]).dropna()
    low, high = shown.min() / 2, max(1.6, shown.max() * 1.6)
    fig.update_layout(
        height=520, margin=dict(l=10, r=10, t=30, b=10), legend=dict(title="adapter"),
        xaxis=dict(
            type="log", title=axis.title, tickformat=".2~p", range=[np.log10(low), np.log10(high)], tickvals=log_ticks(low, high),
        ),
        yaxis=dict(title="%Base (score / baseline × 100)"),
    )
    return fig


def recovery_figure(curves: pd.DataFrame, colours: dict[str, str]) -> go.Figure:
    """%Base against recovery training steps, a line per configuration
    (:func:`harness.leaderboard.frames.recovery_curves`) in its adapter's colour, dashed for +LoRA
    recovery, whiskers the paired 95% interval of %Base; a point whose baseline is at chance is an x
    and says so in its hover, as on the Pareto chart; the hover names the run; the legend is always shown."""
    fig = go.Figure()
    for line, rows in curves.groupby("line", sort=False):
        lora, colour = bool(rows.lora.iloc[0]), colours.get(rows.adapter.iloc[0], BASELINE_COLOUR)
        flagged = rows.at_chance.fillna(False).astype(bool)
        fig.add_trace(go.Scatter(
            x=rows.steps, y=rows.pct_base, mode="lines+markers", name=line, showlegend=True,
            line=dict(color=colour, dash="dash" if lora else "solid"),
            marker=dict(color=colour, size=9, symbol=[AT_CHANCE_SYMBOL if f else "diamond" if lora else "circle" for f in flagged]),
            error_y=dict(type="data", array=(rows.pct_base_ci_high - rows.pct_base).fillna(0),
                         arrayminus=(rows.pct_base - rows.pct_base_ci_low).fillna(0)),
            customdata=list(zip(rows.run_id, rows.config.map(settings_label), rows.pct_base_ci_low, rows.pct_base_ci_high,
                                flagged.map({True: AT_CHANCE_NOTE, False: ""}))),
            hovertemplate=(
                f"<b>{line}</b> %{{customdata[1]}}<br>recovery steps %{{x}}<br>%Base %{{y:.1f}} "
                "[%{customdata[2]:.1f}, %{customdata[3]:.1f}] (paired 95% CI)%{customdata[4]}<br>%{customdata[0]}<extra></extra>"
            ),
        ))
    fig.update_layout(
        height=340, margin=dict(l=10, r=10, t=30, b=10), legend=dict(title="configuration"),
        xaxis=dict(title="recovery training steps (0 = post hoc)", tickvals=sorted(curves.steps.unique())),
        yaxis=dict(title="%Base (score / baseline × 100)"),
    )
    return fig


def language_heatmap(matrix: pd.DataFrame) -> go.Figure:
    """Adapters x languages, %Base: green above 100, red below, saturating 50 points away."""
    values = matrix.to_numpy(dtype=float)
    known = values[np.isfinite(values)]
    reach = float(np.clip(np.abs(known - 100.0).max(), 5.0, 50.0)) if known.size else 50.0
    fig = go.Figure(go.Heatmap(
        z=values, x=list(matrix.columns), y=list(matrix.index), colorscale="RdYlGn",
        zmin=100 - reach, zmax=100 + reach, texttemplate="%{z:.0f}", colorbar=dict(title="%Base"),
        hovertemplate="%{y}<br>%{x}: %Base %{z:.1f}<extra></extra>",
    ))
    fig.update_layout(height=140 + 36 * len(matrix), margin=dict(l=10, r=10, t=30, b=10), yaxis=dict(autorange="reversed"))
    return fig


RATIOS = {"latency_ratio": "p50 latency × base", "throughput_ratio": "throughput × base", "memory_ratio": "peak memory × base"}


def efficiency_figure(ratios: pd.DataFrame, colours: dict[str, str]) -> go.Figure:
    """Each run's p50 latency, throughput and peak memory against the base timed in the same process
    (:func:`harness.leaderboard.frames.in_run_ratios`), horizontal bars with a line at 1; ``ratios``
    holds one phase and shape (named in the page's heading)."""
    ratios = ratios.assign(label=key_settings(ratios))
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03, subplot_titles=list(RATIOS.values()))
    bar_colours = [colours[a] for a in ratios.adapter]
    for col, (column, title) in enumerate(RATIOS.items(), start=1):
        fig.add_trace(go.Bar(
            y=ratios.label, x=ratios[column], orientation="h", marker_color=bar_colours, name=title,
            hovertemplate=f"%{{y}}<br>{title} %{{x:.2f}}<extra></extra>",
        ), row=1, col=col)
        fig.add_vline(x=1, line=dict(color="#444444", width=1, dash="dot"), row=1, col=col)
    fig.update_layout(height=170 + 40 * len(ratios), showlegend=False, margin=dict(l=10, r=10, t=60, b=10))
    fig.update_yaxes(autorange="reversed")
    return fig
