"""Tokenizer statistics: bytes per token, vocabulary size and the share of whole-word tokens.

No training and no model call: the statistics describe the tokenizer the run hands over (adapters
that change the vocabulary hand over a changed tokenizer). Text sets (:mod:`harness.suites.texts`):
WikiText-2 test articles (English, detokenized as in the ``bpb`` suite), the held-out C4 documents
(raw English web text) and XNLI test premises in 15 languages; or ``--set corpus=PATH`` for your own
text (documents separated by blank lines, or JSONL with ``text``).

* bytes per token = UTF-8 bytes / tokens over a text set (paper 003, Section 7: higher is better),
  special tokens not counted, with a bootstrap CI over texts.
* whole-word share = tokens that cover exactly one word (a maximal run of ``\\w`` characters,
  leading whitespace aside) / all tokens. Scripts written without spaces (zh, th) have few such
  runs, so their share is low by construction.
* vocabulary size = ``len(tokenizer)``, added tokens included; lower is better (a smaller
  vocabulary frees embedding rows), so its %Base is base / method.

Per-item outputs: each text's bytes over tokens (bytes per token) and whole-word tokens over tokens,
keyed by the text's index (WikiText-2 article, C4 line, XNLI test row); the vocabulary size is one
item (an exact count: its interval is the point). No chance level applies.
Setting ``intrinsic``: a property of the tokenizer, no model is run.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from harness.suites import texts, xnli

from harness.budgets import Budgets
from harness.results.records import ItemOutputs
from harness.sources import corpora
from harness.sources.data import DataSource
from harness.suite import Suite, SuiteContext, SuiteData, SuiteResult, Task, score_items

_WORD = re.compile(r"\w+")

SETTING = "intrinsic"  # measured on the tokenizer alone


@dataclass(frozen=True)
class TokenizerConfig:
    texts: Literal["all", "wikitext2", "c4", "xnli"] = "all"
    corpus: str = ""  # a text file to measure instead of the packaged text sets


@dataclass(frozen=True)
class TextBudget:
    documents: int | None          # WikiText-2 articles / C4 or corpus documents (seeded sample); None = all
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


BUDGETS = Budgets(
    smoke=TextBudget(documents=3, max_bytes=2000, premises_per_language=20),
    quick=TextBudget(documents=None, max_bytes=None, premises_per_language=1000),
    paper=TextBudget(documents=None, max_bytes=None, premises_per_language=None),
)


class TokenizerStats(Suite):
    name = "tokenizer"
    description = "Tokenizer bytes per token, whole-word share (WikiText-2, C4, XNLI 15 languages, or --set corpus=PATH) and vocabulary size"
    kinds = ("encoder", "decoder")
    default_model = "smollm2"
    config_class = TokenizerConfig
    budgets = BUDGETS

    def sources(self, config: TokenizerConfig, budget: TextBudget) -> tuple[DataSource, ...]:
        if config.corpus:
            return (texts.user_source(config.corpus),)
        chosen = {"wikitext2": texts.WIKITEXT["test"], "c4": texts.C4, "xnli": xnli.SOURCES["test"]}
        return tuple(src for name, src in chosen.items() if config.texts in ("all", name))

    def prepare(self, data_dir: Path | None, config: TokenizerConfig, budget: TextBudget) -> SuiteData:
        if config.corpus:
            docs, files = texts.user_corpus(config.corpus, data_dir)
            return SuiteData({Path(config.corpus).stem: docs}, files)
        readers = {
            "wikitext2": lambda: texts.wikitext("test", data_dir),
            "c4": lambda: texts.c4_heldout(data_dir),
            "xnli": lambda: xnli.load("test", data_dir),
        }
        splits, files = {}, {}
        for name, read in readers.items():
            if config.texts in ("all", name):
                splits[name], found = read()
                files.update(found)
        return SuiteData(splits, files)

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        budget, rng = ctx.budget, np.random.default_rng(ctx.seed)
        text_sets: dict[tuple[str, str], tuple[list[str], list[str]]] = {}  # (task, language) -> (texts, ids)
        for name, docs in data.splits.items():
            if name == "xnli":
                test, positions = xnli.parallel_subset(docs, budget.premises_per_language, rng)
                for lang in xnli.LANGUAGES:
                    rows = np.flatnonzero(test.language == lang)
                    first: dict[str, str] = {}  # unique premises, in order, with the row where each first appears
                    for i in rows:
                        first.setdefault(test.premise[i], str(positions[i]))
                    text_sets[("xnli", lang)] = (list(first), list(first.values()))
            else:
                language = "en" if name in ("wikitext2", "c4") else "-"
                chosen, keep = texts.sample(docs, budget.documents, budget.max_bytes, rng)
                offset = corpora.C4_FIT_DOCUMENTS if name == "c4" else 0
                text_sets[(name, language)] = (chosen, [str(i + offset) for i in keep])
        # an exact count, no sample: its one item is the tokenizer, so its paired interval is the point itself
        items = [ItemOutputs("vocabulary", "all", "-", "vocab_size", ("tokenizer",), (float(len(tokenizer)),))]
        scores = [score_items(items, rng, higher_is_better=False, setting=SETTING)]
        for (name, lang), (chosen, ids) in text_sets.items():
            c = count(tokenizer, chosen)
            for metric, values in (("bytes_per_token", c.bytes), ("whole_word_share", c.whole_word_tokens)):
                items.append(ItemOutputs(name, lang, "test", metric, tuple(ids), tuple(map(float, values)), weights=tuple(map(float, c.tokens))))
                scores.append(score_items([items[-1]], rng, setting=SETTING))
        details = {f"{name}/{lang}": len(chosen) for (name, lang), (chosen, _) in text_sets.items()}
        return SuiteResult(scores, {"texts": details}, items)
