"""The read side (``harness results``, ``list runs``, ``show``, the Streamlit app) never imports torch
or transformers, and the committed database's quick XNLI baselines are well above chance."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from harness.results import queries
from harness.results.queries import RunFilter
from harness.results.store import Store
from harness.runner.matrix import read as read_matrix

REPO = Path(__file__).resolve().parents[1]

READ_SIDE = """
import json, sys
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner
from harness.cli import app

db, run_id, app_file = sys.argv[1:4]
out = {}
for name, args in (("results", ["results", "--db", db, "--format", "json"]), ("list", ["list", "runs", "--db", db]),
                   ("show", ["show", run_id, "--db", db])):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out[name] = result.stdout
at = AppTest.from_file(app_file, default_timeout=120).run()
assert not at.exception, at.exception
out["heavy"] = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print(json.dumps(out))
"""


def test_read_side_imports_neither_torch_nor_transformers(leaderboard_db, monkeypatch):
    method = queries.runs(Store(leaderboard_db), RunFilter(adapter="asg")).run_id[0]
    app_file = REPO / "leaderboard" / "app.py"
    monkeypatch.setenv("HARNESS_DB", str(leaderboard_db))
    proc = subprocess.run(
        [sys.executable, "-c", READ_SIDE, str(leaderboard_db), method, str(app_file)], capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["heavy"] == []
    rows = json.loads(out["results"])
    asg = [r for r in rows if r["adapter"] == "asg" and r["language"] == "en"]
    assert asg and all(
        k in asg[0] for k in ("pct_base_ci_low", "pct_base_ci_high", "chance_adjusted_pct_base", "p_value", "flip_rate")
    )
    assert asg[0]["pct_base_ci_low"] <= asg[0]["pct_base"] <= asg[0]["pct_base_ci_high"]
    assert "xnli" in out["show"] and "spec" in out["show"]


MARGIN = 0.05  # accuracy points above XNLI's chance level 1/3 (three balanced classes)


@pytest.mark.parametrize("model", sorted({e.model for e in read_matrix() if e.suite == "xnli"}))
def test_committed_quick_xnli_baselines_beat_chance_by_a_margin(model):
    """The committed results.duckdb holds the quick profile's XNLI baselines of the reference matrix's
    models (harness/runner/matrix.txt); their English accuracy's 95% CI low must clear chance by MARGIN,
    or %Base on that profile means little. Read with plain SQL on the columns every schema version has;
    the runner checks every new baseline the same way (``baseline_above_chance``, a warning line at the
    end of ``harness run``)."""
    with duckdb.connect(str(REPO / "results.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT s.ci_low FROM scores s JOIN runs r USING (run_id) WHERE r.suite = 'xnli' AND r.adapter = 'none' "
            "AND r.profile = 'quick' AND r.status = 'finished' AND r.model = ? AND s.language = 'en' AND s.metric = 'accuracy'",
            [model],
        ).fetchall()
    assert rows, f"no quick xnli baseline of {model} in the committed results.duckdb"
    assert all(low > 1 / 3 + MARGIN for (low,) in rows), rows


def test_only_the_queries_module_reads_the_store_with_sql():
    """The read side's SQL lives in harness.results.queries behind typed functions: the Store takes no
    SQL, and no other module of the harness or the leaderboard imports DuckDB (the store's module, which
    writes, aside) or opens a read connection (``Store.reading``)."""
    sources = [*(REPO / "harness").rglob("*.py"), *(REPO / "leaderboard").rglob("*.py")]
    allowed = {REPO / "harness" / "results" / "queries.py", REPO / "harness" / "results" / "store.py"}
    offenders = []
    for path in sources:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        reads = any(isinstance(n, ast.Attribute) and n.attr == "reading" for n in ast.walk(tree))
        if path not in allowed and ("duckdb" in imported or reads):
            offenders.append(str(path.relative_to(REPO)))
    assert len(sources) > 50 and offenders == [] and not hasattr(Store, "query")
