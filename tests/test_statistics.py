"""Each statistic's one (weighted) implementation against scipy / scikit-learn and hand-computed cases."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from harness.measure.statistics import (
    STATISTICS,
    binary_f1,
    classification_metrics,
    mcc,
    point,
    ratio,
    spearman,
)

ALL = {"ratio": ratio, **STATISTICS}


def library(name: str):
    """The scipy / scikit-learn (or plain numpy) function each statistic must agree with."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import f1_score, matthews_corrcoef, precision_score, recall_score

    macro = {"average": "macro", "zero_division": 0}
    return {
        "ratio": lambda v, w: np.sum(v) / np.sum(w),
        "spearman": lambda p, g: spearmanr(p, g).statistic, "pearson": lambda p, g: pearsonr(p, g).statistic,
        "mcc": lambda p, g: matthews_corrcoef(g, p), "binary_f1": lambda p, g: f1_score(g, p, zero_division=0),
        "macro_f1": lambda p, g: f1_score(g, p, **macro), "macro_precision": lambda p, g: precision_score(g, p, **macro),
        "macro_recall": lambda p, g: recall_score(g, p, **macro),
    }[name]


def case(name: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gold (or weights), a base and a method prediction (or values): tied ratings for the
    correlations, class ids for the confusion statistics, bits and bytes for the ratio."""
    if name == "ratio":
        weights = rng.integers(1, 500, n).astype(float)
        return weights, weights * rng.uniform(0.5, 1.5, n), weights * rng.uniform(0.5, 1.5, n)
    if name in ("spearman", "pearson"):
        gold = rng.integers(0, 6, n).astype(float)  # ties, as human ratings have
        return gold, gold + rng.normal(0, 2, n), gold + rng.normal(0, 3, n)
    classes = 2 if name in ("mcc", "binary_f1") else 4
    gold = rng.integers(0, classes, n)
    noisy = lambda share: np.where(rng.random(n) < share, rng.integers(0, classes, n), gold)  # noqa: E731
    return gold, noisy(0.4), noisy(0.7)


@pytest.mark.parametrize("name", sorted(ALL))
def test_counts_are_the_items_repeated_that_often(name):
    """A bootstrap draw counts each item 0, 1, 2 ... times: the statistic on those counts is the
    library's statistic of the items repeated that often (ties included)."""
    rng = np.random.default_rng(7)
    gold, _, predicted = case(name, rng, 30)
    counts = rng.integers(0, 3, size=(6, 30)).astype(float)
    want = [library(name)(np.repeat(predicted, c.astype(int)), np.repeat(gold, c.astype(int))) for c in counts]
    assert ALL[name](predicted.astype(float), gold.astype(float), counts) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("name", sorted(ALL))
def test_weights_of_one_give_the_point_estimate(name):
    rng = np.random.default_rng(8)
    gold, base, _ = case(name, rng, 50)
    assert point(ALL[name], base, gold) == pytest.approx(library(name)(base, gold), rel=1e-12)


def test_a_ratio_of_one_set_is_numpys_sum_over_sum_to_the_bit():
    """What a stored bits-per-byte or accuracy figure is: np.sum(values) / np.sum(weights)."""
    weights, values, _ = case("ratio", np.random.default_rng(9), 1001)
    assert point(ratio, values, weights) == np.sum(values) / np.sum(weights)
    assert point(ratio, np.ones(3), np.zeros(3)) == 0.0  # no weight at all: 0 (zero_division=0)


def test_undefined_cases():
    """A constant side: Spearman and Pearson are NaN (undefined, not 0), without a warning from the
    one-set figures; no positive anywhere: binary F1 0; one predicted class: MCC 0."""
    x = np.arange(5.0)
    assert math.isnan(point(spearman, x, np.ones(5))) and math.isnan(point(STATISTICS["pearson"], np.ones(5), x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(point(spearman, x, np.ones(5))) and math.isnan(point(STATISTICS["pearson"], x, np.ones(5)))
    assert point(binary_f1, np.zeros(8), np.zeros(8)) == 0.0 and point(mcc, np.ones(8), np.r_[np.ones(4), np.zeros(4)]) == 0.0


def test_classification_metrics_match_scikit_learn():
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    rng = np.random.default_rng(3)
    y_true = rng.integers(0, 4, 300)
    y_pred = np.where(rng.random(300) < 0.7, y_true, rng.integers(0, 5, 300))  # class 4 is only ever predicted
    y_pred[y_pred == 2] = 1  # class 2 is never predicted: precision 0 for it
    got = classification_metrics(y_true, y_pred, 5)
    p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, average="macro", zero_division=0)
    assert got == pytest.approx({"accuracy": accuracy_score(y_true, y_pred), "f1": f, "precision": p, "recall": r})
    balanced = np.repeat(np.arange(4), 100)
    guess = np.where(rng.random(400) < 0.8, balanced, (balanced + 1) % 4)
    values = classification_metrics(balanced, guess, 4)
    assert values["recall"] == pytest.approx(values["accuracy"])  # balanced: macro recall = accuracy


def test_chance_is_the_score_of_a_predictor_that_ignores_the_input():
    """One rule per metric kind (harness.measure.chance): a label's majority class, an item's own options' uniform guess."""
    from harness.measure import chance

    f1 = lambda p, g: point(binary_f1, p, g)  # noqa: E731
    gold = np.array([1, 1, 1, 0])
    assert chance.majority(gold) == 0.75                                # always 1: accuracy 3/4
    assert chance.majority(gold, f1) == pytest.approx(6 / 7)            # always 1: tp 3, fp 1 -> 6 / 7
    assert chance.majority(np.array([0, 0, 0, 1]), f1) == 0.0           # always 0: no positive predicted
    assert chance.uniform_choice([2, 4, 4]) == pytest.approx((1 / 2 + 1 / 4 + 1 / 4) / 3)
