"""The runner: baseline first, then the method, each reused when an identical finished run exists.

    plan (validate everything, cheap; harness.runner.plan) -> with --recover, time a recovery step
    (harness.runner.estimate: refused above its cap) -> prepare data once -> for baseline, method:
        take the run's lock (harness.results.liveness.RunLock: a process that needs the same run, such
        as a shared new baseline, waits for it) -> reuse a finished identical run, or: record "running"
        -> pipeline (harness.runner.pipeline: the run's stages) -> %Base and the paired comparison with the baseline
        (harness.measure.compare) -> save

A reused baseline's per-item outputs come from the store, so a method run compares item by item
with a baseline run earlier; the baseline is compared with itself (its "above chance" flag).

A run is recorded through a :class:`Sink`: the :class:`~harness.results.store.Store` (journal record,
then the database), or for a sweep's workers a :class:`JournalSink` (journal record only; the sweep's
single writer ingests it). While it executes, the process holds the run's lease
(:mod:`harness.results.liveness`), so a writer can tell a crashed run from a running one.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import socket
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from contextlib import contextmanager
from typing import Callable, Iterator, Protocol

import numpy as np

from harness.adapter import Adapter, ProgressFn, no_progress
from harness.measure.metrics import pct_base
from harness.runner import estimate
from harness.runner.plan import Plan, RunRequest, plan
from harness.runner.provenance import Source, hardware, source, versions
from harness.registry import ADAPTERS
from harness.errors import StoreError
from harness.results.journal import Journal
from harness.results.liveness import Lease, RunLock
from harness.results.records import Comparison, ItemOutputs, Provenance, RunOutcome, RunRecord, RunSpec, Score
from harness.results.store import Store
from harness.suite import SuiteData

__all__ = ["JournalSink", "RunOutcome", "RunRequest", "Sink", "execute", "run_lock", "run_one"]


class Sink(Protocol):
    """Where a run's states go: ``start`` with the running record, ``save`` with the final one
    (True when it reached the database)."""

    records_dir: Path

    def start(self, rec: RunRecord) -> None: ...

    def save(self, rec: RunRecord) -> bool: ...

    def items(self, run_id: str) -> list[ItemOutputs]: ...

    def find_finished(self, spec: RunSpec) -> RunRecord | None: ...


class JournalSink:
    """A sweep worker's sink: records go to the journal only and never open the database."""

    def __init__(self, records_dir: str | Path):
        self.records_dir = Path(records_dir)
        self.journal = Journal(self.records_dir)

    def start(self, rec: RunRecord) -> None:
        self.journal.write(rec)

    def save(self, rec: RunRecord) -> bool:
        self.journal.write(rec)
        return False

    def items(self, run_id: str) -> list[ItemOutputs]:
        """None from here: the sweep's driver hands workers their baseline with its items."""
        return []

    def find_finished(self, spec: RunSpec) -> RunRecord | None:
        """A finished run of ``spec`` in the journal, not yet ingested (one made while this process
        waited for its lock); the database's runs are the driver's to find."""
        found = [e.record for e in self.journal.pending() if e.record.status == "finished" and e.record.spec.config_hash == spec.config_hash]
        return max(found, key=lambda r: r.finished_at or "", default=None)


def execute(
    request: RunRequest, store: Store, progress: ProgressFn = no_progress, say: Callable[[str], None] = lambda line: None, lift_cap: bool = False,
) -> list[RunOutcome]:
    """Run (or reuse) the baseline, then the requested method; returns both outcomes. ``say`` gets the
    recovery estimate of a method run that will recover (:mod:`harness.runner.estimate`), which
    refuses one above its cap unless ``lift_cap``."""
    p = plan(request)
    store.check_writable()  # a damaged store or one of another schema is refused before any work
    if "recover" in p.stages and (p.force or store.find_finished(p.spec) is None):
        progress("time a recovery step", 0, 1)
        say(estimate.recovery(p, lift_cap).line())
        progress("time a recovery step", 1, 1)
    data = _LazyData(p)
    baseline = p.spec.baseline()
    outcomes = [_ensure(p, baseline, ADAPTERS.get("none")(), None, data, store, progress)]
    if p.spec.adapter != "none":
        outcomes.append(_ensure(p, p.spec, p.adapter, outcomes[0].record, data, store, progress))
    return outcomes


class _LazyData:
    """Load the suite's data at most once, and only if some run is not reused."""

    def __init__(self, p: Plan):
        self.p, self.value = p, None

    def get(self) -> SuiteData:
        if self.value is None:
            self.value = self.p.suite.prepare(self.p.data_dir, self.p.suite_config, self.p.suite_budget)
        return self.value


