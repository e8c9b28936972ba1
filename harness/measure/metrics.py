"""Metrics as pure functions: numbers or arrays (plus a seed or Generator) in, numbers out."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def bootstrap_ci(
    groups: Sequence[np.ndarray], rng: np.random.Generator, n_boot: int = 1000, confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of group means.

    Each group (e.g. one language's per-example correctness) is resampled with replacement on its
    own, so a single group gives the usual CI of its mean and several groups give the CI of a
    macro average. Resamples are drawn in chunks to bound memory.
    """
    stats = np.zeros(n_boot)
    for values in groups:
        values = np.asarray(values, dtype=np.float64)
        for start in range(0, n_boot, 100):
            stop = min(start + 100, n_boot)
            idx = rng.integers(0, len(values), size=(stop - start, len(values)))
            stats[start:stop] += values[idx].mean(axis=1)
    stats /= len(groups)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return float(low), float(high)


def bootstrap_ratio_ci(
    numerators: np.ndarray, denominators: np.ndarray, rng: np.random.Generator,
    n_boot: int = 1000, confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap CI of a ratio of sums, sum(num) / sum(den), resampling units together.

    For corpus-level rates over documents (bits per byte = NLL over bytes, bytes per token) and
    entity-level precision, recall and F1 over sentences: each resample draws units with
    replacement and recomputes the pooled ratio, so long documents weigh as much as they do in the
    point estimate. A resample whose denominator sums to zero counts as 0 (``zero_division=0``).
    """
    return bootstrap_macro_ratio_ci([(numerators, denominators)], rng, n_boot, confidence)


def bootstrap_macro_ratio_ci(
    groups: Sequence[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator,
    n_boot: int = 1000, confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean over groups of each group's pooled ratio (a macro
    average of corpus-level scores, e.g. entity F1 averaged over languages); each group
    (numerators, denominators per unit) is resampled on its own, as in :func:`bootstrap_ci`."""
    stats = np.zeros(n_boot)
    for numerators, denominators in groups:
        num, den = np.asarray(numerators, dtype=np.float64), np.asarray(denominators, dtype=np.float64)
        for start in range(0, n_boot, 100):
            stop = min(start + 100, n_boot)
            idx = rng.integers(0, len(num), size=(stop - start, len(num)))
            top, bottom = num[idx].sum(axis=1), den[idx].sum(axis=1)
            stats[start:stop] += np.divide(top, bottom, out=np.zeros_like(top), where=bottom != 0)
    stats /= len(groups)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return float(low), float(high)


def bits_per_byte(total_nll_nats: float, n_bytes: int) -> float:
    """Bits per UTF-8 byte: total negative log-likelihood (nats) / ln 2 / bytes.

    Paper 003 (Section 7, footnote 17; Appendix C.2): "BPB normalizes negative log-likelihood by
    the number of UTF-8 bytes in the evaluation text", well-defined across tokenizers; lower is
    better. lm-eval's ``bits_per_byte`` aggregation is the same formula.
    """
    return total_nll_nats / math.log(2) / n_bytes


def pct_base(value: float, baseline: float, higher_is_better: bool = True) -> float | None:
    """%Base = method / baseline x 100 (paper 000, Table 1); 100 = the unchanged model.

    For lower-is-better metrics (bits per byte) the ratio is inverted, so above 100 is always
    better than the baseline. Undefined (None) when the denominator is zero.
    """
    num, den = (value, baseline) if higher_is_better else (baseline, value)
    return None if den == 0 else 100.0 * num / den
