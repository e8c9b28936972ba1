"""The recover stage (``--recover STEPS``): the fitted model trained toward a frozen copy of the
unchanged model before anything measures it (:mod:`harness.methods.recover` says how and why).

:func:`recipe` is the plan's part: the run's ``recipe["recovery"]``, or a ConfigError naming why the
request or the adapter cannot take it (:meth:`harness.adapter.Adapter.recovery_refusal`).
:func:`recovered` is the pipeline's, right after the fit (which the fit cache keeps under the
post-hoc run's key, :meth:`harness.runner.pipeline.Pipeline.fit`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from torch import nn

from harness.adapter import Adapter, Applied, ProgressFn
from harness.errors import ConfigError
from harness.methods import recover as method
from harness.results.records import RunSpec
from harness.sources import corpora
from harness.sources.data import revisions


def recipe(steps: int, lora: bool, adapter: Adapter, profile: str, large: bool, data_dir: Path | None) -> dict[str, Any] | None:
    """The run's ``recipe["recovery"]`` (None when off): steps, budget, corpora and their sha256."""
    if steps < 0:
        raise ConfigError(f"--recover {steps} must be 0 (off) or a number of training steps, e.g. --recover 100")
    if not steps:
        if lora:
            raise ConfigError("--recover-lora adds LoRA to recovery training; give the steps too, e.g. --recover 100")
        return None
    refusal = adapter.recovery_refusal()
    if refusal:
        raise ConfigError(f"adapter '{adapter.name}' cannot take --recover: {refusal}; run it without --recover")
    settings = method.recipe(steps, lora, method.BUDGETS.select(profile, large))
    return {**settings, "data": revisions(data_dir, [corpora.source(name) for name in settings["corpora"]])}


def recovered(applied: Applied, teacher: nn.Module, tokenizer: Any, adapter: Adapter, spec: RunSpec, kind: str,
              data_dir: Path | None, device: str, progress: ProgressFn) -> Applied:
    """``applied`` trained toward ``teacher`` (the unchanged model) as ``spec``'s recipe says, the
    tensors ``adapter`` declares in ``recovers`` only; what recovery did goes into the fit details as
    ``recovery``."""
    settings = spec.recipe["recovery"]
    texts = method.fit_texts({name: corpora.load(name, data_dir).plain() for name in settings["corpora"]})
    model, done = method.recover(applied.model.to(device), teacher.to(device), tokenizer, kind, adapter.recovers,
                                 texts, settings, spec.seed, progress)
    return dataclasses.replace(applied, model=model, details={**applied.details, "recovery": done})
