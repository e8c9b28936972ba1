"""Plugins through entry points: a real example package installs and runs through the CLI; broken
plugins give one line naming their package (tests/plugins/)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

PLUGINS = Path(__file__).with_name("plugins")
HARNESS = str(Path(sys.executable).with_name("harness"))


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    """Both fixture packages installed (wheels built here) into a folder put on PYTHONPATH."""
    target = tmp_path_factory.mktemp("plugins")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(target),
         *(str(PLUGINS / package) for package in ("frequent_table", "broken_plugin"))],
        check=True, capture_output=True, timeout=300,
    )
    return target


def _harness(plugin_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(plugin_path), "COLUMNS": "400"}  # rich wraps tables at 80 columns otherwise
    return subprocess.run([HARNESS, *args], capture_output=True, text=True, env=env, timeout=900)


def test_example_plugin_is_listed_with_corpus_teacher_and_budgets(plugin_path):
    out = _harness(plugin_path, "list", "adapters")
    assert out.returncode == 0, out.stderr
    assert "frequent" in out.stdout and "harness-frequent-table" in out.stdout
    assert "corpus wikitext2_train" in out.stdout and "teacher" in out.stdout and "fit_texts=50" in out.stdout


def test_example_plugin_runs_through_the_cli(plugin_path, smoke_db, tmp_path):
    """On a copy of the session's smoke database: the plugin's run reuses the stored baseline."""
    db = tmp_path / "r.duckdb"
    shutil.copy(smoke_db, db)
    out = _harness(plugin_path, "run", "--suite", "xnli", "--adapter", "frequent", "--model", "minilm", "--profile", "smoke",
                   "--set", "keep=2000", "--db", str(db))
    assert out.returncode == 0, out.stderr
    con = duckdb.connect(str(db), read_only=True)
    package, fit_data, fraction = con.execute(
        "SELECT adapter_package, CAST(fit_data AS VARCHAR), emb_param_fraction FROM runs JOIN compression USING (run_id) WHERE adapter = 'frequent'"
    ).fetchone()
    assert package == "harness-frequent-table"
    assert "wikitext2/train.txt" in fit_data                      # the corpus is part of the run's identity
    assert fraction == pytest.approx((2000 + 2048) / 30522)      # kept rows + the buckets (2,048 by default)
    # the plugin uninstalled (no PYTHONPATH): its run is stale, and a query for it says why
    gone = subprocess.run([HARNESS, "results", "--adapter", "frequent", "--db", str(db)], capture_output=True, text=True, timeout=300)
    assert gone.returncode == 0 and gone.stdout.startswith("0 result rows"), gone.stderr
    assert gone.stderr.strip() == (
        f"note: the finished run of adapter 'frequent' in {db} is stale: its code is no longer installed "
        "(package harness-frequent-table 0.1.0); install the same code again to read it as current, or add --include-stale to see it"
    )
    paper = subprocess.run([HARNESS, "results", "--paper", "--adapter", "frequent", "--db", str(db)], capture_output=True, text=True, timeout=300)
    assert paper.returncode == 0 and paper.stderr.strip() == gone.stderr.strip(), "--paper says why too"


def test_the_docs_give_the_whole_example_plugin():
    """docs/plugins.md shows the example's adapter module and pyproject.toml as they are, imports and all."""
    docs = (PLUGINS.parent.parent / "docs" / "plugins.md").read_text(encoding="utf-8")
    for path in ("src/frequent_table/adapter.py", "pyproject.toml"):
        assert (PLUGINS / "frequent_table" / path).read_text(encoding="utf-8") in docs, path


@pytest.mark.parametrize("name, fragment", [
    ("misnamed", "declares name 'something_else' but is registered as 'misnamed'"),
    ("crashes", "failed to import: RuntimeError: this plugin is broken on purpose"),
])
def test_broken_plugins_give_one_line_naming_the_package(plugin_path, name, fragment):
    out = _harness(plugin_path, "run", "--suite", "xnli", "--adapter", name, "--model", "minilm", "--profile", "smoke")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "harness-broken-plugin 0.0.1" in lines[0]
    assert "Traceback" not in out.stderr
