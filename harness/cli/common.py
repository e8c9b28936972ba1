"""Options shared by several commands, error mapping, and the rich progress reporter."""

from __future__ import annotations

import os
import sys
import time
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

from harness.errors import EmptyStoreError, HarnessError, printable

err_console = Console(stderr=True)

DbOption = Annotated[Optional[str], typer.Option("--db", help="Results database (default: $HARNESS_DB or ./results.duckdb).")]
WideOption = Annotated[bool, typer.Option("--wide", help="Every column, however wide the terminal (a pipe gets every column anyway).")]


def quiet_transformers() -> None:
    """transformers' own notices and progress bars (``Loading weights: 37%|...``) off for a command
    that loads models: they would interleave with its progress lines and its error line. Before
    transformers is imported, through the variables it reads when it is (so a command that ends up
    loading no model never imports it; the processes it starts inherit them)."""
    if "transformers" not in sys.modules:
        os.environ.update(TRANSFORMERS_VERBOSITY="error", HF_HUB_DISABLE_PROGRESS_BARS="1")
        return
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def error_line(message: str) -> None:
    """``error: MESSAGE`` on stderr, one visible line: the names a message echoes pass through
    :func:`~harness.errors.printable`."""
    typer.echo(f"error: {printable(message)}", err=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a HarnessError into one line on stderr and exit code 2 (no traceback); Ctrl-C into one
    line and exit code 130 (the run in progress is already recorded as failed)."""
    try:
        yield
    except HarnessError as err:
        error_line(str(err))
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:
        typer.echo("error: interrupted; the run in progress is recorded as failed, run the same command again to resume", err=True)
        raise typer.Exit(code=130) from None


@contextmanager
def no_runs_yet(format: str = "table") -> Iterator[None]:
    """A results database without runs is an answer, not an error: exit code 0 with its one line on
    stdout, or for csv / json an empty result there (``[]``, nothing) and the line on stderr, so a
    script parsing the output reads no rows."""
    try:
        yield
    except EmptyStoreError as err:
        if format in ("csv", "json"):
            typer.echo("[]" if format == "json" else "", nl=format == "json")
            typer.echo(str(err), err=True)
        else:
            typer.echo(str(err))
        raise typer.Exit(code=0) from None


class RichProgress:
    """A ``ProgressFn`` drawing one rich bar per label on stderr; the display starts at the first
    update, so a command that fails early prints nothing but its error line.

    When stderr is not a terminal (a log file, CI) a live bar would only be drawn at the end, so
    each label instead prints a plain line at its first update and at every further tenth of its
    total (again from the start when its count goes back): ``sense vectors: 30/300 (12s)``.
    """

    def __init__(self, console: Console = err_console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console,
        )
        self.tasks: dict[str, int] = {}
        self.logged: dict[str, tuple[int, int, float]] = {}  # label -> (last tenth printed, last done, start)

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.console.is_terminal:
            self._log(label, done, total)
            return
        if not self.tasks:
            self.progress.start()
        if label not in self.tasks:
            self.tasks[label] = self.progress.add_task(label, total=total)
        self.progress.update(self.tasks[label], completed=done, total=total)

    def _log(self, label: str, done: int, total: int) -> None:
        tenth = 10 * done // max(total, 1)
        last, last_done, start = self.logged.get(label, (-1, -1, time.monotonic()))
        if done < last_done:  # the label starts over (a second task, a second pass)
            last, start = -1, time.monotonic()
        if tenth > last:
            self.console.print(f"{label}: {done}/{total} ({time.monotonic() - start:.0f}s)", highlight=False, soft_wrap=True)
            last = tenth
        self.logged[label] = (last, done, start)

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.tasks:
            self.progress.stop()

