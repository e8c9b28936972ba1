"""A sweep's points, planned: every request validated by :func:`harness.runner.plan.plan` before any runs,
each baseline once per (model, suite settings, profile, seed), and the one function a worker runs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from harness.errors import DataError, HarnessError
from harness.runner.plan import RunRequest, plan
from harness.results.records import RunRecord, RunSpec
from harness.sweep.grid import Sweep

if TYPE_CHECKING:
    from harness.adapter import ProgressFn
    from harness.results.store import Store


class InvalidPoints(HarnessError):
    """Points of a sweep that fail their plan; ``problems`` holds one line per bad point."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        more = f" (and {len(problems) - 1} more bad points)" if len(problems) > 1 else ""
        super().__init__(problems[0] + more)


@dataclass(frozen=True)
class Point:
    """One run of the sweep: a method point, or (``baseline_hash`` None) a baseline."""

    request: RunRequest
    spec: RunSpec
    baseline_hash: str | None
    label: str

    @property
    def config_hash(self) -> str:
        return self.spec.config_hash


def _label(spec: RunSpec, request: RunRequest, baseline: bool) -> str:
    """``asg k=64 on xnli (minilm, smoke, seed 0)``; a baseline names its suite settings."""
    suite = " ".join([spec.suite, *(f"{k}={v}" for k, v in spec.suite_config.items())])
    recovery = [f"recover={request.recover}"] if request.recover else []
    recovery += ["recover_lora=true"] if request.recover_lora else []
    what = f"none (baseline) on {suite}" if baseline else f"{' '.join([spec.adapter, *request.settings, *recovery])} on {spec.suite}"
    return f"{what} ({spec.model}, {spec.profile}, seed {spec.seed})"


def plan_points(sweep: Sweep) -> list[Point]:
    """Plan every point (cheap: configs, model, data checked and hashed); baselines first, duplicates once.

    Raises :class:`InvalidPoints` naming each bad point before anything runs.
    """
    problems, baselines, methods, seen = [], [], [], set()
    for request in sweep.points():
        try:
            p = plan(request)
        except HarnessError as err:
            settings = " ".join(request.settings)
            problems.append(f"sweep point {request.adapter} {settings} on {request.suite} (seed {request.seed}): {err}".replace("  ", " "))
            continue
        request = dataclasses.replace(request, data_dir=str(p.data_dir) if p.data_dir else None)  # workers need no env
        base = p.spec.baseline()
        for spec, parent, into in ((base, None, baselines), (p.spec, base.config_hash, methods)):
            if spec.config_hash not in seen:
                seen.add(spec.config_hash)
                into.append(Point(request, spec, parent, _label(spec, request, parent is None)))
    if problems:
        raise InvalidPoints(problems)
    return baselines + methods


def recovery_estimates(points: list[Point], store: Store, lift_cap: bool, say: Callable[[str], None]) -> None:
    """Say the recovery estimate (:mod:`harness.runner.estimate`, as ``harness run`` prints it) of each
    method point that will recover and is not stored yet. Points above the estimate's cap are refused
    together, before any runs, unless ``lift_cap``."""
    from harness.runner import estimate

    problems = []
    for point in points:
        if point.baseline_hash is None or "recovery" not in point.spec.recipe or store.find_finished(point.spec) is not None:
            continue
        try:
            say(f"{point.label}: {estimate.recovery(plan(point.request), lift_cap).line()}")
        except HarnessError as err:
            problems.append(f"sweep point {point.label}: {err}")
    if problems:
        raise InvalidPoints(problems)


def execute_point(
    point: Point, baseline: RunRecord | None, records_dir: str | Path, threads: int = 0, sink=None, progress: ProgressFn | None = None,
) -> RunRecord:
    """Run one point (plan again where it runs, then the pipeline) under the run's lock, or return the
    finished run another process made while this one waited; the record goes to ``sink``, by default
    the journal only (a worker never opens the database), and its stages report to ``progress`` as
    ``harness run``'s do. Returns the final record."""
    from harness.adapter import no_progress
    from harness.registry import ADAPTERS
    from harness.runner.run import JournalSink, run_lock, run_one

    if threads:
        import torch

        torch.set_num_threads(threads)
    p = plan(point.request)
    is_baseline = point.baseline_hash is None
    spec = p.spec.baseline() if is_baseline else p.spec
    if spec.config_hash != point.config_hash:
        raise DataError(
            f"sweep point {point.label}: planned here as config {spec.config_hash}, by the sweep as {point.config_hash}; "
            "this machine's data or model differ from the driver's (share the data directory and model cache)"
        )
    adapter = ADAPTERS.get("none")() if is_baseline else p.adapter
    sink, progress = sink or JournalSink(records_dir), progress or no_progress
    with run_lock(Path(records_dir), spec, progress):  # the lock `harness run` takes: one process makes a run
        done = sink.find_finished(spec)
        if done is not None:
            return done
        data = p.suite.prepare(p.data_dir, p.suite_config, p.suite_budget)
        return run_one(p, spec, adapter, baseline, data, sink, progress).record
