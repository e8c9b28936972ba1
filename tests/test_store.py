"""The DuckDB store: JSON record first, busy database, failed and dead runs, reuse lookup."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time

import pytest

from harness.results.records import (
    CompressionReport,
    LatencyStats,
    Provenance,
    RunRecord,
    RunSpec,
    Score,
)
from harness.results.store import Store


def _record(run_id: str, status: str = "running", pid: int = 1, **spec_changes) -> RunRecord:
    spec = RunSpec("minilm", "rev", "asg", {"k": 8}, "xnli", {"train": "en"}, "smoke", 0)
    spec = dataclasses.replace(spec, **spec_changes)
    import socket

    prov = Provenance("sha", "pkg", "0.1", socket.gethostname(), pid, {"cpu_count": 2}, {"torch": "x"}, {"f": "d"})
    return RunRecord(run_id=run_id, spec=spec, status=status, started_at="2026-01-01T00:00:00+00:00", device="cpu", provenance=prov)


def _finished(rec: RunRecord) -> RunRecord:
    return dataclasses.replace(
        rec, status="finished", finished_at="2026-01-01T00:01:00+00:00", wall_s=60.0,
        compression=CompressionReport(100, 10, 400, 50, 1000, 910),
        scores=[Score("xnli", "en", "test", "accuracy", 0.5, 0.4, 0.6, 30, True, 98.0)],
        efficiency=[LatencyStats.from_samples("forward", 8, 128, [10.0, 12.0, 11.0], 100.0)],
    )


def test_round_trip_and_reuse_lookup(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    rec = _record("a")
    store.start(rec)
    assert store.find_finished(rec.spec) is None  # running runs are never reused
    done = _finished(rec)
    assert store.save(done)
    assert (tmp_path / "r.records" / "a.json").exists()
    loaded = store.load("a")
    assert loaded.to_json() == done.to_json()
    assert store.find_finished(rec.spec).run_id == "a"
    assert store.find_finished(dataclasses.replace(rec.spec, seed=1)) is None


def test_busy_database_keeps_json_and_later_ingests(tmp_path):
    path = tmp_path / "r.duckdb"
    store = Store(path, retries=2, wait_s=0.05)
    store.start(_record("a"))
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb,time; c=duckdb.connect({str(path)!r}); print('held', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert store.save(_finished(_record("a"))) is False  # DB busy: nothing lost, JSON kept
        assert (tmp_path / "r.records" / "a.json").exists()
    finally:
        holder.kill()
        holder.wait()
    store.start(_record("b"))  # the next writer ingests what was left
    assert store.load("a").status == "finished"
    assert len(store.query("SELECT * FROM scores WHERE run_id = 'a'")) == 1


def test_failed_run_keeps_error(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    rec = _record("a")
    store.start(rec)
    store.save(dataclasses.replace(rec, status="failed", error="DataError: boom"))
    runs = store.query("SELECT status, error FROM runs")
    assert runs.status.tolist() == ["failed"] and runs.error.tolist() == ["DataError: boom"]
    assert store.query("SELECT count(*) AS n FROM results").n[0] == 0  # failed runs are not results


def test_run_of_a_dead_process_is_marked_failed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store = Store(tmp_path / "r.duckdb")
    store.start(_record("ghost", pid=dead.pid))
    time.sleep(0.01)
    store.start(_record("next"))
    status = dict(store.query("SELECT run_id, status FROM runs").itertuples(index=False))
    assert status == {"ghost": "failed", "next": "running"}


def test_reading_a_missing_database_is_a_clear_error(tmp_path):
    from harness.errors import StoreError

    with pytest.raises(StoreError, match="no results database"):
        Store(tmp_path / "absent.duckdb").load("x")


def test_shots_round_trip_and_are_added_to_an_older_database(tmp_path):
    import duckdb

    path = tmp_path / "r.duckdb"
    with duckdb.connect(str(path)) as con:  # the scores table as it was before scores.shots
        con.execute(
            "CREATE TABLE scores (run_id VARCHAR NOT NULL, task VARCHAR, language VARCHAR, split VARCHAR, metric VARCHAR, "
            "value DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n INTEGER, higher_is_better BOOLEAN, pct_base DOUBLE, chance DOUBLE)"
        )
        con.execute("INSERT INTO scores VALUES ('old', 'xnli', 'en', 'test', 'acc', 0.5, 0.4, 0.6, 30, true, NULL, NULL)")
    store = Store(path)
    rec = _record("a", suite="lm_eval")
    store.start(rec)
    done = dataclasses.replace(_finished(rec), scores=[Score("copa", "en", "validation", "acc", 0.7, 0.6, 0.8, 100, chance=0.5, shots=5)])
    store.save(done)
    assert (store.load("a").scores[0].chance, store.load("a").scores[0].shots) == (0.5, 5)
    assert store.query("SELECT shots FROM scores WHERE run_id = 'old'").shots.isna().all()
    assert store.query("SELECT shots FROM results WHERE run_id = 'a'").shots.tolist() == [5]
