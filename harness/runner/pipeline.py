"""One run's pipeline, the same for every suite and method: it runs the run's stages
(:mod:`harness.runner.stages`). Per task of the suite::

    model for the task's head -> adapter (before_finetune) [-> recovery] -> efficiency -> suite.train
        -> adapter (after_finetune) -> suite.score

With ``--recover STEPS`` (stage ``recover``) the fitted model is trained toward a frozen copy of the
unchanged model before anything measures it (:mod:`harness.runner.stages.recover`); the fit cache
keeps the fit before recovery (the post-hoc run's) and the recovered model, and the fit details say
what recovery did (``recovery``). With ``--pretrain STEPS`` (stage ``pretrain``) the task models
are built from the small encoder the stage writes on first use, and the adapter acts inside its
pretraining: the fit puts the backbone pretrained with the adapter's table into the task model
(:mod:`harness.runner.stages.pretrain`).

The adapter is fitted once per run where it can be: for later tasks of a multi-task suite (GLUE),
a ``before_finetune`` adapter's compressed backbone is copied into the new task's model (the
transformers ``base_model_prefix`` module), so only the task head is new; a method that replaces the
whole model is fitted again. ``after_finetune`` adapters act on each task's fine-tuned model.

Efficiency is measured once, right after the adapter first acts, on the compressed model and on a
copy of the model just before the adapter (the unchanged model, or for ``after_finetune`` the
fine-tuned one), timed in alternating rounds; the copy is dropped at once, unless the suite
declares ``wants_reference``: then it is kept (eval mode) and handed to ``suite.score`` as
``ctx.reference`` with its tokenizer (bpb computes KL(base || method) from it), and freed when the
run ends. The teacher (a frozen copy for adapters that declare ``needs_teacher``) lives only while
the adapter fits.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn
from transformers import set_seed

from harness.runner import fitcache, stages
from harness.runner.stages import pretrain, recover
from harness.adapter import Adapter, Applied, FitContext, ProgressFn
from harness.measure.efficiency import measure
from harness.runner.plan import Plan
from harness.results.records import (
    BASE_PHASE,
    CompressionReport,
    FitReport,
    ItemOutputs,
    LatencyStats,
    RunSpec,
    Score,
)
from harness.sources import corpora, models
from harness.suite import SuiteContext, SuiteData, Task


@dataclass
class Produced:
    """What one run's pipeline measured."""

    scores: list[Score] = field(default_factory=list)
    items: list[ItemOutputs] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    compression: CompressionReport | None = None
    fit: FitReport | None = None
    efficiency: list[LatencyStats] = field(default_factory=list)


