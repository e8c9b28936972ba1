"""The one fine-tuning protocol: tokenized features + a collator + HF Trainer, then batched prediction.

Every fine-tuning suite is a client: it turns its data into features (dicts of token ids plus
``labels``) with the encoders here or its own (token tagging aligns labels to sub-tokens, QA adds
span positions), picks the collator that pads them, and calls :func:`finetune` and :func:`predict`
with its budget. Single-sentence and pair classification, regression, token tagging and span QA
all train through the same Trainer set-up, so a recipe change lands in one place.

A model that its adapter built from scratch rather than compressed (ADE's one-layer SAT, paper
002) is not fine-tuned but trained: it states its own learning rate and warm-up as the attribute
``training_recipe`` (a dict of :class:`FinetuneBudget` fields), which replaces those fields of the
suite's budget; data sizes, epochs and batch stay the suite's, so methods see the same data.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn
from transformers import DataCollatorForTokenClassification, DataCollatorWithPadding

from harness.adapter import ProgressFn
from harness.errors import TrainingError
from harness.suite import SuiteContext

Features = list[dict[str, Any]]
Collator = Callable[[Features], dict[str, torch.Tensor]]


@dataclass(frozen=True)
class FinetuneBudget:
    """How much data and training a fine-tuning suite spends under one profile."""

    train_examples: int | None  # None = all available
    eval_examples: int | None   # per language / eval set; None = all
    epochs: float
    learning_rate: float
    batch_size: int
    weight_decay: float = 0.01
    max_length: int = 128
    eval_batch_size: int = 64
    warmup: float = 0.0  # warm-up steps, or a fraction of all steps when below 1 (transformers warmup_steps)
    group_by_length: bool = False  # batches of similar length (less padding), drawn from shuffled blocks of 50 batches


def sentence_features(
    tokenizer: Any, first: Sequence[str], second: Sequence[str] | None, labels: Sequence[float] | np.ndarray, max_length: int,
) -> Features:
    """Features of single sentences (``second`` None) or sentence pairs, one label each
    (an int class id, or a float for regression)."""
    enc = tokenizer(list(first), list(second) if second is not None else None, truncation=True, max_length=max_length)
    keys = list(enc.keys())
    return [{**{k: enc[k][i] for k in keys}, "labels": labels[i].item() if hasattr(labels[i], "item") else labels[i]} for i in range(len(first))]


IGNORED = -100  # label of positions the loss skips (torch cross_entropy's ignore_index)


def tagging_features(
    tokenizer: Any, words: Sequence[Sequence[str]], tags: Sequence[Sequence[int]] | None, max_length: int,
) -> tuple[Features, list[np.ndarray]]:
    """Features of pre-split sentences for token tagging, and each word's first sub-token position.

    First-sub-token alignment (BERT, Devlin et al. 2019, Section 5.3): a word's label sits on its
    first sub-token; its other sub-tokens and the special tokens get ``IGNORED``. A SentencePiece
    word-start piece standing alone (XLM-R / me5 split a Chinese character into ``▁`` + the
    character) carries none of the word's text and is the same for every such word, so the next
    sub-token takes the label instead. Without ``tags``
    (evaluation) the features carry no labels. The positions (one per word; -1 for a word cut off
    by ``max_length`` or one the tokenizer turns into no sub-token) say where to read each word's
    prediction.
    """
    enc = tokenizer([list(w) for w in words], is_split_into_words=True, truncation=True, max_length=max_length)
    keys = list(enc.keys())
    blank = _blank_pieces(tokenizer)
    features, firsts = [], []
    for i, sentence in enumerate(words):
        first = np.full(len(sentence), -1)
        ids, word_ids = enc["input_ids"][i], enc.word_ids(i)
        for position, word in enumerate(word_ids):
            if word is None:
                continue
            if first[word] < 0:
                first[word] = position
            elif first[word] == position - 1 and ids[position - 1] in blank:
                first[word] = position
        feature = {k: enc[k][i] for k in keys}
        if tags is not None:
            labels = np.full(len(feature["input_ids"]), IGNORED)
            kept = first >= 0
            labels[first[kept]] = np.asarray(tags[i])[kept]
            feature["labels"] = labels.tolist()
        features.append(feature)
        firsts.append(first)
    return features, firsts


def _blank_pieces(tokenizer: Any) -> frozenset[int]:
    """Ids of sub-tokens that are a word-start marker alone (SentencePiece's ``▁``), if any."""
    return frozenset(i for i in tokenizer.convert_tokens_to_ids(["\u2581"]) if i != tokenizer.unk_token_id and i is not None)


def _progress_callback(progress: ProgressFn):
    """A Trainer callback that reports steps (``fine-tuning``) and finished epochs (``epoch``); built
    here because the Trainer's modules take seconds to import and only training needs them."""
    from transformers import TrainerCallback

    class TrainProgress(TrainerCallback):
        def __init__(self):
            self.epochs_done = 0

        def on_step_end(self, args, state, control, **kwargs):
            progress("fine-tuning", state.global_step, state.max_steps)

        def on_epoch_end(self, args, state, control, **kwargs):
            self.epochs_done += 1
            progress("epoch", self.epochs_done, math.ceil(args.num_train_epochs))

    return TrainProgress()


TRAINING_RECIPE_FIELDS = frozenset({"learning_rate", "warmup", "weight_decay"})
"""The budget fields a model may set for itself (``training_recipe``)."""


def recipe_for(model: nn.Module, budget: FinetuneBudget) -> FinetuneBudget:
    """The budget with the model's own ``training_recipe`` applied (see the module docstring)."""
    own = getattr(model, "training_recipe", None) or {}
    unknown = set(own) - TRAINING_RECIPE_FIELDS
    if unknown:
        raise ValueError(f"{type(model).__name__}.training_recipe sets {sorted(unknown)}; only {sorted(TRAINING_RECIPE_FIELDS)} may be set")
    return dataclasses.replace(budget, **own)


def finetune(model: nn.Module, train: Features, collator: Collator, budget: FinetuneBudget, ctx: SuiteContext) -> nn.Module:
    """Train all weights (the adapter's modules included) on ``train`` with the budget's recipe."""
    from transformers import PrinterCallback, Trainer, TrainingArguments

    budget = recipe_for(model, budget)
    args = TrainingArguments(
        output_dir=str(ctx.workdir / "trainer"),
        per_device_train_batch_size=budget.batch_size,
        learning_rate=budget.learning_rate,
        weight_decay=budget.weight_decay,
        num_train_epochs=budget.epochs,
        warmup_steps=budget.warmup,
        train_sampling_strategy="group_by_length" if budget.group_by_length else "random",
        seed=ctx.seed,
        data_seed=ctx.seed,
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=ctx.device == "cpu",
        dataloader_num_workers=0,
        remove_unused_columns=False,  # features carry exactly what the model takes
        logging_nan_inf_filter=False,  # a NaN step must reach the mean training loss checked below
    )
    trainer = Trainer(model=model, args=args, train_dataset=train, data_collator=collator, callbacks=[_progress_callback(ctx.progress)])
    trainer.remove_callback(PrinterCallback)  # our progress display replaces its metric prints
    loss = trainer.train().training_loss
    if not np.isfinite(loss):
        raise TrainingError(
            f"fine-tuning diverged: the mean training loss is {loss} after {trainer.state.global_step} steps; "
            "the model's or the adapter's weights hold NaN/inf, or the learning rate is too high"
        )
    return trainer.model


@torch.inference_mode()
def predict(
    model: nn.Module, features: Features, collator: Collator, budget: FinetuneBudget, ctx: SuiteContext,
    outputs: Sequence[str] = ("logits",), per_token: bool = False,
) -> dict[str, list[np.ndarray]]:
    """The model's ``outputs`` (e.g. ``logits``, or ``start_logits`` and ``end_logits``) for every
    feature, in feature order: one row per feature, or with ``per_token`` one row per real token
    (padding positions cut off).

    Batched by length (shortest first) to limit padding; labels are not passed to the model.
    """
    model.eval().to(ctx.device)
    order = np.argsort([len(f["input_ids"]) for f in features], kind="stable")
    out: dict[str, list[np.ndarray]] = {name: [None] * len(features) for name in outputs}
    steps = range(0, len(order), budget.eval_batch_size)
    for done, start in enumerate(steps):
        idx = order[start:start + budget.eval_batch_size]
        batch = collator([{k: v for k, v in features[i].items() if k != "labels"} for i in idx])
        result = model(**{k: v.to(ctx.device) for k, v in batch.items()})
        for name in outputs:
            values = getattr(result, name).float().cpu().numpy()
            for row, i in enumerate(idx):
                length = len(features[i]["input_ids"])
                out[name][i] = values[row, :length] if per_token else values[row]
        ctx.progress("evaluating", done + 1, len(steps))
    return out


def padding_collator(tokenizer: Any) -> Collator:
    """Pads ids, masks and scalar labels: sentence and pair classification, regression, span QA."""
    return DataCollatorWithPadding(tokenizer)


def tagging_collator(tokenizer: Any) -> Collator:
    """Pads ids, masks and per-token labels (with ``IGNORED``): token tagging."""
    return DataCollatorForTokenClassification(tokenizer, label_pad_token_id=IGNORED)
