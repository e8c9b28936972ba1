"""Planning a run: validate the whole request cheaply, before any model loads or data is read.

A plan builds the suite and adapter from their registries and ``--set`` values, describes the model
from its metadata alone (kind, token table shape, tokenizer; :mod:`harness.sources.metadata`: a
packaged model is converted only when a run first loads it), checks that suite and adapter take its
kind and the adapter its table (rows x width, which may differ from the hidden size), picks both budgets from their tables, checks the data
the run will read (the suite's files and the fit corpora: presence and sha256, cached by size and
mtime; release files cut to some of their languages: :mod:`harness.runner.datacheck`) and records
the run's stages (:mod:`harness.runner.stages`): with ``--recover`` or ``--pretrain`` the stage's
module validates the request and gives its recipe entry (``recovery``, ``pretraining``), corpora's
sha256 included; the pipeline runs the stage, and planning builds and writes no model.
The data revisions and the code fingerprint (:mod:`harness.results.fingerprint`) go into the run's identity, so a finished run is reused only for the same data and the same scoring
code; missing data is an error even when a finished run exists. How the model loads (``--dtype``,
``--trust-remote-code``) is part of the recipe, so of the run's identity.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import devices
from harness.adapter import Adapter
from harness.budgets import PROFILES, is_large
from harness.config import as_dict, build_config, config_fields, parse_assignments, route_settings
from harness.errors import ConfigError
from harness.runner import datacheck, stages
from harness.runner.request import RunRequest, check_seed, describe_model, remember_data, remember_spec
from harness.registry import ADAPTERS, SUITES
from harness.results.fingerprint import code_fingerprint
from harness.results.records import RunSpec
from harness.sources import corpora, models
from harness.sources.data import data_root, revisions
from harness.suite import Suite


@dataclass(frozen=True)
class Plan:
    """A validated request: components built, model resolved, budgets chosen, data checked, spec and stages fixed."""

    suite: Suite
    suite_config: Any
    suite_budget: Any
    adapter: Adapter
    adapter_budget: Any
    model_ref: models.ModelRef   # the model source as resolved (the pretrain stage builds its small encoder from it)
    spec: RunSpec
    data_dir: Path | None
    device: str
    force: bool
    stages: tuple[str, ...]      # the requested run's stages, in order (harness.runner.stages)


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _check_kinds(suite: Suite, adapter: Adapter, ref: models.ModelRef) -> None:
    """The suite and the adapter both take the model's kind; a suite that does not names the suites that do."""
    if ref.kind not in suite.kinds:
        fitting = [n for n in SUITES.names() if ref.kind in SUITES.get(n).kinds]
        raise ConfigError(
            f"suite '{suite.name}' needs {' or '.join(map(_article, suite.kinds))} model; '{ref.name}' is {_article(ref.kind)}, "
            f"which the suites {', '.join(fitting) or 'none'} take"
        )
    if ref.kind not in adapter.kinds:
        raise ConfigError(f"adapter '{adapter.name}' needs {' or '.join(map(_article, adapter.kinds))} model; '{ref.name}' is {_article(ref.kind)}")


def _loading(request: RunRequest) -> dict[str, Any]:
    """The recipe's record of how the model loads: its dtype, and trusted remote code when allowed."""
    return {"dtype": request.dtype, **({"trust_remote_code": True} if request.trust_remote_code else {})}


def plan(request: RunRequest) -> Plan:
    """Validate the whole request before any expensive step (exit code 2 material)."""
    if request.profile not in PROFILES:
        raise ConfigError(f"unknown profile '{request.profile}'; use one of {', '.join(PROFILES)}")
    check_seed(request.seed)
    device = devices.resolve(request.device)
    suite = SUITES.get(request.suite)()
    adapter_cls = ADAPTERS.get(request.adapter)
    to_adapter, to_suite = route_settings(parse_assignments(list(request.settings)), list(config_fields(adapter_cls.config_class)),
                                          list(config_fields(suite.config_class)), adapter_cls.name, suite.name)
    adapter = adapter_cls(build_config(adapter_cls.config_class, to_adapter, f"adapter '{adapter_cls.name}'"))
    suite_config = build_config(suite.config_class, to_suite, f"suite '{suite.name}'")
    name = request.model or models.preferred(suite.default_model)
    ref = describe_model(request, name)  # from metadata: a packaged model is converted when a run first loads it
    _check_kinds(suite, adapter, ref)
    if adapter.heads is not None:
        for task in suite.tasks(suite_config):
            if task.head.kind not in adapter.heads:
                raise ConfigError(
                    f"adapter '{adapter.name}' builds {' or '.join(adapter.heads)} models; suite '{suite.name}' "
                    f"task '{task.name}' needs {task.head.kind}: pick a suite with that head (harness list suites)"
                )
    if corpora.TASK_TRAIN in adapter.corpora() and type(suite).train_texts is Suite.train_texts:
        raise ConfigError(
            f"adapter '{adapter.name}' fits on the suite's training texts, but suite '{suite.name}' trains on none; "
            "set --set corpus=wikitext2_train (or c4_sample)"
        )
    adapter.check(ref.shape.vocab_size, ref.shape.embedding_dim)  # the table as it is: its width may differ from the hidden size
    large = is_large(ref.shape)
    suite_budget = suite.budgets.select(request.profile, large)
    adapter_budget = adapter.budgets.select(request.profile, large) if adapter.budgets else None
    data_dir = data_root(request.data_dir)
    recipe = {**suite.budgets.recipe(request.profile, large), **_loading(request)}
    recovery = None
    if request.recover or request.recover_lora:  # a stage's module imports its training stack: only when asked for
        from harness.runner.stages import recover

        recovery = recover.recipe(request.recover, request.recover_lora, adapter, request.profile, large, data_dir)
    if recovery:
        recipe["recovery"] = recovery
    sources = suite.sources(suite_config, suite_budget)
    fit_sources = [corpora.source(name) for name in adapter.corpora()]
    remember_data(request, sources, fit_sources)  # the CLI's next refusal of missing data comes before torch
    data = revisions(data_dir, sources)  # missing files first, then files cut short
    datacheck.check(data_dir, sources)
    pretraining = None
    if request.pretrain is not None:
        from harness.runner.stages import pretrain

        pretraining = pretrain.recipe(request.pretrain, request.profile, adapter, ref, ref.shape, bool(recovery), data_dir)
    if pretraining:
        recipe["pretraining"] = pretraining
    spec = RunSpec(
        model=ref.name, model_revision=ref.revision, adapter=adapter.name, adapter_config=as_dict(adapter.config),
        suite=suite.name, suite_config=as_dict(suite_config), profile=request.profile, seed=request.seed,
        recipe=recipe,
        adapter_budget=dataclasses.asdict(adapter_budget) if adapter_budget is not None else {},
        data=data,
        fit_data=revisions(data_dir, fit_sources),
        code=code_fingerprint(adapter.name, suite.name),
    )
    remember_spec(request, spec, suite.default_model)  # `harness list matrix` plans it again without torch
    return Plan(suite, suite_config, suite_budget, adapter, adapter_budget, ref, spec, data_dir, device, request.force,
                stages.of(spec.recipe))
