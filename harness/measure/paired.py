"""Paired statistics of a method against its baseline on the same items: pure functions.

Both runs scored the same items (the same XNLI pairs, the same documents), so the uncertainty of
%Base and of the difference comes from which items were drawn, and it is smaller than two
independent CIs suggest: an item that is hard for the baseline is usually hard for the method too.
The paired bootstrap (:func:`paired_interval`) therefore scores both runs on the same draws: each
part holds the method's and the baseline's arrays side by side (:func:`harness.measure.metrics.resampled_parts`),
and each replicate recomputes both scores the way the point estimate does (bits per byte: the drawn
documents' bits over their bytes; Spearman, MCC, macro F1: the statistic of the drawn items).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from harness.measure.metrics import Part, percentile_interval, resampled_parts

Group = tuple[np.ndarray, np.ndarray]  # one group's two per-item arrays, aligned across the two runs:
# (values, weights) of a ratio of sums, (predicted, gold) of a corpus statistic


@dataclass(frozen=True)
class PairedInterval:
    """Percentile intervals from the paired bootstrap."""

    pct_base: tuple[float, float]     # %Base (inverted for lower-is-better metrics, as the point estimate)
    difference: tuple[float, float]   # method - baseline, in the metric's units


def paired_interval(
    parts: Sequence[Part], rng: np.random.Generator, higher_is_better: bool = True, n_boot: int = 1000, confidence: float = 0.95,
) -> PairedInterval:
    """CIs of %Base and of method - base from parts whose arrays are ``[method a, method b, base a, base b]``
    (:class:`~harness.measure.metrics.Part`: a statistic, a weight in the average and clusters per
    part), both runs scored on the same draws (:func:`~harness.measure.metrics.resampled_parts`)."""
    stats = resampled_parts(parts, rng, n_boot)
    m, b = stats[:, 0], stats[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = 100.0 * (m / b if higher_is_better else b / m)
    return PairedInterval(percentile_interval(pct, confidence), percentile_interval(m - b, confidence))


def mcnemar_p(method_correct: np.ndarray, base_correct: np.ndarray) -> float:
    """Exact two-sided McNemar p-value for paired 0/1 outcomes.

    Only the discordant items count: b = right for the baseline only, c = right for the method
    only; under the null each discordant item goes either way with probability 1/2, so the p-value
    is the two-sided binomial test of b successes in b + c trials (1.0 when there are none).
    """
    from scipy.stats import binomtest  # a second of every command's start that only comparing needs

    method_correct, base_correct = np.asarray(method_correct, bool), np.asarray(base_correct, bool)
    b = int(np.sum(base_correct & ~method_correct))
    c = int(np.sum(method_correct & ~base_correct))
    return 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)


def flip_rate(method_correct: np.ndarray, base_correct: np.ndarray) -> float:
    """Share of items whose correctness changed (right -> wrong or wrong -> right), the "flips" of
    compressed-model evaluations: two models with equal accuracy can still disagree on many items."""
    return float(np.mean(np.asarray(method_correct, bool) != np.asarray(base_correct, bool)))


def agreement(method_predictions: Sequence[str], base_predictions: Sequence[str]) -> float:
    """Share of items on which the two runs predict the same label."""
    return float(np.mean([m == b for m, b in zip(method_predictions, base_predictions, strict=True)]))


def is_binary(values: np.ndarray) -> bool:
    """True when every value is 0 or 1 (per-item correctness; McNemar and flips apply)."""
    return bool(np.all((values == 0) | (values == 1)))
