"""``harness results --paper`` as text fitted to the terminal (:mod:`harness.cli.tables`): each run's
headline on a line of its own (run id, method, task, %Base with its paired CI), the papers' points
beside it below, one row each; then the papers' points of the same tasks that sit beside none of these
runs, one row per point and reason with the number of runs it was held against. A paper's figure of a
proportion (accuracy, F1 ...) reads in percent whichever way the paper printed it. CSV and JSON keep
every column as the papers print them (:func:`harness.cli.result_views.fetch_paper`)."""

from __future__ import annotations

import pandas as pd

from harness.cli.result_tables import PERCENT_METRICS, cell
from harness.cli.tables import Column, aligned, blocks, fold, layout, text, titles
from harness.results.reference import PAPER_IDS

INDENT = "  "  # a run's paper points sit under its line
BESIDE = ((Column("paper"), "paper_id"), (Column("its method", prose=True), "paper_method"), (Column("base model", 1), "base model"),
          (Column("reported", right=True), "reported_text"), (Column("%Base", right=True), "paper %Base"))
OTHER = ((Column("paper"), "paper_id"), (Column("method", prose=True), "paper_method"), (Column("base model", 1), "base model"),
         (Column("metric"), "paper metric"), (Column("reported", right=True), "reported_text"), (Column("%Base", 1, right=True), "paper %Base"),
         (Column("runs", 2, right=True), "runs"), (Column("not beside them because", prose=True), "reason"))


def _with_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """The paper's id and table (``000 asg T1``), its method with its settings as ours read (``k=1024 m=48``,
    where the papers' file writes ``k=1024;m=48``), and its figure in one unit."""
    return frame.assign(
        paper_id=frame.paper.map(lambda p: f"{PAPER_IDS.get(p, '?')} {p}") + " " + frame.table.str.replace("Table ", "T", regex=False),
        paper_method=[m if pd.isna(c) or c == "" else f"{m} {c.replace(';', ' ')}" for m, c in zip(frame.method, frame["paper config"])],
        reported_text=reported(frame),
    )


def reported(frame: pd.DataFrame) -> list[str]:
    """Each paper figure in one unit: a proportion (:data:`PERCENT_METRICS`) in percent, also where a
    paper's table prints it as a fraction (every figure of that table and metric at most 1); others as printed."""
    metric = frame["paper metric"]
    fractions = frame.groupby(["paper", "table", "paper metric"], dropna=False).reported.transform("max").le(1)
    return [cell(v) if m not in PERCENT_METRICS or pd.isna(v) else f"{v * 100 if f else v:.4g}%"
            for v, m, f in zip(frame.reported, metric, fractions)]


def _rows(frame: pd.DataFrame, spec: tuple) -> list[list[str]]:
    return [[cell(r[key]) for _, key in spec] for _, r in frame.iterrows()]


def _beside(beside: pd.DataFrame, width: int | None, wide: bool) -> list[str]:
    """Each run's line, then its paper points: one layout for every run's, so their columns align."""
    beside = _with_labels(beside).sort_values(["run_id", "paper_id", "paper_method"], kind="stable")
    columns = [c for c, _ in BESIDE]
    inner = None if width is None else max(width - len(INDENT), 1)
    fit = layout(columns, _rows(beside, BESIDE), inner, wide)
    table = fit.fits or wide
    lines = [INDENT + line for line in titles(columns, fit)] if table else []
    for run_id, part in beside.groupby("run_id", sort=False):
        r = part.iloc[0]
        heading = f"{run_id}  {r.label}  {r.task}  %Base {r['%Base']}"
        lines += fold(heading, width).splitlines()
        rows = _rows(part, BESIDE)
        lines += [INDENT + line for line in (aligned(columns, rows, fit) if table else blocks(columns, rows, inner).splitlines())]
    return lines


def paper_tables(beside: pd.DataFrame, other: pd.DataFrame, width: int | None = None, wide: bool = False) -> str:
    """Both tables as text within ``width`` (None: every column unfolded), each under its title and row count."""
    keys = ["paper", "table", "method", "paper config", "base model", "paper metric", "reported", "paper %Base", "reason"]
    grouped = (other.fillna({"paper config": "", "base model": "-"}).groupby(keys, dropna=False, sort=True).run_id.nunique()
               .rename("runs").reset_index())
    grouped = _with_labels(grouped)
    return "\n".join([
        fold(f"paper points beside runs: same regime, setting and metric ({len(beside)} rows)", width), *_beside(beside, width, wide), "",
        fold(f"paper, other setting: the same tasks' points beside none of these runs, and why ({len(grouped)} rows)", width),
        text([c for c, _ in OTHER], _rows(grouped, OTHER), width, wide),
    ])
