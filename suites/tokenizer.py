"""Tokenizer statistics: bytes per token, vocabulary size and the share of whole-word tokens.

No training and no model call: the statistics describe the tokenizer the run hands over (adapters
that change the vocabulary hand over a changed tokenizer). Text sets: WikiText-2 test articles
(English, detokenized as in the ``bpb`` suite) and XNLI test premises in 15 languages.

* bytes per token = UTF-8 bytes / tokens over a text set (paper 003, Section 7: higher is better),
  special tokens not counted, with a bootstrap CI over texts.
* whole-word share = tokens that cover exactly one word (a maximal run of ``\\w`` characters,
  leading whitespace aside) / all tokens. Scripts written without spaces (zh, th) have few such
  runs, so their share is low by construction.
* vocabulary size = ``len(tokenizer)``, added tokens included; lower is better (a smaller
  vocabulary frees embedding rows), so its %Base is base / method.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from harness.suites import bpb, xnli

from harness.measure.metrics import bootstrap_ratio_ci
from harness.results.records import Score
from harness.suite import Suite, SuiteContext, SuiteData, SuiteResult

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class TokenizerConfig:
    texts: Literal["all", "wikitext2", "xnli"] = "all"


@dataclass(frozen=True)
class TextBudget:
    documents: int | None          # WikiText-2 articles (seeded sample); None = all
    max_bytes: int | None          # each article cut to about this many bytes; None = whole
    premises_per_language: int | None  # XNLI test premises per language; None = all


@dataclass(frozen=True)
class TextCounts:
    """Per-text counts, aligned arrays (one entry per text)."""

    bytes: np.ndarray
    tokens: np.ndarray
    whole_word_tokens: np.ndarray


def count(tokenizer: Any, texts: list[str]) -> TextCounts:
    """UTF-8 bytes, tokens (no special tokens) and whole-word tokens of every text."""
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    whole = [_whole_word_tokens(text, offsets) for text, offsets in zip(texts, enc["offset_mapping"])]
    return TextCounts(
        np.array([len(t.encode("utf-8")) for t in texts]),
        np.array([len(ids) for ids in enc["input_ids"]]),
        np.array(whole),
    )


def _whole_word_tokens(text: str, offsets: list[tuple[int, int]]) -> int:
    """Tokens whose span (leading whitespace dropped) is exactly one word and is no other token's."""
    words = {m.span() for m in _WORD.finditer(text)}
    spans = Counter()
    for start, end in offsets:
        while start < end and text[start].isspace():
            start += 1
        spans[(start, end)] += 1
    return sum(1 for span, n in spans.items() if n == 1 and span in words)


class TokenizerStats(Suite):
    name = "tokenizer"
    description = "Tokenizer bytes per token, whole-word share (WikiText-2, XNLI 15 languages) and vocabulary size"
    head = "base"
    kinds = ("encoder", "decoder")
    default_model = "smollm2"
    config_class = TokenizerConfig

    def budget(self, profile: str) -> TextBudget:
        if profile == "smoke":
            return TextBudget(documents=3, max_bytes=2000, premises_per_language=20)
        if profile == "quick":
            return TextBudget(documents=None, max_bytes=None, premises_per_language=1000)
        return TextBudget(documents=None, max_bytes=None, premises_per_language=None)

    def recipe(self, profile: str, config: TokenizerConfig) -> dict[str, Any]:
        return dataclasses.asdict(self.budget(profile))

    def prepare(self, data_dir: Path | None, config: TokenizerConfig) -> SuiteData:
        splits, files = {}, {}
        if config.texts in ("all", "wikitext2"):
            splits["wikitext2"], found = bpb.load("test", data_dir)
            files.update(found)
        if config.texts in ("all", "xnli"):
            splits["xnli"], found = xnli.load("test", data_dir)
            files.update(found)
        return SuiteData(splits, files)

    def evaluate(self, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        budget, rng = self.budget(ctx.profile), np.random.default_rng(ctx.seed)
        text_sets: dict[tuple[str, str], list[str]] = {}
        if "wikitext2" in data.splits:
            docs = data.splits["wikitext2"]
            keep = range(len(docs)) if budget.documents is None else np.sort(rng.permutation(len(docs))[: budget.documents])
            text_sets[("wikitext2", "en")] = [bpb.prefix(docs[i], budget.max_bytes) for i in keep]
        if "xnli" in data.splits:
            test = xnli.parallel_subset(data.splits["xnli"], budget.premises_per_language, rng)
            for lang in xnli.LANGUAGES:
                rows = np.flatnonzero(test.language == lang)
                text_sets[("xnli", lang)] = list(dict.fromkeys(test.premise[i] for i in rows))  # unique, in order
        scores = [Score("vocabulary", "all", "-", "vocab_size", float(len(tokenizer)), higher_is_better=False)]
        for (task, lang), texts in text_sets.items():
            scores.extend(self._scores(task, lang, count(tokenizer, texts), rng))
        details = {f"{task}/{lang}": len(texts) for (task, lang), texts in text_sets.items()}
        return SuiteResult(scores, {"texts": details})

    @staticmethod
    def _scores(task: str, lang: str, c: TextCounts, rng: np.random.Generator) -> list[Score]:
        n = len(c.bytes)
        low, high = bootstrap_ratio_ci(c.bytes, c.tokens, rng)
        ww_low, ww_high = bootstrap_ratio_ci(c.whole_word_tokens, c.tokens, rng)
        return [
            Score(task, lang, "test", "bytes_per_token", float(c.bytes.sum() / c.tokens.sum()), low, high, n=n),
            Score(task, lang, "test", "whole_word_share", float(c.whole_word_tokens.sum() / c.tokens.sum()), ww_low, ww_high, n=n),
        ]
