"""Which implementation each compressed module ran, counted per call.

A compressed head or lookup picks its path per call (a fused kernel, a Triton kernel, one replayed
from a CUDA graph, its torch reference) by device, dtype, gradients and what builds on the
machine. Each call adds one to a counter on the module (:func:`record`; a plain dict entry outside
torch's state, so it is neither saved nor part of the model's description), and a suite copies
:func:`taken` into the run's details, so a run says which path its scores came from.
"""

from __future__ import annotations

from collections import Counter

from torch import nn


def record(module: nn.Module, path: str) -> None:
    """Count one call of ``module`` on ``path``."""
    counts = module.__dict__.get("_paths")
    if counts is None:
        counts = module.__dict__["_paths"] = Counter()
    counts[path] += 1


def taken(model: nn.Module) -> dict[str, dict[str, int]]:
    """Calls per path of every module of ``model`` that records them, by module name (``""``: the
    model itself); empty for a model without compressed modules."""
    return {name: dict(counts) for name, module in model.named_modules() if (counts := module.__dict__.get("_paths"))}
