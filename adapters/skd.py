"""SKD, sense-based knowledge distillation (paper 004, Section 3.3): a student of the teacher's
first N layers learns to pick the teacher's senses; at inference its arg-max sense feeds the
teacher's head.

1. Sense dictionary of the teacher (the model as the suite hands it over, fine-tuned where the
   suite fine-tunes: stage ``after_finetune``) over the fit corpus, as in ``multisense``
   (:mod:`harness.methods.senses.fit`).
2. Labels: on every fit window the teacher's arg-max sense index i* = argmax_i <m_t, s_t^(i)> per
   token (tokens with two or more senses; with one sense there is nothing to learn).
3. Student: the same model with only its first ``layers`` transformer layers (the authors' Llama
   student: the first 4 of 32; by default here 1, see Reported), trained on the fit windows (the
   dictionary's inputs, a pair as two segments with their token type ids) with the paper's loss
   L = -sum_t log softmax_j <n_t, s_t^(j)> [i*]
   (:func:`harness.methods.senses.dictionary.sense_cross_entropy`).
   W_align maps the student into the dictionary's width only where the widths differ; a student
   cut from the teacher's own layers has the teacher's width, so none is needed (as in the
   authors' Llama student). A narrower student (the paper's DeBERTa-xsmall-shaped one) is not
   built here: it would be trained from scratch, not started from the teacher's layers.
4. Inference: the student's last-layer vector n_t is replaced by argmax_j <n_t, s_t^(j)> (tokens
   without an entry keep n_t, paper 004 Appendix C) and the teacher's head runs on it.

Reported (paper 004 Tables 3-4, 7-8): parameters and weight bytes of teacher and student, their
ratio, and the dictionary's bytes, which the paper keeps in CPU memory beside the student.

* ``params_ratio`` = student / teacher parameters of the transformer layer stack, the count of
  paper 004 Table 7 (DeBERTa-v3-large 300M, its xsmall-shaped student 22M: 7%; both without their
  token-embedding tables). Left out on both sides, because the student keeps them from the
  teacher, frozen and unchanged: the token, position and segment embeddings, a final norm, a pooler
  and the task head (the student adds no W_align). Table 8's Llama count (7.5B vs 1.4B: 19%) also
  holds one embedding table, which on MiniLM (11.7M of 22.7M parameters) would hide the layers:
  there the paper's 7-19% is reached only without it. Default: 1 of MiniLM's 6 layers, 1.77M of
  10.6M, 17% (2 layers would be 33%).
* ``model_params_ratio``: every parameter the student runs with (the shared embeddings and head
  included) over the teacher's; the compression report's ``total_params_after / _before`` is the
  same ratio (on MiniLM with 1 layer about 0.61: the shared token table dominates).
* ``weight_bytes_ratio``: the same over stored weight bytes (buffers included, the dictionary not).

Choices where the paper is silent, following the authors' scripts where they say:

* Trained: the student's transformer layers only. Token embeddings, a final norm, a pooler and the
  task head stay the teacher's, frozen (the authors freeze the copied pooler and classifier of
  their DeBERTa student; embeddings stay frozen here because a decoder ties them to its LM head,
  the teacher's head).
* Optimiser: AdamW, weight decay 1e-4, cosine schedule with 10% warm-up (the authors' Llama
  script: AdamW, 1e-4, cosine with 300 warm-up steps); lr and epochs per profile in ``BUDGETS``
  (paper Table 9: 4e-5 for a Llama student started from the teacher's layers).
* Labels are computed once (one teacher pass) and reused every epoch; dropout stays as the
  model's config has it while training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from harness.adapter import Adapter, Compressed, FitContext
from harness.budgets import Budgets
from harness.config import require_positive
from harness.errors import ConfigError
from harness.measure.efficiency import model_bytes
from harness.methods.senses.collect import Window, backbone_of, batches, last_hidden
from harness.methods.senses.dictionary import SenseDictionary, sense_cross_entropy, teacher_senses
from harness.methods.senses.fit import SenseBudget, SenseSettings, fit_dictionary


@dataclass(frozen=True)
class SkdBudget(SenseBudget):
    epochs: float = 1.0
    learning_rate: float = 1e-4
    weight_decay: float = 1e-4
    warmup_ratio: float = 0.1


BUDGETS = Budgets(
    smoke=SkdBudget(fit_tokens=2_000, window=64, batch_size=16, epochs=1),
    quick=SkdBudget(fit_tokens=60_000, batch_size=16, epochs=2),
    paper=SkdBudget(fit_tokens=None, batch_size=8, epochs=2, learning_rate=4e-5),
    large={"quick": SkdBudget(fit_tokens=30_000, batch_size=16, epochs=2)},
)


@dataclass(frozen=True)
class SkdConfig(SenseSettings):
    layers: int = 1  # the student keeps the teacher's first N layers (MiniLM: 1 of 6 = 17% of the layers' parameters)

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive(layers=self.layers)


def layer_stack(backbone: nn.Module) -> tuple[nn.Module, str]:
    """(parent, attribute) of the backbone's list of transformer layers (``encoder.layer`` in BERT,
    ``layers`` in Llama): the ModuleList with one entry per configured hidden layer."""
    n = backbone.config.num_hidden_layers
    for path, module in backbone.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == n and path:
            parent, _, attr = path.rpartition(".")
            return backbone.get_submodule(parent), attr
    raise ConfigError(f"{type(backbone).__name__}: no list of {n} layers found to cut a student from")


def layer_params(model: nn.Module) -> int:
    """Parameters of the model's transformer layer stack: what ``params_ratio`` counts (module docstring)."""
    parent, attr = layer_stack(backbone_of(model))
    return sum(p.numel() for p in getattr(parent, attr).parameters())


