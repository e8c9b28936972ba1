"""The stages of a run. Per task of the suite, the pipeline (:mod:`harness.runner.pipeline`) runs::

    [pretrain] -> fit -> [recover] -> train -> score

``fit`` applies the adapter (from the fit cache where it can; an ``after_finetune`` adapter fits
after ``train``), and ``train`` and ``score`` are the suite's protocol: every run has them. Each
optional stage is a module with the plan's part (the run's recipe entry, validated without building
or writing anything) and the pipeline's part:

* ``pretrain`` (``--pretrain STEPS``, :mod:`harness.runner.stages.pretrain`): ``recipe["pretraining"]``;
* ``recover`` (``--recover STEPS``, :mod:`harness.runner.stages.recover`): ``recipe["recovery"]``.

A run's stages follow from its recipe (:func:`of`): the plan records those of the requested run
(``Plan.stages``), and its baseline, whose recipe holds no recovery, has no ``recover``.
"""

from __future__ import annotations

from typing import Any, Mapping

STAGES = ("pretrain", "fit", "recover", "train", "score")
"""Every stage, in the order a run goes through them."""

OPTIONAL = {"pretrain": "pretraining", "recover": "recovery"}
"""Each optional stage and the recipe entry that puts a run through it."""


def of(recipe: Mapping[str, Any]) -> tuple[str, ...]:
    """The stages of a run with ``recipe``, in order."""
    return tuple(stage for stage in STAGES if stage not in OPTIONAL or OPTIONAL[stage] in recipe)
