"""Tables that fit the terminal they print to (docs/cli.md, "Tables and widths").

Every column has a rank. When a table is wider than its terminal, columns go in order of rank, the
highest first (among equals the rightmost first), until the rest fit; rank 0 always stays. Ids and
numbers never fold or shorten: such a column is as wide as its widest cell. Prose (a prose column, a
:class:`Prose` cell, any title) folds at spaces, never inside a word, so it needs only its longest
word and takes the width left over. Where even the
rank-0 columns do not fit, a plain table prints each row as a block of ``title  value`` lines.

The width is ``COLUMNS`` when set, else the terminal's; a pipe or a file (no terminal) gets every
column unfolded, its rows whole. ``--wide`` keeps every column in a terminal too.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

PLAIN_GAP = 2  # spaces between the columns of a plain table
BOX_GAP, BOX_EDGE = 3, 4  # a rich table's border and padding: 3 between columns, 2 + 2 at its edges


@dataclass(frozen=True)
class Column:
    """A column: its title, its rank (0: always shown; higher goes first), whether its cells are prose
    (folded at spaces) and whether they align right (numbers)."""

    title: str
    rank: int = 0
    prose: bool = False
    right: bool = False


class Prose(str):
    """A cell that folds at spaces whatever its column (a run's settings in a column of figures)."""


@dataclass(frozen=True)
class Layout:
    """The columns kept (indices, in display order), their widths, and whether they fit the width."""

    keep: tuple[int, ...]
    widths: tuple[int, ...]
    fits: bool


def output_width() -> int | None:
    """``COLUMNS`` when set; else the terminal's width when stdout is one; else None (a pipe: whole rows)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def stdout_console() -> Console:
    """A console on stdout as wide as :func:`output_width` (a pipe: wide enough for any line)."""
    return Console(width=output_width() or 100_000)


def fold(line: str, width: int | None) -> str:
    """A line of prose folded at spaces to ``width`` (None: as it is); a word longer than the width stays whole."""
    return "\n".join(textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False)) if width else line


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _need(column: Column, cells: list[str]) -> tuple[int, int]:
    """(narrowest, natural) width of a column: prose needs its longest word, other cells their longest
    line; a title folds at spaces in any column."""
    natural = max(len(line) for t in [column.title, *cells] for line in _lines(t))
    folding = [column.title, *(c for c in cells if column.prose or isinstance(c, Prose))]
    whole = [c for c in cells if not (column.prose or isinstance(c, Prose))]
    return max([1, *(len(w) for t in folding for w in t.split()), *(len(line) for t in whole for line in _lines(t))]), natural


def layout(columns: list[Column], rows: list[list[str]], width: int | None, wide: bool = False,
           gap: int = PLAIN_GAP, edge: int = 0) -> Layout:
    """Which columns a table of ``rows`` keeps within ``width`` (None: all, unfolded), and their widths."""
    needs = [_need(c, [r[i] for r in rows]) for i, c in enumerate(columns)]
    keep = list(range(len(columns)))

    def total(kept: list[int], part: int) -> int:
        return sum(needs[i][part] for i in kept) + gap * max(len(kept) - 1, 0) + edge

    if width is None:
        return Layout(tuple(keep), tuple(n for _, n in needs), True)
    if not wide:
        for i in sorted((i for i in keep if columns[i].rank > 0), key=lambda i: (-columns[i].rank, -i)):
            if total(keep, 0) <= width:
                break
            keep.remove(i)
    widths = {i: needs[i][1] for i in keep}
    excess = total(keep, 1) - width
    while excess > 0:  # fold the widest column that can still give a character (prose, or a title)
        slack = [i for i in keep if widths[i] > needs[i][0]]
        if not slack:
            break
        widest = max(slack, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return Layout(tuple(keep), tuple(widths[i] for i in keep), total(keep, 0) <= width)


def _cell_lines(text: str, width: int, prose: bool) -> list[str]:
    if not prose:
        return _lines(text)
    return [line for part in _lines(text) for line in (textwrap.wrap(part, width, break_long_words=False, break_on_hyphens=False) or [""])]


def text(columns: list[Column], rows: list[list[str]], width: int | None = None, wide: bool = False) -> str:
    """A plain table, titles on the first line; or, where the rank-0 columns do not fit, a block per
    row (:func:`blocks`)."""
    fit = layout(columns, rows, width, wide)
    if not fit.fits and not wide:
        return blocks(columns, rows, width)
    return "\n".join(titles(columns, fit) + aligned(columns, rows, fit))


def titles(columns: list[Column], fit: Layout) -> list[str]:
    """The title line(s) of a plain table: titles fold at spaces in any column."""
    return aligned([Column(c.title, c.rank, True, c.right) for c in columns], [[c.title for c in columns]], fit)


def aligned(columns: list[Column], rows: list[list[str]], fit: Layout) -> list[str]:
    """The lines of ``rows`` in the columns and widths of ``fit``: two spaces between columns, numbers
    right-aligned, prose folded (a row takes as many lines as its tallest cell)."""
    out = []
    for row in rows:
        cells = [_cell_lines(row[i], w, columns[i].prose or isinstance(row[i], Prose)) for i, w in zip(fit.keep, fit.widths)]
        for k in range(max(len(c) for c in cells)):
            parts = [(c[k] if k < len(c) else "") for c in cells]
            out.append((" " * PLAIN_GAP).join(
                p.rjust(w) if columns[i].right else p.ljust(w) for p, i, w in zip(parts, fit.keep, fit.widths)).rstrip())
    return out


def blocks(columns: list[Column], rows: list[list[str]], width: int | None) -> str:
    """Each row as a block of ``title  value`` lines (every column, empty cells left out), values folded
    at spaces to the width; a blank line between rows."""
    left = max(len(c.title) for c in columns)
    room = max((width or 0) - left - PLAIN_GAP, 1)
    out = []
    for row in rows:
        for column, cell in zip(columns, row):
            if cell in ("", "-"):
                continue
            for k, line in enumerate(_cell_lines(cell, room, True)):
                out.append(f"{column.title if k == 0 else '':<{left}}{' ' * PLAIN_GAP}{line}".rstrip())
        out.append("")
    return "\n".join(out).rstrip("\n")


def rich_table(columns: list[Column], rows: list[list[str]], width: int | None = None, wide: bool = False,
               styles: list[str | None] | None = None, **options) -> Table:
    """A rich table (borders, bold titles) of the columns that fit ``width``: ids and numbers on one line
    (``no_wrap``), prose and titles folded at spaces, each column at the width :func:`layout` gives it.
    Cells are text as it is (no rich markup); ``styles`` gives a style per row (``bold``)."""
    fit = layout(columns, rows, width, wide, gap=BOX_GAP, edge=BOX_EDGE)
    table = Table(**options)
    for i, w in zip(fit.keep, fit.widths):
        c = columns[i]
        table.add_column(Text(c.title, no_wrap=False), width=w, no_wrap=not c.prose, overflow="fold", justify="right" if c.right else "left")
    for k, row in enumerate(rows):
        table.add_row(*(Text(row[i], no_wrap=False if isinstance(row[i], Prose) else None) for i in fit.keep),
                      style=styles[k] if styles else None)
    return table


def print_table(table: Table) -> None:
    """Print a :func:`rich_table` on stdout, on a console at least as wide as the table's columns: where
    they do not fit the terminal, its lines run past it (the terminal wraps them) rather than cut an id."""
    least = sum(c.width or 0 for c in table.columns) + BOX_GAP * max(len(table.columns) - 1, 0) + BOX_EDGE
    Console(width=max(output_width() or 100_000, least)).print(table)
