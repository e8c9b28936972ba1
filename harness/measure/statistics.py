"""Every statistic a score is made of, implemented once, with frequency weights: pure functions.

A :data:`Statistic` takes two aligned per-item arrays ``a``, ``b`` of shape ``(n,)`` and item counts
of shape ``(B, n)`` and returns ``(B,)``: row ``r`` is the statistic of the items with item ``i``
repeated ``counts[r, i]`` times. Counts of 1 (:func:`point`) give the statistic of the items
themselves, the figure a score reports; a bootstrap replicate's draw counts
(:func:`harness.measure.metrics.resampled_parts`) give the statistic of that resample, whether items
or clusters of items were drawn. The definitions:

* :func:`ratio`: ``sum(values) / sum(weights)``, 0 where the weights sum to 0 (``zero_division=0``):
  accuracy (0/1 correctness over weights 1), bits per byte (bits over UTF-8 bytes per document, paper
  003 Appendix C.2), entity F1 (2 TP over 2 TP + FP + FN per sentence, seqeval's micro F1), SQuAD F1;
* :func:`pearson` (Pearson's r) and :func:`spearman` (Spearman's rho: Pearson's r of the ranks, ties
  given their average rank), NaN where a side is constant, as scipy's ``pearsonr`` / ``spearmanr``;
* from the confusion matrix [gold, predicted] (:func:`confusion`): :func:`mcc`, Matthews' correlation
  in its multiclass form (Gorodkin 2004; CoLA's GLUE metric, 0 where undefined), :func:`binary_f1`,
  F1 of class 1 (MRPC's GLUE metric), and accuracy with macro F1, precision and recall
  (:func:`from_confusion`: scikit-learn's ``average="macro", zero_division=0``).

Each equals scipy's or scikit-learn's function on the items repeated that often (tests pin it).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

Statistic = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def point(statistic: Statistic, a, b) -> float:
    """The statistic of the items themselves: every item counted once."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(statistic(a, b, np.ones((1, len(a))))[0])


