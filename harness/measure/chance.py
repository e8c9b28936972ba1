"""Chance levels: one rule per metric kind, the score of a predictor that ignores the input.

Every classification-like score stores the level it must clear (``Score.chance``); the runner
reports (method - chance) / (baseline - chance) beside %Base and flags a baseline whose 95% CI low
is not above it (:mod:`harness.measure.compare`). The rule, by what the metric scores:

* a label from a fixed set (accuracy, binary or macro F1, precision, recall; XNLI, GLUE, SST-2 and
  XNLI through lm-eval, BoolQ, topic classification, MTEB): the majority class of the scored gold
  labels, predicted for every item (:func:`majority`): accuracy = the majority share;
* one of an item's own options (lm-eval multiple choice: ARC, COPA, PIQA, WinoGrande, HellaSwag,
  whose gold position carries no class): a uniform guess, the mean of 1 / options (:func:`uniform_choice`);
* a correlation, MCC, entity F1 or a QA F1 / exact match: 0, what a constant prediction (all ``O``,
  an empty answer) scores (:data:`ZERO`);
* ratios and rates with no trivial level (bits per byte, bytes per token, decoding rates): none
  (:data:`NO_LEVEL`, :func:`has_level`).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

ZERO = 0.0
"""The level of a correlation, MCC, entity F1 or QA F1 / EM: a constant prediction scores 0."""

NO_LEVEL = frozenset({
    "bits_per_byte", "kl_from_base", "bytes_per_token", "whole_word_share", "vocab_size",
    "exact_rate", "detok_rate", "base_rate", "diff_inflection_rate", "other_rate",
})
"""Ratios, sizes and decoding rates: no predictor that ignores the input has a defined score on them."""


def has_level(metric: str, higher_is_better: bool) -> bool:
    """Whether a score of ``metric`` must carry a chance level: every higher-is-better metric but
    the ratios and rates of :data:`NO_LEVEL` (a lower-is-better score has none)."""
    return higher_is_better and metric not in NO_LEVEL


def majority(gold: Sequence, metric: Callable[[np.ndarray, np.ndarray], float] | None = None) -> float:
    """The score of predicting the scored items' most frequent gold label for every item:
    ``metric(predicted, gold)``, or without ``metric`` its accuracy, the majority share."""
    labels, counts = np.unique(np.asarray(gold), return_counts=True)
    if metric is None:
        return float(counts.max() / counts.sum())
    gold = np.asarray(gold)
    return float(metric(np.full_like(gold, labels[counts.argmax()]), gold))


def uniform_choice(options: Sequence[int]) -> float:
    """Expected accuracy of a uniform guess among each item's options: mean of 1 / options."""
    return float(np.mean(1.0 / np.asarray(options, dtype=np.float64)))