def _ensure(p: Plan, spec: RunSpec, adapter: Adapter, baseline: RunRecord | None, data: _LazyData, store: Store, progress: ProgressFn) -> RunOutcome:
    """Reuse the finished run of ``spec`` or make it, under its :class:`RunLock`: a concurrent process
    that needs the same run (a shared new baseline) waits for this one and then reuses it."""
    forced = p.force and spec == p.spec
    with run_lock(store.records_dir, spec, progress):
        if not forced:
            done = store.find_finished(spec)
            if done is not None:
                return RunOutcome(done, reused=True, stored=True)
        return run_one(p, spec, adapter, baseline, data.get(), store, progress)


@contextmanager
def run_lock(records_dir: Path, spec: RunSpec, progress: ProgressFn) -> Iterator[None]:
    """Hold the :class:`RunLock` of ``spec``; while another process holds it (making the same run),
    wait, and say so through ``progress``."""
    what = f"{spec.adapter} on {spec.suite} ({spec.model}, {spec.profile}, seed {spec.seed})"
    waited = ""

    def waiting(holder: dict) -> None:
        nonlocal waited
        waited = f"waiting for process {holder.get('pid', '?')}, which is making the run of {what}"
        progress(waited, 0, 1)

    with RunLock(records_dir, spec.config_hash).acquire({"run": what}, waiting):
        if waited:
            progress(waited, 1, 1)
        yield


def _new_record(p: Plan, spec: RunSpec, data: SuiteData, baseline: RunRecord | None, code: Source) -> RunRecord:
    origin = ADAPTERS.origin(spec.adapter)
    prov = Provenance(
        git_sha=code.git_sha, adapter_package=origin.package, adapter_version=origin.version,
        host=socket.gethostname(), pid=os.getpid(), hardware=hardware(p.device), versions=versions(),
        data_files={**data.files, **spec.fit_data},
    )
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{spec.adapter}-{secrets.token_hex(3)}"
    return RunRecord(
        run_id=run_id, spec=spec, status="running", started_at=_now(), device=p.device, provenance=prov,
        baseline_run_id=baseline.run_id if baseline else None,
    )


def run_one(p: Plan, spec: RunSpec, adapter: Adapter, baseline: RunRecord | None, data: SuiteData, sink: Sink, progress: ProgressFn = no_progress) -> RunOutcome:
    """Execute ``spec`` (no reuse): running record, pipeline, then the finished or failed record.
    Any exception (Ctrl-C included) records the run as failed with its error before it propagates."""
    from harness.runner.pipeline import Pipeline  # the training stack (transformers' trainer, peft): a reused run never needs it

    code = source()
    rec = _new_record(p, spec, data, baseline, code)
    sink.start(rec)
    code.save_patch(Journal(sink.records_dir), rec.run_id)
    start = time.perf_counter()
    with Lease(sink.records_dir, rec.run_id):
        try:
            with tempfile.TemporaryDirectory(prefix="harness-") as workdir:
                produced = Pipeline(p, spec, adapter, Path(workdir), _labelled(progress, spec.adapter)).run(data)
        except BaseException as err:
            error = "interrupted (SIGINT)" if isinstance(err, KeyboardInterrupt) else f"{err.__class__.__name__}: {err}"
            sink.save(dataclasses.replace(rec, status="failed", error=error[:2000], finished_at=_now(), wall_s=time.perf_counter() - start))
            raise
        rec = dataclasses.replace(
            rec, status="finished", finished_at=_now(), wall_s=time.perf_counter() - start, compression=produced.compression,
            fit=produced.fit, scores=_with_pct_base(produced.scores, baseline), efficiency=produced.efficiency,
            items=produced.items, details=produced.details,
        )
        rec.comparisons = _compared(rec, baseline or rec, sink)
        return RunOutcome(rec, reused=False, stored=sink.save(rec))


def _compared(rec: RunRecord, baseline: RunRecord, sink: Sink) -> list[Comparison]:
    """Every score against the baseline's on the same items (a reused baseline's items from the sink;
    when they cannot be read now, the comparison keeps what needs no items)."""
    base_items = baseline.items
    if not base_items:
        try:
            base_items = sink.items(baseline.run_id)
        except StoreError:
            base_items = []
    from harness.measure.compare import compare  # scipy

    rng = np.random.default_rng(rec.spec.seed)
    return compare(rec.scores, rec.items, baseline.scores, base_items, baseline.run_id, rng)


def _labelled(progress: ProgressFn, prefix: str) -> ProgressFn:
    return lambda label, done, total: progress(f"{prefix}: {label}", done, total)


def _with_pct_base(scores: list[Score], baseline: RunRecord | None) -> list[Score]:
    """Attach %Base from the baseline run's matching score (the baseline itself gets 100)."""
    ref = {(s.task, s.language, s.split, s.metric): s.value for s in baseline.scores} if baseline else {}
    out = []
    for s in scores:
        base = s.value if baseline is None else ref.get((s.task, s.language, s.split, s.metric))
        out.append(dataclasses.replace(s, pct_base=None if base is None else pct_base(s.value, base, s.higher_is_better)))
    return out


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
