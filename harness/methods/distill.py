"""Logit distillation: train some parameters so a student's next-token distribution matches a teacher's.

The loop is plain AdamW with linear warm-up and decay (the Hugging Face Trainer's default schedule),
over fixed-length blocks of token ids cut from running text (no padding, so no mask).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from torch import nn

from harness.adapter import ProgressFn, no_progress
from harness.sources import layout


def kl_to_teacher(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Mean over positions of KL(p_teacher || p_student).

    The student may score more classes than the teacher (ids the teacher's vocabulary lacks): they
    take part in the student's softmax with teacher probability 0, so their mass is pushed down.
    """
    vocab = teacher_logits.shape[-1]
    log_q = student_logits.float().log_softmax(-1)[..., :vocab]
    log_p = teacher_logits.float().log_softmax(-1)
    return (log_p.exp() * (log_p - log_q)).sum(-1).mean()


def token_blocks(tokenizer: Any, texts: Sequence[str], length: int, count: int, seed: int) -> torch.Tensor:
    """(count, length) blocks of ids: texts tokenized, joined by the EOS token, cut, a seeded sample taken."""
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    ids: list[int] = []
    for text in texts:
        ids.extend(tokenizer.encode(text, add_special_tokens=False) + eos)
        if len(ids) >= 4 * count * length:  # enough to sample from; the rest is not tokenized
            break
    blocks = torch.tensor(ids[: len(ids) // length * length]).view(-1, length)
    pick = np.random.default_rng(seed).permutation(len(blocks))[:count]
    return blocks[torch.from_numpy(np.sort(pick))]


def lora_top_layers(model: nn.Module) -> tuple[nn.Module, list[nn.Parameter]]:
    """LoRA on every projection (``nn.Linear``, and ``Conv1D`` as in GPT-2) of the last quarter of the
    transformer layers, r = alpha = hidden / 16, dropout 0: paper 003 Section 5's stage 2
    (Llama-3.1-8B: last 8 of 32 layers, r = alpha = 256 at hidden 4096) scaled to the model. The
    layers and their projections are found by what they are (:mod:`harness.sources.layout`), so any
    architecture's names serve (Llama's ``layers``, GPT-2's ``h``, T5's decoder ``block``). Returns the
    peft wrapper (``merge_and_unload()`` gives the plain model back) and the LoRA parameters; peft
    leaves only those trainable."""
    from peft import LoraConfig, get_peft_model

    path, stack = layout.blocks(model)
    layers, rank = len(stack), max(1, layout.hidden_size(model) // 16)
    lora = LoraConfig(r=rank, lora_alpha=rank, lora_dropout=0.0, target_modules=layout.projections(stack),
                      layers_to_transform=list(range(layers - max(1, layers // 4), layers)),
                      layers_pattern=path.rsplit(".", 1)[-1])
    wrapped = get_peft_model(model, lora)
    return wrapped, [p for n, p in model.named_parameters() if "lora_" in n]


def train(loss: Callable[[torch.Tensor], torch.Tensor], groups: list[dict[str, Any]], blocks: torch.Tensor,
          batch: int, steps: int, warmup: float, label: str, progress: ProgressFn = no_progress) -> list[float]:
    """``steps`` AdamW steps (weight decay 0) of ``loss(batch_of_blocks)`` over parameter ``groups``
    (``{"params": [...], "lr": lr}`` each); returns the loss per step."""
    from transformers import get_linear_schedule_with_warmup  # its module imports the Trainer's stack (seconds)

    optimizer = torch.optim.AdamW(groups, weight_decay=0.0)
    schedule = get_linear_schedule_with_warmup(optimizer, int(warmup * steps), steps)
    losses = []
    for step in range(steps):
        start = step * batch % len(blocks)
        value = loss(blocks[start:start + batch])
        value.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(value.detach()))
        progress(label, step + 1, steps)
    return losses
