"""The ``harness`` command group: typer's, with click's usage errors kept readable.

A usage error (an unknown option, a value of the wrong type) is click's: the usage line, a hint
and the message, in a rich box. Two things can hide that message: a name the user typed echoed
with its control characters (``--x$'\\e[2J'`` would clear the screen), and a terminal too narrow
for the box (``COLUMNS=1`` leaves it empty, ``COLUMNS=0`` prints nothing). So the message's names pass through
:func:`~harness.errors.printable`, and below :data:`MIN_COLUMNS` the error is click's plain text,
which any width shows.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from rich.console import Console
from typer.core import TyperGroup
from typer.exceptions import TyperException

from harness.errors import printable

MIN_COLUMNS = 40
"""The narrowest terminal that draws rich's boxed usage errors and help; below it, click's plain text."""


@contextmanager
def _printable_message() -> Iterator[None]:
    try:
        yield
    except TyperException as err:  # click's errors, as typer vendors them
        err.message = printable(err.message)
        raise


class HarnessGroup(TyperGroup):
    """The top-level group; its subcommands' errors reach the user through it."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with _printable_message():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with _printable_message():
            return super().invoke(ctx)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        rich = self.rich_markup_mode
        if Console(stderr=True).width < MIN_COLUMNS:  # the width rich would draw the box at (COLUMNS, the terminal's)
            self.rich_markup_mode = None
        try:
            return super().main(*args, **kwargs)
        finally:
            self.rich_markup_mode = rich
