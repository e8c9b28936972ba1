"""``harness reference load``: the papers' reported numbers into the results database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.common import DbOption, user_errors
from harness.errors import printable

reference_app = typer.Typer(help="The papers' reported numbers (paper_results table).", no_args_is_help=True)


@reference_app.command("load")
def load(
    db: DbOption = None,
    csv: Annotated[Optional[Path], typer.Option("--csv", help="A paper_results.csv (default: the packaged copy).")] = None,
) -> None:
    """Replace the paper_results table with the CSV's rows (running it twice changes nothing)."""
    from harness.results.reference import read_paper_results
    from harness.results.store import Store

    with user_errors():
        rows = read_paper_results(csv)
        store = Store(db)
        store.replace_paper_results(rows)
    placed = sum(r.has_pareto_coordinates for r in rows)
    typer.echo(f"{len(rows)} paper rows in {printable(str(store.path))}; {placed} have %Base and an embedding fraction (Pareto plot)")
