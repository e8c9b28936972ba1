"""Vocab Diet (paper 003: compositional vocabularies): surface forms as base token + transformations.

Post-hoc setting (Sections 3-5) on a decoder:

* Section 4: the decomposition map w -> (b_w, T(w)): English noun, adjective and verb inflections
  (UniMorph's verbs where given, lemminflect's tables for the rest) and capitalization; the
  unspaced variant only with ``unspaced=true`` (off in the post-hoc setup, as the authors run it;
  Section 7 composes it in pretraining) (``harness.methods.vocab.decomposition`` lists the choices).
* Section 3.1: e_w = e_{b_w} + sum_{t in T(w)} e_t; Section 3.2: logit(w) = h.u_{b_w} + sum_t h.u_t,
  one softmax over the whole vocabulary (``harness.methods.vocab.composed``: no V x D matrix is built).
* Section 3.3: each transformation vector starts as the mean offset (form - base) over the pairs
  that show that transformation alone, separately for the input and the output table.
* Section 5: two-stage distillation. Stage 1 trains the input transformations against the
  unchanged model, the output still the original head (the teacher's). Stage 2 adds LoRA on the
  last layers and trains it with the output transformations, the teacher being the stage-1 model.
* Section 7: the freed rows are gone from storage; ``reallocate=N`` spends N of them on new BPE
  merges learned on the fit text (``harness.methods.vocab.reallocation``).

Choices where the paper is open (the authors' code ``posthoc/`` decides where it can):

* Ids: a removed form keeps its token id, so the tokenizer is unchanged (text -> ids -> text is
  the base tokenizer's round trip) and the teacher's logits align with the student's class for
  class; what is freed is its stored row. New merges take ids from V on.
* Patchscopes filter (paper Sections 5 and 6.1, the authors' default ``--remove_patchscopes_mistakes``;
  on by default, ``--set filter=false`` skips it): with the initial transformations, each form's
  composed vector is read by the unchanged model (``harness.methods.vocab.patchscopes``): *embed*
  (the vector itself in ``X, X, X, X,``) and *detok* (its hidden state after any of the first 10
  layers, the embedding included). ``criterion`` picks the one a form must pass to stay composed;
  the default is ``detok``: the paper filters "surface words with failed detokenization" (Section
  6.1) and the authors' ``adapt.py`` drops a form only when no state of layers 0-9 reads back.
  The details hold both readings per transformation over the probed forms (paper Table 1,
  in-vocabulary columns). ``budget.probe_forms`` caps the forms probed: the first N by token id,
  which in a BPE vocabulary follow the merge order, the most common forms; a form that fails at the
  embedding costs up to 10 decodes (SmolLM2 on 2 cores: ~0.3-0.6 s a form), so quick probes
  1,000 of SmolLM2's ~9,200 and the forms beyond keep their own rows (``forms_unprobed_kept``):
  none stays composed unread. The paper profile probes all.
  The probe decodes, so it needs the LM head: a suite that loads the model without it (``tokenizer``,
  which only counts bytes per token) skips it and says so in the run's details (``filter``), its map
  being the unfiltered one.
* Tied models (SmolLM2) keep one stored table for both sides; the input and output transformation
  vectors are still separate tables (paper: E_T and U_T), equal at the start.
* Stage 2's teacher is the stage-1 model (paper Section 5; the authors compute it with the LoRA
  adapters switched off), so stage 2 learns the output side without undoing stage 1.
* LoRA scaled from the paper's Llama-3.1-8B recipe (last 8 of 32 layers, r = alpha = 256 for hidden
  size 4096): the last quarter of the layers, r = alpha = hidden / 16 (SmolLM2: 8 of 30 layers,
  r = 36), on every linear layer (the authors' q, k, v, o and MLP), dropout 0; merged into the
  weights afterwards, so the returned model is a plain transformers model.
* Learning rates are scaled to the short budgets (the paper: 5e-5 over 20k sequences of 256
  tokens); warm-up 3%, weight decay 0, AdamW, as in the paper.
* New tokens' rows start as the mean of the rows of the base pieces they join.
* Fit text: wikitext2_train articles and c4_sample documents, interleaved (the paper distills on
  FineWeb-Edu); wikitext2_train's lower-case words also serve as the English word list.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import chain, zip_longest
from pathlib import Path
from typing import Any, Literal, Sequence

import torch
from torch import nn

from harness.methods import distill
from harness.adapter import (
    Adapter,
    Compressed,
    FitContext,
    ProgressFn,
    no_progress,
    untie,
)
from harness.methods.tables import input_table, replaced_input, unscaled
from harness.budgets import Budgets
from harness.errors import ConfigError
from harness.sources.data import data_root, file_digest
from harness.methods.vocab import decomposition, patchscopes, reallocation
from harness.methods.vocab.composed import ComposedEmbedding, ComposedLMHead
from harness.methods.vocab.decomposition import Decomposition
from harness.methods.vocab.reallocation import NewToken

_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class VocabDietConfig:
    distill: Literal["none", "stage1", "stage2"] = "stage2"  # distillation stages run after the initialisation
    reallocate: int = 0    # freed rows given to new BPE merges learned on the fit text (Section 7)
    filter: bool = True    # keep the own rows of forms whose composed vector fails the Patchscopes probe
    criterion: Literal["detok", "embed"] = "detok"  # the probe's reading the filter requires (Section 5)
    unspaced: bool = False  # also compose forms without the leading space (Section 7's pretraining map)
    unimorph: str = ""     # UniMorph table; "" = <data dir>/unimorph/eng.tsv

    def __post_init__(self) -> None:
        if self.reallocate < 0:
            raise ConfigError(f"reallocate={self.reallocate} must be 0 or positive (freed rows to refill)")


@dataclass(frozen=True)
class VocabDietBudget:
    fit_texts: int         # texts read from each fit corpus
    probe_forms: int | None  # forms put through the Patchscopes filter (the first by token id); None = all;
                             # forms beyond it keep their own rows
    seq_len: int           # distillation block length in tokens
    batch: int
    stage1_steps: int
    stage2_steps: int
    lr_transforms: float   # transformation vectors
    lr_lora: float
    warmup: float = 0.03


BUDGETS = Budgets(
    smoke=VocabDietBudget(fit_texts=40, probe_forms=64, seq_len=32, batch=2, stage1_steps=2, stage2_steps=2,
                          lr_transforms=1e-3, lr_lora=1e-4),
    quick=VocabDietBudget(fit_texts=800, probe_forms=1000, seq_len=128, batch=2, stage1_steps=30, stage2_steps=30,
                          lr_transforms=5e-3, lr_lora=1e-3),
    paper=VocabDietBudget(fit_texts=20000, probe_forms=None, seq_len=256, batch=8, stage1_steps=2500, stage2_steps=2500,
                          lr_transforms=5e-5, lr_lora=5e-5),
)


def mean_offsets(decomp: Decomposition, table: torch.Tensor) -> torch.Tensor:
    """(T, D): per transformation, the mean of table[form] - table[base] over forms with it alone (Section 3.3)."""
    singles = [(f, b, ts[0]) for f, (b, ts) in decomp.forms.items() if len(ts) == 1]
    offsets = table.new_zeros(len(decomp.transformations), table.shape[1])
    counts = table.new_zeros(len(decomp.transformations))
    if singles:
        form, base, kind = (torch.tensor(c) for c in zip(*singles))
        offsets.index_add_(0, kind, table[form] - table[base])
        counts.index_add_(0, kind, torch.ones(len(kind), dtype=table.dtype))
    return offsets / counts.clamp_min(1).unsqueeze(1)


def _stored_rows(table: torch.Tensor, keep: torch.Tensor, new_tokens: Sequence[NewToken]) -> torch.Tensor:
    """Kept rows, then one row per new token: the mean of its base pieces' rows."""
    new = [table[list(t.pieces)].mean(0) for t in new_tokens]
    return torch.cat([table[keep]] + ([torch.stack(new)] if new else []))


