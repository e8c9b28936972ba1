"""Metrics: %Base arithmetic and the bootstrap CI."""

from __future__ import annotations

import numpy as np
import pytest

from harness.measure.metrics import bootstrap_ci, pct_base


def test_pct_base_is_method_over_baseline():
    assert pct_base(0.7306, 0.7546) == pytest.approx(96.8195, abs=1e-3)  # mBERT-like numbers
    assert pct_base(0.5, 0.5) == 100.0
    assert pct_base(0.1, 0.0) is None


def test_pct_base_inverts_lower_is_better():
    # bits per byte 1.10 vs baseline 1.00: worse, so below 100
    assert pct_base(1.10, 1.00, higher_is_better=False) == pytest.approx(90.909, abs=1e-3)


def test_bootstrap_ci_brackets_mean_and_repeats():
    values = np.r_[np.ones(700), np.zeros(300)]
    low, high = bootstrap_ci([values], np.random.default_rng(0))
    assert low < 0.7 < high
    assert high - low == pytest.approx(2 * 1.96 * np.sqrt(0.7 * 0.3 / 1000), rel=0.15)  # normal approximation
    assert (low, high) == bootstrap_ci([values], np.random.default_rng(0))


def test_bootstrap_ci_of_macro_average_is_narrower_than_groups():
    rng = np.random.default_rng(1)
    groups = [rng.random(200) < p for p in (0.4, 0.5, 0.6)]
    low, high = bootstrap_ci(groups, np.random.default_rng(2))
    assert low < np.mean([g.mean() for g in groups]) < high
    one_low, one_high = bootstrap_ci(groups[:1], np.random.default_rng(2))
    assert high - low < one_high - one_low


def test_classification_metrics_match_scikit_learn():
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    from harness.measure.metrics import classification_metrics

    rng = np.random.default_rng(3)
    y_true = rng.integers(0, 4, 300)
    y_pred = np.where(rng.random(300) < 0.7, y_true, rng.integers(0, 5, 300))  # class 4 is only ever predicted
    y_pred[y_pred == 2] = 1  # class 2 is never predicted: precision 0 for it
    got = classification_metrics(y_true, y_pred, 5)
    p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, average="macro", zero_division=0)
    assert got == pytest.approx({"accuracy": accuracy_score(y_true, y_pred), "f1": f, "precision": p, "recall": r})


def test_classification_ci_brackets_values_and_repeats():
    from harness.measure.metrics import bootstrap_classification_ci, classification_metrics

    rng = np.random.default_rng(4)
    y_true = np.repeat(np.arange(4), 100)  # balanced: macro recall = accuracy
    y_pred = np.where(rng.random(400) < 0.8, y_true, (y_true + 1) % 4)
    values = classification_metrics(y_true, y_pred, 4)
    assert values["recall"] == pytest.approx(values["accuracy"])
    cis = bootstrap_classification_ci(y_true, y_pred, 4, np.random.default_rng(0), n_boot=300)
    for name, (low, high) in cis.items():
        assert low < values[name] < high and high - low < 0.15, name
    assert cis == bootstrap_classification_ci(y_true, y_pred, 4, np.random.default_rng(0), n_boot=300)


def test_chance_is_the_score_of_a_predictor_that_ignores_the_input():
    """One rule per metric kind (harness.measure.chance): a label's majority class, an item's own options' uniform guess."""
    from harness.measure import chance
    from harness.measure.metrics import binary_f1

    gold = np.array([1, 1, 1, 0])
    assert chance.majority(gold) == 0.75                                # always 1: accuracy 3/4
    assert chance.majority(gold, binary_f1) == pytest.approx(6 / 7)     # always 1: tp 3, fp 1 -> 6 / 7
    assert chance.majority(np.array([0, 0, 0, 1]), binary_f1) == 0.0    # always 0: no positive predicted
    assert chance.uniform_choice([2, 4, 4]) == pytest.approx((1 / 2 + 1 / 4 + 1 / 4) / 3)
