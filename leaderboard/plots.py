"""Plotly figures: the Pareto view, the recovery curve, the per-language heatmap and the efficiency bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from harness.leaderboard.frames import AXES, Axis, config_label, pareto_frontier, run_label
from harness.leaderboard.significance import APART, BELOW, BEST, TIED
from plotly.colors import qualitative
from plotly.subplots import make_subplots

BASELINE_COLOUR = "#7f7f7f"
PAPER_COLOUR = "#222222"
FRONTIER_NAME = "Pareto frontier"
PAPERS_NAME = "papers (reported)"
# label corner -> offset of the label's centre from its marker, in axis fractions
LABEL_OFFSETS = {"top left": (-0.07, 0.04), "top right": (0.07, 0.04), "bottom left": (-0.07, -0.04), "bottom right": (0.07, -0.04)}


def label_positions(u: np.ndarray, v: np.ndarray) -> list[str]:
    """A corner per marker (u: log10 x, v: y) whose label lies farthest from the labels and
    markers placed so far; labels near an edge point inwards so they are not cut off."""
    span = lambda a: (a - a.min()) / (np.ptp(a) or 1.0)  # noqa: E731
    pts = np.column_stack([span(u), span(v)])
    taken, chosen = [*pts], []
    for x, y in pts:
        corners = {k: (x + dx, y + dy) for k, (dx, dy) in LABEL_OFFSETS.items() if not (x > 0.8 and dx > 0 or x < 0.2 and dx < 0)}
        best = max(corners, key=lambda k: min(np.hypot(corners[k][0] - a, (corners[k][1] - b) * 2) for a, b in taken))
        taken.append(corners[best])
        chosen.append(best)
    return chosen


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
    """One adapter's points (means over seeds, whisker: sd of %Base) at their fraction kept on ``axis``;
    a point whose baseline is at chance is drawn as an x and says so in its hover, as does a stale run."""
    flagged = rows.at_chance.astype(bool)
    notes = [
        (AT_CHANCE_NOTE if chance else "")
        + ("<br><b>stale: made by other code than the installed one</b>" if stale else "")
        for chance, stale in zip(flagged, rows.stale.astype(bool))
    ]
    custom = list(zip(
        rows.config.map(config_label), rows.value, rows.ci_low, rows.ci_high, rows.storage_bytes / 1e6, rows.run_id,
        rows.chance_adjusted_pct_base.map(lambda v: "-" if pd.isna(v) else f"{v:.1f}"), rows.setting.fillna("-"),
        rows.seeds, notes, [g if isinstance(g, str) else "-" for g in rows.group],
    ))
    return go.Scatter(
        x=rows[axis.column], y=rows.pct_base, mode="markers", name=adapter, customdata=custom,
        error_y=dict(type="data", array=rows.pct_base_sd.fillna(0), visible=bool((rows.seeds > 1).any())),
        marker=dict(color=colour, size=12, symbol=[_symbol(f, g) for f, g in zip(flagged, rows.group)], line=dict(color=colour, width=2)),
        hovertemplate=(
            f"<b>{adapter}</b> %{{customdata[0]}}<br>score %{{customdata[1]:.4f}} "
            "[%{customdata[2]:.4f}, %{customdata[3]:.4f}] (95% CI)<br>%Base %{y:.1f}, chance-adjusted %{customdata[6]}<br>"
            "setting %{customdata[7]}, seeds %{customdata[8]}<br>"
            f"{axis.label} %{{x:.3%}}<br>storage %{{customdata[4]:.1f}} MB<br>significance: %{{customdata[10]}}<br>"
            "%{customdata[5]}%{customdata[9]}<extra></extra>"
        ),
    )


def _paper_trace(papers: pd.DataFrame, colours: dict[str, str]) -> go.Scatter:
    """Hollow markers in the colour of the paper's method, labelled paper and base model."""
    labels = [f"{p} paper · {m}" for p, m in zip(papers.paper, papers.base_model.fillna("?"))]
    custom = list(zip(papers.method, papers.config.fillna("-"), papers.paper_setting.fillna("-"), papers.table, papers.value,
                      papers.family, papers.regime))
    return go.Scatter(
        x=papers.emb_param_fraction, y=papers.pct_base, mode="markers+text", name=PAPERS_NAME, text=labels,
        textposition=label_positions(np.log10(papers.emb_param_fraction.to_numpy()), papers.pct_base.to_numpy()),
        textfont=dict(size=10, color=PAPER_COLOUR), customdata=custom,
        marker=dict(symbol="circle-open", size=11, color=[colours.get(m, PAPER_COLOUR) for m in papers.method], line=dict(width=2)),
        hovertemplate=(
            "<b>%{text}</b><br>%{customdata[5]}<br>%{customdata[6]}<br>%{customdata[0]} %{customdata[1]}<br>setting %{customdata[2]}, "
            "%{customdata[3]}<br>reported %{customdata[4]}<br>%Base %{y:.1f}<br>"
            "embedding params kept %{x:.3%}<extra></extra>"
        ),
    )


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
        fig.add_trace(_paper_trace(papers, colours))
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
    """%Base against recovery training steps (issue 32), a line per configuration
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
            customdata=list(zip(rows.run_id, rows.config.map(config_label), rows.pct_base_ci_low, rows.pct_base_ci_high,
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


def efficiency_figure(eff: pd.DataFrame, colours: dict[str, str]) -> go.Figure:
    """Latency (p50 bar, p95 whisker), throughput and peak memory per run, horizontal bars;
    ``eff`` holds one phase and shape (named in the page's heading)."""
    eff = eff.assign(label=[f"{run_label(a, c)} · {s}" for a, c, s in zip(eff.adapter, eff.config, eff.suite)])
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03, subplot_titles=(
        "p50 latency ms (whisker: p95)", "throughput, tokens/s", "peak memory, MB"))
    bar_colours = [colours[a] for a in eff.adapter]
    fig.add_trace(go.Bar(
        y=eff.label, x=eff.p50_ms, orientation="h", marker_color=bar_colours, name="p50 ms",
        error_x=dict(type="data", symmetric=False, array=eff.p95_ms - eff.p50_ms, arrayminus=[0] * len(eff)),
        hovertemplate="%{y}<br>p50 %{x:.1f} ms<extra></extra>",
    ), row=1, col=1)
    for col, (column, unit) in enumerate((("throughput", "tokens/s"), ("peak_mem_mb", "MB")), start=2):
        fig.add_trace(go.Bar(
            y=eff.label, x=eff[column], orientation="h", marker_color=bar_colours, name=unit,
            hovertemplate=f"%{{y}}<br>%{{x:,.0f}} {unit}<extra></extra>",
        ), row=1, col=col)
    fig.update_layout(height=170 + 40 * len(eff), showlegend=False, margin=dict(l=10, r=10, t=60, b=10))
    fig.update_yaxes(autorange="reversed")
    return fig
