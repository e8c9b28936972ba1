"""Metrics as pure functions: numbers or arrays (plus a seed or Generator) in, numbers out.

Every score the harness reports is a macro average over groups (languages; one group for most
scores) of a ratio of sums over items, ``sum(values) / sum(weights)``: accuracy is the mean of 0/1
correctness (weights 1), bits per byte is bits over UTF-8 bytes per document, bytes per token is bytes
over tokens per text. One bootstrap (:func:`resampled`) serves all of them, and the paired statistics
(:mod:`harness.measure.paired`) resample a method's and the baseline's arrays jointly through it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy.stats import rankdata

CHUNK = 100  # bootstrap replicates drawn at once (bounds the index array to CHUNK x items)


@dataclass(frozen=True)
class Part:
    """One group of an averaged score, as the bootstrap sees it.

    ``arrays`` are aligned per-item arrays ``[a_1, b_1, a_2, b_2, ...]``; column ``j`` of the score is
    ``sum(a_j) / sum(b_j)`` (values over weights) or, with ``statistic``, that corpus statistic of
    :data:`STATISTICS` of (predicted ``a_j``, gold ``b_j``). ``weight`` is the part's weight in the
    average (None: all parts weigh alike). ``clusters`` names each item's resampling unit: items of
    parts that share cluster ids are drawn together (the same XNLI row in 15 languages, the same
    word pair in two word-similarity sets, the same question of one GLUE task under two metrics);
    None: every item is its own unit.
    """

    arrays: Sequence[np.ndarray]
    statistic: str | None = None
    weight: float | None = None
    clusters: Sequence[str] | None = None


def resampled(
    groups: Sequence[Sequence[np.ndarray]], rng: np.random.Generator, n_boot: int = 1000, statistic: str | None = None,
) -> np.ndarray:
    """Bootstrap replicates of the mean over ``groups`` (aligned arrays ``[a_1, b_1, ...]``, each group
    resampled on its own, all scored by ``statistic``), shape ``(n_boot, len(groups[0]) // 2)``: the
    unclustered case of :func:`resampled_parts`."""
    return resampled_parts([Part(g, statistic) for g in groups], rng, n_boot)


def resampled_parts(parts: Sequence[Part], rng: np.random.Generator, n_boot: int = 1000) -> np.ndarray:
    """Bootstrap replicates of a weighted average of parts (:class:`Part`), shape ``(n_boot, width)``.

    Parts that share no cluster are resampled each on its own: in every replicate its items are
    drawn with replacement once, the same draw for all of its arrays (so a method's and a baseline's
    outputs on one item stay paired). Parts linked by shared cluster ids form one stratum that is
    resampled as a cluster bootstrap (Davison & Hinkley 1997, Section 3.8): its clusters are drawn
    with replacement, and each part's items count as often as their cluster was drawn, so the
    translations of one row move together instead of averaging out as independent draws. Vectorised
    over :data:`CHUNK` replicates at a time; a resample whose denominator sums to 0 scores 0
    (``zero_division=0``, as entity F1 of sentences without entities).
    """
    width = len(parts[0].arrays) // 2
    uniform = all(p.weight is None for p in parts)  # then sum, and divide once: the mean of the groups, as the point estimate
    weights = [1.0 if uniform else (1.0 / len(parts) if p.weight is None else p.weight) for p in parts]
    stats = np.zeros((n_boot, width))
    for stratum in _strata(parts):
        lone = parts[stratum[0]].clusters
        if len(stratum) == 1 and (lone is None or len(set(lone)) == len(lone)):  # one group, each item its own unit
            part = parts[stratum[0]]
            stats += _independent(part, rng, n_boot) if uniform else weights[stratum[0]] * _independent(part, rng, n_boot)
        else:
            stats += _clustered([parts[i] for i in stratum], [weights[i] for i in stratum], rng, n_boot)
    return stats / len(parts) if uniform else stats


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


def _independent(part: Part, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """(n_boot, width) scores of one part, its items drawn with replacement."""
    score = _ratio_rows if part.statistic is None else STATISTICS[part.statistic]
    arrays = [np.asarray(a, dtype=np.float64) for a in part.arrays]
    n, width = len(arrays[0]), len(arrays) // 2
    out = np.zeros((n_boot, width))
    for start in range(0, n_boot, CHUNK):
        stop = min(start + CHUNK, n_boot)
        idx = rng.integers(0, n, size=(stop - start, n))
        for j in range(width):
            out[start:stop, j] = score(arrays[2 * j][idx], arrays[2 * j + 1][idx])
    return out


def _clustered(parts: Sequence[Part], weights: Sequence[float], rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """(n_boot, width) weighted sum of the parts' scores when their clusters are drawn with replacement
    (each item weighted by its cluster's count in the draw: :data:`WEIGHTED`)."""
    clusters = [np.asarray(p.clusters if p.clusters is not None else [f"{k}:{i}" for i in range(len(p.arrays[0]))])
                for k, p in enumerate(parts)]
    universe, codes = np.unique(np.concatenate(clusters), return_inverse=True)
    codes = np.split(codes, np.cumsum([len(c) for c in clusters])[:-1])
    width, n = len(parts[0].arrays) // 2, len(universe)
    out = np.zeros((n_boot, width))
    for start in range(0, n_boot, CHUNK):
        rows = min(start + CHUNK, n_boot) - start
        drawn = rng.integers(0, n, size=(rows, n)) + n * np.arange(rows)[:, None]
        counts = np.bincount(drawn.ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)
        for part, weight, code in zip(parts, weights, codes):
            arrays = [np.asarray(a, dtype=np.float64) for a in part.arrays]
            score = _weighted_ratio if part.statistic is None else WEIGHTED[part.statistic]
            for j in range(width):
                out[start:start + rows, j] += weight * score(arrays[2 * j], arrays[2 * j + 1], counts[:, code])
    return out


def _ratio_rows(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``sum(values) / sum(weights)`` of each row (0 where the weights sum to 0)."""
    top, bottom = values.sum(-1), weights.sum(-1)
    return np.divide(top, bottom, out=np.zeros_like(top), where=bottom != 0)


def percentile_interval(stats: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates (non-finite replicates dropped)."""
    finite = stats[np.isfinite(stats)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return float(low), float(high)


def bootstrap_ci(
    groups: Sequence[np.ndarray], rng: np.random.Generator, n_boot: int = 1000, confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of group means.

    Each group (e.g. one language's per-example correctness) is resampled with replacement on its
    own, so a single group gives the usual CI of its mean and several groups give the CI of a
    macro average.
    """
    return bootstrap_macro_ratio_ci([(g, np.ones(len(g))) for g in groups], rng, n_boot, confidence)


def bootstrap_statistic(
    statistic: str, groups: Sequence[Sequence[np.ndarray]], rng: np.random.Generator,
    n_boot: int = 1000, confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean over groups of a corpus statistic of :data:`STATISTICS`.

    Each group is a (predicted, gold) pair of aligned per-item arrays (model and gold similarities of
    one data set, predictions and labels of one task); its items are resampled with replacement
    together, each group on its own. One group gives the CI of a statistic that is not a mean of
    per-item values (a correlation, MCC, F1); several give the CI of their macro average. Resamples
    where the statistic is undefined (NaN: a constant resample) are left out of the quantiles.
    Vectorised over replicates (:func:`resampled`): a scipy call per replicate made word_sim's smoke
    CIs take 40 s.
    """
    stats = resampled(groups, rng, n_boot, statistic)[:, 0]
    tail = (1.0 - confidence) / 2.0
    low, high = np.nanquantile(stats, [tail, 1.0 - tail])
    return float(low), float(high)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (scipy; ties get average ranks); NaN when either side is constant."""
    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: NaN is the answer, not a warning
        return float(spearmanr(x, y).statistic)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's correlation (scipy); NaN when either side is constant."""
    from scipy.stats import pearsonr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(pearsonr(x, y).statistic)


def matthews(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Matthews correlation coefficient (scikit-learn; 0 when a side has one class), CoLA's GLUE metric."""
    from sklearn.metrics import matthews_corrcoef

    return float(matthews_corrcoef(gold, predicted))


def binary_f1(predicted: np.ndarray, gold: np.ndarray) -> float:
    """F1 of the positive class 1 (scikit-learn; 0 when nothing is predicted positive), MRPC's GLUE metric."""
    from sklearn.metrics import f1_score

    return float(f1_score(gold, predicted, zero_division=0.0))


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
    groups: Sequence[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator, n_boot: int = 1000, confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean over groups of each group's pooled ratio
    ``sum(values) / sum(weights)`` (a macro average of corpus-level scores, e.g. entity F1 averaged
    over languages); each group is resampled on its own, as in :func:`bootstrap_ci`."""
    return percentile_interval(resampled([list(g) for g in groups], rng, n_boot)[:, 0], confidence)


def macro_ratio(groups: Sequence[tuple[np.ndarray, np.ndarray]]) -> float:
    """The mean over groups of ``sum(values) / sum(weights)`` (the point estimate the bootstrap resamples;
    0 for a group whose weights sum to 0, as in :func:`resampled`)."""
    return float(np.mean([np.sum(v) / np.sum(w) if np.sum(w) else 0.0 for v, w in groups]))


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


CLASSIFICATION_METRICS = ("accuracy", "f1", "precision", "recall")
"""What :func:`classification_metrics` returns; f1, precision and recall are macro averages."""


def confusion_counts(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> np.ndarray:
    """(..., n) true and predicted labels in [0, n_classes) -> (..., C, C) counts [true, pred]."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    lead = y_true.shape[:-1]
    rows = np.arange(int(np.prod(lead, dtype=np.int64))).reshape(*lead, 1) * n_classes * n_classes
    codes = rows + y_true * n_classes + y_pred
    counts = np.bincount(codes.ravel(), minlength=rows.size * n_classes * n_classes)
    return counts.reshape(*lead, n_classes, n_classes)


def metrics_from_confusion(conf: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy and macro F1 / precision / recall from (..., C, C) confusion counts.

    Macro = the unweighted mean over classes present in the true or the predicted labels, a class
    never predicted has precision 0 (scikit-learn's ``average="macro", zero_division=0``). On a
    balanced test set macro recall equals accuracy, as in paper 002 Tables 3-4.
    """
    tp = np.diagonal(conf, axis1=-2, axis2=-1).astype(np.float64)
    true_n, pred_n = conf.sum(-1), conf.sum(-2)
    precision = np.divide(tp, pred_n, out=np.zeros_like(tp), where=pred_n > 0)
    recall = np.divide(tp, true_n, out=np.zeros_like(tp), where=true_n > 0)
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(tp), where=denom > 0)
    present = (true_n + pred_n) > 0
    n_present = present.sum(-1)
    macro = {name: (v * present).sum(-1) / n_present for name, v in (("f1", f1), ("precision", precision), ("recall", recall))}
    return {"accuracy": tp.sum(-1) / conf.sum((-2, -1)), **macro}


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> dict[str, float]:
    """Accuracy and macro F1, precision and recall of one set of predictions."""
    return {k: float(v) for k, v in metrics_from_confusion(confusion_counts(y_true, y_pred, n_classes)).items()}


def bootstrap_classification_ci(
    y_true: np.ndarray, y_pred: np.ndarray, n_classes: int, rng: np.random.Generator,
    n_boot: int = 1000, confidence: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap CIs of :func:`classification_metrics`, resampling examples (pairs of
    true and predicted label) with replacement; resamples are drawn in chunks to bound memory."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    stats: dict[str, list[np.ndarray]] = {name: [] for name in CLASSIFICATION_METRICS}
    for start in range(0, n_boot, 100):
        idx = rng.integers(0, len(y_true), size=(min(100, n_boot - start), len(y_true)))
        for name, values in metrics_from_confusion(confusion_counts(y_true[idx], y_pred[idx], n_classes)).items():
            stats[name].append(values)
    tail = (1.0 - confidence) / 2.0
    return {name: tuple(float(q) for q in np.quantile(np.concatenate(v), [tail, 1.0 - tail])) for name, v in stats.items()}


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r of each row pair (NaN where a row is constant, as scipy)."""
    x, y = x - x.mean(-1, keepdims=True), y - y.mean(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (x * y).sum(-1) / np.sqrt((x * x).sum(-1) * (y * y).sum(-1))


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair: Pearson's r of the ranks (ties averaged, as scipy's spearmanr)."""
    return _pearson_rows(rankdata(x, axis=-1), rankdata(y, axis=-1))


def _confusion(predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """(B, C, C) counts [gold, predicted] of integer class ids."""
    p, g = predicted.astype(np.int64), gold.astype(np.int64)
    return confusion_counts(g, p, int(max(p.max(), g.max())) + 1)


def _mcc_rows(predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Matthews correlation of each row (scikit-learn's multiclass formula; 0 where undefined)."""
    return _mcc_of_confusion(_confusion(predicted, gold).astype(np.float64))


def _mcc_of_confusion(conf: np.ndarray) -> np.ndarray:
    """Matthews correlation of (B, C, C) counts [gold, predicted]."""
    t, p = conf.sum(-1), conf.sum(-2)  # gold and predicted counts per class
    c, s = np.diagonal(conf, axis1=-2, axis2=-1).sum(-1), conf.sum((-2, -1))
    top = c * s - (t * p).sum(-1)
    bottom = np.sqrt((s * s - (p * p).sum(-1)) * (s * s - (t * t).sum(-1)))
    return np.divide(top, bottom, out=np.zeros_like(top), where=bottom != 0)


def _binary_f1_rows(predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """F1 of class 1 of each row: 2 TP / (2 TP + FP + FN), 0 when nothing is predicted or gold positive."""
    tp = ((predicted == 1) & (gold == 1)).sum(-1).astype(np.float64)
    bottom = (predicted == 1).sum(-1) + (gold == 1).sum(-1)
    return np.divide(2 * tp, bottom, out=np.zeros_like(tp), where=bottom != 0)


def _binary_f1_of_confusion(conf: np.ndarray) -> np.ndarray:
    """F1 of class 1 of (B, C, C) counts [gold, predicted] (0 when nothing is predicted or gold positive)."""
    if conf.shape[-1] < 2:
        return np.zeros(conf.shape[0])
    tp = conf[:, 1, 1]
    bottom = conf[:, :, 1].sum(-1) + conf[:, 1, :].sum(-1)
    return np.divide(2 * tp, bottom, out=np.zeros_like(tp), where=bottom != 0)


def _macro(name: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    return lambda predicted, gold: metrics_from_confusion(_confusion(predicted, gold))[name]


Statistic = Callable[[np.ndarray, np.ndarray], np.ndarray]
STATISTICS: dict[str, Statistic] = {
    "spearman": _spearman_rows,
    "pearson": _pearson_rows,
    "mcc": _mcc_rows,
    "binary_f1": _binary_f1_rows,
    "macro_f1": _macro("f1"),
    "macro_precision": _macro("precision"),
    "macro_recall": _macro("recall"),
}
"""Corpus-level statistics by name: ``(B, n)`` predicted and gold arrays -> ``(B,)`` values, one per
row (a bootstrap replicate, :func:`resampled`; the point estimate is one row). Class ids are
integers in [0, C). They agree with scipy's ``spearmanr`` / ``pearsonr`` and scikit-learn's
``matthews_corrcoef`` / ``f1_score`` (binary; macro with ``zero_division=0``), which the suites use
for the point estimate."""


def _weighted_ratio(values: np.ndarray, weights: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``sum(c * values) / sum(c * weights)`` per row of item counts ``c`` (B, n); 0 where it sums to 0."""
    top, bottom = counts @ values, counts @ weights
    return np.divide(top, bottom, out=np.zeros_like(top), where=bottom != 0)


def _weighted_pearson(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Pearson's r of x and y with each item repeated ``counts[b, i]`` times (NaN where a side is constant)."""
    total = counts.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        dx, dy = x - (counts @ x)[:, None] / total, y - (counts @ y)[:, None] / total
        return (counts * dx * dy).sum(-1) / np.sqrt((counts * dx * dx).sum(-1) * (counts * dy * dy).sum(-1))


def _weighted_ranks(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(B, n) average ranks (ties averaged, as ``rankdata``) of x with item i repeated ``counts[b, i]`` times."""
    order = np.argsort(x, kind="stable")
    _, first, inverse = np.unique(x[order], return_index=True, return_inverse=True)
    cum = np.cumsum(counts[:, order], axis=1)
    last = np.append(first[1:], len(x)) - 1
    below = np.where(first > 0, cum[:, np.maximum(first - 1, 0)], 0.0)  # copies of smaller values
    tied = cum[:, last] - below
    ranks = np.empty_like(counts)
    ranks[:, order] = (below + (tied + 1) / 2)[:, inverse]
    return ranks


def _weighted_spearman(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Spearman's rho with each item repeated ``counts[b, i]`` times: Pearson's r of the tie-averaged ranks."""
    return _weighted_pearson_rows(_weighted_ranks(x, counts), _weighted_ranks(y, counts), counts)


def _weighted_pearson_rows(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """As :func:`_weighted_pearson` with per-row values x, y of shape (B, n)."""
    total = counts.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        dx, dy = x - (counts * x).sum(-1, keepdims=True) / total, y - (counts * y).sum(-1, keepdims=True) / total
        return (counts * dx * dy).sum(-1) / np.sqrt((counts * dx * dx).sum(-1) * (counts * dy * dy).sum(-1))


def _weighted_confusion(predicted: np.ndarray, gold: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(B, C, C) counts [gold, predicted] with item i counted ``counts[b, i]`` times."""
    p, g = predicted.astype(np.int64), gold.astype(np.int64)
    classes = int(max(p.max(), g.max())) + 1
    cells = np.zeros((len(p), classes * classes))
    cells[np.arange(len(p)), g * classes + p] = 1.0
    return (counts @ cells).reshape(-1, classes, classes)


def _from_confusion(rows: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    return lambda predicted, gold, counts: rows(_weighted_confusion(predicted, gold, counts))


WEIGHTED: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "spearman": _weighted_spearman,
    "pearson": _weighted_pearson,
    "mcc": _from_confusion(_mcc_of_confusion),
    "binary_f1": _from_confusion(_binary_f1_of_confusion),
    "macro_f1": _from_confusion(lambda conf: metrics_from_confusion(conf)["f1"]),
    "macro_precision": _from_confusion(lambda conf: metrics_from_confusion(conf)["precision"]),
    "macro_recall": _from_confusion(lambda conf: metrics_from_confusion(conf)["recall"]),
}
"""The statistics of :data:`STATISTICS` with frequency weights: ``(n,)`` predicted and gold, ``(B, n)``
counts of each item in a cluster-bootstrap draw -> ``(B,)``; equal to the statistic of the items
repeated that often (tested against it)."""
