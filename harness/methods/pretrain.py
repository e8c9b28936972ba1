"""Pretraining with the method: paper 001's regime at small scale, a run option.

Paper 001 (Section 4, Appendix A.1) pretrains RoBERTa-medium from scratch with its k-sub-embeddings
(250k masked-language-modelling steps) and then fine-tunes; swapped into a pretrained model instead,
the codes leave MiniLM at chance (docs/methods.md, Recovery training). ``harness run ... --pretrain
STEPS`` puts any suite run in that regime:

1. The model source (``--model``) is cut to a small encoder: its configuration with the budget's
   layers and feed-forward width (hidden size, heads, vocabulary and tokenizer kept), saved once
   with weights from scratch (:func:`skeleton`) when the run first loads a task model. The suite's
   model loader builds the task model from it, so the run's unchanged-model timing and compression
   report are the small encoder's.
2. A masked-LM model of that configuration is built from scratch (seeded); the model source's
   *pretrained* input table is copied into it and the adapter is fitted on it, so allocations read
   pretrained vectors (paper 001 Algorithm 2 clusters "embeddings of pretrained network"), and a
   tied MLM decoder becomes the method's output head (the paper ties the decoder to the table).
3. Every floating-point parameter of the token-embedding modules is then initialised from scratch
   (normal, the configuration's ``initializer_range``; biases zero): what the adapter fixed stays
   (k-sub's codes, ASG's ConceptIDs), what trains starts random, as the paper's sub-tables do.
4. ``STEPS`` steps of masked-language modelling (HF ``Trainer`` with
   ``DataCollatorForLanguageModeling``: 15% of the tokens, 80/10/10 mask / random / kept) on the fit
   corpora ``wikitext2_train`` and ``c4_sample`` interleaved, in blocks of the budget's length with
   the encoder's special tokens around them (:func:`harness.methods.recover.blocks`); the loss is
   taken at the masked positions only, so the V-wide decoder runs on 15% of the tokens. AdamW with
   paper 001 Table 5's betas (0.9, 0.98) and epsilon 1e-6, linear warm-up and decay. The last
   :data:`HELD_OUT` blocks are kept out; their loss, with the same masks in every run, is recorded.
5. The pretrained backbone's modules (embeddings, layers, and a pooler masked-LM leaves as initialised)
   replace the task model's; its task head stays as built. Then the suite fine-tunes and scores as
   it always does.

``--pretrain 0`` is the no-pretraining control: the same encoder from scratch, fine-tuned only.
The steps, budget, architecture, corpora (sha256) and this module's code fingerprint are the run's
``recipe["pretraining"]`` (:func:`recipe`): part of its identity and of the fit-cache key, and kept
by its baseline, so a method's %Base is against the full table pretrained with the same budget. The
runner's pretrain stage (:mod:`harness.runner.stages.pretrain`) plans it, writes the small encoder
and caches the pretrained backbone apart from any task head, so every suite and task reuses it.

The method takes the adapters that can take ``--recover`` (their trainable tensors are new ones
inside the token-embedding modules: asg, sg, ksub, lowrank, quant) and ``none`` (the full table).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.adapter import Adapter, Applied, FitContext, ProgressFn, no_progress
from harness.errors import ConfigError, TrainingError
from harness.methods import recover
from harness.results.fingerprint import module_fingerprint
from harness.sources import corpora, models

CORPORA = recover.CORPORA
"""The fit corpora the masked-LM reads, interleaved text by text."""

CURVE_POINTS = 50
"""At most this many points of the loss curve are kept in the run's details."""

HELD_OUT = 64
"""Blocks kept out of training (the last in corpus order): the masked-LM loss on them is recorded."""


@dataclass(frozen=True)
class PretrainBudget:
    layers: int                    # transformer layers of the small encoder (hidden size, heads: the model source's)
    intermediate: int              # feed-forward width
    batch: int                     # blocks per step
    seq_len: int                   # tokens per block, special tokens included
    lr: float                      # peak learning rate (paper 001 Table 5: 2e-4 for 8 layers x 512 at batch 128 x 512)
    warmup: float = 0.06           # share of the steps (paper 001: 24k of 250k, about 10%)
    weight_decay: float = 0.01
    mlm_probability: float = 0.15


BUDGETS: dict[str, PretrainBudget] = {
    "smoke": PretrainBudget(layers=1, intermediate=64, batch=2, seq_len=32, lr=1e-3),
    "quick": PretrainBudget(layers=2, intermediate=1536, batch=32, seq_len=128, lr=1e-3),
    # the one-GPU profile (docs/methods.md): selected once the harness has a `gpu` profile
    "gpu": PretrainBudget(layers=4, intermediate=1536, batch=128, seq_len=128, lr=5e-4),
}
"""Per profile; the steps come from ``--pretrain``. See docs/methods.md for how quick was chosen."""

