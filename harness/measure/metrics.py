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