class Pipeline:
    """Runs ``adapter`` on every task of the planned suite (see the module docstring)."""

    def __init__(self, p: Plan, spec: RunSpec, adapter: Adapter, workdir: Path, progress: ProgressFn):
        self.p, self.spec, self.adapter, self.workdir, self.progress = p, spec, adapter, workdir, progress
        self.stages = stages.of(spec.recipe)
        self.out = Produced()
        self.tokenizer: Any = None       # the tokenizer after the adapter (a changed one, or the base one)
        self.backbone: nn.Module | None = None  # the first compressed model, for later tasks' backbones
        self.reference: tuple[nn.Module, Any] | None = None  # the unchanged model and tokenizer, for wants_reference suites
        self._corpora: dict[str, corpora.Corpus] | None = None

    def run(self, data: SuiteData) -> Produced:
        suite = self.p.suite
        tasks = suite.tasks(self.p.suite_config)
        for index, task in enumerate(tasks):
            model, tokenizer = self._model_for(task, index, len(tasks) > 1, data)
            model = self._timed("train", lambda: suite.train(task, model, tokenizer, data, self._suite_context(task)))
            if self.adapter.stage == "after_finetune":
                model, tokenizer = self._act(model, tokenizer, task, data)
            result = self._timed("evaluate", lambda: suite.score(task, model, tokenizer, data, self._suite_context(task)))
            self.out.scores += result.scores
            self.out.items += result.items
            self.out.details.update(result.details if len(tasks) == 1 else {task.name: result.details})
        summary = suite.summarize(self.out.scores, self.out.items, self._suite_context(tasks[0]))
        self.out.scores += summary.scores
        self.out.items += summary.items
        self.reference = None
        return self.out

    def _suite_context(self, task: Task) -> SuiteContext:
        reference, reference_tokenizer = self.reference or (None, None)
        return SuiteContext(
            self.spec.profile, self.spec.seed, self.p.device, self.p.suite_config, self.p.suite_budget,
            self.workdir / task.name, model=self.spec.model, config_hash=self.spec.config_hash, progress=self.progress,
            reference=reference, reference_tokenizer=reference_tokenizer,
            adapter=self.adapter,
        )

    def _timed(self, phase: str, step):
        self.progress(phase, 0, 1)
        value = step()
        self.progress(phase, 1, 1)
        return value

    def _model_for(self, task: Task, index: int, keep_backbone: bool, data: SuiteData) -> tuple[nn.Module, Any]:
        """The task's model, compressed when the adapter acts before fine-tuning."""
        set_seed(self.spec.seed)
        model, tokenizer = self._timed("load model", lambda: self.load(task))
        if self.adapter.stage == "after_finetune":
            return model, tokenizer
        if index > 0 and _transplant(self.backbone, model):
            return model, self.tokenizer
        model, tokenizer = self._act(model, tokenizer, task, data)
        if keep_backbone and index == 0:
            self.backbone = copy.deepcopy(model)
        return model, tokenizer

    def load(self, task: Task) -> tuple[nn.Module, Any]:
        """The task's model and tokenizer from the run's model source: in the pretraining regime the
        small encoder the pretrain stage writes on first use."""
        source = self.p.model_ref
        if "pretrain" in self.stages:
            source = pretrain.source(source, self.spec.recipe["pretraining"])
        return models.load(source, task.head)

    def _act(self, model: nn.Module, tokenizer: Any, task: Task, data: SuiteData) -> tuple[nn.Module, Any]:
        """Apply the adapter; the first time, also record its report and time the model beside a copy."""
        first = self.out.compression is None
        base = copy.deepcopy(model) if first and not self.adapter.unchanged else None
        self.progress("fit adapter", 0, 1)
        applied, cached = self.fit(model, tokenizer, task, data)
        seconds = cached.load_seconds if cached.reused else cached.fit_seconds
        self.progress("fit adapter", 1, 1)
        applied.model.to(self.p.device)
        if first:
            self.out.compression = applied.report
            self.out.fit = FitReport(seconds, {**applied.details, **cached.details()})
            self.tokenizer = applied.tokenizer
            self.out.efficiency = self._timed("efficiency", lambda: self._efficiency(applied.model, base, tokenizer))
            if base is not None and self.p.suite.wants_reference:
                self.reference = (base.eval().requires_grad_(False), tokenizer)
        else:
            self.out.fit = dataclasses.replace(self.out.fit, seconds=self.out.fit.seconds + seconds)
        return applied.model, applied.tokenizer

    def fit(self, model: nn.Module, tokenizer: Any, task: Task, data: SuiteData | None) -> tuple[Applied, fitcache.FitInfo]:
        """The adapter applied to ``model``: from the fit cache when an intact entry exists, else
        fitted now (the teacher lives only while it fits) and saved there. ``data`` is needed only
        by adapters that fit on the suite's training texts."""

        def fit() -> Applied:
            teacher = copy.deepcopy(model).eval().requires_grad_(False) if self.adapter.needs_teacher else None
            context = FitContext(
                profile=self.spec.profile, seed=self.spec.seed, device=self.p.device, workdir=self.workdir / "fit",
                tokenizer=tokenizer, corpora=self._fit_corpora(task, data), budget=self.p.adapter_budget, teacher=teacher,
                progress=self.progress,
            )
            if "pretrain" in self.stages:
                return pretrain.pretrained(self.adapter, self.spec, self.p.data_dir, model, context)
            return self.adapter.apply(model, context)

        key = functools.partial(fitcache.key, self.spec, self.adapter, task.head, task.name)
        # a task model with a pretrained backbone is kept, even the full table's (the baseline's)
        cacheable = self.adapter.cacheable or "pretrain" in self.stages
        if "recover" not in self.stages:
            return fitcache.fitted(key(), fit, cacheable)

        def recovered() -> Applied:
            teacher = copy.deepcopy(model).eval().requires_grad_(False)  # the unchanged model
            applied, _ = fitcache.fitted(key(recovery=False), fit, cacheable)
            return recover.recovered(applied, teacher, tokenizer, self.adapter, self.spec, self.p.model_ref.kind,
                                     self.p.data_dir, self.p.device, self.progress)

        return fitcache.fitted(key(), recovered, cacheable)

    def _fit_corpora(self, task: Task, data: SuiteData | None) -> dict[str, corpora.Corpus]:
        """The declared corpora: read once from the data directory; ``task_train`` from the suite, per task."""
        if self._corpora is None:
            self._corpora = {name: corpora.load(name, self.p.data_dir) for name in self.adapter.corpora() if name != corpora.TASK_TRAIN}
        if corpora.TASK_TRAIN not in self.adapter.corpora():
            return self._corpora
        texts = tuple(self.p.suite.train_texts(task, data, self.p.suite_config))
        return {**self._corpora, corpora.TASK_TRAIN: corpora.Corpus(corpora.TASK_TRAIN, texts, {})}

    def _efficiency(self, model: nn.Module, base: nn.Module | None, tokenizer: Any) -> list[LatencyStats]:
        """Both models timed on text through the base tokenizer, whose ids both tables cover."""
        smoke = self.spec.profile == "smoke"
        timed = measure([model] if base is None else [base, model], self.p.model_ref.kind, self.p.device, seed=self.spec.seed, smoke=smoke,
                        tokenizer=tokenizer)
        if base is None:
            return timed[0]
        return [dataclasses.replace(s, phase=BASE_PHASE + s.phase) for s in timed[0]] + timed[1]


def _transplant(source: nn.Module | None, target: nn.Module) -> bool:
    """Copy ``source``'s backbone (its ``base_model_prefix`` module) into ``target``, which has a
    fresh task head; False when the two models do not share that structure."""
    prefix = getattr(target, "base_model_prefix", None)
    if source is None or not prefix or type(source) is not type(target) or not isinstance(getattr(source, prefix, None), nn.Module):
        return False
    setattr(target, prefix, copy.deepcopy(getattr(source, prefix)))
    return True
