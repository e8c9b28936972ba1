"""Protocol: fine-tune a sentence-pair classifier with HF Trainer, then predict.

Shared by every pair task (XNLI now; GLUE pair tasks later): the suite supplies the data and the
budget, this module supplies training and batched prediction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from transformers import (
    DataCollatorWithPadding,
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from harness.adapter import ProgressFn
from harness.suite import FinetuneBudget, SuiteContext


@dataclass(frozen=True)
class PairSet:
    """Sentence pairs with integer labels and a language tag per row."""

    language: np.ndarray   # (n,) str
    premise: list[str]
    hypothesis: list[str]
    label: np.ndarray      # (n,) int64

    def __len__(self) -> int:
        return len(self.label)

    def take(self, idx: np.ndarray) -> PairSet:
        return PairSet(
            self.language[idx], [self.premise[i] for i in idx], [self.hypothesis[i] for i in idx], self.label[idx]
        )

    def where(self, mask: np.ndarray) -> PairSet:
        return self.take(np.flatnonzero(mask))


def _encode(tokenizer, data: PairSet, max_length: int) -> list[dict]:
    enc = tokenizer(data.premise, data.hypothesis, truncation=True, max_length=max_length)
    keys = list(enc.keys())
    return [{**{k: enc[k][i] for k in keys}, "labels": int(data.label[i])} for i in range(len(data))]


class _TrainProgress(TrainerCallback):
    def __init__(self, progress: ProgressFn):
        self.progress = progress

    def on_step_end(self, args, state, control, **kwargs):
        self.progress("fine-tuning", state.global_step, state.max_steps)


def finetune(model: nn.Module, tokenizer, train: PairSet, budget: FinetuneBudget, ctx: SuiteContext) -> nn.Module:
    """Train all weights (the adapter's codebooks included) with the budget's recipe."""
    args = TrainingArguments(
        output_dir=str(ctx.workdir / "trainer"),
        per_device_train_batch_size=budget.batch_size,
        learning_rate=budget.learning_rate,
        weight_decay=budget.weight_decay,
        num_train_epochs=budget.epochs,
        seed=ctx.seed,
        data_seed=ctx.seed,
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=ctx.device == "cpu",
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=_encode(tokenizer, train, budget.max_length),
        data_collator=DataCollatorWithPadding(tokenizer),
        callbacks=[_TrainProgress(ctx.progress)],
    )
    trainer.remove_callback(PrinterCallback)  # our progress bar replaces its metric prints
    trainer.train()
    return trainer.model


@torch.inference_mode()
def predict(model: nn.Module, tokenizer, data: PairSet, budget: FinetuneBudget, ctx: SuiteContext) -> np.ndarray:
    """Arg-max labels for ``data``, batched by length (shortest first) to limit padding."""
    model.eval().to(ctx.device)
    enc = tokenizer(data.premise, data.hypothesis, truncation=True, max_length=budget.max_length)
    order = np.argsort([len(ids) for ids in enc["input_ids"]], kind="stable")
    collate = DataCollatorWithPadding(tokenizer)
    out = np.empty(len(data), dtype=np.int64)
    steps = range(0, len(order), budget.eval_batch_size)
    for done, start in enumerate(steps):
        idx = order[start:start + budget.eval_batch_size]
        batch = collate([{k: enc[k][i] for k in enc.keys()} for i in idx])
        logits = model(**{k: v.to(ctx.device) for k, v in batch.items()}).logits
        out[idx] = logits.argmax(-1).cpu().numpy()
        ctx.progress("evaluating", done + 1, len(steps))
    return out
