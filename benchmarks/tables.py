"""The measured tables of docs/performance.md, rendered from the stored bench JSON.

Each table sits between two marker comments, ``<!-- table: benchmarks/results/X.json -->`` and
``<!-- end table -->``; everything between them is what :func:`render_table` makes of that file (its
provenance line, then :meth:`BenchReport.markdown` of its headline rows without the notes), so a
figure in the docs is the figure the JSON holds. The JSON keeps every row and note. ``python -m benchmarks.tables`` rewrites the blocks; ``--check`` only compares them (exit 1
when a block differs, as after a hand edit).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer

from harness.benchmarks.report import BenchReport, Row
from harness.errors import ConfigError, DataError

BLOCK = re.compile(r"^(<!-- table: (?P<path>\S+) -->\n)(?P<body>.*?)^(<!-- end table -->)$", re.DOTALL | re.MULTILINE)
OPEN = re.compile(r"^<!-- table: ", re.MULTILINE)  # markers stand on lines of their own
VARIANT = re.compile(r" (reference|eager|lut=\S+|kernel vs its torch reference) @")


def headline(row: Row) -> bool:
    """A head's own call as a run makes it, decoding, memory, fit: not the variants timed beside a
    head (its torch reference, its eager call, a half-precision score table, kernel vs reference)."""
    return not VARIANT.search(row.case)


def render_table(path: Path) -> str:
    """The markdown block for one bench JSON: provenance line, machine line, table."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path} does not exist; write it with `harness bench --json {path}` or drop its table markers") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path} is not JSON ({err}); write it again with `harness bench --json {path}`") from None
    try:
        report = BenchReport.from_json(data)
    except (KeyError, TypeError) as err:
        raise DataError(f"{path} is not a bench JSON (no environment and rows: {err}); write it with `harness bench --json {path}`") from None
    shown = BenchReport(report.environment, [row for row in report.rows if headline(row)])
    return (f"{report.provenance()} {len(shown.rows)} of its {len(report.rows)} rows (the rest and the notes: "
            f"the JSON).\n{shown.markdown(notes=False)}\n")


def render_doc(text: str, root: Path) -> str:
    """``text`` with every marked block replaced by its rendered table; paths are relative to ``root``."""
    if len(OPEN.findall(text)) != len(BLOCK.findall(text)):
        raise ConfigError("a `<!-- table: PATH -->` marker has no `<!-- end table -->` after it; close every block")
    return BLOCK.sub(lambda m: m.group(1) + render_table(root / m.group("path")) + m.group(4), text)


def tables(
    doc: Annotated[Path, typer.Argument(help="The markdown file holding the table markers.")] = Path("docs/performance.md"),
    check: Annotated[bool, typer.Option("--check", help="Compare only: exit 1 when a block differs from its JSON.")] = False,
    root: Annotated[Path, typer.Option(help="The folder the markers' paths are relative to.")] = Path("."),
) -> None:
    """Render every `<!-- table: X.json -->` block of DOC from its JSON (or, with --check, compare)."""
    from harness.cli.common import user_errors

    with user_errors():
        if not doc.is_file():
            raise ConfigError(f"{doc} does not exist; run from the checkout's root or name the file")
        text = doc.read_text()
        rendered = render_doc(text, root)
    if rendered == text:
        typer.echo(f"{doc}: {len(BLOCK.findall(text))} table(s) match their JSON")
    elif check:
        typer.echo(f"error: {doc}'s tables differ from their JSON; run `python -m benchmarks.tables` and commit the result", err=True)
        raise typer.Exit(code=1)
    else:
        doc.write_text(rendered)
        typer.echo(f"{doc}: tables rendered from their JSON")


if __name__ == "__main__":
    typer.run(tables)