def composed_embedding(table: torch.Tensor, decomp: Decomposition, new_tokens: Sequence[NewToken] = ()) -> ComposedEmbedding:
    """The input side over ``table`` (V, D): kept rows, then new tokens; forms point at their base's row."""
    vocab = table.shape[0]
    keep = torch.ones(vocab, dtype=torch.bool)
    keep[list(decomp.forms)] = False
    rows = torch.cat([keep.cumsum(0) - 1, int(keep.sum()) + torch.arange(len(new_tokens))])
    masks = torch.zeros(len(rows), dtype=torch.long)
    for form, (base, kinds) in decomp.forms.items():
        rows[form] = rows[base]
        masks[form] = sum(1 << k for k in kinds)
    return ComposedEmbedding(_stored_rows(table, keep, new_tokens), rows, masks, mean_offsets(decomp, table))


def compose(model: nn.Module, decomp: Decomposition, new_tokens: Sequence[NewToken] = ()) -> nn.Module:
    """Replace the model's tables by composed ones (input, and output when it has a linear head); the
    input keeps what the original module computes (a scale: :func:`harness.methods.tables.replaced_input`)."""
    original = model.get_input_embeddings()
    table = input_table(model).detach()
    head = model.get_output_embeddings()
    embedding = composed_embedding(table, decomp, new_tokens)
    model.set_input_embeddings(replaced_input(original, embedding, "vocabdiet"))
    if isinstance(head, nn.Linear):
        keep = ~embedding.composed()[: table.shape[0]]
        out = head.weight.detach()
        own = None if out.data_ptr() == table.data_ptr() else _stored_rows(out, keep, new_tokens)
        bias = None if head.bias is None else _stored_rows(head.bias.detach().unsqueeze(1), keep, new_tokens).squeeze(1)
        model.set_output_embeddings(ComposedLMHead(embedding, mean_offsets(decomp, out), own, bias))
    untie(model)
    model.config.vocab_size = embedding.num_embeddings
    return model


