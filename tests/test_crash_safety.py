"""Crash safety with real processes and signals: leases tell a dead run from a live one (a reused pid
included), a run killed with SIGKILL is marked failed by the next writer, two runs writing one
database while a reader holds it open lose no row, and two runs that need one new baseline make it
once (the second waits for the first, and takes over when the first is killed)."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd

from harness.results import liveness, queries
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
    runs = queries.runs(Store(db))[["run_id", "status", "error"]]
    assert runs.to_dict("records") == [{"run_id": run_id, "status": "failed", "error": "process died before the run finished"}]


def test_two_runs_and_a_reader_on_one_database_lose_no_row(tmp_path):
    """Two `harness run` processes write one database while a reader (the leaderboard's read path)
    keeps opening it; every run ends up in the database once the next writer has ingested."""
    db = tmp_path / "r.duckdb"
    Store(db).ingest()  # create the file so the reader can open it from the start
    reader = subprocess.Popen(
        [sys.executable, "-c", (
            "import time; from harness.results import queries; from harness.results.store import Store\n"
            "from harness.errors import StoreBusyError\n"
            f"s = Store({str(db)!r}, retries=1)\n"
            "while True:\n"
            "    try: queries.runs(s)\n"
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
    store = Store(db)
    runs = queries.runs(store)
    assert sorted(zip(runs.seed, runs.status)) == [(5, "finished"), (6, "finished")]
    assert Journal(db.with_name("r.records")).pending() == []
    assert all(store.load(r).scores for r in runs.run_id)


def test_run_lock_waits_for_its_holder_and_is_taken_when_the_holder_dies(tmp_path):
    """liveness.RunLock: a second process waits, told who holds the lock; a SIGKILL of the holder frees it."""
    code = ("import sys, time; from harness.results.liveness import RunLock\n"
            "RunLock(sys.argv[1], 'h').acquire({'run': 'the baseline'}, print); print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    seen = []

    def waiting(who: dict) -> None:
        seen.append(who)
        if len(seen) == 3:
            holder.kill()

    with liveness.RunLock(tmp_path, "h", poll_s=0.05).acquire({"run": "the method"}, waiting) as lock:
        assert seen[0] == {"run": "the baseline", "pid": holder.pid, "host": socket.gethostname()}
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
    holder.wait()
    assert not (tmp_path / "h.lock").exists()  # released: removed


def _method(db: Path, adapter: str, suite: str = "xnli") -> subprocess.Popen:
    """A smoke `harness run` of ``adapter`` on ``suite`` with MiniLM (seed 0: a new baseline in a new database)."""
    args = [HARNESS, "run", "--suite", suite, "--adapter", adapter, "--model", "minilm", "--profile", "smoke",
            "--device", "cpu", "--db", str(db)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _runs(db: Path) -> pd.DataFrame:
    """run_id, adapter, status, error, baseline_run_id of every run, oldest first, as the next writer sees them."""
    store = Store(db)
    store.ingest()  # the next writer's view: dead runs marked failed
    records = [store.load(r) for r in reversed(queries.runs(store).run_id)]
    return pd.DataFrame([(r.run_id, r.spec.adapter, r.status, r.error, r.baseline_run_id) for r in records],
                        columns=["run_id", "adapter", "status", "error", "baseline_run_id"])


def test_two_methods_that_need_one_new_baseline_make_it_once(tmp_path):
    """Two `harness run` of different methods started at once, both needing the same new baseline: one
    baseline run, and both methods paired with it (on the tokenizer suite, the cheapest: the lock does
    not depend on the suite)."""
    db = tmp_path / "r.duckdb"
    procs = [_method(db, adapter, "tokenizer") for adapter in ("quant", "lowrank")]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    assert sum("waiting for process" in err for _, err in outs) == 1  # one made the baseline, the other waited for it
    runs = _runs(db)
    (baseline,) = runs[runs.adapter == "none"].itertuples()
    methods = runs[runs.adapter != "none"]
    assert baseline.status == "finished" and sorted(methods.adapter) == ["lowrank", "quant"]
    assert list(methods.status) == ["finished", "finished"] and set(methods.baseline_run_id) == {baseline.run_id}


def _lines(proc: subprocess.Popen, into: queue.Queue) -> None:
    for line in proc.stderr:
        into.put((proc.pid, line))


def test_a_run_waiting_for_a_baseline_takes_over_when_its_maker_is_killed(tmp_path):
    """Two runs need one new baseline; the one that makes it is killed (SIGKILL) while the other waits:
    the waiting run makes the baseline itself and pairs with it, the killed one's reads as failed."""
    db = tmp_path / "r.duckdb"
    procs = {p.pid: p for p in (_method(db, "quant"), _method(db, "lowrank"))}
    lines: queue.Queue = queue.Queue()
    for p in procs.values():
        threading.Thread(target=_lines, args=(p, lines), daemon=True).start()
    deadline = time.monotonic() + 300
    while True:  # until one of them says it waits for the other
        pid, line = lines.get(timeout=max(1.0, deadline - time.monotonic()))
        if line.startswith("waiting for process"):
            break
    waiter, maker = procs[pid], procs[int(line.split()[3].rstrip(","))]
    assert maker is not waiter and "making the run of none on xnli (minilm, smoke, seed 0)" in line
    _wait_for(lambda: list(db.with_name("r.records").glob("*.lease")))  # the maker's baseline is recorded running
    os.killpg(maker.pid, signal.SIGKILL)
    maker.wait(timeout=30)
    assert waiter.wait(timeout=600) == 0, waiter.stdout.read()
    runs = _runs(db)
    baselines = runs[runs.adapter == "none"]
    assert list(baselines.status) == ["failed", "finished"]  # the killed maker's, then the waiter's own
    assert baselines.error.iloc[0] == "process died before the run finished"
    (method,) = runs[runs.adapter != "none"].itertuples()
    assert method.status == "finished" and method.baseline_run_id == baselines.run_id.iloc[1]
    assert not list(db.with_name("r.records").glob("*.lock"))  # the waiter released its locks
