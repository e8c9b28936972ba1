"""Bits per byte through lm-eval's ``loglikelihood_rolling``: WikiText-2, held-out C4, or your own text.

Protocol: every document is scored with rolling windows of ``max_length`` tokens at batch 1 (the
first window starts from the model's prefix token, as lm-eval does). BPB = total NLL / ln 2 / UTF-8
bytes of the scored text (paper 003, footnote 17), with a bootstrap CI over documents. Lower is
better; %Base is inverted. BPB is per byte, so it stays comparable when an adapter changes the
tokenizer (Vocab Diet's reallocated vocabulary).

Corpora (:mod:`harness.suites.texts`): by default both packaged ones, WikiText-2 (``--set
split=test`` or ``valid``; the tokenized release, detokenized with lm-eval's WikiText detokenizer,
``<unk>`` counted in the details) and the held-out C4 documents (raw web text); ``--set corpus=PATH``
scores only your file (documents separated by blank lines, or JSONL with ``text``).

No training: for a compressed model this is the post-hoc cost of the compression (for ASG, the
product quantization of the tied input/output table without fine-tuning); the scores' setting is
``post-hoc`` (paper 003's ``pretraining`` numbers are another setting). Per-item outputs: each
document's NLL in bits (values) and UTF-8 bytes (weights), keyed by its article index (WikiText-2) or
its line in ``c4_sample.jsonl`` (800-999).

Method runs also report ``kl_from_base``: the mean per-token KL(base || method) of the next-token
distributions on the same documents (nats per token; :func:`harness.measure.divergence.window_kl`),
with the unchanged model as ``ctx.reference`` (the suite sets ``wants_reference``). Its windows are
lm-eval's rolling windows (``max_length`` tokens predicted per window, each window starting from the
token before it; the first from the prefix token), so KL and BPB describe the same predictions. It is
left out when the adapter changed the tokenizer (two vocabularies: KL is undefined).

Encoder-decoders (T5, mT5) are scored through lm-eval's seq2seq model type, which reads each
rolling window with its decoder (the encoder given lm-eval's end-of-text token alone); their
``kl_from_base`` is not computed.

The details also name the path each compressed module of the scored model took, with its calls
(``kernel_paths``: a fused kernel, a Triton kernel replayed from a CUDA graph, a torch reference).

One choice differs from lm-eval's ``wikitext`` task: bytes are counted on the scored
(detokenized) text, not on the original page, so numerator and denominator describe the same text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from harness.suites import texts
from harness.suites.lm_eval_client import render_tasks, run_tasks, write_jsonl

from harness.budgets import Budgets
from harness.methods import kernel_paths
from harness.results.records import ItemOutputs
from harness.sources import corpora
from harness.sources.data import DataSource
from harness.suite import Head, Suite, SuiteContext, SuiteData, SuiteResult, Task, score_items

TASK = "harness_rolling_text"
SETTING = "post-hoc"


@dataclass(frozen=True)
class BpbConfig:
    split: Literal["test", "valid"] = "test"  # the WikiText-2 split scored
    corpus: str = ""                          # a text file to score instead of the packaged corpora


@dataclass(frozen=True)
class BpbBudget:
    documents: int | None   # documents scored per corpus (a seeded sample); None = all
    max_bytes: int | None   # each document cut to about its first max_bytes UTF-8 bytes; None = whole
    max_length: int = 2048  # rolling-window length in tokens


BUDGETS = Budgets(
    smoke=BpbBudget(documents=3, max_bytes=300),
    quick=BpbBudget(documents=16, max_bytes=2000),
    paper=BpbBudget(documents=None, max_bytes=None),
)


class BitsPerByte(Suite):
    name = "bpb"
    description = "Bits per byte via lm-eval loglikelihood_rolling: WikiText-2 and held-out C4, or --set corpus=PATH (lower is better)"
    head = Head("causal_lm")
    kinds = ("decoder", "encoder-decoder")  # an encoder-decoder through lm-eval's seq2seq model type
    default_model = "smollm2"
    config_class = BpbConfig
    budgets = BUDGETS
    wants_reference = True

    def sources(self, config: BpbConfig, budget: BpbBudget) -> tuple[DataSource, ...]:
        if config.corpus:
            return (texts.user_source(config.corpus),)
        return (texts.WIKITEXT[config.split], texts.C4)

    def prepare(self, data_dir: Path | None, config: BpbConfig, budget: BpbBudget) -> SuiteData:
        if config.corpus:
            docs, files = texts.user_corpus(config.corpus, data_dir)
            return SuiteData({Path(config.corpus).stem: docs}, files)
        wiki, wiki_files = texts.wikitext(config.split, data_dir)
        c4, c4_files = texts.c4_heldout(data_dir)
        return SuiteData({"wikitext2": wiki, "c4": c4}, {**wiki_files, **c4_files})

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        budget = ctx.budget
        split = "all" if ctx.config.corpus else ctx.config.split
        seq2seq = getattr(model.config, "is_encoder_decoder", False)
        same = ctx.reference is not None and _same_vocabulary(tokenizer, ctx.reference_tokenizer)
        reference = ctx.reference if same and not seq2seq else None
        scores, items, details = [], [], {"max_length": budget.max_length}
        for name, docs in data.splits.items():
            chosen, ids = texts.sample(docs, budget.documents, budget.max_bytes, np.random.default_rng(ctx.seed))
            nll, n_bytes = self._rolling(model, tokenizer, name, chosen, ctx)
            part = split if name == "wikitext2" else ("heldout" if name == "c4" else "all")
            language = "en" if name in ("wikitext2", "c4") else "-"
            keys = tuple(str(i + (corpora.C4_FIT_DOCUMENTS if name == "c4" else 0)) for i in ids)
            bits = ItemOutputs(name, language, part, "bits_per_byte", keys, tuple(nll / math.log(2)), weights=tuple(n_bytes))
            scores.append(score_items([bits], np.random.default_rng(ctx.seed), higher_is_better=False, setting=SETTING))
            items.append(bits)
            details[name] = {
                "documents": len(chosen), "bytes": int(n_bytes.sum()), "total_nll_nats": float(nll.sum()),
                "tokens": sum(len(tokenizer(t)["input_ids"]) for t in chosen), "unk": sum(t.count(texts.UNK) for t in chosen),
            }
            if name == "c4":
                details[name]["c4_sample.jsonl"] = texts.c4_ranges(len(docs))
            if reference is not None:
                kl = self._divergence(reference, model, tokenizer, chosen, budget.max_length, ctx)
                items.append(ItemOutputs(name, language, part, "kl_from_base", keys, tuple(kl[:, 0]), weights=tuple(kl[:, 1])))
                scores.append(score_items([items[-1]], np.random.default_rng(ctx.seed), higher_is_better=False, setting=SETTING))
        if ctx.reference is not None and reference is None:
            details["kl_from_base"] = ("not computed: an encoder-decoder reads its rolling windows through its decoder (lm-eval's seq2seq type)"
                                       if seq2seq else "not computed: the adapter changed the tokenizer (KL over two vocabularies is undefined)")
        details["kernel_paths"] = kernel_paths.taken(model)
        return SuiteResult(scores, details, items)

    @staticmethod
    def _rolling(model: Any, tokenizer: Any, name: str, docs: list[str], ctx: SuiteContext) -> tuple[np.ndarray, np.ndarray]:
        """Per document: total NLL (nats) and UTF-8 bytes, from lm-eval's rolling log-likelihood."""
        folder = ctx.workdir / name
        data_file = write_jsonl(folder / "texts.jsonl", ({"text": t} for t in docs))
        include = render_tasks(["bpb"], folder, {"texts.jsonl": data_file})
        out = run_tasks(model, tokenizer, [TASK], include, ("bits_per_byte",), ctx, batch_size=1, max_length=ctx.budget.max_length)
        per_doc = out[TASK].values["bits_per_byte"]
        return -per_doc[:, 0], per_doc[:, 1]

    @staticmethod
    def _divergence(reference: Any, model: Any, tokenizer: Any, docs: list[str], max_length: int, ctx: SuiteContext) -> np.ndarray:
        """Per document: summed KL(base || method) over its predicted tokens, and their number."""
        from harness.measure.divergence import rolling_kl

        prefix = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id  # lm-eval's prefix token
        reference.eval().to(ctx.device)
        model.eval().to(ctx.device)
        out = []
        for done, text in enumerate(docs):
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            out.append(rolling_kl(reference, model, ids, prefix, max_length, ctx.device))
            ctx.progress("KL from the unchanged model", done + 1, len(docs))
        return np.asarray(out, dtype=np.float64)


def _same_vocabulary(tokenizer: Any, reference_tokenizer: Any) -> bool:
    return tokenizer is reference_tokenizer or tokenizer.get_vocab() == reference_tokenizer.get_vocab()
