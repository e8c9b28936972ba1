"""Token tagging (named entities) on BIO files: the reader, seqeval scores and the protocol wikiann and bc5cdr share.

Protocol: fine-tune a token-classification head on the training sentences (label on each word's
first sub-token, ``suites/finetune.py``), then predict every word of the evaluation sentences from
its first sub-token; a word the tokenizer cut off at ``max_length`` is predicted ``O`` (it counts
against recall). Scores per evaluation set (a language, or a split): seqeval's entity-level F1,
precision and recall (CoNLL-2000 rules, seqeval's default mode: an entity is a maximal B/I run of
one type; ``I-X`` after ``O`` opens one) on the 0-1 scale. An all-``O`` tagger finds no entity, so
its F1 is 0: the trivial level (``Score.chance``). ``Score.setting`` is the suite's protocol
(:meth:`TaggingSuite.setting`).

CIs: percentile bootstrap over sentences of the pooled ratios. Per-item outputs, one row per
sentence (id: the file line where it starts), are those ratios' numerators and denominators, so the
corpus scores of any resample (and the paired statistics between two runs) follow exactly: ``f1``
values 2 TP and weights 2 TP + FP + FN (seqeval's micro F1 = 2 TP / (2 TP + FP + FN)), with the
predicted and gold tags; ``precision`` TP over TP + FP; ``recall`` TP over TP + FN. The ``avg`` row
is the mean of the languages' F1, as the runner's paired statistic averages the languages' ratios.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from harness.suites.finetune import finetune, predict, tagging_collator, tagging_features

from harness.errors import DataError
from harness.measure.metrics import Part, bootstrap_intervals
from harness.results.records import ItemOutputs, Score
from harness.suite import Suite, SuiteContext, SuiteData, SuiteResult, Task

OUTSIDE = "O"


@dataclass(frozen=True)
class TaggedSentences:
    """Sentences as words with one BIO tag each, and the file line where each sentence starts."""

    words: list[tuple[str, ...]]
    tags: list[tuple[str, ...]]
    lines: np.ndarray  # (n,) int

    def __len__(self) -> int:
        return len(self.words)

    def take(self, idx: np.ndarray) -> TaggedSentences:
        return TaggedSentences([self.words[i] for i in idx], [self.tags[i] for i in idx], self.lines[idx])

    @staticmethod
    def concat(parts: list[TaggedSentences]) -> TaggedSentences:
        return TaggedSentences([w for p in parts for w in p.words], [t for p in parts for t in p.tags], np.concatenate([p.lines for p in parts]))

    def sample(self, size: int | None, rng: np.random.Generator) -> TaggedSentences:
        """``size`` sentences drawn without replacement (kept in file order), or all of them."""
        if size is None or size >= len(self):
            return self
        return self.take(np.sort(rng.permutation(len(self))[:size]))


def read_bio(path: Path, labels: tuple[str, ...]) -> TaggedSentences:
    """``token<TAB>tag`` per line, a blank line between sentences (CoNLL / XTREME layout)."""
    words, tags, starts = [], [], []
    sentence: list[tuple[str, str]] = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                if sentence:
                    words.append(tuple(w for w, _ in sentence))
                    tags.append(tuple(t for _, t in sentence))
                    sentence = []
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0] or fields[1] not in labels:
                raise DataError(
                    f"{path}:{number}: malformed line {line[:60]!r}: need token<TAB>tag with a tag in {', '.join(labels)}; fix or restore the file"
                )
            if not sentence:
                starts.append(number)
            sentence.append((fields[0], fields[1]))
    if sentence:
        words.append(tuple(w for w, _ in sentence))
        tags.append(tuple(t for _, t in sentence))
    if not words:
        raise DataError(f"{path}: no sentences; expected token<TAB>tag lines with blank lines between sentences")
    return TaggedSentences(words, tags, np.array(starts))


def entity_counts(gold: list[tuple[str, ...]], predicted: list[tuple[str, ...]]) -> np.ndarray:
    """(n, 3) per sentence: correct, predicted and gold entities (seqeval's entity extraction)."""
    from seqeval.metrics.sequence_labeling import get_entities  # seqeval imports scikit-learn (a second)

    out = np.zeros((len(gold), 3), dtype=np.int64)
    for i, (g, p) in enumerate(zip(gold, predicted)):
        truth, guess = set(get_entities(list(g))), set(get_entities(list(p)))
        out[i] = len(truth & guess), len(guess), len(truth)
    return out


def entity_ratios(counts: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per sentence, from its (correct, predicted, gold) entity counts: each score's numerator and
    denominator (seqeval's micro scores are their pooled ratios)."""
    correct, guessed, truth = counts.T.astype(np.float64)
    return {"f1": (2 * correct, guessed + truth), "precision": (correct, guessed), "recall": (correct, truth)}


def entity_scores(
    task: str, language: str, split: str, gold: list, predicted: list, counts: np.ndarray, rng: np.random.Generator, setting: str = "",
) -> list[Score]:
    """seqeval F1, precision and recall of one evaluation set, with bootstrap CIs over sentences."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    gold, predicted = [list(g) for g in gold], [list(p) for p in predicted]  # seqeval takes lists only
    values = {
        "f1": f1_score(gold, predicted, zero_division=0),
        "precision": precision_score(gold, predicted, zero_division=0),
        "recall": recall_score(gold, predicted, zero_division=0),
    }
    ratios = entity_ratios(counts)
    return [
        Score(task, language, split, metric, float(values[metric]), *bootstrap_intervals([Part(ratios[metric])], rng)[0], n=len(gold), chance=0.0,
              setting=setting)
        for metric in values
    ]


def macro_f1(task: str, split: str, scores: list[Score], counts: list[np.ndarray], rng: np.random.Generator, setting: str = "") -> Score:
    """The ``avg`` row: entity F1 averaged over evaluation sets (languages), CI from resampling each."""
    f1 = [s.value for s in scores if s.metric == "f1"]
    low, high = bootstrap_intervals([Part(entity_ratios(c)["f1"]) for c in counts], rng)[0]
    return Score(task, "avg", split, "f1", float(np.mean(f1)), low, high, n=sum(len(c) for c in counts), chance=0.0, setting=setting)


def entity_items(task: str, language: str, split: str, ids: tuple[str, ...], counts: np.ndarray, predicted: list, gold: list) -> list[ItemOutputs]:
    """The per-sentence ratio items of F1 (with the predicted and gold tags), precision and recall."""
    tags = {"predictions": tuple(" ".join(p) for p in predicted), "gold": tuple(" ".join(g) for g in gold)}
    return [
        ItemOutputs(task, language, split, metric, ids, tuple(top.tolist()), weights=tuple(bottom.tolist()), **(tags if metric == "f1" else {}))
        for metric, (top, bottom) in entity_ratios(counts).items()
    ]


class TaggingSuite(Suite):
    """A BIO tagging suite: subclasses name their tags and say which sentences train and which are scored."""

    labels: ClassVar[tuple[str, ...]]  # the BIO tags, id order of the head
    kinds = ("encoder",)

    @abstractmethod
    def training_sentences(self, data: SuiteData, config: Any) -> TaggedSentences:
        """All sentences the tagger may train on (the budget subsamples them)."""

    @abstractmethod
    def setting(self, config: Any) -> str:
        """The protocol as the papers name it (``Score.setting``)."""

    @abstractmethod
    def evaluation_sets(self, data: SuiteData, config: Any) -> tuple[str, dict[str, TaggedSentences]]:
        """The scored split's name and its sentences by language (the scores' ``language``)."""

    def _training(self, data: SuiteData, ctx: SuiteContext) -> TaggedSentences:
        return self.training_sentences(data, ctx.config).sample(ctx.budget.train_examples, np.random.default_rng(ctx.seed))

    def train(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> Any:
        train = self._training(data, ctx)
        ids = [[self.labels.index(t) for t in tags] for tags in train.tags]
        features, _ = tagging_features(tokenizer, train.words, ids, ctx.budget.max_length)
        return finetune(model, features, tagging_collator(tokenizer), ctx.budget, ctx)

    def train_texts(self, task: Task, data: SuiteData, config: Any) -> list[str]:
        return [" ".join(words) for words in self.training_sentences(data, config).words]

    def tag(self, model: Any, tokenizer: Any, sentences: TaggedSentences, ctx: SuiteContext) -> list[tuple[str, ...]]:
        """Predicted tags of every word, read at its first sub-token (``O`` where it has none)."""
        features, firsts = tagging_features(tokenizer, sentences.words, None, ctx.budget.max_length)
        logits = predict(model, features, tagging_collator(tokenizer), ctx.budget, ctx, per_token=True)["logits"]
        return [
            tuple(self.labels[int(np.argmax(scores[p]))] if p >= 0 else OUTSIDE for p in first)
            for scores, first in zip(logits, firsts)
        ]

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        rng = np.random.default_rng(ctx.seed + 1)
        scores, items, all_counts, sizes = [], [], [], {}
        split, sets = self.evaluation_sets(data, ctx.config)
        for language, sentences in sets.items():
            chosen = sentences.sample(ctx.budget.eval_examples, rng)
            predicted = self.tag(model, tokenizer, chosen, ctx)
            counts = entity_counts(chosen.tags, predicted)
            scores += entity_scores(task.name, language, split, chosen.tags, predicted, counts, rng, self.setting(ctx.config))
            items += entity_items(task.name, language, split, tuple(str(line) for line in chosen.lines), counts, predicted, chosen.tags)
            all_counts.append(counts)
            sizes[language] = len(chosen)
        if len(all_counts) > 1:
            scores.append(macro_f1(task.name, split, scores, all_counts, rng, self.setting(ctx.config)))
        details = {"train_sentences": len(self._training(data, ctx)), "eval_sentences": sizes, "max_length": ctx.budget.max_length}
        return SuiteResult(scores, details, items)

