"""Every excerpt of a command's output in the README is what that command prints today: a
fenced block whose info string is ``text harness ...`` holds lines of what ``harness ...`` prints on the
committed results.duckdb (its claims table: tests/test_committed_results.py). The main job's command,
``harness run``, is only read here, never run: its runs must be current in the committed store (else
`make reference` re-makes them), so the command reuses them and prints at once."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results.store import Store
from harness.runner.plan import RunRequest, plan
from tests.test_docs import README, fenced

COMMITTED = Path(__file__).resolve().parents[1] / "results.duckdb"
BOX = re.compile(r"[│┃]")


def excerpts() -> list[tuple[list[str], list[str]]]:
    """(command argv after ``harness``, excerpt lines) of each ``text harness ...`` block."""
    infos = {line[3:].strip() for line in README.splitlines() if line.startswith("```text harness ")}
    return [(shlex.split(info)[2:], fenced(README, info)[0].splitlines()) for info in sorted(infos)]


def cells(line: str) -> tuple[str, ...]:
    """A table line's cells, stripped (rich pads them to its column widths; an excerpt need not)."""
    return tuple(c.strip() for c in BOX.split(line)[1:-1]) if BOX.search(line) else (line.strip(),)


def _reused(argv: list[str]) -> None:
    """A `harness run` excerpt's runs (method and baseline) are finished in the committed store under the
    installed code, so the command reuses them (it would otherwise train for minutes)."""
    options = dict(zip(argv[1::2], argv[2::2]))
    spec = plan(RunRequest(options["--suite"], options.get("--adapter", "none"), options.get("--model"))).spec
    store = Store(COMMITTED)
    for needed in (spec.baseline(), spec):
        if store.find_finished(needed) is None:
            pytest.fail(f"the committed store has no current {needed.adapter} run for `harness {' '.join(argv)}`: make reference re-makes it")


def test_the_readme_shows_the_main_jobs_output():
    assert [argv for argv, _ in excerpts()] == [["run", "--suite", "xnli", "--adapter", "asg"]]


@pytest.mark.skipif(not COMMITTED.exists(), reason="no committed results.duckdb in this checkout")
@pytest.mark.parametrize("argv, lines", excerpts(), ids=[" ".join(argv) for argv, _ in excerpts()])
def test_each_readme_excerpt_is_what_its_command_prints(argv, lines, tmp_path):
    if argv[0] == "run":
        _reused(argv)
    db = tmp_path / "results.duckdb"
    shutil.copy(COMMITTED, db)
    result = CliRunner().invoke(app, [*argv, "--db", str(db)], env={"COLUMNS": None})  # no terminal width: whole rows
    assert result.exit_code == 0, result.output
    printed = {cells(line) for line in result.stdout.splitlines()}
    for line in lines:
        assert cells(line) in printed, f"the README shows a line `harness {' '.join(argv)}` does not print: {line}"
