"""The pretrain stage (``--pretrain STEPS``): paper 001's regime at small scale, the encoder
pretrained from scratch with the method's table (:mod:`harness.methods.pretrain` says how and why).

* :func:`recipe`, the plan's part: the run's ``recipe["pretraining"]``, or a ConfigError naming what
  cannot be pretrained; nothing is built or written.
* :func:`source`, the pipeline's when it loads a task model: the small encoder from scratch, written
  once under the models cache, from which every task model of the run is built.
* :func:`pretrained`, the pipeline's fit in this regime: the backbone pretrained with the adapter's table
  (from the fit cache under :data:`BACKBONE`, or pretrained now) replaces the task model's, whose task
  head stays; the compression report counts the task model before and after.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

from torch import nn

from harness.adapter import Adapter, Applied, Compressed, FitContext, applied
from harness.errors import ConfigError
from harness.methods import pretrain as method
from harness.results.records import RunSpec
from harness.runner import fitcache
from harness.sources import corpora, models
from harness.sources.data import revisions
from harness.sources.heads import Head

BACKBONE = Head("base")
"""The pretrained backbone's fit-cache entry has no task head: every suite and task reuses it."""


def recipe(steps: int | None, profile: str, adapter: Adapter, ref: models.ModelRef, config: Any, recovery: bool,
           data_dir: Path | None) -> dict[str, Any] | None:
    """The run's ``recipe["pretraining"]`` (None without ``--pretrain``) with its corpora's sha256, or a
    ConfigError naming what cannot be pretrained: negative steps, recovery on top, a decoder, an adapter
    whose tensors are not new ones of its table, the paper profile."""
    if steps is None:
        return None
    if steps < 0:
        raise ConfigError(f"--pretrain {steps} must be a number of steps, or 0 for the same encoder not pretrained (the control)")
    if recovery:
        raise ConfigError("--pretrain trains the whole encoder from scratch, so --recover (toward the unchanged model) does not apply; drop one")
    if ref.kind != "encoder":
        raise ConfigError(f"--pretrain pretrains an encoder with masked-language modelling; '{ref.name}' is a {ref.kind}")
    refusal = None if adapter.unchanged else adapter.recovery_refusal()
    if refusal:
        raise ConfigError(f"adapter '{adapter.name}' cannot be pretrained with: {refusal}; --pretrain takes none and the table replacements")
    settings = method.recipe(steps, profile, config.hidden_size, config.num_attention_heads)
    return {**settings, "data": revisions(data_dir, [corpora.source(name) for name in settings["corpora"]])}


def source(ref: models.ModelRef, settings: dict[str, Any]) -> models.ModelRef:
    """The small encoder of ``settings`` (``recipe["pretraining"]``) cut from ``ref``, written on first use."""
    return method.skeleton(ref, settings["architecture"])


def pretrained(adapter: Adapter, spec: RunSpec, data_dir: Path | None, model: nn.Module, fit: FitContext) -> Applied:
    """``model`` (a task model built from :func:`source`) with the backbone pretrained with ``adapter``'s
    table as ``spec``'s recipe says, and its report; the fit details say what pretraining did
    (``pretraining``) and whether the backbone came from the fit cache (``pretrained_model_cache``)."""
    settings = spec.recipe["pretraining"]

    def compress(model: nn.Module, fit: FitContext) -> Compressed:
        backbone, info = fitcache.fitted(fitcache.key(spec, adapter, BACKBONE, ""), lambda: method.backbone(
            adapter, copy.deepcopy(model.config), spec.model, settings, data_dir, fit))
        method.attach(backbone.model, model)
        return Compressed(model, details={**backbone.details, "pretrained_model_cache": dataclasses.asdict(info)})

    return applied(model, fit, compress)
