"""The runner: a short pipeline of named steps, baseline first, with reuse of finished runs.

    plan (validate everything, cheap) -> prepare data once -> for baseline, method:
        reuse a finished identical run, or: load model -> adapter -> efficiency -> suite -> save
"""

from __future__ import annotations

import copy
import dataclasses
import os
import secrets
import socket
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, set_seed

from harness.adapter import Adapter, FitContext, ProgressFn, no_progress
from harness.config import as_dict, build_config, config_fields, parse_assignments
from harness.errors import ConfigError
from harness.measure.efficiency import measure
from harness.measure.metrics import pct_base
from harness.provenance import git_sha, hardware, resolve_device, versions
from harness.registry import ADAPTERS, SUITES
from harness.results.records import LatencyStats, Provenance, RunRecord, RunSpec, Score
from harness.results.store import Store
from harness.sources import models
from harness.sources.data import data_root
from harness.suite import PROFILES, Suite, SuiteContext, SuiteData


@dataclass(frozen=True)
class RunRequest:
    """What the user asked for, as typed on the command line."""

    suite: str
    adapter: str
    model: str | None = None
    profile: str = "quick"
    seed: int = 0
    settings: tuple[str, ...] = ()
    data_dir: str | None = None
    device: str = "auto"
    force: bool = False


@dataclass(frozen=True)
class Plan:
    """A validated request: components built, model resolved, spec fixed."""

    suite: Suite
    suite_config: Any
    adapter: Adapter
    model_ref: models.ModelRef
    spec: RunSpec
    data_dir: Path | None
    device: str
    force: bool


@dataclass(frozen=True)
class RunOutcome:
    record: RunRecord
    reused: bool
    stored: bool  # False when the DB was busy and only the JSON record was written


def _split_settings(pairs: dict[str, str], adapter_cls: type[Adapter], suite: Suite) -> tuple[dict, dict]:
    """Route each --set key to the adapter or the suite config (``adapter.`` / ``suite.`` prefix optional)."""
    a_fields, s_fields = config_fields(adapter_cls.config_class), config_fields(suite.config_class)
    to_adapter, to_suite = {}, {}
    for key, value in pairs.items():
        scope, _, bare = key.rpartition(".")
        if scope == "adapter" or (not scope and bare in a_fields):
            to_adapter[bare] = value
        elif scope == "suite" or (not scope and bare in s_fields):
            to_suite[bare] = value
        else:
            valid = ", ".join([*a_fields, *s_fields]) or "none"
            raise ConfigError(f"--set {key} is not a setting of adapter '{adapter_cls.name}' or suite '{suite.name}'; valid keys: {valid}")
    return to_adapter, to_suite


def plan(request: RunRequest) -> Plan:
    """Validate the whole request before any expensive step (exit code 2 material)."""
    if request.profile not in PROFILES:
        raise ConfigError(f"unknown profile '{request.profile}'; use one of {', '.join(PROFILES)}")
    if request.device not in ("auto", "cpu", "cuda") and not request.device.startswith("cuda:"):
        raise ConfigError(f"unknown device '{request.device}'; use auto, cpu or cuda")
    if request.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("--device cuda but no CUDA GPU is visible; use --device cpu or auto")
    suite = SUITES.get(request.suite)()
    adapter_cls = ADAPTERS.get(request.adapter)
    to_adapter, to_suite = _split_settings(parse_assignments(list(request.settings)), adapter_cls, suite)
    adapter = adapter_cls(build_config(adapter_cls.config_class, to_adapter, f"adapter '{adapter_cls.name}'"))
    suite_config = build_config(suite.config_class, to_suite, f"suite '{suite.name}'")
    ref = models.resolve(request.model or models.preferred(suite.default_model))
    if ref.kind not in suite.kinds:
        raise ConfigError(f"suite '{suite.name}' needs a {' or '.join(suite.kinds)} model; '{ref.name}' is a {ref.kind}")
    config = AutoConfig.from_pretrained(ref.location)
    adapter.check(config.vocab_size, config.hidden_size)
    suite = suite.for_model(config)
    spec = RunSpec(
        model=ref.name, model_revision=ref.revision, adapter=adapter.name, adapter_config=as_dict(adapter.config),
        suite=suite.name, suite_config=as_dict(suite_config), profile=request.profile, seed=request.seed,
        recipe=suite.recipe(request.profile, suite_config),
    )
    device = resolve_device(request.device)
    return Plan(suite, suite_config, adapter, ref, spec, data_root(request.data_dir), device, request.force)


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
        data_files=data.files,
    )
    run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{spec.adapter}-{secrets.token_hex(3)}"
    return RunRecord(
        run_id=run_id, spec=spec, status="running", started_at=_now(), device=p.device, provenance=prov,
        baseline_run_id=baseline.run_id if baseline else None,
    )


def _run_one(p: Plan, spec: RunSpec, adapter: Adapter, baseline: RunRecord | None, data: SuiteData, store: Store, progress: ProgressFn) -> RunOutcome:
    rec = _new_record(p, spec, data, baseline)
    store.start(rec)
    progress = _labelled(progress, spec.adapter)
    start = time.perf_counter()
    try:
        set_seed(spec.seed)
        model, tokenizer = models.load(p.model_ref, p.suite.head, p.suite.num_labels)
        base = None if adapter.name == "none" else copy.deepcopy(model)  # timed beside the method, then dropped
        model, report = adapter.apply(model, FitContext(seed=spec.seed, device=p.device, progress=progress))
        efficiency = _efficiency(p, spec, model, base)
        del base
        with tempfile.TemporaryDirectory(prefix="harness-") as workdir:
            ctx = SuiteContext(
                spec.profile, spec.seed, p.device, p.suite_config, Path(workdir),
                model=spec.model, config_hash=spec.config_hash, progress=progress,
            )
            result = p.suite.evaluate(model, tokenizer, data, ctx)
    except BaseException as err:
        failed = dataclasses.replace(rec, status="failed", error=f"{err.__class__.__name__}: {err}"[:2000], finished_at=_now(), wall_s=time.perf_counter() - start)
        store.save(failed)
        raise
    rec = dataclasses.replace(
        rec, status="finished", finished_at=_now(), wall_s=time.perf_counter() - start, compression=report,
        scores=_with_pct_base(result.scores, baseline), efficiency=efficiency, details=result.details,
    )
    return RunOutcome(rec, reused=False, stored=store.save(rec))


BASE_PHASE = "base:"
"""Prefix of efficiency phases timed on the unchanged model inside a method's run, in rounds that
alternate with the compressed model's, so that compressed/base ratios come from one process under
one machine load."""


def _efficiency(p: Plan, spec: RunSpec, model, base=None) -> list[LatencyStats]:
    timed = measure([model] if base is None else [base, model], p.model_ref.kind, p.device, seed=spec.seed, smoke=spec.profile == "smoke")
    if base is None:
        return timed[0]
    return [dataclasses.replace(s, phase=BASE_PHASE + s.phase) for s in timed[0]] + timed[1]


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
