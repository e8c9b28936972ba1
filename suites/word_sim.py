"""Word similarity: Spearman correlation between a model's word similarities and human ratings.

No training. For every pair of a data set (``<data dir>/word_similarity/EN-<set>.txt``, lines
``word1<TAB>word2<TAB>score``) the model scores the two words, and the score is Spearman's rho with
the gold ratings, per data set and averaged over the sets (paper 004 Table 10 averages its sets
unweighted), each with a bootstrap CI over pairs; chance is 0; setting ``intrinsic``. Per-item
outputs: each pair's model similarity and gold rating (Spearman's items,
:func:`harness.suite.statistic_items`), stored under the set's task and again under task
``word_sim`` with the set as language, so the sets and their average get the runner's paired CI.
The sets overlap (WS-353-SIM and -REL are subsets of WS-353-ALL, MC-30 of RG-65), so the average
keeps every set, as paper 004 does, and its bootstrap resamples word pairs as clusters
(:func:`pair_key`): a pair in three sets is drawn once for all three.

A word's vector in a context is the mean of its sub-token vectors in the model's last hidden layer
(:func:`harness.suites.word_vectors.word_vectors`). Its occurrences come from a context corpus
(``--set contexts=wikitext2_train``, WikiText-2 train: Wikipedia, as paper 004's 5% of English
Wikipedia): at most the budget's ``contexts_per_word`` sentences per word (the paper's 8,000 in the
``paper`` profile), a seeded uniform sample of the word's occurrences in them. A word that never
occurs there has one occurrence, its vector encoded alone (count in the details), so every pair is
scored. With ``vectors=contextual`` (default) the scores are (metric names):

* ``spearman`` (headline): paper 004 Appendix E's scoring, a pair scores the largest dot product
  over the two words' vectors (:func:`max_similarity`). An adapter with senses (one whose
  :meth:`harness.adapter.Adapter.word_senses` gives them, paper 004's ``multisense``) gives each
  word its k senses, clustered from exactly these occurrences read from the unchanged model (its
  drop-in suspended); every other run, the baseline included, uses the occurrences themselves,
  unclustered, read through the model as the adapter returned it. So the baseline's headline is
  the same function over the same vectors as the senses': %Base isolates what clustering the
  occurrences into k senses loses (with k >= ``contexts_per_word`` the senses are the occurrences
  and %Base is 100).
* ``spearman_mean_context``: the cosine of the words' mean occurrence vectors (the one-sense
  version without the dot product's norms).
* ``spearman_alone``: the cosine of the words encoded alone (with the model's special tokens, left
  out of the mean): no context at all.
* ``spearman_static``: the cosine of the mean of the words' rows of the input embedding table. A
  table adapter (asg, sg, ksub, quant ...) changes these directly: the effect of the method on the
  table itself, beside its effect on the model.

The three references are read through the model as the adapter returned it (multisense: with its
token drop-in), so each pairs with the baseline's same metric. With ``vectors=static`` the headline
is the static cosine alone. The run's details say which figure is the headline and why
(``headline``), with the senses per word and the words whose occurrences were clustered.

Out-of-vocabulary words: the tokenizers here are sub-word tokenizers, so every word has a vector
(a rare word is the mean of its pieces; the details count words split into several pieces and
words containing the unknown token). No pair is skipped. Words are encoded as the tokenizer
encodes the start of a text (no leading space for byte-level BPE decoders), case as in the file.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
from torch import nn

from harness.budgets import Budgets
from harness.errors import ConfigError, DataError
from harness.measure.metrics import Part, bootstrap_intervals
from harness.measure.statistics import point, spearman
from harness.results.records import Score
from harness.sources import corpora
from harness.sources.data import DataSource, local_or_hub
from harness.suite import Head, Suite, SuiteContext, SuiteData, SuiteResult, Task, score_items, statistic_items
from harness.suites.word_vectors import alone_vectors, bare, static_vectors, word_occurrences, word_vectors

SETS = ("MC-30", "RG-65", "WS-353-ALL", "WS-353-SIM", "WS-353-REL", "MTurk-287", "MEN-TR-3k")
SETTING = "intrinsic"  # no training: the model's own word vectors against human ratings (paper 004 Table 10)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def set_file(name: str) -> str:
    return f"word_similarity/EN-{name}.txt"


@dataclass(frozen=True)
class WordSimConfig:
    sets: str = ",".join(SETS)                          # data sets: word_similarity/EN-<name>.txt
    vectors: Literal["contextual", "static"] = "contextual"
    contexts: str = "wikitext2_train"                   # sentences for the senses of adapters with senses

    def __post_init__(self) -> None:
        names = self.set_names
        if not names or len(set(names)) != len(names):
            raise ConfigError(f"--set sets={self.sets} must name each data set once (files word_similarity/EN-<name>.txt)")
        corpora.source(self.contexts)  # a known corpus name or a hub id

    @property
    def set_names(self) -> tuple[str, ...]:
        return tuple(n.strip() for n in self.sets.split(",") if n.strip())


@dataclass(frozen=True)
class WordSimBudget:
    pairs: int | None          # pairs scored per data set (a seeded sample); None = all
    contexts_per_word: int     # context sentences per word for adapters with senses
    batch_size: int = 64


BUDGETS = Budgets(
    smoke=WordSimBudget(pairs=20, contexts_per_word=3),
    quick=WordSimBudget(pairs=None, contexts_per_word=10),
    paper=WordSimBudget(pairs=None, contexts_per_word=8000),  # paper 004 Appendix E: <= 8,000 vectors per word
    disclosed={profile: "a word without contexts gets its one sense encoded alone from the model's own layer (was: through the sense drop-in), changed after multisense's avg %Base was seen (96.6 -> 98.6 on MiniLM quick)" for profile in ("quick", "paper")},
)


@dataclass(frozen=True)
class WordPairs:
    first: list[str]
    second: list[str]
    gold: np.ndarray   # (n,) float ratings
    lines: list[int]   # each pair's line in its file (the item id)

    def take(self, idx: np.ndarray) -> WordPairs:
        return WordPairs([self.first[i] for i in idx], [self.second[i] for i in idx], self.gold[idx], [self.lines[i] for i in idx])


def read_pairs(path: Path) -> WordPairs:
    """``word1<TAB>word2<TAB>score`` lines (blank lines skipped); DataError naming file and line."""
    first, second, gold, lines = [], [], [], []
    for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        fields = text.split("\t")
        if len(fields) != 3 or not fields[0].strip() or not fields[1].strip():
            raise DataError(f"{path}:{line}: expected word1<TAB>word2<TAB>score, got {len(fields)} field(s); fix the line")
        try:
            gold.append(float(fields[2]))
        except ValueError:
            raise DataError(f"{path}:{line}: score {fields[2]!r} is not a number; fix the line") from None
        first.append(fields[0].strip())
        second.append(fields[1].strip())
        lines.append(line)
    if len(gold) < 3:
        raise DataError(f"{path}: {len(gold)} pair(s); a rank correlation needs at least 3")
    return WordPairs(first, second, np.array(gold, dtype=np.float64), lines)


def context_sentences(texts: tuple[str, ...], words: list[str], per_word: int, seed: int) -> list[str]:
    """Sentences of ``texts`` in a seeded order, each kept while it holds a word of ``words`` seen in
    fewer than ``per_word`` kept sentences: a bounded, balanced set of contexts for every word."""
    wanted = {w.lower() for w in words}
    sentences = [s for text in texts for s in SENTENCE_END.split(text)]
    seen: dict[str, int] = {}
    kept = []
    for i in np.random.default_rng(seed).permutation(len(sentences)):
        found = {bare(t) for t in sentences[i].split()} & wanted
        if any(seen.get(w, 0) < per_word for w in found):
            kept.append(sentences[i])
            for w in found:
                seen[w] = seen.get(w, 0) + 1
    return kept


def pair_key(first: str, second: str) -> str:
    """A word pair as one resampling unit wherever it occurs: case-folded, order-free (WS-353-SIM and
    -REL are subsets of WS-353-ALL, MC-30 of RG-65, and MEN shares pairs with both)."""
    return "|".join(sorted((first.casefold(), second.casefold())))


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two (n, D) arrays."""
    return np.sum(a * b, 1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)


