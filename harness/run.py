"""The runner: baseline first, then the method, each reused when an identical finished run exists.

    plan (validate everything, cheap; harness.plan) -> prepare data once -> for baseline, method:
        reuse a finished identical run, or: record "running" -> pipeline (harness.pipeline) -> save
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import socket
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness.adapter import Adapter, ProgressFn, no_progress
from harness.measure.metrics import pct_base
from harness.pipeline import Pipeline
from harness.plan import Plan, RunRequest, plan
from harness.provenance import git_sha, hardware, versions
from harness.registry import ADAPTERS
from harness.results.records import Provenance, RunRecord, RunSpec, Score
from harness.results.store import Store
from harness.suite import SuiteData

__all__ = ["RunOutcome", "RunRequest", "execute"]


@dataclass(frozen=True)
class RunOutcome:
    record: RunRecord
    reused: bool
    stored: bool  # False when the DB was busy and only the JSON record was written


def execute(request: RunRequest, store: Store, progress: ProgressFn = no_progress) -> list[RunOutcome]:
    """Run (or reuse) the baseline, then the requested method; returns both outcomes."""
    p = plan(request)
    data = _LazyData(p)
    outcomes = [_ensure(p, p.spec.baseline(), ADAPTERS.get("none")(), None, data, store, progress)]
    if p.spec.adapter != "none":
        outcomes.append(_ensure(p, p.spec, p.adapter, outcomes[0].record, data, store, progress))
    return outcomes


class _LazyData:
    """Load the suite's data at most once, and only if some run is not reused."""

    def __init__(self, p: Plan):
        self.p, self.value = p, None

    def get(self) -> SuiteData:
        if self.value is None:
            self.value = self.p.suite.prepare(self.p.data_dir, self.p.suite_config)
        return self.value


def _ensure(p: Plan, spec: RunSpec, adapter: Adapter, baseline: RunRecord | None, data: _LazyData, store: Store, progress: ProgressFn) -> RunOutcome:
    forced = p.force and spec == p.spec
    if not forced:
        done = store.find_finished(spec)
        if done is not None:
            return RunOutcome(done, reused=True, stored=True)
    return _run_one(p, spec, adapter, baseline, data.get(), store, progress)


def _new_record(p: Plan, spec: RunSpec, data: SuiteData, baseline: RunRecord | None) -> RunRecord:
    origin = ADAPTERS.origin(spec.adapter)
    prov = Provenance(
        git_sha=git_sha(), adapter_package=origin.package, adapter_version=origin.version,
        host=socket.gethostname(), pid=os.getpid(), hardware=hardware(p.device), versions=versions(),
        data_files={**data.files, **spec.fit_data},
    )
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{spec.adapter}-{secrets.token_hex(3)}"
    return RunRecord(
        run_id=run_id, spec=spec, status="running", started_at=_now(), device=p.device, provenance=prov,
        baseline_run_id=baseline.run_id if baseline else None,
    )


def _run_one(p: Plan, spec: RunSpec, adapter: Adapter, baseline: RunRecord | None, data: SuiteData, store: Store, progress: ProgressFn) -> RunOutcome:
    rec = _new_record(p, spec, data, baseline)
    store.start(rec)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="harness-") as workdir:
            produced = Pipeline(p, spec, adapter, Path(workdir), _labelled(progress, spec.adapter)).run(data)
    except BaseException as err:
        failed = dataclasses.replace(rec, status="failed", error=f"{err.__class__.__name__}: {err}"[:2000], finished_at=_now(), wall_s=time.perf_counter() - start)
        store.save(failed)
        raise
    rec = dataclasses.replace(
        rec, status="finished", finished_at=_now(), wall_s=time.perf_counter() - start, compression=produced.compression,
        fit=produced.fit, scores=_with_pct_base(produced.scores, baseline), efficiency=produced.efficiency,
        items=produced.items, details=produced.details,
    )
    return RunOutcome(rec, reused=False, stored=store.save(rec))


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
