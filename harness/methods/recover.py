"""Recovery training: heal a replaced table against the unchanged model before it is judged.

A table-replacing method (ASG, SG, k-sub, low-rank, quantization) is otherwise judged post hoc, or
only through the suite's own short fine-tuning; the papers train with their tables (paper 001
pretrains with its sub-embeddings), and compression tools distill after compressing. This stage,
run by the pipeline after the adapter's fit and before the suite trains, trains the compressed model
(the student) toward the unchanged one (the teacher) on the fit corpora ``wikitext2_train`` and
``c4_sample`` (never a suite's scored text), so the harness can say how much of a method's loss is
the method and how much is missing training. ``--recover STEPS`` sets the steps; :data:`BUDGETS`
the rest per profile.

* Decoders with an LM head: KL(p_teacher || p_student) of the next-token distributions
  (:func:`harness.methods.distill.kl_to_teacher`, paper 003's distillation loss).
* Encoders (and any model without an LM head): per token, 1 - cos(h_student, h_teacher) of the
  backbone's last hidden states. Cosine, not MSE: the last states leave a LayerNorm, so their
  norms vary little and the two losses differ mainly by the model's scale (per-dimension RMS of the
  last states 0.39 on MiniLM, 0.23 on me5-small), which cosine removes: one budget serves every
  encoder, and the embedding suites (MTEB) compare texts by cosine.
* What trains: by default only the tensors the adapter names in ``recovers`` inside its
  token-embedding modules (codebooks, sub-tables, group vectors, factors, quantization scales);
  the transformer stays frozen. ``lora`` adds LoRA on the top quarter of the layers
  (:func:`harness.methods.distill.lora_top_layers`, Vocab Diet's stage 2), merged afterwards.
* Step sizes are relative to each tensor's scale (AdamW's steps are about ``lr`` in absolute
  terms, whatever the gradient's scale): one learning rate then fits codebooks, factors A and B of
  different scales, and quantization scales of ~1e-3 alike.
* The student runs in eval mode (no dropout): it fits deterministic targets. Blocks are cut from
  running text (:func:`harness.methods.distill.token_blocks`); an encoder's get its special tokens
  around them, as it reads text in every suite.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from itertools import chain, zip_longest
from typing import Any, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from harness.adapter import ProgressFn, no_progress, recoverable
from harness.budgets import Budgets
from harness.errors import ConfigError
from harness.methods import distill

CORPORA = ("wikitext2_train", "c4_sample")
"""The fit corpora recovery reads, interleaved text by text."""

CURVE_POINTS = 50
"""At most this many points of the loss curve are kept in the run's details."""


@dataclass(frozen=True)
class RecoveryBudget:
    batch: int       # blocks per step
    seq_len: int     # tokens per block
    lr: float        # the method's own tensors, relative: each tensor's step size is lr x its RMS at the start
    lr_lora: float   # LoRA, when it is on (absolute: LoRA's B starts at zero)
    warmup: float = 0.03


BUDGETS = Budgets(
    smoke=RecoveryBudget(batch=2, seq_len=32, lr=1e-2, lr_lora=1e-3),
    quick=RecoveryBudget(batch=8, seq_len=128, lr=3e-2, lr_lora=1e-4),
    paper=RecoveryBudget(batch=8, seq_len=256, lr=3e-2, lr_lora=5e-5),
    large={"quick": RecoveryBudget(batch=2, seq_len=64, lr=3e-2, lr_lora=1e-4)},
)
"""Per profile; the steps come from ``--recover``. quick gives a MiniLM-sized encoder 1,024 tokens a
step and a large model (SmolLM2-135M, me5-small) 128, about the same work. The rate was chosen on
the recovery loss of held-out fit text (ASG k = 1,024 on SmolLM2, 16 steps of 2 x 64 tokens: KL
5.60 -> 3.83 nats at 1e-2, 3.03 at 3e-2, 3.01 at 1e-1), never on a suite's score; smoke keeps 1e-2
for the tiny random models of the tests."""


def recipe(steps: int, lora: bool, budget: RecoveryBudget) -> dict[str, Any]:
    """The run's ``recipe["recovery"]``: what decides the recovered model (part of the run's identity)."""
    return {"steps": steps, "lora": lora, "corpora": list(CORPORA), **dataclasses.asdict(budget)}


def fit_texts(corpora: Mapping[str, Sequence[str]]) -> list[str]:
    """The corpora's texts interleaved (one of each in turn), so any prefix mixes them."""
    return [t for t in chain.from_iterable(zip_longest(*corpora.values())) if t is not None]


