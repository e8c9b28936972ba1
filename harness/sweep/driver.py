"""The sweep's driver: skip finished points, run baselines before their methods, ingest as the single writer.

    ingest leftovers (dead runs -> failed) -> finished points by config hash (resume)
    -> ready: baselines, and methods whose baseline is finished -> submit up to the backend's slots
    -> on each outcome: release the methods of a finished baseline, ingest the journal, report progress
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from harness.results.records import RunRecord
from harness.results.store import Store
from harness.sweep.backends import Backend
from harness.sweep.points import Point

INGEST_EVERY_S = 10.0


@dataclass
class Progress:
    """Points done / running / failed / pending of one sweep, and an ETA from this sweep's wall times."""

    total: int
    slots: int = 1
    reused: int = 0
    finished: int = 0
    failed: list[str] = field(default_factory=list)
    running: dict[str, float] = field(default_factory=dict)   # config hash -> start (monotonic)
    walls: list[float] = field(default_factory=list)

    @property
    def pending(self) -> int:
        return self.total - self.reused - self.finished - len(self.failed) - len(self.running)

    def eta_s(self) -> float | None:
        """Mean wall of the points run so far x remaining work (a running point counts half) / slots."""
        if not self.walls:
            return None
        return statistics.mean(self.walls) * (self.pending + 0.5 * len(self.running)) / max(self.slots, 1)

    def line(self) -> str:
        eta = self.eta_s()
        when = "ETA unknown until a point finishes" if eta is None and (self.pending or self.running) else f"ETA {_duration(eta or 0)}"
        reused = f" ({self.reused} already stored)" if self.reused else ""
        return (
            f"sweep: {self.reused + self.finished}/{self.total} done{reused}, {len(self.running)} running, "
            f"{len(self.failed)} failed, {self.pending} pending; {when}"
        )


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def _finished(store: Store, points: list[Point]) -> dict[str, RunRecord]:
    found = {}
    for point in points:
        rec = store.find_finished(point.spec)
        if rec is not None:
            found[point.config_hash] = dataclasses.replace(rec, items=[])
    return found


def _with_items(store: Store, baseline: RunRecord | None) -> RunRecord | None:
    """The baseline as a worker needs it: with its per-item outputs, for the paired comparison."""
    return baseline and dataclasses.replace(baseline, items=store.items(baseline.run_id))


def run_sweep(points: list[Point], store: Store, backend: Backend, echo: Callable[[str], None]) -> Progress:
    """Run every point not finished yet; returns the final progress (failed points listed)."""
    store.ingest()  # what a killed sweep left: records ingested, its running runs marked failed
    done = _finished(store, points)
    progress = Progress(len(points), backend.slots, reused=len(done))
    todo = [p for p in points if p.config_hash not in done]
    ready = [p for p in todo if p.baseline_hash is None or p.baseline_hash in done]
    blocked = [p for p in todo if p not in ready]
    echo(f"sweep: {len(points)} points ({sum(p.baseline_hash is None for p in points)} baselines), {len(done)} already stored, "
         f"{len(todo)} to run on {backend.name} ({backend.slots} at a time)")
    running: dict = {}
    last_ingest = time.monotonic()
    try:
        while ready or running:
            while ready and len(running) < backend.slots:
                point = ready.pop(0)
                running[backend.submit(point, _with_items(store, done.get(point.baseline_hash or "")))] = point
                progress.running[point.config_hash] = time.monotonic()
                echo(f"started  {point.label}")
            for handle, outcome in backend.wait(list(running), timeout=INGEST_EVERY_S):
                point = running.pop(handle)
                wall = time.monotonic() - progress.running.pop(point.config_hash)
                if isinstance(outcome, RunRecord) and outcome.status == "finished":
                    _store_returned(store, outcome)
                    done[point.config_hash] = dataclasses.replace(outcome, items=[])
                    progress.finished += 1
                    progress.walls.append(wall)
                    echo(f"finished {point.label} in {wall:.0f} s (run {outcome.run_id})")
                    ready += [p for p in blocked if p.baseline_hash == point.config_hash]
                else:
                    _fail(point, outcome, progress, echo)
                    for child in [p for p in blocked if p.baseline_hash == point.config_hash]:
                        _fail(child, f"its baseline failed ({point.label})", progress, echo)
                blocked = [p for p in blocked if p.baseline_hash != point.config_hash]
                echo(progress.line())
            if time.monotonic() - last_ingest >= INGEST_EVERY_S or not running:
                store.ingest()
                last_ingest = time.monotonic()
    finally:
        backend.close()
        store.ingest()
    return progress


def _store_returned(store: Store, rec: RunRecord) -> None:
    """A worker on another machine wrote its record to its own disk: keep the returned copy here."""
    if not store.journal.path(rec.run_id).exists():
        store.journal.write(rec)


def _fail(point: Point, outcome, progress: Progress, echo: Callable[[str], None]) -> None:
    progress.failed.append(point.label)
    why = outcome.error if isinstance(outcome, RunRecord) else str(outcome).splitlines()[0] if str(outcome) else outcome.__class__.__name__
    echo(f"failed   {point.label}: {why}")
