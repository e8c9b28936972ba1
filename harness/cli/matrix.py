"""``harness list matrix``: the committed store's reference matrix (:mod:`harness.runner.matrix`), each
entry current, stale or missing against a store, with the minutes its stored run took."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import pandas as pd
import typer

from harness.cli.common import DbOption, quiet_transformers, user_errors
from harness.errors import printable
from harness.results.store import Store


def list_matrix(
    db: DbOption = None,
    file: Annotated[Optional[Path], typer.Option("--matrix", help="Another matrix file (default: the packaged harness/runner/matrix.txt).")] = None,
    profile: Annotated[str, typer.Option(help="Plan the entries under this profile (the committed store: quick).")] = "quick",
    todo: Annotated[bool, typer.Option("--todo", help="Print only the entries to run, one per line as written (what `make reference` runs).")] = False,
) -> None:
    """The reference matrix against a store: each entry (and each baseline the entries share) current,
    stale (made by other code, data or budget) or missing, the run behind it and the minutes that run
    took; then the hours the whole matrix takes and what is still to do, by the stored runs' wall time."""
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
    typer.echo(printable(f"reference matrix {file or matrix.MATRIX} against {store.path} ({profile} profile, seed {matrix.SEED})"))
    for section, part in frame.groupby("section", sort=False):
        typer.echo(f"\n## {printable(section) or '(no section)'}")
        for r in part.itertuples(index=False):
            state = r.status + (", baseline not current" if r.todo and r.status == matrix.CURRENT else "")
            minutes = "?" if pd.isna(r.minutes) else f"{r.estimate if r.estimate == '~' else ''}{r.minutes:.0f}"
            note = f"  # {r.note}" if r.note else ""
            typer.echo(printable(f"  {state:<30} {minutes:>5} min  {r.run_id if isinstance(r.run_id, str) else '-':<36} {r.entry}{note}"))
    typer.echo("\n" + matrix.summary_line(frame))