def max_similarity(sets: Sequence[np.ndarray], first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Paper 004 Appendix E's pair score: for each index pair (``first[p]``, ``second[p]``) into
    ``sets`` (one (n_w, D) matrix per word: its senses, or its unclustered occurrences), the largest
    dot product over the two words' rows (NaN when a word has none)."""
    return np.array([float((sets[a] @ sets[b].T).max()) if len(sets[a]) and len(sets[b]) else float("nan")
                     for a, b in zip(first, second)])


class WordSimilarity(Suite):
    name = "word_sim"
    description = "Word similarity: Spearman of paper 004's max dot product over context occurrences (or a method's senses) with human ratings"
    head = Head("base")
    kinds = ("encoder", "decoder")
    default_model = "minilm"
    config_class = WordSimConfig
    budgets = BUDGETS

    def sources(self, config: WordSimConfig, budget: WordSimBudget) -> tuple[DataSource, ...]:
        return (DataSource(tuple(set_file(n) for n in config.set_names)), corpora.source(config.contexts))

    def prepare(self, data_dir: Path | None, config: WordSimConfig, budget: WordSimBudget) -> SuiteData:
        names = config.set_names
        sets, files = local_or_hub(
            data_dir, DataSource(tuple(set_file(n) for n in names)), lambda paths: [read_pairs(p) for p in paths], lambda: None,
        )
        contexts = corpora.load(config.contexts, data_dir)
        return SuiteData({**dict(zip(names, sets)), "contexts": contexts.texts}, {**files, **contexts.files})

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        config, budget = ctx.config, ctx.budget
        rng = np.random.default_rng(ctx.seed)
        sets = {n: self._sample(data.splits[n], budget.pairs, ctx.seed) for n in config.set_names}
        words = sorted({w for s in sets.values() for w in (*s.first, *s.second)})
        index = {w: i for i, w in enumerate(words)}
        model.eval()
        static = static_vectors(model, tokenizer, words)
        measures, details = self._similarities(model, tokenizer, words, static, data, ctx)
        scores, items = [], []
        for metric, sim in measures.items():
            groups = []
            for name, pairs in sets.items():
                values = sim(np.array([index[w] for w in pairs.first]), np.array([index[w] for w in pairs.second]))
                low, high = bootstrap_intervals([Part([values, pairs.gold], spearman)], rng)[0]
                scores.append(Score(name, "en", "all", metric, point(spearman, values, pairs.gold), low, high, n=len(values), chance=0.0, setting=SETTING))
                items.append(statistic_items(name, "en", "all", metric, "spearman", pairs.lines, values, pairs.gold))  # the set's score
                groups.append(dataclasses.replace(  # the average's group: a word pair in several sets is one cluster
                    statistic_items("word_sim", name, "all", metric, "spearman", pairs.lines, values, pairs.gold),
                    clusters=tuple(pair_key(a, b) for a, b in zip(pairs.first, pairs.second))))
            items += groups
            scores.append(score_items(groups, rng, chance=0.0, setting=SETTING))
        details.update(self._vocabulary(tokenizer, words), pairs={n: len(s.gold) for n, s in sets.items()}, pairs_skipped=0)
        return SuiteResult(scores, details, items)

    @staticmethod
    def _sample(pairs: WordPairs, n: int | None, seed: int) -> WordPairs:
        if n is None or n >= len(pairs.gold):
            return pairs
        return pairs.take(np.sort(np.random.default_rng(seed).permutation(len(pairs.gold))[:n]))

    def _similarities(self, model: Any, tokenizer: Any, words: list[str], static: np.ndarray, data: SuiteData,
                      ctx: SuiteContext) -> tuple[dict[str, Any], dict[str, Any]]:
        """The similarity of word index pairs per metric (the headline ``spearman`` first), and how
        they were computed (module docstring)."""
        def cosines(vectors: np.ndarray):
            return lambda a, b: cosine(vectors[a], vectors[b])

        def best_dot(sets: list[np.ndarray]):
            return lambda a, b: max_similarity(sets, a, b)

        if ctx.config.vectors == "static":
            return {"spearman": cosines(static)}, {"representation": "static", "headline": "spearman: cosine of the static table's word vectors"}
        budget = ctx.budget
        alone = alone_vectors(model, tokenizer, words, budget.batch_size)
        texts = context_sentences(data.splits["contexts"], words, budget.contexts_per_word, ctx.seed)
        found = word_vectors(model, tokenizer, texts, words, cap=budget.contexts_per_word, seed=ctx.seed)
        occurrences = word_occurrences(found, alone)
        facts: dict[str, Any] = {
            "representation": "occurrences", "context_sentences": len(texts), "words_without_contexts": len(words) - len(found.ids),
            "occurrences_per_word_histogram": _histogram(occurrences),
            "headline": ("spearman: the largest dot product over the two words' context occurrences, unclustered (paper 004 "
                         "Appendix E's scoring), the function a method's senses are scored with over the same contexts"),
        }
        measures = {"spearman": best_dot(occurrences), "spearman_mean_context": cosines(np.stack([o.mean(0) for o in occurrences])),
                    "spearman_alone": cosines(alone), "spearman_static": cosines(static)}
        found_senses = self._senses(model, tokenizer, texts, words, ctx)
        if found_senses is not None:
            measures["spearman"] = best_dot(found_senses)
            facts.update(
                representation="senses", senses=sum(len(s) for s in found_senses), senses_per_word_histogram=_histogram(found_senses),
                words_clustered=sum(len(s) < len(o) for s, o in zip(found_senses, occurrences)),
                headline=("spearman: the largest dot product over the two words' senses (paper 004 Appendix E), clustered from "
                          "their context occurrences read from the unchanged model; the baseline scores the same function over "
                          "those occurrences unclustered, so %Base isolates the clustering"))
        return measures, facts

    @staticmethod
    def _senses(model: nn.Module, tokenizer: Any, texts: list[str], words: list[str], ctx: SuiteContext) -> list[np.ndarray] | None:
        """The words' senses the run's adapter declares (:meth:`harness.adapter.Adapter.word_senses`),
        clustered from their occurrences read as every run reads them; None for a method without senses."""
        if ctx.adapter is None:
            return None
        budget = ctx.budget

        def occurrences(m: nn.Module) -> list[np.ndarray]:
            found = word_vectors(m, tokenizer, texts, words, cap=budget.contexts_per_word, seed=ctx.seed)
            return word_occurrences(found, alone_vectors(m, tokenizer, words, budget.batch_size))

        return ctx.adapter.word_senses(model, occurrences, ctx.seed)

    @staticmethod
    def _vocabulary(tokenizer: Any, words: list[str]) -> dict[str, int]:
        """How the tokenizer covers the words: every word has pieces; how many are split or unknown."""
        pieces = [tokenizer(w, add_special_tokens=False)["input_ids"] for w in words]
        unk = tokenizer.unk_token_id
        return {"words": len(words), "words_split": sum(len(p) > 1 for p in pieces),
                "words_with_unknown_piece": sum(unk is not None and unk in p for p in pieces)}


def _histogram(sets: list[np.ndarray]) -> dict[int, int]:
    """Rows per word (occurrences or senses) -> words."""
    sizes, counts = np.unique([len(s) for s in sets], return_counts=True)
    return {int(n): int(c) for n, c in zip(sizes, counts)}