def cut_student(model: nn.Module, layers: int) -> nn.ModuleList:
    """Keep the first ``layers`` transformer layers of ``model`` in place; returns them."""
    backbone = backbone_of(model)
    total = backbone.config.num_hidden_layers
    if layers >= total:
        raise ConfigError(f"layers={layers} must be below the teacher's {total} layers; pick e.g. --set layers={max(1, total // 3)}")
    parent, attr = layer_stack(backbone)
    kept = nn.ModuleList(list(getattr(parent, attr))[:layers])
    setattr(parent, attr, kept)
    backbone.config.num_hidden_layers = layers
    if isinstance(getattr(backbone.config, "layer_types", None), list):
        backbone.config.layer_types = backbone.config.layer_types[:layers]
    return kept


@torch.inference_mode()
def label_windows(teacher: nn.Module, dictionary: SenseDictionary, windows: list[Window],
                  budget: SkdBudget, pad_id: int, device: str, progress) -> list[torch.Tensor]:
    """The teacher's sense label per position of every batch of windows (-1: nothing to learn)."""
    backbone = backbone_of(teacher).eval().to(device)
    out = []
    steps = math.ceil(len(windows) / budget.batch_size)
    for step, batch in enumerate(batches(windows, budget.batch_size, pad_id, device)):
        out.append(teacher_senses(dictionary, batch.ids, batch.mask, last_hidden(backbone, batch)))
        progress("teacher senses", step + 1, steps)
    return out


def distill(model: nn.Module, trained: nn.Module, dictionary: SenseDictionary, windows: list[Window],
            labels: list[torch.Tensor], budget: SkdBudget, pad_id: int, fit: FitContext) -> dict[str, float]:
    """Train ``trained`` (the student's layers) with the SKD loss; returns the last epoch's mean
    loss and sense agreement with the teacher."""
    for p in model.parameters():
        p.requires_grad_(False)
    params = list(trained.parameters())
    for p in params:
        p.requires_grad_(True)
    backbone = backbone_of(model).train().to(fit.device)
    epochs = math.ceil(budget.epochs)
    steps = max(1, round(budget.epochs * len(labels)))
    opt = torch.optim.AdamW(params, lr=budget.learning_rate, weight_decay=budget.weight_decay)
    from transformers import get_cosine_schedule_with_warmup  # its module imports the Trainer's stack (seconds)

    schedule = get_cosine_schedule_with_warmup(opt, int(budget.warmup_ratio * steps), steps)
    generator = torch.Generator().manual_seed(fit.seed)
    padded = list(batches(windows, budget.batch_size, pad_id, fit.device))
    step, losses, agreement = 0, [], []
    for _ in range(epochs):
        losses, agreement = [], []
        for b in torch.randperm(len(padded), generator=generator).tolist():
            if step == steps:
                break
            batch = padded[b]
            loss, agree = sense_cross_entropy(dictionary, batch.ids, labels[b], last_hidden(backbone, batch))
            opt.zero_grad()
            loss.backward()
            opt.step()
            schedule.step()
            step += 1
            losses.append(loss.item())
            agreement.append(agree)
            fit.progress("sense distillation", step, steps)
    model.eval()
    return {"skd_steps": step, "skd_loss": sum(losses) / max(len(losses), 1), "skd_sense_agreement": sum(agreement) / max(len(agreement), 1)}


class SkdAdapter(Adapter):
    name = "skd"
    config_class = SkdConfig
    budgets = BUDGETS
    needs_teacher = True
    stage = "after_finetune"

    def corpora(self) -> tuple[str, ...]:
        return (self.config.corpus,)

    def compress(self, model: nn.Module, fit: FitContext) -> Compressed:
        teacher = fit.teacher
        dictionary, windows, facts = fit_dictionary(teacher, fit, self.config)
        dictionary = dictionary.to(fit.device)  # the teacher's labels and the loss index it with batches on the run's device
        pad_id = fit.tokenizer.pad_token_id or 0
        labels = label_windows(teacher, dictionary, windows, fit.budget, pad_id, fit.device, fit.progress)
        trained = cut_student(model, self.config.layers)
        facts |= distill(model, trained, dictionary, windows, labels, fit.budget, pad_id, fit)
        counts = {
            role: {"params": layer_params(m), "model_params": sum(p.numel() for p in m.parameters()), "weight_bytes": model_bytes(m)}
            for role, m in (("teacher", teacher), ("student", model))
        }
        dictionary.attach(model)
        facts |= {"teacher_layers": backbone_of(teacher).config.num_hidden_layers, "student_layers": self.config.layers}
        for what in ("params", "model_params", "weight_bytes"):
            facts |= {f"teacher_{what}": counts["teacher"][what], f"student_{what}": counts["student"][what],
                      f"{what}_ratio": counts["student"][what] / counts["teacher"][what]}
        return Compressed(model, details={"clustering": self.config.clustering, **facts})
