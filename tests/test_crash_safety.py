"""Crash safety with real processes and signals: leases tell a dead run from a live one (a reused pid
included), a run killed with SIGKILL is marked failed by the next writer, and two runs writing one
database while a reader holds it open lose no row."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness.results import liveness
from harness.results.journal import Journal
from harness.results.store import Store

HARNESS = os.path.join(os.path.dirname(sys.executable), "harness")


def _lease(folder: Path, run_id: str, **changes) -> None:
    pid = os.getpid()
    body = {"host": socket.gethostname(), "boot_id": liveness.boot_id(), "pid": pid, "start": liveness.start_time(pid), **changes}
    folder.mkdir(exist_ok=True)
    (folder / f"{run_id}.lease").write_text(json.dumps(body))


def test_lease_judges_pid_reuse_reboot_and_remote_heartbeat(tmp_path):
    me = os.getpid()
    _lease(tmp_path, "live")
    assert liveness.alive(tmp_path, "live", socket.gethostname(), me) is True
    _lease(tmp_path, "reused", start="1")  # this pid, but a process that started at another time
    assert liveness.alive(tmp_path, "reused", socket.gethostname(), me) is False
    _lease(tmp_path, "rebooted", boot_id="another-boot")
    assert liveness.alive(tmp_path, "rebooted", socket.gethostname(), me) is False
    _lease(tmp_path, "remote", host="ray-node-7", pid=1)
    assert liveness.alive(tmp_path, "remote", "ray-node-7", 1) is True  # fresh heartbeat
    old = time.time() - liveness.STALE_S - 5
    os.utime(tmp_path / "remote.lease", (old, old))
    assert liveness.alive(tmp_path, "remote", "ray-node-7", 1) is False  # heartbeat stopped
    assert liveness.alive(tmp_path, "unknown", "ray-node-7", 1) is None  # no lease, another host: cannot tell


def test_lease_heartbeat_and_release(tmp_path, monkeypatch):
    monkeypatch.setattr(liveness, "HEARTBEAT_S", 0.05)
    with liveness.Lease(tmp_path, "r") as lease:
        first = lease.path.stat().st_mtime_ns
        time.sleep(0.3)
        assert lease.path.stat().st_mtime_ns > first
        assert liveness.alive(tmp_path, "r", socket.gethostname(), os.getpid()) is True
    assert not lease.path.exists()


def _run(db: Path, seed: int, suite: str = "tokenizer") -> subprocess.Popen:
    args = [HARNESS, "run", "--suite", suite, "--adapter", "none", "--model", "minilm", "--profile", "smoke",
            "--seed", str(seed), "--device", "cpu", "--db", str(db)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for(predicate, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_kill_9_of_a_run_is_marked_failed_by_the_next_writer(tmp_path):
    db = tmp_path / "r.duckdb"
    records = tmp_path / "r.records"
    proc = _run(db, seed=11, suite="xnli")
    _wait_for(lambda: list(records.glob("*.lease")))  # the run is executing
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    (run_id,) = [p.stem for p in records.glob("*.json")]
    assert Journal(records).read(run_id).status == "running"
    assert (records / f"{run_id}.lease").exists()  # a SIGKILL leaves the lease behind: its pid is dead
    assert Store(db).ingest() is not None
    runs = Store(db).query("SELECT run_id, status, error FROM runs")
    assert runs.to_dict("records") == [{"run_id": run_id, "status": "failed", "error": "process died before the run finished"}]


def test_two_runs_and_a_reader_on_one_database_lose_no_row(tmp_path):
    """Two `harness run` processes write one database while a reader (the leaderboard's read path)
    keeps opening it; every run ends up in the database once the next writer has ingested."""
    db = tmp_path / "r.duckdb"
    Store(db).ingest()  # create the file so the reader can open it from the start
    reader = subprocess.Popen(
        [sys.executable, "-c", (
            "import time; from harness.results.store import Store; from harness.errors import StoreBusyError\n"
            f"s = Store({str(db)!r}, retries=1)\n"
            "while True:\n"
            "    try: s.query('SELECT count(*) AS n FROM runs')\n"
            "    except StoreBusyError: pass\n"
            "    time.sleep(0.02)\n"
        )],
        stdout=subprocess.DEVNULL,
    )
    try:
        runs = [_run(db, seed) for seed in (5, 6)]
        outs = [p.communicate(timeout=600) for p in runs]
    finally:
        reader.kill()
        reader.wait()
    assert [p.returncode for p in runs] == [0, 0], [err for _, err in outs]
    Store(db).ingest()  # the next writer takes what a busy database could not
    frame = Store(db).query("SELECT seed, status FROM runs ORDER BY seed")
    assert frame.to_dict("records") == [{"seed": 5, "status": "finished"}, {"seed": 6, "status": "finished"}]
    assert Journal(db.with_name("r.records")).pending() == []
    assert len(Store(db).query("SELECT * FROM scores")) > 0
