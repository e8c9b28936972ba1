"""The CLI's progress reporter writes plain lines when stderr is not a terminal (logs, CI)."""

from __future__ import annotations

import io

from rich.console import Console

from harness.cli.common import RichProgress


def test_non_interactive_progress_prints_a_line_per_tenth():
    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=False, width=200))
    with progress:
        for done in range(1, 101):
            progress("sense vectors", done, 100)
        for done in range(1, 4):
            progress("sense vectors", done, 3)  # the same label again: it starts over
    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        *(f"sense vectors: {d}/100" for d in (1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)),
        "sense vectors: 1/3", "sense vectors: 2/3", "sense vectors: 3/3",
    ]