def _hidden(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return model.base_model(input_ids=ids).last_hidden_state


def probe(teacher: nn.Module, embedding: nn.Module, tokenizer: Any, decomp: Decomposition, marker: str,
          limit: int | None) -> tuple[list[int], patchscopes.Reading]:
    """The first ``limit`` forms by id and the unchanged model's Patchscopes reading of their composed vectors."""
    ids = sorted(decomp.forms)[:limit]
    words = [t.removeprefix(marker) for t in tokenizer.convert_ids_to_tokens(ids)]
    with torch.no_grad():
        vectors = embedding(torch.tensor(ids, dtype=torch.long))
    return ids, patchscopes.read_back(teacher, tokenizer, vectors, words)


def probe_report(decomp: Decomposition, ids: Sequence[int], reading: patchscopes.Reading) -> dict[str, dict[str, float]]:
    """Per transformation (and ``all``): forms probed and the share read back at the embedding and after
    detokenization (paper Table 1's in-vocabulary columns)."""
    groups: dict[str, list[int]] = {"all": list(range(len(ids)))}
    for n, i in enumerate(ids):
        for k in decomp.forms[i][1]:
            groups.setdefault(decomp.transformations[k], []).append(n)
    return {name: {"n": len(rows), **{c: sum(reading.passed(c)[r] for r in rows) / len(rows) for c in patchscopes.CRITERIA}}
            for name, rows in groups.items()}


def stage1(model: nn.Module, teacher: nn.Module, blocks: torch.Tensor, budget: VocabDietBudget,
           progress: ProgressFn) -> list[float]:
    """Input transformations against the unchanged model; logits from the original head."""
    original_head = teacher.get_output_embeddings()

    def loss(batch: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            target = teacher(input_ids=batch).logits
        return distill.kl_to_teacher(original_head(_hidden(model, batch)), target)

    groups = [{"params": [unscaled(model.get_input_embeddings()).transforms], "lr": budget.lr_transforms}]
    return _train(model, groups, loss, blocks, budget.stage1_steps, budget, "stage 1", progress)


def stage2(model: nn.Module, blocks: torch.Tensor, original_head: nn.Module, budget: VocabDietBudget,
           progress: ProgressFn) -> tuple[nn.Module, list[float]]:
    """LoRA on the last quarter of the layers + output transformations, against the stage-1 model
    (the same network with the adapters off and the original head)."""
    wrapped, lora = distill.lora_top_layers(model)
    head = model.get_output_embeddings()

    def loss(batch: torch.Tensor) -> torch.Tensor:
        with torch.no_grad(), wrapped.disable_adapter():
            target = original_head(_hidden(model, batch))
        return distill.kl_to_teacher(head(_hidden(model, batch)), target)

    groups = [{"params": [head.transforms], "lr": budget.lr_transforms},
              {"params": lora, "lr": budget.lr_lora}]
    losses = _train(model, groups, loss, blocks, budget.stage2_steps, budget, "stage 2", progress)
    return wrapped.merge_and_unload(), losses


def _train(model: nn.Module, groups: list[dict], loss: Any, blocks: torch.Tensor, steps: int, budget: VocabDietBudget,
           label: str, progress: ProgressFn) -> list[float]:
    """Train only the parameters in ``groups``; everything is frozen again afterwards."""
    trainable = {id(p) for group in groups for p in group["params"]}
    for p in model.parameters():
        p.requires_grad_(id(p) in trainable)
    model.train()
    try:
        return distill.train(loss, groups, blocks, budget.batch, steps, budget.warmup, label, progress)
    finally:
        model.eval()
        model.requires_grad_(False)


class VocabDietAdapter(Adapter):
    """Vocab Diet on a decoder: composed vocabulary, Patchscopes filter, distillation, reallocation."""

    name = "vocabdiet"
    config_class = VocabDietConfig
    no_recovery = ("it distills against the unchanged model itself (paper 003 Section 5's two stages); "
                   "its training is set with --set distill=none|stage1|stage2")
    kinds = ("decoder",)
    needs_teacher = True
    budgets = BUDGETS

    def corpora(self) -> tuple[str, ...]:
        return ("wikitext2_train", "c4_sample")

    def check(self, vocab_size: int, hidden_size: int) -> None:
        """Before any model loads: the UniMorph table reads, and reallocate cannot exceed the vocabulary."""
        decomposition.read_unimorph(self.unimorph_path())
        if self.config.reallocate >= vocab_size:
            raise ConfigError(f"reallocate={self.config.reallocate} exceeds the vocabulary ({vocab_size} tokens); "
                              "it refills freed rows, a fraction of that")

    def unimorph_path(self) -> Path:
        if self.config.unimorph:
            return Path(self.config.unimorph)
        root = data_root()
        if root is None:
            raise ConfigError("no data directory for the UniMorph table; set HARNESS_DATA_DIR or --set unimorph=PATH")
        return root / "unimorph" / "eng.tsv"

    def decomposition(self, tokenizer: Any, word_counts: Counter) -> tuple[Decomposition, str]:
        """The map of ``tokenizer``'s vocabulary and its leading-space marker."""
        marker = decomposition.leading_space_marker(tokenizer)
        table = decomposition.read_unimorph(self.unimorph_path())
        return decomposition.build(tokenizer.get_vocab(), marker, table, word_counts, tokenizer.all_special_ids,
                                   unspaced=self.config.unspaced), marker

    def compress(self, model: nn.Module, fit: FitContext) -> Compressed:
        texts = {name: fit.corpus(name).texts[: fit.budget.fit_texts] for name in self.corpora()}
        return self.diet(model, fit.tokenizer, fit.teacher, texts, fit.budget, fit.seed, fit.progress)

    def filtered(self, decomp: Decomposition, model: nn.Module, teacher: nn.Module, tokenizer: Any, marker: str,
                 budget: VocabDietBudget) -> tuple[Decomposition, dict[str, Any]]:
        """Section 6.1's filter: a probed form stays composed when the unchanged model reads its composed
        vector back by ``criterion``; failed and unprobed forms keep their own rows."""
        cfg = self.config
        counts = {"forms_probed": 0, "forms_unprobed_kept": 0, "probe_failures": 0}
        if not cfg.filter:
            return decomp, {"filter": "off", **counts}
        if teacher.get_output_embeddings() is None:
            return decomp, {"filter": "skipped: the suite's model has no LM head to decode with", **counts}
        original = model.get_input_embeddings()
        embedding = replaced_input(original, composed_embedding(input_table(model).detach(), decomp), "vocabdiet")
        ids, reading = probe(teacher, embedding, tokenizer, decomp, marker, budget.probe_forms)
        kept = [i for i, ok in zip(ids, reading.passed(cfg.criterion)) if ok]
        return decomp.only(kept), {
            "filter": "probed", "criterion": cfg.criterion, "forms_probed": len(ids),
            "forms_unprobed_kept": len(decomp.forms) - len(ids), "probe_failures": len(ids) - len(kept),
            "probe": probe_report(decomp, ids, reading),
        }

    def diet(self, model: nn.Module, tokenizer: Any, teacher: nn.Module, texts: dict[str, Sequence[str]],
             budget: VocabDietBudget, seed: int = 0, progress: ProgressFn = no_progress) -> Compressed:
        """The whole method on explicit inputs: ``texts`` maps each fit corpus to its texts."""
        cfg = self.config
        words = Counter(w for text in texts.get("wikitext2_train", ()) for w in _WORD.findall(text))
        decomp, marker = self.decomposition(tokenizer, words)
        vocab = input_table(model).shape[0]
        found, found_counts = len(decomp.forms), decomp.counts()
        decomp, filtered = self.filtered(decomp, model, teacher, tokenizer, marker, budget)
        if cfg.reallocate > len(decomp.forms):
            raise ConfigError(f"reallocate={cfg.reallocate} exceeds the {len(decomp.forms)} freed slots; "
                              f"set --set reallocate=N with N <= {len(decomp.forms)}")
        fit_texts = [t for t in chain.from_iterable(zip_longest(*texts.values())) if t]
        new_tokens = reallocation.learn_merges(tokenizer, fit_texts, cfg.reallocate) if cfg.reallocate else []
        model = compose(model, decomp, new_tokens)
        losses, distilled = {}, cfg.distill
        if teacher.get_output_embeddings() is None:  # the suite's model (tokenizer's) has no LM head to distill against
            distilled = "skipped: the suite's model has no LM head to distill with"
        elif cfg.distill != "none":
            steps = budget.stage1_steps + (budget.stage2_steps if cfg.distill == "stage2" else 0)
            blocks = distill.token_blocks(tokenizer, fit_texts, budget.seq_len, steps * budget.batch, seed)
            losses["stage1"] = stage1(model, teacher, blocks[: budget.stage1_steps * budget.batch], budget, progress)
            if cfg.distill == "stage2":
                model, losses["stage2"] = stage2(model, blocks[budget.stage1_steps * budget.batch:],
                                                 teacher.get_output_embeddings(), budget, progress)
        changed = reallocation.with_new_tokens(tokenizer, new_tokens, vocab) if new_tokens else None
        details = {
            "transformations_found": found_counts, "transformations": decomp.counts(), **filtered, "forms_removed": len(decomp.forms),
            "forms_found": found,
            "english_word_tokens": decomp.english_words,
            "freed_share_of_vocab": len(decomp.forms) / vocab,
            "freed_share_of_english_words": decomp.whole_word_forms() / max(1, decomp.english_words),
            "reallocated": len(new_tokens), "unimorph": {str(self.unimorph_path()): file_digest(self.unimorph_path())},
            "distill": distilled, "distill_loss": {stage: [v[0], v[-1]] for stage, v in losses.items()},
            **decomp.details,
        }
        return Compressed(model, changed, vocab - len(decomp.forms) + len(new_tokens), len(decomp.forms), details)

