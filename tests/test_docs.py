"""The front door stays a front door: the README is short, links a docs page for every part, names
every package in its layout, and its commands marked ``bash run`` run against a smoke database;
every adapter, suite and CLI command has its entry under docs/."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.registry import ADAPTERS, SUITES
from tests.conftest import read_sql

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
PAGES = ("methods", "suites", "cli", "results", "plugins", "performance")


def doc(name: str) -> str:
    return (REPO / "docs" / f"{name}.md").read_text(encoding="utf-8")


def fenced(text: str, info: str) -> list[str]:
    """The bodies of the fenced blocks whose info string is exactly ``info``."""
    blocks, current, opened = [], [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if opened is None:
                opened, current = line[3:].strip(), []
            else:
                if opened == info:
                    blocks.append("\n".join(current) + "\n")
                opened = None
        elif opened is not None:
            current.append(line)
    return blocks


def commands(body: str) -> list[list[str]]:
    return [shlex.split(line.split("#", 1)[0]) for line in body.splitlines() if line.split("#", 1)[0].strip()]


def cli_commands() -> list[str]:
    """Every command of ``harness``: top level, and each group's subcommands as "group sub"."""
    out = [c.name for c in app.registered_commands]
    for group in app.registered_groups:
        out += [f"{group.name} {c.name}" for c in group.typer_instance.registered_commands]
    return out


def test_readme_is_a_front_door():
    assert len(README.encode("utf-8")) <= 10 * 1024
    for page in PAGES:
        assert f"(docs/{page}.md)" in README, f"README does not link docs/{page}.md"
        assert (REPO / "docs" / f"{page}.md").is_file()
    assert "harness run --suite xnli --adapter asg" in README
    setup = [argv[:2] for argv in commands(fenced(README, "bash")[0])]
    assert setup == [["make", "setup"], ["make", "test"]], "the first block is the two set-up commands"


@pytest.mark.parametrize("name", ADAPTERS.names())
def test_every_adapter_has_its_docs_entry(name):
    assert re.search(rf"^\| `{name}`", doc("methods"), flags=re.M), f"docs/methods.md has no row for adapter {name}"


@pytest.mark.parametrize("name", SUITES.names())
def test_every_suite_has_its_docs_entry(name):
    assert f"`{name}`" in doc("suites"), f"docs/suites.md does not name suite {name}"
    assert f"`{name}`" in README, f"the README's suite map does not name {name}"


@pytest.mark.parametrize("command", cli_commands())
def test_every_cli_command_has_its_docs_entry(command):
    assert f"harness {command}" in doc("cli"), f"docs/cli.md does not show `harness {command}`"


def test_readme_layout_names_every_package_and_nothing_that_is_gone():
    block = next(b for b in fenced(README, "") if b.startswith("harness/"))
    core = sorted(p.name for p in (REPO / "harness").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    modules = sorted(p.name for p in (REPO / "harness").glob("*.py") if p.name != "__init__.py")
    for name in core:
        assert re.search(rf"^\s+{name}/", block, flags=re.M), f"README layout misses harness/{name}/"
    for name in modules:
        assert name in block, f"README layout misses harness/{name}"
    for folder in re.findall(r"^([a-z_]+)/", block, flags=re.M):
        assert (REPO / folder).is_dir(), f"README layout names {folder}/, which does not exist"


def test_readme_commands_marked_to_run_do_run(smoke_db, tmp_path, monkeypatch):
    db = tmp_path / "results.duckdb"
    shutil.copy(smoke_db, db)
    monkeypatch.setenv("HARNESS_DB", str(db))
    runner = CliRunner()
    run_id = read_sql(db, "SELECT run_id FROM runs WHERE adapter = 'asg'").run_id[0]
    ran = 0
    for body in fenced(README, "bash run"):
        for argv in commands(body):
            assert argv[0] == "harness", argv
            argv = [run_id if a == "RUN_ID" else a for a in argv[1:]]
            result = runner.invoke(app, argv)
            assert result.exit_code == 0, f"harness {' '.join(argv)}: {result.output}"
            ran += 1
    assert ran >= 3
