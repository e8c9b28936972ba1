"""The results commands a user reads, on a copy of the smoke store (baseline + ASG k=256
on MiniLM XNLI) with one run made by other code: `harness results` shows and filters the profile and says
what it hides, `harness list runs` says when it cuts and hides stale runs unless asked, `harness show`
gives the settings as fitted and takes a unique prefix of a run id; every table fits the terminal it
prints to, with ids whole."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.run_tables import print_tables
from harness.results import queries, summary
from harness.results.queries import RunFilter
from harness.results.store import Store
from harness.results.records import RunOutcome

PREFIXED = "20200101-000000-asg-c0ffee"  # a run whose 12-character prefix is its own


@pytest.fixture
def store(smoke_db, tmp_path) -> Store:
    shutil.copy(smoke_db, tmp_path / "r.duckdb")
    store = Store(tmp_path / "r.duckdb")
    (asg,) = [store.load(r) for r in queries.runs(store, RunFilter(adapter="asg")).run_id]
    older = dataclasses.replace(asg.spec, adapter_config={**asg.spec.adapter_config, "k": 128}, code="older-code")
    store.save(dataclasses.replace(asg, run_id="old-asg", spec=older, started_at="2020-01-01T00:00:00+00:00"))
    return store


def _run(*args: str, columns: int | None = None) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns) if columns else None})
    assert result.exit_code == 0, result.output
    return result.stdout


def _fits(out: str, columns: int) -> None:
    """Every line within ``columns``, but a line that is one whole path (kept whole where it cannot fit:
    a patch beside a run made from a tree with uncommitted changes)."""
    lines = [line for line in out.splitlines() if not re.fullmatch(r"\s*/\S+", line)]
    assert max(len(line) for line in lines) <= columns, max(lines, key=len)


def test_results_show_and_filter_the_profile(store):
    shown = _run("results", "--db", str(store.path), "--suite", "xnli")
    assert shown.splitlines()[0] == "32 result rows: model minilm, suite xnli, profile smoke, seed 0, setting zero-shot"
    header = shown.splitlines()[1].split()
    assert header[:2] == ["run_id", "adapter"] and header[header.index("task"):header.index("metric") + 1] == ["task", "split", "language", "metric"]  # what each row is
    assert _run("results", "--db", str(store.path), "--profile", "smoke").splitlines()[0] == shown.splitlines()[0]
    assert _run("results", "--db", str(store.path), "--profile", "quick").splitlines()[:2] == ["0 result rows", "(no rows)"]


def test_results_say_how_many_stale_runs_they_hide(store):
    line = "1 stale run (made by other code) is hidden; --include-stale shows it"
    assert _run("results", "--db", str(store.path), "--adapter", "asg").splitlines()[-1] == line
    assert line not in _run("results", "--db", str(store.path), "--adapter", "asg", "--include-stale")
    result = CliRunner().invoke(app, ["results", "--db", str(store.path), "-f", "json"])
    assert result.stderr.strip() == line and json.loads(result.stdout)  # beside JSON: on stderr, the JSON whole


@pytest.mark.parametrize("columns", [80, 120, 160])
def test_every_table_fits_the_terminal_with_ids_whole(store, columns):
    db = ["--db", str(store.path)]
    ids = list(queries.runs(store).run_id)
    listed = _run("list", "runs", "--include-stale", *db, columns=columns)
    _fits(listed, columns)
    assert all(run_id in listed for run_id in ids)
    results = _run("results", "--include-stale", *db, columns=columns)
    _fits(results, columns)
    scores = len(json.loads(_run("results", "--include-stale", "-f", "json", *db)))
    rows = [line for line in results.splitlines() if line.split() and line.split()[0] in ids]
    assert len(rows) == len(set(rows)) == scores  # a row per score, each whole on its line, none alike
    for args in (["results", "--aggregate"], ["results", "--paper"], ["results", "--claims"], ["show", ids[0]]):
        _fits(_run(*args, *db, columns=columns), columns)


@pytest.mark.parametrize("columns", [80, 160])
def test_the_main_job_prints_whole_ids_and_the_settings_as_resolved(store, columns, monkeypatch, capsys):
    """What `harness run` prints (:func:`harness.cli.run_tables.print_tables`, here of the stored runs) fits the
    terminal, with both runs' whole ids (users copy them for `harness show`) and the settings as typed."""
    method = store.load(queries.runs(store, RunFilter(adapter="asg", hidden=("old-asg",))).run_id.item())
    monkeypatch.setenv("COLUMNS", str(columns))
    print_tables([[RunOutcome(store.load(method.baseline_run_id), True, True), RunOutcome(method, True, True)]], store)
    out = capsys.readouterr().out
    _fits(out, columns)
    assert method.run_id in out and method.baseline_run_id in out
    assert "asg k=256 m=24 shared=false output=true niter=25" in " ".join(out.split()) and "{" not in out


def test_show_takes_a_unique_prefix_and_lists_the_runs_an_ambiguous_one_matches(store):
    (asg,) = [store.load(r) for r in queries.runs(store, RunFilter(adapter="asg", hidden=("old-asg",))).run_id]
    store.save(dataclasses.replace(asg, run_id=PREFIXED))
    shown = _run("show", PREFIXED[:12], "--db", str(store.path))
    assert PREFIXED in shown and re.search(r"  wall \d+\.\d s\n", shown)  # the run's whole id, its wall time rounded
    ambiguous = CliRunner().invoke(app, ["show", "2", "--db", str(store.path)])
    assert ambiguous.exit_code == 2 and len(ambiguous.stderr.strip().splitlines()) == 1
    listed = ambiguous.stderr.strip()
    assert listed.startswith("error: run id prefix '2' matches") and PREFIXED in listed and asg.run_id in listed
    missing = CliRunner().invoke(app, ["export", "zz", "--out", str(store.path.parent / "out"), "--db", str(store.path)])
    assert missing.exit_code == 2 and "no run 'zz'" in missing.stderr


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


def test_settings_read_as_resolved_in_one_spelling():
    """A fit detail of the setting's type is its resolved value (k=0 -> 1024); one of another type is a
    note in parentheses (Vocab Diet's filter=true reports 'probed'); booleans read as JSON writes them."""
    assert summary.settings_label(summary.resolved_config('{"k": 0, "shared": false}', '{"k": 1024}')) == "k=1024 shared=false"
    assert summary.settings_label(summary.resolved_config('{"filter": true}', '{"filter": "probed"}')) == "filter=true"
    fitted = summary.fitted_settings({"k": 0, "filter": True}, {"k": 1024, "k_rule": "0.45% of V", "filter": "probed"}, {})
    assert fitted == "k=1024 filter=true (k: 0.45% of V; filter: probed)"
    assert summary.settings_label(None) == "-" and summary.setting_text("recover_lora", True) == "+LoRA"
