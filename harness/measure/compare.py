"""A run's scores against its baseline's, item by item: the runner's step after every run.

For each score of the run, the per-item outputs behind it (:class:`~harness.results.records.ItemOutputs`:
one per language, or all languages of the task for the ``avg`` row) are matched with the baseline's
by item id, and the paired statistics of :mod:`harness.measure.paired` are computed on the items
both runs scored. Items named ``<metric>@<statistic>`` (:func:`statistic_metric`, ``statistic`` a key
of :data:`harness.measure.statistics.STATISTICS`) back a corpus-level score (Spearman, MCC, macro F1):
their values are predictions and their gold the gold values, and the paired bootstrap recomputes the
statistic; all other items are the ratio of sums ``sum(values) / sum(weights)``. The chance-adjusted
%Base and the "baseline above chance" flag need only the two scores. The baseline run is compared
with itself (%Base 100, no flips), so every stored score carries the flag.

Averages. Groups whose items carry shared clusters (XNLI's 15 translations of one row, an MLQA
question in several languages, a word pair in several word-similarity sets) are resampled jointly by
cluster, so their correlation widens the interval as it should; other groups (the tasks of an average
over tasks) are resampled independently. An average row gets no McNemar p: pooling its languages'
discordant pairs (or stratifying them by language, Cochran-Mantel-Haenszel) assumes independent
items, which translations are not; its difference interval is the test.

Unpaired. When the two runs share no items for a score (one stored none, other groups, other item
layouts, no common ids) the comparison says why in ``unpaired`` instead of carrying an interval.

"Baseline above chance" is a one-sided test at the 2.5% level: the lower end of the baseline score's
95% bootstrap CI lies above the chance level. Where it does not, %Base divides by noise (a method at
chance shows 90% of a baseline that is barely above it) and the run is flagged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from harness.measure import paired
from harness.measure.metrics import Part, chance_adjusted_pct_base
from harness.measure.statistics import STATISTICS, by_name, point
from harness.results.records import Comparison, ItemOutputs, Score

AVERAGE = "avg"  # the language of a macro average over a task's languages
STATISTIC = "@"  # joins a score's metric and the corpus statistic its items are scored with
PART = "/"       # in an average over tasks, the group of one metric of a task scored by several: ``mrpc/f1``


def statistic_metric(metric: str, statistic: str) -> str:
    """The item metric of a corpus-level score: ``spearman@spearman``, ``f1@macro_f1``, ``f1@binary_f1``."""
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; known: {', '.join(STATISTICS)}")
    return f"{metric}{STATISTIC}{statistic}"


def split_metric(item_metric: str) -> tuple[str, str | None]:
    """(the score's metric, the corpus statistic or None for a ratio of sums) of an item metric."""
    metric, _, statistic = item_metric.partition(STATISTIC)
    return metric, statistic or None


def items_behind(score: Score, items: Sequence[ItemOutputs]) -> list[ItemOutputs]:
    """The per-item outputs a score is computed from: its own (task, language, split, metric), or for
    the ``avg`` language every language of that task, split and metric."""
    def behind(i: ItemOutputs) -> bool:
        same = (i.task, i.split, split_metric(i.metric)[0]) == (score.task, score.split, score.metric)
        return same and (i.language != AVERAGE if score.language == AVERAGE else i.language == score.language)
    return [i for i in items if behind(i)]


def value_of(items: Sequence[ItemOutputs]) -> float:
    """The score per-item outputs give: each group's corpus statistic (its metric names it) or
    ``sum(values) / sum(weights)``, averaged over the groups with :func:`group_weights`; what the
    paired bootstrap resamples."""
    values = [point(by_name(split_metric(i.metric)[1]), *_take(i, list(range(len(i.ids))))) for i in items]
    weights = group_weights([i.language for i in items])
    return float(np.mean(values)) if weights is None else float(np.dot(weights, values))


def parts_of(items: Sequence[ItemOutputs]) -> list[Part]:
    """The bootstrap's view of a score's per-item outputs: one part per group, scored by its own
    statistic, weighted by :func:`group_weights`, with its items' clusters."""
    weights = group_weights([i.language for i in items])
    return [
        Part(_take(i, list(range(len(i.ids)))), by_name(split_metric(i.metric)[1]), None if weights is None else w, i.clusters or None)
        for i, w in zip(items, weights or [None] * len(items))
    ]


def group_weights(languages: Sequence[str]) -> list[float] | None:
    """Each group's weight in an average: None when all weigh alike (languages, word-similarity sets);
    an average over tasks names a task scored by several metrics ``task/metric`` (GLUE's MRPC: accuracy
    and F1), so that each task weighs alike and its metrics share its weight."""
    tasks = [language.partition(PART)[0] for language in languages]
    if len(set(tasks)) == len(tasks):
        return None
    per_task = {t: tasks.count(t) for t in tasks}
    return [1.0 / (len(per_task) * per_task[t]) for t in tasks]


@dataclass(frozen=True)
class _Pair:
    """One group's items scored by both runs, in the baseline's item order."""

    language: str   # the group (a language, a word-similarity set, a task of an average over tasks)
    method: paired.Group
    base: paired.Group
    predictions: tuple[list[str], list[str]] | None  # both runs' predicted labels, when both stored them
    weighted: bool
    statistic: str | None  # the corpus statistic (groups: predicted, gold), None for a ratio (values, weights)
    clusters: tuple[str, ...] | None  # the items' resampling units across groups (the baseline's), None: each its own


def _take(out: ItemOutputs, idx: list[int]) -> paired.Group:
    values = np.asarray(out.values, dtype=np.float64)[idx]
    if split_metric(out.metric)[1]:
        return values, np.asarray([float(g) for g in out.gold])[idx]
    weights = np.asarray(out.weights, dtype=np.float64)[idx] if out.weights else np.ones(len(idx))
    return values, weights


def _pair(method: ItemOutputs, base: ItemOutputs) -> _Pair:
    where = {item: i for i, item in enumerate(method.ids)}
    common = [(where[item], j) for j, item in enumerate(base.ids) if item in where]
    m_idx, b_idx = [i for i, _ in common], [j for _, j in common]
    predictions = None
    if method.predictions and base.predictions:
        predictions = ([method.predictions[i] for i in m_idx], [base.predictions[j] for j in b_idx])
    statistic = split_metric(base.metric)[1]
    clusters = tuple(base.clusters[j] for j in b_idx) if base.clusters else None
    return _Pair(base.language, _take(method, m_idx), _take(base, b_idx), predictions, bool(method.weights or base.weights), statistic, clusters)


def _pairs(mine: list[ItemOutputs], theirs: list[ItemOutputs]) -> list[_Pair] | str:
    """Every group of the score matched with the baseline's, or why no paired statistic is defined
    (a group without a partner or without common items, other item layouts, no items at all)."""
    if not mine:
        return "this run stored no per-item outputs for this score"
    if not theirs:
        return "the baseline run stored no per-item outputs for this score"
    by_language = {i.language: i for i in theirs}
    if sorted(i.language for i in mine) != sorted(by_language):
        return f"the runs scored other groups ({', '.join(sorted(i.language for i in mine))} vs {', '.join(sorted(by_language))})"
    other = [m.language for m in mine if m.metric != by_language[m.language].metric]
    if other:
        return f"the runs stored their items in other layouts ({', '.join(other)})"
    pairs = [_pair(m, by_language[m.language]) for m in mine]
    empty = [m.language for m, p in zip(mine, pairs) if not len(p.method[0])]
    if empty:
        return f"no item ids in common ({', '.join(empty)}): other items, or ids stored in another layout"
    return pairs


def compare(
    scores: Sequence[Score], items: Sequence[ItemOutputs], base_scores: Sequence[Score], base_items: Sequence[ItemOutputs],
    baseline_run_id: str, rng: np.random.Generator,
) -> list[Comparison]:
    """One :class:`Comparison` per score that the baseline also has."""
    base_by_key = {(s.task, s.language, s.split, s.metric): s for s in base_scores}
    out = []
    for s in scores:
        b = base_by_key.get((s.task, s.language, s.split, s.metric))
        if b is not None:
            pairs = _pairs(items_behind(s, items), items_behind(b, base_items))
            out.append(_compare_one(s, b, pairs, baseline_run_id, rng))
    return out


def _compare_one(s: Score, b: Score, pairs: list[_Pair] | str, baseline_run_id: str, rng: np.random.Generator) -> Comparison:
    """The paired statistics of one score (McNemar, flips: 0/1 ratio items only; agreement: stored predictions)."""
    known = Comparison(
        s.task, s.language, s.split, s.metric, baseline_run_id, n_paired=0,
        chance_adjusted_pct_base=chance_adjusted_pct_base(s.value, b.value, s.chance) if s.higher_is_better else None,
        baseline_above_chance=None if s.chance is None or b.ci_low is None else bool(b.ci_low > s.chance),
    )
    if isinstance(pairs, str):
        return dataclasses.replace(known, unpaired=pairs)
    weights = group_weights([p.language for p in pairs]) if len(pairs) > 1 else None
    parts = [Part([*p.method, *p.base], by_name(p.statistic), None if weights is None else w, p.clusters)
             for p, w in zip(pairs, weights or [None] * len(pairs))]
    ci = paired.paired_interval(parts, rng, s.higher_is_better)
    mv, bv = (np.concatenate([getattr(p, side)[0] for p in pairs]) for side in ("method", "base"))
    binary = not any(p.statistic or p.weighted for p in pairs) and paired.is_binary(mv) and paired.is_binary(bv)
    predicted = all(p.predictions for p in pairs)
    return dataclasses.replace(
        known, n_paired=len(mv), pct_base_ci_low=ci.pct_base[0], pct_base_ci_high=ci.pct_base[1],
        difference=s.value - b.value, difference_ci_low=ci.difference[0], difference_ci_high=ci.difference[1],
        p_value=paired.mcnemar_p(mv, bv) if binary and len(pairs) == 1 else None,
        flip_rate=paired.flip_rate(mv, bv) if binary else None,
        agreement=paired.agreement(*(sum((p.predictions[k] for p in pairs), []) for k in (0, 1))) if predicted else None,
    )
