"""`harness run` end to end on the smoke profile: real MiniLM, real XNLI, real DuckDB."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.runner.plan import plan
from harness.results.store import Store
from harness.runner.run import RunRequest, execute
from tests.conftest import read_sql


def _rows(db) -> list[dict]:
    result = CliRunner().invoke(app, ["results", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _accuracy_by_hand(store: Store, run_id: str) -> dict[str, float]:
    """Per language, and their mean as ``avg``: the share of stored items marked correct."""
    shares = {}
    for it in store.items(run_id):
        right = sum(1 for v in it.values if v == 1.0)
        shares[it.language] = right / len(it.values)
    return {**shares, "avg": sum(shares.values()) / len(shares)}


def test_baseline_and_method_finished(smoke_db):
    runs = read_sql(smoke_db, "SELECT adapter, status, baseline_run_id, run_id FROM runs ORDER BY started_at")
    assert runs.adapter.tolist() == ["none", "asg"]
    assert runs.status.tolist() == ["finished", "finished"]
    assert runs.baseline_run_id[1] == runs.run_id[0]


def test_results_json_has_15_languages_avg_ci_and_pct_base(smoke_db):
    rows = _rows(smoke_db)
    by_run = {}
    for r in rows:
        by_run.setdefault(r["adapter"], {})[r["language"]] = r
    assert set(by_run) == {"none", "asg"}
    for adapter, langs in by_run.items():
        assert len(langs) == 16 and "avg" in langs
        for r in langs.values():
            assert r["ci_low"] <= r["value"] <= r["ci_high"]
            assert r["metric"] == "accuracy" and r["profile"] == "smoke"
    store = Store(smoke_db)
    accuracy = {adapter: _accuracy_by_hand(store, langs["en"]["run_id"]) for adapter, langs in by_run.items()}
    for lang, r in by_run["asg"].items():
        base = accuracy["none"][lang]  # correct items / items, read from the stored per-item outputs
        assert r["value"] == pytest.approx(accuracy["asg"][lang])
        assert r["pct_base"] == (None if base == 0 else pytest.approx(100 * accuracy["asg"][lang] / base))
        assert r["emb_param_fraction"] == pytest.approx(256 / 30522)
        assert json.loads(r["config"])["k"] == 256
    assert all(r["pct_base"] == pytest.approx(100.0) for r in by_run["none"].values() if r["value"] > 0)


def test_compression_and_efficiency_recorded(smoke_db):
    store = Store(smoke_db)
    asg = store.load(read_sql(store.path, "SELECT run_id FROM runs WHERE adapter = 'asg'").run_id[0])
    assert asg.compression.storage_bytes_after == 256 * 384 * 4 + 30522 * 24  # codebooks + uint8 map (m = 24: the divisor of 384 nearest 384/16)
    assert asg.compression.storage_bytes_before == 30522 * 384 * 4
    phases = {e.phase: e for e in asg.efficiency}
    assert set(phases) == {"forward", "base:forward"}  # the unchanged model is timed in the same run
    eff = phases["forward"]
    assert (eff.batch, eff.seq_len) == (phases["base:forward"].batch, phases["base:forward"].seq_len)
    assert eff.p50_ms > 0 and eff.p95_ms >= eff.p50_ms and eff.throughput > 0 and eff.peak_mem_mb > 0
    assert asg.provenance.data_files and asg.provenance.versions["torch"]
    assert asg.details["test_examples_per_language"] == 16


def test_same_command_reuses_both_runs(smoke_db):
    request = RunRequest("xnli", "asg", model="minilm", profile="smoke", settings=("k=256",))
    outcomes = execute(request, Store(smoke_db))
    assert [o.reused for o in outcomes] == [True, True]
    assert read_sql(smoke_db, "SELECT count(*) AS n FROM runs WHERE suite = 'xnli' AND profile = 'smoke'").n[0] == 2


def test_a_run_made_on_another_device_is_reused_and_says_where_it_was_timed(smoke_db, tmp_path):
    """The device is not part of a run's identity (scores agree across devices within noise): a CPU
    request reuses runs made on CUDA, and the output names the device their efficiency figures are from."""
    import shutil

    import duckdb

    db = tmp_path / "made_on_cuda.duckdb"
    shutil.copy(smoke_db, db)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE runs SET device = 'cuda'")
    args = ["run", "--suite", "xnli", "--adapter", "asg", "--model", "minilm", "--profile", "smoke", "--set", "k=256",
            "--device", "cpu", "--db", str(db)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.count(" on cuda)") == 2  # the compression table's baseline and asg columns
    assert "timed in one run on cuda" in result.output
    assert read_sql(db, "SELECT count(*) AS n FROM runs").n[0] == 2


def test_missing_data_is_an_error_even_when_the_run_is_stored(smoke_db, tmp_path):
    """A stored identical run is not reused before the data directory is checked."""
    args = ["run", "--suite", "xnli", "--adapter", "asg", "--model", "minilm", "--profile", "smoke", "--set", "k=256",
            "--db", str(smoke_db), "--data-dir", str(tmp_path / "no" / "such" / "dir")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "dataset files missing" in result.stderr and "xnli/xnli.dev.tsv" in result.stderr


def test_other_files_of_the_same_names_are_another_run(smoke_db, data_dir, tmp_path):
    """The data's sha256 is part of the run's identity: changed files are not served an old result."""
    (tmp_path / "xnli").mkdir()
    (tmp_path / "xnli" / "xnli.dev.tsv").write_bytes((data_dir / "xnli" / "xnli.dev.tsv").read_bytes())
    test_rows = (data_dir / "xnli" / "xnli.test.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "xnli" / "xnli.test.tsv").write_text("".join(test_rows[:-15]), encoding="utf-8")
    same = plan(RunRequest("xnli", "asg", model="minilm", profile="smoke", settings=("k=256",)))
    other = plan(RunRequest("xnli", "asg", model="minilm", profile="smoke", settings=("k=256",), data_dir=str(tmp_path)))
    assert same.spec.data["xnli/xnli.dev.tsv"] == other.spec.data["xnli/xnli.dev.tsv"]
    assert same.spec.data["xnli/xnli.test.tsv"] != other.spec.data["xnli/xnli.test.tsv"]
    store = Store(smoke_db)
    assert store.find_finished(same.spec) is not None and store.find_finished(other.spec) is None
    assert store.find_finished(other.spec.baseline()) is None
