"""``harness sweep``: grid expansion, validation before any run, resume after kill -9, Ray backend.

The runs are real xnli smoke runs on MiniLM. The sweep starts from a copy of the session's smoke
database (baseline + asg k=256), so those two points are resumed, not run again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results.records import RunRecord
from harness.sweep.backends import LocalProcesses, WorkerDied
from harness.sweep.grid import from_options, from_yaml
from harness.sweep.points import execute_point, plan_points
from tests.conftest import read_sql

HARNESS = os.path.join(os.path.dirname(sys.executable), "harness")
SWEEP = ["--adapter", "asg", "--suite", "xnli", "--model", "minilm", "--profile", "smoke", "--device", "cpu"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_yaml_and_options_expand_to_the_same_points(tmp_path):
    """The acceptance grid: 2 seeds x (3 asg + 2 sg) methods and one baseline per seed = 12 points."""
    yaml = _write(tmp_path / "s.yaml", (
        "suites: [xnli]\nmodels: [minilm]\nprofile: smoke\nseeds: [0, 1]\n"
        "adapters:\n  - adapter: asg\n    grid: {k: [64, 256, 1024]}\n  - adapter: sg\n    grid: {fraction: [0.1, 0.4]}\n"
    ))
    points = plan_points(from_yaml(yaml))
    assert len(points) == 12
    baselines = [p for p in points if p.baseline_hash is None]
    assert len(baselines) == 2 and points[:2] == baselines  # baselines first, one per seed
    assert len({p.config_hash for p in points}) == 12
    assert {p.baseline_hash for p in points[2:]} == {b.config_hash for b in baselines}
    asg = plan_points(from_options("asg", ["k=64,256,1024"], "xnli", "minilm", "0,1", "smoke", [], None, "auto"))
    assert {p.config_hash for p in asg} == {p.config_hash for p in points if p.spec.adapter in ("none", "asg")}


def test_a_bad_point_stops_the_sweep_before_any_run(tmp_path):
    db = tmp_path / "r.duckdb"
    result = CliRunner().invoke(app, ["sweep", *SWEEP, "--grid", "k=64,40000", "--grid", "m=48,7", "--db", str(db)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3  # k=40000 with m=48, and both k with m=7
    assert all(line.startswith("error: sweep point asg ") for line in lines)
    assert any("k=40000 m=48" in line and "exceeds the vocabulary size 30522" in line for line in lines)
    assert not db.exists() and not db.with_name("r.records").exists()


def _finished_hashes(db: Path) -> dict[str, int]:
    frame = read_sql(db, "SELECT config_hash, count(*) AS n FROM runs WHERE status = 'finished' GROUP BY config_hash")
    return dict(zip(frame.config_hash, frame.n))


def _journal_status(db: Path) -> dict[str, str]:
    records = db.with_name(db.stem + ".records")
    return {json.loads(p.read_text())["run_id"]: json.loads(p.read_text())["status"] for p in records.glob("*.json")}


@pytest.fixture(scope="module")
def resumed_sweep(smoke_db, tmp_path_factory):
    """asg k=64,256,1024 from the smoke database: killed with SIGKILL while its last point runs, then rerun."""
    db = tmp_path_factory.mktemp("sweep") / "results.duckdb"
    shutil.copy(smoke_db, db)
    args = [HARNESS, "sweep", *SWEEP, "--grid", "k=64,256,1024", "--db", str(db)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    first = []
    for line in proc.stdout:  # the driver prints "started <label>" as it submits each point
        first.append(line)
        if line.startswith("started  asg k=1024"):
            break
    lease_dir = db.with_name(db.stem + ".records")
    deadline = time.monotonic() + 120
    while not list(lease_dir.glob("*.lease")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    statuses = _journal_status(db)
    status = CliRunner().invoke(app, ["sweep", *SWEEP, "--grid", "k=64,256,1024", "--db", str(db), "--status"])
    rerun = CliRunner().invoke(app, args[1:])  # in this process: only the killed sweep needs one of its own
    return db, "".join(first), statuses, status, rerun


def test_kill_9_loses_no_finished_point_and_the_rerun_runs_only_the_rest(resumed_sweep):
    db, first, killed_statuses, killed_status, rerun = resumed_sweep
    assert "4 points (1 baselines), 2 already stored, 2 to run" in first
    assert "asg: fit adapter: 1/1 (" in first  # a point run in the sweep's process reports its stages as `harness run` does
    assert sorted(killed_statuses.values()) == ["finished", "running"]  # k=64 done, k=1024 cut off
    assert killed_status.exit_code == 0, killed_status.output  # read from the database and the journal
    lines = killed_status.stdout.splitlines()
    assert lines[0].startswith("sweep: 3/4 done, 0 running, 1 failed, 0 pending; ETA ")  # the dead run is not "running"
    assert [line.split()[0] for line in lines[1:]] == ["finished", "finished", "finished", "failed"]
    assert rerun.exit_code == 0, rerun.output
    assert "4 points (1 baselines), 3 already stored, 1 to run" in rerun.stderr
    assert rerun.stderr.count("started  ") == 1 and "started  asg k=1024" in rerun.stderr
    assert sorted(_finished_hashes(db).values()) == [1, 1, 1, 1]  # every point once, none twice
    runs = read_sql(db, "SELECT status, error FROM runs WHERE status != 'finished'")
    assert list(runs.status) == ["failed"] and runs.error[0] == "process died before the run finished"
    status = CliRunner().invoke(app, ["sweep", *SWEEP, "--grid", "k=64,256,1024", "--db", str(db), "--status"])
    assert status.exit_code == 0, status.output
    assert status.stdout.splitlines()[0] == "sweep: 4/4 done, 0 running, 0 failed, 0 pending; ETA 0m00s"


def test_ray_backend_gives_the_scores_of_the_local_sweep(resumed_sweep, smoke_db, tmp_path):
    """asg k=64 as a Ray task on a local Ray instance, from a copy of the smoke database: the stored
    baseline, with its per-item outputs, travels to the task as its argument (as a baseline a sweep has
    just made does); the scores are those the local sweep gave."""
    pytest.importorskip("ray")
    local_db, *_ = resumed_sweep
    db = tmp_path / "ray.duckdb"
    shutil.copy(smoke_db, db)
    args = [HARNESS, "sweep", *SWEEP, "--grid", "k=64", "--backend", "ray", "--db", str(db)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "2 points (1 baselines), 1 already stored, 1 to run on ray" in proc.stderr
    assert sorted(_finished_hashes(db).values()) == [1, 1, 1]  # the smoke baseline and asg k=256, and k=64
    assert not list(db.with_name("ray.records").glob("*.lease"))
    sql = ("SELECT r.config_hash, s.task, s.language, s.metric, s.value FROM scores s JOIN runs r USING (run_id) "
           "WHERE r.status = 'finished' ORDER BY ALL")
    ray_scores = read_sql(db, sql)
    local_scores = read_sql(local_db, sql)
    local_scores = local_scores[local_scores.config_hash.isin(set(ray_scores.config_hash))].reset_index(drop=True)
    assert len(ray_scores) == len(local_scores) > 0
    assert ray_scores.equals(local_scores)


def test_jobs_run_points_in_worker_processes_and_the_driver_ingests(tmp_path):
    """--jobs 2: two tokenizer-suite points in spawned workers (journal only); the driver (this process) writes the DB."""
    db = tmp_path / "r.duckdb"
    args = ["sweep", "--adapter", "none", "--suite", "tokenizer", "--model", "minilm", "--profile", "smoke",
            "--seeds", "0,1", "--jobs", "2", "--device", "cpu", "--db", str(db)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "2 points (2 baselines), 0 already stored, 2 to run on local (2 at a time)" in result.stderr
    runs = read_sql(db, "SELECT seed, status, pid FROM runs ORDER BY seed")
    assert list(runs.status) == ["finished", "finished"] and list(runs.seed) == [0, 1]
    assert os.getpid() not in set(runs.pid)  # executed in the workers, not in the driver


def test_a_worker_that_dies_fails_its_own_point_and_says_how(tmp_path):
    """A local worker killed with SIGKILL (as the out-of-memory killer does) fails its point only, naming
    the signal; the other worker's point finishes, and the dead worker leaves the pool."""
    points = plan_points(from_options("none", [], "tokenizer", "minilm", "0,1", "smoke", [], None, "cpu"))
    backend = LocalProcesses(2, tmp_path / "records")
    try:
        doomed, kept = (backend.submit(p, None) for p in points)
        os.kill(doomed.process.pid, signal.SIGKILL)
        outcomes: dict = {}
        while len(outcomes) < 2:
            outcomes.update(backend.wait([h for h in (doomed, kept) if h not in outcomes], timeout=60))
        assert backend.workers == [kept] and backend.idle == [kept]
    finally:
        backend.close()
    assert isinstance(outcomes[doomed], WorkerDied) and "was killed by SIGKILL" in str(outcomes[doomed]), outcomes[doomed]
    assert isinstance(outcomes[kept], RunRecord) and outcomes[kept].status == "finished"
    assert outcomes[kept].spec.seed == 1 and outcomes[kept].provenance.pid == kept.process.pid


def test_a_point_waits_for_the_process_making_its_run_and_takes_that_run(tmp_path):
    """A sweep's point takes the run's lock as `harness run` does: while a worker makes the run, the
    same point here waits for it (and says for which process), then takes the worker's run, unrun."""
    (point,) = plan_points(from_options("none", [], "tokenizer", "minilm", "0", "smoke", [], None, "cpu"))
    records = tmp_path / "records"
    backend = LocalProcesses(1, records)
    try:
        maker = backend.submit(point, None)
        deadline = time.monotonic() + 120
        while not (records / f"{point.config_hash}.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        said: list[str] = []
        taken = execute_point(point, None, records, progress=lambda label, done, total: said.append(label))
        ((_, made),) = backend.wait([maker], timeout=120)
    finally:
        backend.close()
    assert made.status == "finished" and taken.run_id == made.run_id
    assert said and said[0].startswith(f"waiting for process {maker.process.pid}, which is making the run of none on tokenizer")

