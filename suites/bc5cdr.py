"""BC5CDR (Li et al., 2016): chemical and disease mentions in PubMed abstracts, seqeval entity F1.

Paper 000 Tables 3-4 (BERT-base and BioBERT, F1 and %Base). The tagger is fine-tuned on the
training split and scored on test (``--set split=devel`` scores the development split instead,
for choosing settings without touching test). Protocol, scores and per-sentence outputs:
:mod:`harness.suites.tagging`.
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

LABELS = ("O", "B-Chemical", "I-Chemical", "B-Disease", "I-Disease")

BUDGETS = Budgets(
    smoke=FinetuneBudget(train_examples=48, eval_examples=16, epochs=1, learning_rate=1e-4, batch_size=16, max_length=64),
    # MiniLM-L6 on a 2-core CPU
    quick=FinetuneBudget(train_examples=None, eval_examples=1000, epochs=1, learning_rate=1e-4, batch_size=32),
    # paper 000 Appendix A's encoder recipe for NER (it gives none for BC5CDR): lr 5e-5, weight decay 0.01, batch 128, 2 epochs
    paper=FinetuneBudget(train_examples=None, eval_examples=None, epochs=2, learning_rate=5e-5, batch_size=128, max_length=256),
)


@dataclass(frozen=True)
class Bc5cdrConfig:
    split: Literal["test", "devel"] = "test"  # the split scored


class BC5CDR(TaggingSuite):
    name = "bc5cdr"
    description = "BC5CDR biomedical NER (chemicals, diseases): fine-tune on train, seqeval entity F1 on test (or devel)"
    labels = LABELS
    head = Head("token_classification", LABELS)
    default_model = "minilm"
    config_class = Bc5cdrConfig
    budgets = BUDGETS

    def sources(self, config: Bc5cdrConfig, budget: FinetuneBudget) -> tuple[DataSource, ...]:
        return (DataSource(("bc5cdr/train.tsv",)), DataSource((f"bc5cdr/{config.split}.tsv",)))

    def prepare(self, data_dir: Path | None, config: Bc5cdrConfig, budget: FinetuneBudget) -> SuiteData:
        splits, files = {}, {}
        for src, split in zip(self.sources(config, budget), ("train", config.split)):
            splits[split], provenance = local_or_hub(data_dir, src, lambda paths: read_bio(paths[0], LABELS))
            files.update(provenance)
        return SuiteData(splits, files)

    def training_sentences(self, data: SuiteData, config: Bc5cdrConfig) -> TaggedSentences:
        return data.splits["train"]

    def setting(self, config: Bc5cdrConfig) -> str:
        return "fine-tuned"  # the tagger is fine-tuned on BC5CDR's own training split

    def evaluation_sets(self, data: SuiteData, config: Bc5cdrConfig) -> tuple[str, dict[str, TaggedSentences]]:
        return config.split, {"en": data.splits[config.split]}
