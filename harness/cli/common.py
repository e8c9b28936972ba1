"""Options shared by several commands, error mapping, and the rich progress reporter."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from harness.errors import HarnessError

console = Console()
err_console = Console(stderr=True)

DbOption = Annotated[Optional[str], typer.Option("--db", help="Results database (default: $HARNESS_DB or ./results.duckdb).")]


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a HarnessError into one line on stderr and exit code 2 (no traceback)."""
    try:
        yield
    except HarnessError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=2) from None


class RichProgress:
    """A ``ProgressFn`` drawing one rich bar per label on stderr; the display starts at the first
    update, so a command that fails early prints nothing but its error line."""

    def __init__(self) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=err_console,
        )
        self.tasks: dict[str, int] = {}

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.tasks:
            self.progress.start()
        if label not in self.tasks:
            self.tasks[label] = self.progress.add_task(label, total=total)
        self.progress.update(self.tasks[label], completed=done, total=total)

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.tasks:
            self.progress.stop()
