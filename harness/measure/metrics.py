"""The bootstrap, %Base and bits per byte: pure functions (numbers or arrays, plus a Generator, in; numbers out).

Every score is an average over groups (languages, word-similarity sets, tasks; one group for most
scores) of a statistic of each group's items (:mod:`harness.measure.statistics`: a ratio of sums,
a correlation, MCC, F1). One bootstrap, :func:`resampled_parts`, gives the replicates of all of them:
it draws items (or clusters of items) with replacement and scores every group on the draw's item
counts. Score CIs (:func:`bootstrap_intervals`) and the paired %Base intervals of
:mod:`harness.measure.paired` (a method's and the baseline's arrays side by side in one part, so an
item is drawn for both runs at once) are percentiles of its replicates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from harness.measure.statistics import Statistic, by_name, ratio

CHUNK = 100  # bootstrap replicates drawn at once (bounds the count array to CHUNK x units)


@dataclass(frozen=True)
class Part:
    """One group of an averaged score, as the bootstrap sees it.

    ``arrays`` are aligned per-item arrays ``[a_1, b_1, a_2, b_2, ...]``; column ``j`` of the score
    is ``statistic(a_j, b_j, counts)`` (:mod:`harness.measure.statistics`), or with a tuple of
    statistics, column ``j``'s own. ``weight`` is the part's weight in the average (None: all parts
    weigh alike). ``clusters`` names each item's resampling unit: items of parts that share cluster
    ids are drawn together (the same XNLI row in 15 languages, the same word pair in two
    word-similarity sets, the same question of one GLUE task under two metrics); None: every item
    is its own unit.
    """

    arrays: Sequence[np.ndarray]
    statistic: Statistic | tuple[Statistic, ...] = ratio
    weight: float | None = None
    clusters: Sequence[str] | None = None

    def columns(self) -> list[tuple[np.ndarray, np.ndarray, Statistic]]:
        """(a_j, b_j, statistic of column j) of every column."""
        arrays = [np.asarray(a, dtype=np.float64) for a in self.arrays]
        width = len(arrays) // 2
        statistics = self.statistic if isinstance(self.statistic, tuple) else (self.statistic,) * width
        return [(arrays[2 * j], arrays[2 * j + 1], statistics[j]) for j in range(width)]


def resampled_parts(parts: Sequence[Part], rng: np.random.Generator, n_boot: int = 1000) -> np.ndarray:
    """Bootstrap replicates of a weighted average of parts (:class:`Part`), shape ``(n_boot, width)``.

    Parts linked by shared cluster ids form one stratum (a part without shared ids is a stratum of
    its own); strata are resampled independently of each other. A stratum of one part whose items
    are their own units draws its items with replacement; a stratum of several is a cluster
    bootstrap (Davison & Hinkley 1997, Section 3.8): its clusters are drawn with replacement and
    each item counts as often as its cluster was drawn, so the translations of one row move
    together instead of averaging out as independent draws. Either way every part is scored on its
    items' counts in the draw, the same counts for all of its columns (so a method's and a
    baseline's outputs on one item stay paired). :data:`CHUNK` replicates are drawn at a time.
    """
    width = len(parts[0].arrays) // 2
    uniform = all(p.weight is None for p in parts)  # then sum, and divide once: the mean of the groups, as the point estimate
    weights = [1.0 if uniform else (1.0 / len(parts) if p.weight is None else p.weight) for p in parts]
    stats = np.zeros((n_boot, width))
    for stratum in _strata(parts):
        stats += _stratum([parts[i] for i in stratum], [weights[i] for i in stratum], rng, n_boot)
    return stats / len(parts) if uniform else stats


def resampled(
    groups: Sequence[Sequence[np.ndarray]], rng: np.random.Generator, n_boot: int = 1000, statistic: str | None = None,
) -> np.ndarray:
    """:func:`resampled_parts` of unclustered groups (aligned arrays ``[a_1, b_1, ...]``, each group
    resampled on its own, all scored by the statistic named ``statistic``, None: the ratio of sums)."""
    return resampled_parts([Part(g, by_name(statistic)) for g in groups], rng, n_boot)


def bootstrap_intervals(
    parts: Sequence[Part], rng: np.random.Generator, n_boot: int = 1000, confidence: float = 0.95,
) -> list[tuple[float, float]]:
    """Percentile bootstrap CI (:func:`percentile_interval`) of each column of the average of ``parts``."""
    stats = resampled_parts(parts, rng, n_boot)
    return [percentile_interval(stats[:, j], confidence) for j in range(stats.shape[1])]


def percentile_interval(stats: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates (Efron & Tibshirani 1993, Section 13.3);
    non-finite replicates (a statistic undefined on a constant resample) are left out."""
    finite = stats[np.isfinite(stats)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return float(low), float(high)


def _strata(parts: Sequence[Part]) -> list[list[int]]:
    """Indices of parts linked by shared cluster ids (connected components), in order of their first part."""
    owner: dict[str, int] = {}
    root = list(range(len(parts)))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    for i, part in enumerate(parts):
        for c in set(part.clusters or ()):
            if c in owner:
                root[find(i)] = find(owner[c])
            else:
                owner[c] = i
    out: dict[int, list[int]] = {}
    for i in range(len(parts)):
        out.setdefault(find(i), []).append(i)
    return sorted(out.values(), key=lambda s: s[0])


def _units(parts: Sequence[Part]) -> tuple[int, list[np.ndarray]]:
    """The stratum's resampling units: their number, and per part each item's unit. One part whose
    items are their own units: the items, in order; else the sorted distinct cluster ids (an item
    without a cluster is a unit of its own)."""
    lone = parts[0].clusters
    if len(parts) == 1 and (lone is None or len(set(lone)) == len(lone)):
        n = len(parts[0].arrays[0])
        return n, [np.arange(n)]
    clusters = [np.asarray(p.clusters if p.clusters is not None else [f"{k}:{i}" for i in range(len(p.arrays[0]))])
                for k, p in enumerate(parts)]
    universe, codes = np.unique(np.concatenate(clusters), return_inverse=True)
    return len(universe), np.split(codes, np.cumsum([len(c) for c in clusters])[:-1])


def _stratum(parts: Sequence[Part], weights: Sequence[float], rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """(n_boot, width) weighted sum of the parts' scores on draws of the stratum's units."""
    n, codes = _units(parts)
    columns = [p.columns() for p in parts]
    out = np.zeros((n_boot, len(columns[0])))
    for start in range(0, n_boot, CHUNK):
        rows = min(start + CHUNK, n_boot) - start
        drawn = rng.integers(0, n, size=(rows, n)) + n * np.arange(rows)[:, None]
        units = np.bincount(drawn.ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)
        for part, weight, code in zip(columns, weights, codes):
            counts = units[:, code]
            for j, (a, b, statistic) in enumerate(part):
                out[start:start + rows, j] += weight * statistic(a, b, counts)
    return out


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


def chance_adjusted_pct_base(value: float, baseline: float, chance: float | None) -> float | None:
    """(method - chance) / (baseline - chance) x 100: the share of the baseline's gain over chance
    that the method keeps. 0 = no better than chance, 100 = the baseline. Undefined (None) without a
    chance level or when the baseline is not above it (then raw %Base says nothing either).
    For higher-is-better metrics."""
    if chance is None or baseline <= chance:
        return None
    return 100.0 * (value - chance) / (baseline - chance)


def mean_sd(values: Sequence[float | None]) -> tuple[float, float] | None:
    """Mean and sample standard deviation (ddof 1; 0 for one value) of the defined values; None if none."""
    known = np.array([v for v in values if v is not None], dtype=np.float64)
    if known.size == 0:
        return None
    return float(known.mean()), float(known.std(ddof=1)) if known.size > 1 else 0.0
