"""How long ``--recover STEPS`` will train, measured before a run starts; above :data:`CAP_S` it is refused.

Recovery training (:mod:`harness.methods.recover`) runs inside the method's run, after its fit: a
mistyped step count (``--recover 100000000``) would only show after the baseline and the fit, and
then hold the machine for years. So before anything runs, the runner times a few recovery steps of the
planned model at the profile's recovery budget (batch x sequence length) on the run's device and
multiplies by the steps. The step is the real loss (:func:`harness.methods.recover.loss_fn`: the
teacher's forward, the student's forward and backward down to its token embeddings) on the unchanged
model; the method's own table changes that little, LoRA (``--recover-lora``) adds its small optimizer
step. Above the cap the run is refused unless ``--lift-cap`` (``--force`` only re-runs a stored run).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from functools import lru_cache

from harness.errors import ConfigError
from harness.runner.plan import Plan
from harness.sources import models

CAP_S = 12 * 3600
"""Recovery estimated longer than this (12 hours: a night on one machine) is refused unless ``--lift-cap``:
a longer one is more often a mistyped step count than a plan, and nothing of it is kept until the run
finishes (the fit cache keeps the fit before recovery)."""

TIMED_STEPS = 2
"""Steps timed after one untimed warm-up step; the faster counts (a step's time barely varies)."""


@dataclass(frozen=True)
class Estimate:
    steps: int
    step_s: float   # measured seconds of one recovery step
    device: str

    @property
    def seconds(self) -> float:
        return self.steps * self.step_s

    def line(self) -> str:
        return (f"recovery: {self.steps:,} steps x {self.step_s:.3f} s a step (measured now on {self.device}) "
                f"= about {duration(self.seconds)}")


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:,.0f} days"


def recovery(p: Plan, lift_cap: bool = False) -> Estimate | None:
    """The planned run's recovery estimate (None without ``--recover``); refused above :data:`CAP_S`
    unless ``lift_cap``."""
    settings = p.spec.recipe.get("recovery")
    if not settings:
        return None
    head = p.suite.tasks(p.suite_config)[0].head
    found = Estimate(settings["steps"], step_seconds(p.model_ref, head, p.device, settings["batch"], settings["seq_len"]), p.device)
    if found.seconds > CAP_S and not lift_cap:
        raise ConfigError(
            f"--recover {found.steps:,} would train about {duration(found.seconds)} ({found.step_s:.3f} s a step measured on "
            f"{p.device}), above the {duration(CAP_S)} cap for a run: give fewer steps, or --lift-cap to run it anyway"
        )
    return found


@lru_cache(maxsize=8)
def step_seconds(ref: models.ModelRef, head, device: str, batch: int, seq_len: int) -> float:
    """Seconds of one recovery step of ``ref`` on ``device`` at (batch, seq_len), measured (see the module docstring)."""
    import torch

    from harness.methods import recover

    student, _ = models.load(ref, head)
    student.to(device).eval().requires_grad_(False)
    teacher = copy.deepcopy(student)
    # the gradient flows from the loss down to the token vectors, as it does to a method's codebooks
    student.get_input_embeddings().register_forward_hook(lambda module, args, out: out.detach().requires_grad_(True))
    loss = recover.loss_fn(student, teacher, ref.kind)
    ids = torch.randint(0, student.get_input_embeddings().num_embeddings, (batch, seq_len), device=device)
    times = []
    for _ in range(1 + TIMED_STEPS):
        start = time.perf_counter()
        loss(ids).backward()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times[1:])
