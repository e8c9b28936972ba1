"""Options shared by several commands, error mapping, and the rich progress reporter."""

from __future__ import annotations

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

from harness.errors import HarnessError

console = Console(width=None if sys.stdout.isatty() else 200)  # logs and pipes keep whole table rows
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


class LineProgress:
    """A ``ProgressFn`` for logs (stderr not a terminal, e.g. a background or cluster run): one line
    when a phase starts and one when it ends, with the time since the command started and the
    phase's own duration; a phase counted in at most ``STEPS`` steps (epochs, languages) also gets a
    line per step. Long counters (training steps, batches) print only their start and end.

        [  12.4s] asg: fit adapter ...
        [  58.9s] asg: fit adapter done (46.5s)
        [ 301.0s] asg: epoch 1/2 (120.3s)
    """

    STEPS = 20

    def __init__(self, console: Console = err_console) -> None:
        self.console, self.start = console, time.monotonic()
        self.phases: dict[str, tuple[float, int]] = {}  # label -> (start, last done)

    def __call__(self, label: str, done: int, total: int) -> None:
        now = time.monotonic()
        began, last = self.phases.get(label, (now, -1))
        if done <= last or label not in self.phases:  # a new phase, or the label starts over (next task)
            began, last = now, -1
            if done < total and (done == 0 or total > self.STEPS):
                self._line(now, f"{label} ...")
        if done == total and last < total:
            self._line(now, f"{label} done ({now - began:.1f}s)" if total == 1 else f"{label} {done}/{total} done ({now - began:.1f}s)")
        elif max(last, 0) < done < total and total <= self.STEPS:
            self._line(now, f"{label} {done}/{total} ({now - began:.1f}s)")
        self.phases[label] = (began, done)

    def _line(self, now: float, text: str) -> None:
        self.console.print(f"[{now - self.start:7.1f}s] {text}", highlight=False, markup=False, soft_wrap=True)

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc) -> None:
        return None


def progress_display() -> RichProgress | LineProgress:
    """Rich bars on a terminal, plain lines otherwise."""
    return RichProgress() if err_console.is_terminal else LineProgress()
