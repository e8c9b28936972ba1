"""The DuckDB store: JSON record first, busy database, failed and dead runs, reuse lookup, a store of an older schema refused."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time

import duckdb
import pytest

from harness.errors import StoreError
from harness.results import queries
from harness.results.queries import RunFilter
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
    assert len(store.load("a").scores) == 1


def test_failed_run_keeps_error(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    rec = _record("a")
    store.start(rec)
    store.save(dataclasses.replace(rec, status="failed", error="DataError: boom"))
    runs = queries.runs(store)
    assert runs.status.tolist() == ["failed"] and runs.error.tolist() == ["DataError: boom"]
    assert queries.results(store, RunFilter()).empty  # failed runs are not results


def test_run_of_a_dead_process_is_marked_failed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store = Store(tmp_path / "r.duckdb")
    store.start(_record("ghost", pid=dead.pid))
    time.sleep(0.01)
    store.start(_record("next"))
    runs = queries.runs(store)
    status = dict(zip(runs.run_id, runs.status))
    assert status == {"ghost": "failed", "next": "running"}


def test_reading_a_missing_database_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="no results database"):
        Store(tmp_path / "absent.duckdb").load("x")


def test_items_and_comparisons_round_trip(tmp_path):
    from harness.results.records import Comparison, ItemOutputs

    store = Store(tmp_path / "r.duckdb")
    rec = _record("a")
    store.start(rec)
    items = [
        ItemOutputs("xnli", "en", "test", "accuracy", ("7", "3", "5"), (1.0, 0.0, 1.0), ("e", "n", "c"), ("e", "c", "c")),
        ItemOutputs("wikitext2", "en", "test", "bits_per_byte", ("0", "4"), (812.5, 1020.0), weights=(900.0, 1100.0)),
    ]
    comparison = Comparison("xnli", "en", "test", "accuracy", "base", 3, 90.0, 110.0, 0.0, -0.1, 0.1, 100.0, 1.0, 0.0, 1.0, True)
    done = dataclasses.replace(_finished(rec), items=items, comparisons=[comparison])
    store.save(done)
    assert store.items("a") == items  # order of items, predictions, gold and weights kept
    assert store.load("a").comparisons == [comparison]
    row = queries.results(store, RunFilter()).iloc[0]
    assert (row.pct_base_ci_low, row.chance_adjusted_pct_base, row.p_value, row.flip_rate, row.baseline_above_chance) == (90.0, 100.0, 1.0, 0.0, True)
    assert row.variant == rec.spec.variant == dataclasses.replace(rec.spec, seed=5).variant != dataclasses.replace(rec.spec, profile="quick").variant


def _v4_store(path) -> bytes:
    """A store as a v4 harness left it (one finished run, meta row 'schema_version' = '4'); its bytes."""
    store = Store(path)
    store.save(_finished(_record("a")))
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    return path.read_bytes()


OLDER = (r"^\S+old.duckdb was written by an older harness \(schema v4\); this harness reads v5: "
         r"re-make it with `make reference FRESH=1` or `harness run \.\.\. --db NEW.duckdb`$")


def test_a_store_of_an_older_schema_is_refused_by_readers_and_writers_and_left_as_it_is(tmp_path):
    path = tmp_path / "old.duckdb"
    before = _v4_store(path)
    store = Store(path)
    reads = (lambda: store.load("a"), lambda: store.items("a"), store.stale_run_ids, lambda: queries.runs(store),
             lambda: store.find_finished(_record("a").spec))
    writes = (lambda: store.start(_record("b")), lambda: store.save(_finished(_record("c"))) or store.ingest(),
              store.check_writable, lambda: store.replace_paper_results([]))
    for attempt in (*reads, *writes):
        with pytest.raises(StoreError, match=OLDER):
            attempt()
    assert path.read_bytes() == before and not path.with_name("old.duckdb.wal").exists()
    records = tmp_path / "old.records"
    assert not (records / "b.json").exists() and (records / "c.json").exists()  # b refused before it ran; c's record kept


def test_shots_round_trip(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    rec = _record("a", suite="lm_eval")
    store.start(rec)
    done = dataclasses.replace(_finished(rec), scores=[Score("copa", "en", "validation", "acc", 0.7, 0.6, 0.8, 100, chance=0.5, shots=5)])
    store.save(done)
    assert (store.load("a").scores[0].chance, store.load("a").scores[0].shots) == (0.5, 5)
    assert queries.scores(store, RunFilter()).shots.tolist() == [5]  # the results view
