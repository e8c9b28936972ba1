"""``harness sweep --status``: each point's state from the database and the journal, read-only.

A point is finished when a finished run has its config hash; running when a running run does and
its process is alive (:mod:`harness.results.liveness`); failed when its latest run failed or its
process died; else pending. The ETA is the mean wall time of the finished points x the remaining
points / the points running now.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from harness.results import liveness, queries
from harness.results.store import Store
from harness.sweep.driver import Progress
from harness.sweep.points import Point

_RANK = {"finished": 3, "running": 2, "failed": 1}


@dataclass(frozen=True)
class PointState:
    point: Point
    state: str                # finished | running | failed | pending
    run_id: str = ""
    started_at: str = ""
    wall_s: float | None = None
    error: str = ""


def _runs(store: Store, hashes: list[str]) -> list[tuple]:
    """(config_hash, status, run_id, host, pid, started_at, wall_s, error) from the database and pending records."""
    rows = []
    if store.path.exists():
        rows = queries.runs_of_configs(store, hashes)
    for e in store.journal.pending():  # newer than the database where both hold a run
        r = e.record
        rows = [row for row in rows if row[2] != r.run_id]
        rows.append((r.spec.config_hash, r.status, r.run_id, r.provenance.host, r.provenance.pid, r.started_at, r.wall_s, r.error))
    return rows


def _state(row: tuple, store: Store) -> str:
    status = row[1]
    if status == "running" and liveness.alive(store.records_dir, row[2], row[3], row[4]) is False:
        return "failed"
    return status


def states(points: list[Point], store: Store) -> list[PointState]:
    best: dict[str, PointState] = {}
    for row in _runs(store, [p.config_hash for p in points]):
        state = _state(row, store)
        held = best.get(row[0])
        if held is None or (_RANK[state], str(row[5])) > (_RANK[held.state], held.started_at):
            error = row[7] if isinstance(row[7], str) else ("process died before the run finished" if state != row[1] else "")
            best[row[0]] = PointState(None, state, row[2], str(row[5]), row[6] if row[6] == row[6] else None, error)
    return [PointState(p, *_fields(best.get(p.config_hash))) for p in points]


def _fields(s: PointState | None) -> tuple:
    return ("pending",) if s is None else (s.state, s.run_id, s.started_at, s.wall_s, s.error)


def summary(rows: list[PointState]) -> Progress:
    """Counts and ETA in the driver's terms; the points running now stand for the parallelism."""
    running = [r for r in rows if r.state == "running"]
    progress = Progress(len(rows), slots=max(len(running), 1))
    progress.finished = sum(r.state == "finished" for r in rows)
    progress.failed = [r.point.label for r in rows if r.state == "failed"]
    progress.running = {r.point.config_hash: 0.0 for r in running}
    progress.walls = [r.wall_s for r in rows if r.state == "finished" and r.wall_s is not None]
    return progress


def report(rows: list[PointState]) -> list[str]:
    now = datetime.now(timezone.utc)
    lines = [summary(rows).line()]
    for r in rows:
        if r.state == "finished":
            detail = f"run {r.run_id}, {r.wall_s:.0f} s" if r.wall_s is not None else f"run {r.run_id}"
        elif r.state == "running":
            detail = f"run {r.run_id}, running for {_since(r.started_at, now)}"
        elif r.state == "failed":
            detail = f"run {r.run_id}: {r.error.splitlines()[0] if r.error else 'failed'}"
        else:
            detail = ""
        lines.append(f"{r.state:<9}{r.point.label}" + (f"  [{detail}]" if detail else ""))
    return lines


def _since(started_at: str, now: datetime) -> str:
    try:
        start = datetime.fromisoformat(started_at)
    except ValueError:
        return "?"
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    seconds = max(0, int((now - start).total_seconds()))
    return f"{seconds // 60}m{seconds % 60:02d}s"