PAPER = ("--pretrain at the paper's scale is not run here: paper 001 pretrains RoBERTa-medium (8 layers x 512) for 250k "
         "steps of 128 x 512 tokens on BooksCorpus + Wikipedia (Table 5), a GPU cluster's work on corpora the harness "
         "does not hold; use --profile quick")


def budget(profile: str) -> PretrainBudget:
    """The profile's budget; the paper profile is refused with what it would take."""
    if profile == "paper":
        raise ConfigError(PAPER)
    return BUDGETS[profile]


def recipe(steps: int, profile: str, hidden: int, heads: int) -> dict[str, Any]:
    """The run's ``recipe["pretraining"]``: the steps, the small encoder's architecture (the profile's
    layers and feed-forward width, the source's ``hidden`` size and ``heads``), the rest of the
    profile's budget, the corpora and this module's code fingerprint (what decides the backbone)."""
    chosen = budget(profile)
    architecture = {"layers": chosen.layers, "hidden": hidden, "heads": heads, "intermediate": chosen.intermediate}
    training = {k: v for k, v in dataclasses.asdict(chosen).items() if k not in ("layers", "intermediate")}
    return {"steps": steps, "corpora": list(CORPORA), "architecture": architecture, **training, "code": module_fingerprint(__name__)}


def skeleton(ref: models.ModelRef, architecture: Mapping[str, int]) -> models.ModelRef:
    """``ref`` cut to ``architecture`` (layers, feed-forward width), saved once under the models cache
    with weights from scratch (seed 0) and ``ref``'s tokenizer: the source the suite's loader builds the
    task model from (its task head keeps its fresh weights; the backbone is replaced by the pretrained one)."""
    digest = hashlib.sha256(json.dumps({"revision": ref.revision, **architecture}, sort_keys=True).encode()).hexdigest()[:16]
    ref = models.located(ref)

    def write(folder: Path) -> None:
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        config = AutoConfig.from_pretrained(ref.location)
        config.num_hidden_layers, config.intermediate_size = architecture["layers"], architecture["intermediate"]
        with torch.random.fork_rng():
            torch.manual_seed(0)
            AutoModel.from_config(config).save_pretrained(folder)
        AutoTokenizer.from_pretrained(ref.location).save_pretrained(folder)

    location = models.convert_once(f"scratch-{digest}", write)
    return dataclasses.replace(ref, location=str(location))


