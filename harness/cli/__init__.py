"""The ``harness`` command: small Typer apps per command group, joined here."""

from __future__ import annotations

import os

import typer

from harness.cli import bench, export, leaderboard, listing, matrix, reference, results, run, sweep
from harness.cli.group import HarnessGroup

app = typer.Typer(
    name="harness",
    cls=HarnessGroup,
    help="Benchmark compressed and compositional token embeddings against the unchanged model.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
app.command("run")(run.run)
app.command("sweep")(sweep.sweep)
app.command("results")(results.results)
listing.list_app.command("matrix")(matrix.list_matrix)
app.add_typer(listing.list_app, name="list")
app.command("show")(listing.show)
app.command("leaderboard")(leaderboard.leaderboard)
app.add_typer(reference.reference_app, name="reference")
app.command("bench")(bench.bench)
app.command("export")(export.export)
app.add_typer(export.cache_app, name="cache")


def main() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app()
