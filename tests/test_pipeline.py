"""The runner's pipeline: an ``after_finetune`` adapter acts on the fine-tuned model, with the teacher
copied from that model; a ``before_finetune`` adapter acts on the loaded one (real MiniLM, XNLI smoke)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
import torch
from transformers import set_seed

from harness.adapter import Adapter, FitContext
from harness.runner.pipeline import Pipeline
from harness.runner.plan import RunRequest, plan
from harness.sources import models


@dataclass(frozen=True)
class _NoSettings:
    pass


class _Recorder(Adapter):
    """Records what it was given; changes nothing."""

    name = "recorder"
    config_class = _NoSettings
    needs_teacher = True
    seen: list = []

    def compress(self, model, fit: FitContext):
        classifier = model.classifier.weight.detach().clone()
        teacher_same = torch.equal(fit.teacher.classifier.weight, classifier) and not any(p.requires_grad for p in fit.teacher.parameters())
        self.seen.append({"classifier": classifier, "teacher_same": teacher_same, "profile": fit.profile, "tokenizer": fit.tokenizer})
        return model


class _AfterRecorder(_Recorder):
    stage = "after_finetune"


@pytest.mark.parametrize("recorder, trained", [(_Recorder, False), (_AfterRecorder, True)])
def test_stage_decides_whether_the_adapter_sees_the_fine_tuned_model(recorder, trained, data_dir, tmp_path):
    recorder.seen = []
    p = plan(RunRequest("xnli", "none", model="minilm", profile="smoke"))
    p = dataclasses.replace(p, adapter=recorder())
    data = p.suite.prepare(p.data_dir, p.suite_config, p.suite_budget)
    produced = Pipeline(p, p.spec, p.adapter, tmp_path, lambda *a: None).run(data)
    (seen,) = recorder.seen
    torch.manual_seed(0)
    initial = p.suite.tasks(p.suite_config)[0]


    set_seed(p.spec.seed)
    fresh, _ = models.load(p.model_ref, initial.head)
    assert torch.equal(seen["classifier"], fresh.classifier.weight) is not trained  # fine-tuned or as loaded
    assert seen["teacher_same"] and seen["profile"] == "smoke" and seen["tokenizer"] is not None
    assert produced.compression.emb_param_fraction == 1.0 and len(produced.scores) == 16
    assert {e.phase for e in produced.efficiency} == {"forward", "base:forward"}
