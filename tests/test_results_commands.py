"""The results commands a user reads (issue 45.4), on a copy of the smoke store (baseline + ASG k=256 on
MiniLM XNLI) with one run made by other code: `harness results` shows and filters the profile, `harness
list runs` says when it cuts and hides stale runs unless asked, `harness show` gives the settings as fitted."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results import queries
from harness.results.queries import RunFilter
from harness.results.store import Store


@pytest.fixture
def store(smoke_db, tmp_path) -> Store:
    shutil.copy(smoke_db, tmp_path / "r.duckdb")
    store = Store(tmp_path / "r.duckdb")
    (asg,) = [store.load(r) for r in queries.runs(store, RunFilter(adapter="asg")).run_id]
    older = dataclasses.replace(asg.spec, adapter_config={**asg.spec.adapter_config, "k": 128}, code="older-code")
    store.save(dataclasses.replace(asg, run_id="old-asg", spec=older, started_at="2020-01-01T00:00:00+00:00"))
    return store


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_results_show_and_filter_the_profile(store):
    shown = _run("results", "--db", str(store.path), "--suite", "xnli")
    header = shown.splitlines()[1].split()
    assert header[header.index("suite") + 1] == "profile" and " smoke " in shown
    assert _run("results", "--db", str(store.path), "--profile", "smoke").splitlines()[0] == shown.splitlines()[0]
    assert _run("results", "--db", str(store.path), "--profile", "quick").splitlines()[:2] == ["0 result rows", "(no rows)"]


def test_list_runs_says_when_it_cuts_and_hides_stale_runs_unless_asked(store):
    listed = _run("list", "runs", "--db", str(store.path), "--limit", "1")
    assert "the newest 1 of 2 runs; --limit 0 lists all" in listed
    assert "1 stale runs (made by other code) are hidden; --include-stale lists them" in listed and "old-asg" not in listed
    every = _run("list", "runs", "--db", str(store.path), "--limit", "0", "--include-stale")
    assert "old-asg" in every and "(stale)" in every and "the newest" not in every and "hidden" not in every
    assert "k=256 m=24" in every and '"k"' not in every  # settings as typed and as fitted, not JSON


def test_show_gives_the_settings_as_fitted(store):
    asg = queries.runs(store, RunFilter(adapter="asg", hidden=("old-asg",))).run_id.item()
    assert "settings (as fitted): k=256 m=24 shared=false output=true niter=25 (m: paper 000: the divisor of D nearest D/16, sub-vectors of about 16 values)\n" in _run("show", asg, "--db", str(store.path))
    baseline = queries.runs(store, RunFilter(adapter="none")).run_id.item()
    assert "settings (as fitted): -\n" in _run("show", baseline, "--db", str(store.path))
