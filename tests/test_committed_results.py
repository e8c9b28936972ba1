"""The committed results.duckdb keeps the trust rules: every current (non-stale) method run's headline
scores are paired with the baseline's (n_paired > 0, a paired %Base interval) and carry the chance
level their metric has. Runs made by other code (stale: no or another code fingerprint) are exempt:
they stay in the store for history, hidden by default. Read with plain SQL, read-only."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import duckdb
import pytest

from harness.measure import chance
from harness.results.fingerprint import is_stale

DB = Path(__file__).resolve().parents[1] / "results.duckdb"

HEADLINES = """
SELECT r.run_id, r.adapter, r.suite, r.code, s.task, s.language, s.metric, s.chance, s.higher_is_better,
       k.n_paired, k.pct_base_ci_low, k.pct_base_ci_high, k.unpaired
FROM scores s JOIN runs r USING (run_id)
LEFT JOIN comparisons k ON k.run_id = s.run_id AND k.task = s.task AND k.language = s.language AND k.split = s.split AND k.metric = s.metric
WHERE r.status = 'finished' AND r.adapter <> 'none' AND s.pct_base IS NOT NULL  -- scores the baseline has too
QUALIFY s.language = 'avg' OR count(*) OVER (PARTITION BY s.run_id, s.task, s.metric) = 1
"""


def _current_headlines() -> list[dict]:
    with duckdb.connect(str(DB), read_only=True) as con:
        columns = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'").fetchall()}
        if "code" not in columns:  # a store from before code fingerprints: every run in it is stale
            return []
        frame = con.execute(HEADLINES).df()
    return [r for r in frame.to_dict("records") if not is_stale(r["adapter"], r["suite"], r["code"])]


@pytest.mark.skipif(not DB.exists(), reason="no committed results.duckdb in this checkout")
def test_current_method_headlines_are_paired_and_carry_chance():
    for r in _current_headlines():
        where = f"{r['run_id']} {r['task']}/{r['language']}/{r['metric']}"
        assert r["n_paired"] and r["n_paired"] > 0, f"{where}: unpaired ({r['unpaired']})"
        assert r["pct_base_ci_low"] is not None and r["pct_base_ci_low"] <= r["pct_base_ci_high"], where
        if chance.has_level(r["metric"], r["higher_is_better"]):
            assert r["chance"] is not None and r["chance"] == r["chance"], f"{where}: no chance level"


@pytest.mark.skipif(not DB.exists(), reason="no committed results.duckdb in this checkout")
def test_every_current_run_was_made_from_a_commit_that_can_be_checked_out():
    """The committed store ships without its journal, so a current run must come from a clean commit
    (``make reference`` refuses a dirty tree) that this repository holds."""
    with duckdb.connect(str(DB), read_only=True) as con:
        runs = con.execute("SELECT run_id, adapter, suite, code, git_sha FROM runs WHERE status = 'finished'").fetchall()
    current = [(run_id, sha) for run_id, adapter, suite, code, sha in runs if not is_stale(adapter, suite, code)]
    assert not [(run_id, sha) for run_id, sha in current if not re.fullmatch(r"[0-9a-f]{40}", sha or "")]
    shallow = subprocess.run(["git", "-C", str(DB.parent), "rev-parse", "--is-shallow-repository"], capture_output=True, text=True)
    if shallow.returncode == 0 and shallow.stdout.strip() == "false":
        missing = {sha for _, sha in current
                   if subprocess.run(["git", "-C", str(DB.parent), "cat-file", "-e", f"{sha}^{{commit}}"], capture_output=True).returncode}
        assert not missing, f"runs made from commits this repository does not hold: {sorted(missing)}"


@pytest.mark.skipif(not DB.exists(), reason="no committed results.duckdb in this checkout")
def test_the_readmes_claims_table_is_what_the_committed_store_gives():
    """The front door's claims rows (paper, claim, paper figure, ours, verdict) are
    ``harness results --claims`` on the committed store, not figures typed once and left behind."""
    from harness.results import claims
    from harness.results.store import Store

    readme = (DB.parent / "README.md").read_text(encoding="utf-8")
    shown = [[c.strip() for c in line.strip("|").split(" | ")] for line in readme.splitlines() if line.startswith("| 00")]
    computed = claims.table(Store(DB))  # reads only (read-only connections)
    expected = computed[["paper", "claim", "paper figure", "harness figure [95% CI]", "verdict"]].values.tolist()
    assert shown == [[str(v) for v in row] for row in expected]