def ratio(values: np.ndarray, weights: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``sum(c * values) / sum(c * weights)`` per row of counts ``c``; 0 where the weights sum to 0."""
    top, bottom = (counts * values).sum(-1), (counts * weights).sum(-1)
    return np.divide(top, bottom, out=np.zeros_like(top), where=bottom != 0)


def pearson(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Pearson's r, sum(c dx dy) / sqrt(sum(c dx^2) sum(c dy^2)) around the weighted means; x and y
    are ``(n,)`` or per row ``(B, n)``. NaN where a side is constant."""
    total = counts.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = x - (counts * x).sum(-1, keepdims=True) / total
        dy = y - (counts * y).sum(-1, keepdims=True) / total
        return (counts * dx * dy).sum(-1) / np.sqrt((counts * dx * dx).sum(-1) * (counts * dy * dy).sum(-1))


def _ranks(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(B, n) average ranks of x with item i repeated ``counts[b, i]`` times (ties get the mean of
    the ranks they span, as scipy's ``rankdata``)."""
    order = np.argsort(x, kind="stable")
    _, first, inverse = np.unique(x[order], return_index=True, return_inverse=True)
    cum = np.cumsum(counts[:, order], axis=1)
    last = np.append(first[1:], len(x)) - 1
    below = np.where(first > 0, cum[:, np.maximum(first - 1, 0)], 0.0)  # copies of smaller values
    tied = cum[:, last] - below
    out = np.empty_like(counts)
    out[:, order] = (below + (tied + 1) / 2)[:, inverse]
    return out


def spearman(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Spearman's rho: Pearson's r of the tie-averaged ranks (Spearman 1904); NaN where a side is constant."""
    return pearson(_ranks(x, counts), _ranks(y, counts), counts)


def confusion(predicted: np.ndarray, gold: np.ndarray, counts: np.ndarray, classes: int | None = None) -> np.ndarray:
    """(B, C, C) counts [gold, predicted] of class ids in [0, C), item i counted ``counts[b, i]``
    times; C = ``classes``, or the largest id seen + 1."""
    p, g = predicted.astype(np.int64), gold.astype(np.int64)
    classes = classes or int(max(p.max(), g.max())) + 1
    rows = counts.shape[0]
    cells = (np.arange(rows)[:, None] * classes * classes + g * classes + p).ravel()
    flat = np.bincount(cells, weights=counts.ravel(), minlength=rows * classes * classes)
    return flat.reshape(rows, classes, classes)


def from_confusion(conf: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy and macro F1 / precision / recall of (..., C, C) counts [gold, predicted].

    Macro = the unweighted mean over the classes present in the gold or the predicted labels; a
    class never predicted has precision 0 (scikit-learn's ``average="macro", zero_division=0``). On
    a balanced test set macro recall equals accuracy, as in paper 002 Tables 3-4.
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


def mcc(predicted: np.ndarray, gold: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Matthews' correlation, (c s - sum_k t_k p_k) / sqrt((s^2 - sum p_k^2)(s^2 - sum t_k^2)) with c
    correct, s items, t_k / p_k gold / predicted counts of class k (scikit-learn's
    ``matthews_corrcoef``); 0 where a side has one class."""
    conf = confusion(predicted, gold, counts)
    t, p = conf.sum(-1), conf.sum(-2)
    c, s = np.diagonal(conf, axis1=-2, axis2=-1).sum(-1), conf.sum((-2, -1))
    top = c * s - (t * p).sum(-1)
    bottom = np.sqrt((s * s - (p * p).sum(-1)) * (s * s - (t * t).sum(-1)))
    return np.divide(top, bottom, out=np.zeros_like(top), where=bottom != 0)


def binary_f1(predicted: np.ndarray, gold: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """F1 of class 1, 2 TP / (2 TP + FP + FN) = 2 TP / (predicted 1 + gold 1); 0 when neither side
    has a 1 (scikit-learn's ``f1_score(zero_division=0)``)."""
    conf = confusion(predicted, gold, counts, max(2, int(max(predicted.max(), gold.max())) + 1))
    tp = conf[:, 1, 1]
    bottom = conf[:, :, 1].sum(-1) + conf[:, 1, :].sum(-1)
    return np.divide(2 * tp, bottom, out=np.zeros_like(tp), where=bottom != 0)


def confusion_statistic(name: str, classes: int | None = None) -> Statistic:
    """The statistic ``name`` of :func:`from_confusion` (accuracy, f1, precision, recall) over
    ``classes`` classes (None: the largest id seen + 1)."""
    return lambda predicted, gold, counts: from_confusion(confusion(predicted, gold, counts, classes))[name]


STATISTICS: dict[str, Statistic] = {
    "spearman": spearman,
    "pearson": pearson,
    "mcc": mcc,
    "binary_f1": binary_f1,
    "macro_f1": confusion_statistic("f1"),
    "macro_precision": confusion_statistic("precision"),
    "macro_recall": confusion_statistic("recall"),
}
"""The corpus statistics that are no ratio of sums, by the name items carry (``f1@macro_f1``): their
items hold each item's prediction and gold value as numbers, class ids in [0, C)."""


def by_name(name: str | None) -> Statistic:
    """The statistic a name stands for: one of :data:`STATISTICS`, or None for :func:`ratio`."""
    return ratio if name is None else STATISTICS[name]


CLASSIFICATION_METRICS = ("accuracy", "f1", "precision", "recall")
"""What :func:`classification_metrics` returns; f1, precision and recall are macro averages."""


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> dict[str, float]:
    """Accuracy and macro F1, precision and recall of one set of predictions over ``n_classes``."""
    return {m: point(confusion_statistic(m, n_classes), y_pred, y_true) for m in CLASSIFICATION_METRICS}
