"""``harness list matrix``: the committed store's reference matrix (:mod:`harness.runner.matrix`), each
entry current, stale or missing against a store, with the minutes its stored run took."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from harness.cli.common import DbOption, WideOption, quiet_transformers, user_errors
from harness.cli.tables import Column, aligned, blocks, fold, layout, output_width, titles
from harness.errors import printable

if TYPE_CHECKING:
    import pandas as pd


def list_matrix(
    db: DbOption = None,
    file: Annotated[Optional[Path], typer.Option("--matrix", help="Another matrix file (default: the packaged harness/runner/matrix.txt).")] = None,
    profile: Annotated[str, typer.Option(help="Plan the entries under this profile (the committed store: quick).")] = "quick",
    todo: Annotated[bool, typer.Option("--todo", help="Print only the entries to run, one per line as written (what `make reference` runs).")] = False,
    wide: WideOption = False,
) -> None:
    """The reference matrix against a store: each entry (and each baseline the entries share) current,
    stale (made by other code, data or budget) or missing, the run behind it and the minutes that run
    took; then the hours the whole matrix takes and what is still to do, by the stored runs' wall time."""
    from harness.results.store import Store
    from harness.runner import matrix  # plans runs: torch and transformers, which the other listings never import

    quiet_transformers()
    with user_errors():
        entries = matrix.read(file or matrix.MATRIX)
        store = Store(db)
        frame = matrix.status(entries, store, profile)
    if todo:
        for line in frame.entry[frame.todo & frame.section.ne(matrix.BASELINES)]:
            typer.echo(printable(line))
        return
    width = output_width()
    typer.echo(fold(printable(f"reference matrix {file or matrix.MATRIX} against {store.path} ({profile} profile, seed {matrix.SEED})"), width))
    for line in _table(frame, matrix.CURRENT, width, wide):
        typer.echo(line)
    typer.echo("\n" + fold(matrix.summary_line(frame), width))


# the columns of each section's rows, in display order: state, run and entry stay at any width (docs/cli.md)
COLUMNS = (Column("state", prose=True), Column("min", 1, right=True), Column("run"), Column("entry", prose=True), Column("note", 2, prose=True))


def _table(frame: pd.DataFrame, current: str, width: int | None, wide: bool) -> list[str]:
    """Each section's title, then its entries: one layout for every section's rows, so they align."""
    import pandas as pd
    rows = {}
    for r in frame.itertuples():
        state = r.status + (", baseline not current" if r.todo and r.status == current else "")
        minutes = "?" if pd.isna(r.minutes) else f"{r.estimate if r.estimate == '~' else ''}{r.minutes:.0f}"
        rows[r.Index] = [state, minutes, r.run_id if isinstance(r.run_id, str) else "-", printable(r.entry), printable(r.note or "")]
    fit = layout(list(COLUMNS), list(rows.values()), width, wide)
    table = fit.fits or wide
    lines = titles(list(COLUMNS), fit) if table else []
    for section, part in frame.groupby("section", sort=False):
        lines += ["", fold(f"## {printable(section) or '(no section)'}", width)]
        chosen = [rows[i] for i in part.index]
        lines += aligned(list(COLUMNS), chosen, fit) if table else blocks(list(COLUMNS), chosen, width).splitlines()
    return lines
