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
product quantization of the tied input/output table without fine-tuning).

One choice differs from lm-eval's ``wikitext`` task: bytes are counted on the scored
(detokenized) text, not on the original page, so numerator and denominator describe the same text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from harness.suites import texts
from harness.suites.lm_eval_client import render_tasks, run_tasks, write_jsonl

from harness.budgets import Budgets
from harness.measure.metrics import bits_per_byte, bootstrap_ratio_ci
from harness.results.records import ItemOutputs, Score
from harness.sources.data import DataSource
from harness.suite import Head, Suite, SuiteContext, SuiteData, SuiteResult, Task

TASK = "harness_rolling_text"


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
    kinds = ("decoder",)
    default_model = "smollm2"
    config_class = BpbConfig
    budgets = BUDGETS

    def sources(self, config: BpbConfig) -> tuple[DataSource, ...]:
        if config.corpus:
            return (texts.user_source(config.corpus),)
        return (texts.WIKITEXT[config.split], texts.C4)

    def prepare(self, data_dir: Path | None, config: BpbConfig) -> SuiteData:
        if config.corpus:
            docs, files = texts.user_corpus(config.corpus, data_dir)
            return SuiteData({Path(config.corpus).stem: docs}, files)
        wiki, wiki_files = texts.wikitext(config.split, data_dir)
        c4, c4_files = texts.c4_heldout(data_dir)
        return SuiteData({"wikitext2": wiki, "c4": c4}, {**wiki_files, **c4_files})

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        budget = ctx.budget
        split = "all" if ctx.config.corpus else ctx.config.split
        scores, items, details = [], [], {"max_length": budget.max_length}
        for name, docs in data.splits.items():
            chosen, ids = texts.sample(docs, budget.documents, budget.max_bytes, np.random.default_rng(ctx.seed))
            nll, n_bytes = self._rolling(model, tokenizer, name, chosen, ctx)
            value = bits_per_byte(float(nll.sum()), int(n_bytes.sum()))
            low, high = (bits_per_byte(v, 1) for v in bootstrap_ratio_ci(nll, n_bytes, np.random.default_rng(ctx.seed)))
            part = split if name == "wikitext2" else ("heldout" if name == "c4" else "all")
            scores.append(Score(name, "en" if name in ("wikitext2", "c4") else "-", part, "bits_per_byte", value, low, high, n=len(chosen), higher_is_better=False))
            keys = tuple(str(i) for i in ids)
            items += [ItemOutputs(name, scores[-1].language, part, "nll", keys, tuple(nll)), ItemOutputs(name, scores[-1].language, part, "bytes", keys, tuple(n_bytes))]
            details[name] = {
                "documents": len(chosen), "bytes": int(n_bytes.sum()), "total_nll_nats": float(nll.sum()),
                "tokens": sum(len(tokenizer(t)["input_ids"]) for t in chosen), "unk": sum(t.count(texts.UNK) for t in chosen),
            }
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
