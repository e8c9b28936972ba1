"""Bits per byte on WikiText-2 (Merity et al., 2016) through lm-eval's ``loglikelihood_rolling``.

Protocol: every article of the chosen split is one document, detokenized with lm-eval's own
WikiText detokenizer (the files on hand are the tokenized release, with `` @-@ `` and ``<unk>``),
scored with rolling windows of ``max_length`` tokens at batch 1 (the first window starts from the
model's prefix token, as lm-eval does). BPB = total NLL / ln 2 / UTF-8 bytes of the scored text
(paper 003, footnote 17), with a bootstrap CI over documents. Lower is better; %Base is inverted.

No training: for a compressed model this is the post-hoc cost of the compression (for ASG, the
product quantization of the tied input/output table without fine-tuning).

One choice differs from lm-eval's ``wikitext`` task: bytes are counted on the scored
(detokenized) text, not on the original page, so numerator and denominator describe the same text.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from harness.suites.lm_eval_client import render_tasks, run_tasks, write_jsonl

from harness.errors import DataError
from harness.measure.metrics import bits_per_byte, bootstrap_ratio_ci
from harness.results.records import Score
from harness.sources.data import local_or_hub
from harness.suite import Suite, SuiteContext, SuiteData, SuiteResult

FILES = {"valid": "wikitext2/valid.txt", "test": "wikitext2/test.txt"}
HUB_ID = "Salesforce/wikitext"  # config wikitext-2-v1: the tokenized release, one line per row
TASK = "harness_wikitext2"
_ARTICLE = re.compile(r"^ = [^=].* = $")  # top-level heading " = Title = " starts an article


@dataclass(frozen=True)
class BpbConfig:
    split: Literal["test", "valid"] = "test"


@dataclass(frozen=True)
class BpbBudget:
    documents: int | None   # articles scored (a seeded sample); None = all
    max_bytes: int | None   # each article cut to about its first max_bytes UTF-8 bytes; None = whole
    max_length: int = 2048  # rolling-window length in tokens


def articles(lines: list[str]) -> list[str]:
    """Group WikiText lines into articles (a top-level heading starts one), detokenized."""
    from lm_eval.tasks.wikitext.preprocess_wikitext import wikitext_detokenizer

    pages: list[list[str]] = []
    for line in lines:
        if _ARTICLE.match(line.rstrip("\n")) or not pages:
            pages.append([])
        pages[-1].append(line)
    texts = [wikitext_detokenizer({"page": "".join(page)}).strip() for page in pages]
    return [t for t in texts if t]


def _read_local(path: Path) -> list[str]:
    docs = articles(path.read_text(encoding="utf-8").splitlines(keepends=True))
    if len(docs) < 2:
        raise DataError(f"{path}: found {len(docs)} article(s); expected the WikiText-2 release file with ' = Title = ' headings")
    return docs


def _read_hub(split: str) -> list[str]:
    from datasets import load_dataset

    rows = load_dataset(HUB_ID, "wikitext-2-v1", split="validation" if split == "valid" else "test")
    return articles(list(rows["text"]))


def load(split: str, data_dir: Path | None) -> tuple[list[str], dict[str, str]]:
    """WikiText-2 ``valid`` or ``test`` articles, from the data directory or the hub."""
    return local_or_hub(data_dir, [FILES[split]], lambda paths: _read_local(paths[0]), HUB_ID, lambda: _read_hub(split))


def prefix(text: str, max_bytes: int | None) -> str:
    """The text cut to at most ``max_bytes`` UTF-8 bytes, at a whitespace boundary."""
    if max_bytes is None or len(text.encode("utf-8")) <= max_bytes:
        return text
    head = text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
    cut = max(head.rfind(" "), head.rfind("\n"))
    return head[:cut] if cut > 0 else head


class BitsPerByte(Suite):
    name = "bpb"
    description = "WikiText-2 bits per byte via lm-eval loglikelihood_rolling (lower is better)"
    head = "causal_lm"
    kinds = ("decoder",)
    default_model = "smollm2"
    config_class = BpbConfig

    def budget(self, profile: str) -> BpbBudget:
        if profile == "smoke":
            return BpbBudget(documents=3, max_bytes=300)
        if profile == "quick":
            return BpbBudget(documents=16, max_bytes=2000)
        return BpbBudget(documents=None, max_bytes=None)

    def recipe(self, profile: str, config: BpbConfig) -> dict[str, Any]:
        return dataclasses.asdict(self.budget(profile))

    def prepare(self, data_dir: Path | None, config: BpbConfig) -> SuiteData:
        docs, files = load(config.split, data_dir)
        return SuiteData({config.split: docs}, files)

    def evaluate(self, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        budget, split = self.budget(ctx.profile), ctx.config.split
        docs = data.splits[split]
        if budget.documents is not None:
            rng = np.random.default_rng(ctx.seed)
            docs = [docs[i] for i in np.sort(rng.permutation(len(docs))[: budget.documents])]
        texts = [prefix(d, budget.max_bytes) for d in docs]
        data_file = write_jsonl(ctx.workdir / "wikitext2.jsonl", ({"text": t} for t in texts))
        include = render_tasks(["bpb"], ctx.workdir, {"wikitext2.jsonl": data_file})
        out = run_tasks(model, tokenizer, [TASK], include, ("bits_per_byte",), ctx, batch_size=1, max_length=budget.max_length)
        per_doc = out[TASK].values["bits_per_byte"]
        nll, n_bytes = -per_doc[:, 0], per_doc[:, 1]
        value = bits_per_byte(float(nll.sum()), int(n_bytes.sum()))
        low, high = (bits_per_byte(v, 1) for v in bootstrap_ratio_ci(nll, n_bytes, np.random.default_rng(ctx.seed)))
        score = Score("wikitext2", "en", split, "bits_per_byte", value, low, high, n=len(texts), higher_is_better=False)
        details = {
            "documents": len(texts),
            "bytes": int(n_bytes.sum()),
            "tokens": sum(len(tokenizer(t)["input_ids"]) for t in texts),
            "max_length": budget.max_length,
            "total_nll_nats": float(nll.sum()),
        }
        return SuiteResult([score], details)