class MaskedPositions(nn.Module):
    """A masked-LM model whose loss reads the masked positions only: the backbone runs on every
    token, the MLM head (the model's child that is not the backbone) on the labelled ones."""

    def __init__(self, mlm: nn.Module):
        super().__init__()
        self.mlm = mlm

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None = None, **_) -> dict:
        prefix = self.mlm.base_model_prefix
        hidden = getattr(self.mlm, prefix)(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        (head,) = [m for name, m in self.mlm.named_children() if name != prefix]
        picked = labels != -100
        return {"loss": F.cross_entropy(head(hidden[picked]).float(), labels[picked])}


def _callback(progress: ProgressFn, curve: list[tuple[int, float]]):
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        """Reports steps and keeps the logged losses."""

        def on_step_end(self, args, state, control, **kwargs):
            progress("pretrain", state.global_step, state.max_steps)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                curve.append((state.global_step, float(logs["loss"])))

    return Progress()


def masked_lm(mlm: nn.Module, tokenizer: Any, texts: list[str], recipe: Mapping[str, Any], seed: int, device: str,
              workdir: Path, progress: ProgressFn = no_progress) -> dict[str, Any]:
    """Train ``mlm`` in place for ``recipe["steps"]`` masked-LM steps; returns what the run records."""
    from transformers import DataCollatorForLanguageModeling, PrinterCallback, Trainer, TrainingArguments

    start, steps = time.perf_counter(), recipe["steps"]
    ids = recover.blocks(tokenizer, texts, "encoder", recipe["seq_len"], steps * recipe["batch"] + HELD_OUT, seed)
    train, held = ids[:-HELD_OUT].tolist(), ids[-HELD_OUT:].tolist()
    args = TrainingArguments(
        output_dir=str(workdir / "pretrain"), per_device_train_batch_size=recipe["batch"], max_steps=steps,
        learning_rate=recipe["lr"], weight_decay=recipe["weight_decay"], warmup_steps=recipe["warmup"],
        adam_beta1=0.9, adam_beta2=0.98, adam_epsilon=1e-6, lr_scheduler_type="linear", seed=seed, data_seed=seed,
        save_strategy="no", logging_strategy="steps", logging_steps=max(1, steps // CURVE_POINTS), report_to="none",
        disable_tqdm=True, use_cpu=device == "cpu", dataloader_num_workers=0, remove_unused_columns=False,
        logging_nan_inf_filter=False,
    )
    curve: list[tuple[int, float]] = []
    collate = functools.partial(DataCollatorForLanguageModeling, tokenizer, mlm_probability=recipe["mlm_probability"], seed=seed)
    model = MaskedPositions(mlm)
    trainer = Trainer(model=model, args=args, train_dataset=[{"input_ids": row} for row in train], data_collator=collate(),
                      callbacks=[_callback(progress, curve)])
    trainer.remove_callback(PrinterCallback)
    loss = trainer.train().training_loss
    if not math.isfinite(loss):
        raise TrainingError(f"pretraining diverged: the mean masked-LM loss is {loss} after {steps} steps; lower the budget's lr")
    model.eval()
    with torch.no_grad():
        batches = [collate()([{"input_ids": row} for row in held[i:i + recipe["batch"]]]) for i in range(0, HELD_OUT, recipe["batch"])]
        held_out = [float(model(**{k: v.to(device) for k, v in b.items()})["loss"]) for b in batches]
    tail = [v for _, v in curve[-max(1, len(curve) // 10):]]
    return {
        "steps": steps, "loss": [curve[0][1], float(np.mean(tail))], "loss_curve": [list(p) for p in curve],
        "held_out_loss": float(np.mean(held_out)), "objective": "masked-LM cross-entropy (nats), masked positions only",
        "tokens": steps * recipe["batch"] * recipe["seq_len"], "blocks": len(train), "epochs": steps * recipe["batch"] / len(train),
        "seconds": time.perf_counter() - start,
    }


def from_scratch(model: nn.Module, std: float, seed: int) -> int:
    """Initialise every floating-point parameter of ``model``'s token-embedding modules (input table,
    output head) from scratch: normal(0, ``std``), 1-D ones (biases) zero. Returns how many values."""
    modules = [m for m in (model.get_input_embeddings(), model.get_output_embeddings()) if m is not None]
    params = {id(p): p for m in modules for p in m.parameters() if p.is_floating_point()}
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in params.values():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=generator) * std)
            else:
                p.zero_()
    return sum(p.numel() for p in params.values())


def attach(backbone: nn.Module, model: nn.Module) -> None:
    """The pretrained backbone's modules (embeddings, layers, pooler) into ``model``'s backbone (its
    ``base_model_prefix`` module), whose task head stays."""
    source, target = backbone, getattr(model, model.base_model_prefix)
    if type(source) is not type(target):
        raise ConfigError(f"the pretrained backbone is a {type(source).__name__}, the task model's a {type(target).__name__}; "
                          "--pretrain needs a model source whose masked-LM and task models share their backbone")
    for name, child in source.named_children():
        setattr(target, name, child)


def backbone(adapter: Adapter, config: Any, source: str, recipe: Mapping[str, Any], data_dir: Path | None,
             fit: FitContext) -> Applied:
    """The backbone of ``config`` (the task model's, pooler included) with ``adapter``'s table, built
    from scratch and pretrained inside a masked-LM model whose decoder is tied to its table (steps 2
    to 4 of the module docstring); ``source`` names the model whose pretrained table the adapter fits on."""
    from transformers import AutoModel, AutoModelForMaskedLM

    with torch.random.fork_rng():
        torch.manual_seed(fit.seed)
        mlm = AutoModelForMaskedLM.from_config(config)
        setattr(mlm, mlm.base_model_prefix, AutoModel.from_config(config))
    mlm.get_output_embeddings().weight = mlm.get_input_embeddings().weight
    table = AutoModel.from_pretrained(models.resolve(source).location).get_input_embeddings().weight
    with torch.no_grad():
        mlm.get_input_embeddings().weight.copy_(table)  # what the allocation reads (tied: the decoder too)
    applied = adapter.apply(mlm, fit)
    values = from_scratch(applied.model, config.initializer_range, fit.seed)
    done: dict[str, Any] = {"steps": 0, "tokens": 0}
    if recipe["steps"]:
        texts = recover.fit_texts({name: corpora.load(name, data_dir).plain() for name in recipe["corpora"]})
        done = masked_lm(applied.model.to(fit.device), fit.tokenizer, texts, recipe, fit.seed, fit.device,
                         fit.workdir or Path("."), fit.progress)
    return dataclasses.replace(applied, model=getattr(applied.model, mlm.base_model_prefix),
                               details={**applied.details, "pretraining": {**done, "initialised_values": values}})
