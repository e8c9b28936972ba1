"""``harness results --paper`` as text within 160 columns (issue 45.4): one row per (run, paper point)
beside it, the run's own cells written once; then the papers' points of the same tasks that sit beside
none of these runs, one row per point and reason with the number of runs it was held against. CSV
and JSON keep every column (:func:`harness.cli.results.fetch_paper`)."""

from __future__ import annotations

import pandas as pd

from harness.results.reference import PAPER_IDS

# (title, column of fetch_paper's frames, width): truncated with "…" past the width; with two spaces between, 160 columns in all
BESIDE = (("run", "run_id", 33), ("method", "label", 22), ("task", "task", 9), ("%Base [paired CI]", "%Base", 18),
          ("paper", "paper_id", 14), ("its method", "paper_method", 20), ("base model", "base model", 14),
          ("reported", "reported", 8), ("%Base", "paper %Base", 6))
OTHER = (("paper", "paper_id", 12), ("method", "paper_method", 18), ("base model", "base model", 12), ("metric", "paper metric", 8),
         ("reported", "reported", 8), ("%Base", "paper %Base", 6), ("runs", "runs", 4), ("not beside them because", "reason", 76))
NUMERIC = {"reported", "%Base", "runs"}


def _text(value) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _lines(frame: pd.DataFrame, layout: tuple) -> list[str]:
    """An aligned table: titles, then a line per row (numbers right-aligned)."""
    def line(cells: list[str]) -> str:
        return "  ".join(_cut(c, w).rjust(w) if t in NUMERIC else _cut(c, w).ljust(w) for c, (t, _, w) in zip(cells, layout)).rstrip()

    return [line([t for t, _, _ in layout])] + [line([_text(r[c]) for _, c, _ in layout]) for _, r in frame.iterrows()]


def _with_labels(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(
        paper_id=frame.paper.map(_paper_id) + " " + frame.table.str.replace("Table ", "T", regex=False),
        paper_method=[m if pd.isna(c) or c == "" else f"{m} {c}" for m, c in zip(frame.method, frame["paper config"])],
    )


def _paper_id(paper: str) -> str:
    return f"{PAPER_IDS.get(paper, '?')} {paper}"


def paper_tables(beside: pd.DataFrame, other: pd.DataFrame) -> str:
    """Both tables as text, each under its title and row count."""
    beside = _with_labels(beside)
    beside = beside.sort_values(["run_id", "paper_id", "paper_method"], kind="stable")
    repeat = beside.run_id.duplicated()
    for column in ("run_id", "label", "task", "%Base"):
        beside[column] = beside[column].where(~repeat, "")
    keys = ["paper", "table", "method", "paper config", "base model", "paper metric", "reported", "paper %Base", "reason"]
    grouped = (other.fillna({"paper config": "", "base model": "-"}).groupby(keys, dropna=False, sort=True).run_id.nunique()
               .rename("runs").reset_index())
    grouped = _with_labels(grouped)
    return "\n".join([
        f"paper points beside runs: same regime, setting and metric ({len(beside)} rows)", *_lines(beside, BESIDE), "",
        f"paper, other setting: the same tasks' points beside none of these runs, and why ({len(grouped)} rows)", *_lines(grouped, OTHER),
    ])