def blocks(tokenizer: Any, texts: Sequence[str], kind: str, seq_len: int, count: int, seed: int) -> torch.Tensor:
    """(count, seq_len) ids; an encoder's blocks open and close with its special tokens ([CLS] ... [SEP],
    <s> ... </s>) as every text it reads does."""
    if kind == "decoder":
        return distill.token_blocks(tokenizer, texts, seq_len, count, seed)
    first = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    last = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    body = distill.token_blocks(tokenizer, texts, seq_len - (first is not None) - (last is not None), count, seed)
    pieces = [(first, torch.full((len(body), 1), first or 0)), (0, body), (last, torch.full((len(body), 1), last or 0))]
    return torch.cat([piece for token, piece in pieces if token is not None], dim=1)


def _backbone_states(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    backbone = getattr(model, getattr(model, "base_model_prefix", ""), model)
    return backbone(input_ids=ids).last_hidden_state


def loss_fn(model: nn.Module, teacher: nn.Module, kind: str):
    """``loss(ids)`` of the student against the teacher (see the module docstring)."""
    if kind == "decoder" and model.get_output_embeddings() is not None:
        def kl(ids: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                target = teacher(input_ids=ids).logits
            return distill.kl_to_teacher(model(input_ids=ids).logits, target)
        return kl

    def cosine(ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            target = _backbone_states(teacher, ids)
        return (1 - F.cosine_similarity(_backbone_states(model, ids).float(), target.float(), dim=-1)).mean()
    return cosine


def _rms(t: torch.Tensor) -> float:
    return float(t.detach().float().pow(2).mean().sqrt())


def recover(model: nn.Module, teacher: nn.Module, tokenizer: Any, kind: str, names: Sequence[str],
            texts: Sequence[str], settings: Mapping[str, Any], seed: int,
            progress: ProgressFn = no_progress) -> tuple[nn.Module, dict[str, Any]]:
    """Train ``model``'s tensors named ``names`` (and LoRA when ``settings["lora"]``) toward
    ``teacher`` for ``settings["steps"]`` steps; returns the model (LoRA merged) and what the run
    records: losses, what trained, seconds. Every tensor's ``requires_grad`` is as before afterwards."""
    start = time.perf_counter()
    tensors = recoverable(model, names)
    if not tensors:
        raise ConfigError(f"recovery found none of the tensors {', '.join(names)} in the model's embedding modules; "
                          "the adapter's `recovers` must name tensors of the modules it builds")
    steps, batch = settings["steps"], settings["batch"]
    ids = blocks(tokenizer, texts, kind, settings["seq_len"], steps * batch, seed).to(next(model.parameters()).device)
    flags = {id(t): t.requires_grad for t in chain(model.parameters(), model.buffers())}
    wrapped, lora = distill.lora_top_layers(model) if settings["lora"] else (None, [])
    model.requires_grad_(False)  # after wrapping: peft freezes all but LoRA, the method's tensors included
    for t in chain(tensors.values(), lora):
        t.requires_grad_(True)
    groups = [{"params": [t], "lr": settings["lr"] * (_rms(t) or 1.0)} for t in tensors.values()]
    groups += [{"params": lora, "lr": settings["lr_lora"]}] if lora else []
    model.eval()
    try:
        losses = distill.train(loss_fn(model, teacher, kind), groups, ids, batch, steps, settings["warmup"], "recover", progress)
    finally:
        if wrapped is not None:
            model = wrapped.merge_and_unload()
        for t in chain(model.parameters(), model.buffers()):
            t.requires_grad_(flags.get(id(t), False))
    tail = losses[-max(1, steps // 10):]
    every = max(1, steps // CURVE_POINTS)
    kl = kind == "decoder" and model.get_output_embeddings() is not None
    return model, {
        "steps": steps, "lora": bool(settings["lora"]), "loss": [losses[0], sum(tail) / len(tail)],
        "loss_curve": [[i + 1, losses[i]] for i in range(0, steps, every)],
        "objective": "KL(teacher || student), next-token distributions" if kl else "1 - cos, last hidden states per token",
        "trained": sorted(tensors) + (["lora (top quarter of the layers)"] if lora else []),
        "trained_values": sum(t.numel() for t in tensors.values()), "tokens": steps * batch * settings["seq_len"],
        "seconds": time.perf_counter() - start,
    }
