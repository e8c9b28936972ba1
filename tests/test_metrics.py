"""Metrics: %Base arithmetic and the one bootstrap (independent and cluster draws, every statistic)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from tests.test_statistics import case, library

from harness.measure.metrics import Part, _strata, bootstrap_intervals, pct_base, percentile_interval, resampled, resampled_parts
from harness.measure.statistics import CLASSIFICATION_METRICS, STATISTICS, classification_metrics, confusion_statistic, ratio


def _ones(n: int) -> np.ndarray:
    return np.ones(n)


def test_pct_base_is_method_over_baseline():
    assert pct_base(0.7306, 0.7546) == pytest.approx(96.8195, abs=1e-3)  # mBERT-like numbers
    assert pct_base(0.5, 0.5) == 100.0
    assert pct_base(0.1, 0.0) is None


def test_pct_base_inverts_lower_is_better():
    # bits per byte 1.10 vs baseline 1.00: worse, so below 100
    assert pct_base(1.10, 1.00, higher_is_better=False) == pytest.approx(90.909, abs=1e-3)


def test_bootstrap_interval_brackets_mean_and_repeats():
    values = np.r_[np.ones(700), np.zeros(300)]
    low, high = bootstrap_intervals([Part([values, _ones(1000)])], np.random.default_rng(0))[0]
    assert low < 0.7 < high
    assert high - low == pytest.approx(2 * 1.96 * np.sqrt(0.7 * 0.3 / 1000), rel=0.15)  # normal approximation
    assert [(low, high)] == bootstrap_intervals([Part([values, _ones(1000)])], np.random.default_rng(0))


def test_interval_of_a_macro_average_is_narrower_than_one_groups():
    rng = np.random.default_rng(1)
    groups = [Part([(rng.random(200) < p).astype(float), _ones(200)]) for p in (0.4, 0.5, 0.6)]
    low, high = bootstrap_intervals(groups, np.random.default_rng(2))[0]
    assert low < np.mean([g.arrays[0].mean() for g in groups]) < high
    one_low, one_high = bootstrap_intervals(groups[:1], np.random.default_rng(2))[0]
    assert high - low < one_high - one_low


def test_ratio_interval_pools_documents_and_repeats():
    rng = np.random.default_rng(0)
    den = rng.integers(100, 5000, size=60).astype(float)
    num = den * rng.normal(0.7, 0.05, size=60)
    low, high = bootstrap_intervals([Part([num, den])], np.random.default_rng(1))[0]
    assert low < num.sum() / den.sum() < high and high - low < 0.05
    assert (low, high) == bootstrap_intervals([Part([num, den])], np.random.default_rng(1))[0]


@pytest.mark.parametrize("name", sorted({"ratio", *STATISTICS}))
def test_the_bootstrap_is_the_library_statistic_on_the_generators_draws(name):
    """Two groups of 9 and 7 items, 50 replicates: per group one (replicates, items) block of the
    generator's integers, the library statistic of each resample, averaged over the groups."""
    data = np.random.default_rng(11)
    groups = [case(name, data, n) for n in (9, 7)]
    draw, want = np.random.default_rng(5), np.zeros(50)
    for gold, _, method in groups:
        idx = draw.integers(0, len(gold), size=(50, len(gold)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a constant resample: NaN, as the bootstrap leaves out
            want += [library(name)(method[row], gold[row]) for row in idx]
    got = resampled([[method, gold] for gold, _, method in groups], np.random.default_rng(5), 50, None if name == "ratio" else name)
    assert got[:, 0] == pytest.approx(want / 2, rel=1e-12, nan_ok=True)


def test_classification_intervals_come_from_one_draw_for_the_four_metrics():
    rng = np.random.default_rng(4)
    y_true = np.repeat(np.arange(4), 100)
    y_pred = np.where(rng.random(400) < 0.8, y_true, (y_true + 1) % 4)
    values = classification_metrics(y_true, y_pred, 4)
    part = Part([y_pred, y_true] * 4, tuple(confusion_statistic(m, 4) for m in CLASSIFICATION_METRICS))
    stats = resampled_parts([part], np.random.default_rng(0), 300)
    alone = resampled_parts([Part([y_pred, y_true], confusion_statistic("f1", 4))], np.random.default_rng(0), 300)
    assert np.array_equal(stats[:, 1], alone[:, 0])  # the same draws as f1 alone
    for name, (low, high) in zip(CLASSIFICATION_METRICS, bootstrap_intervals([part], np.random.default_rng(0), 300)):
        assert low < values[name] < high and high - low < 0.15, name


def test_a_cluster_bootstrap_does_not_count_translations_as_new_evidence():
    """15 groups that are the same 200 rows (perfectly correlated languages): resampled as clusters,
    the average's interval is that of one group; resampled each on its own, it would shrink by about
    sqrt(15). Unclustered groups keep the independent draws exactly."""
    rows = (np.random.default_rng(0).random(200) < 0.55).astype(float)
    ids = tuple(str(i) for i in range(200))
    one = percentile_interval(resampled([[rows, _ones(200)]], np.random.default_rng(1))[:, 0])
    clustered = percentile_interval(resampled_parts([Part([rows, _ones(200)], clusters=ids)] * 15, np.random.default_rng(1))[:, 0])
    independent = percentile_interval(resampled([[rows, _ones(200)]] * 15, np.random.default_rng(1))[:, 0])
    width = lambda ci: ci[1] - ci[0]  # noqa: E731
    assert width(clustered) == pytest.approx(width(one), rel=0.15)
    assert width(independent) == pytest.approx(width(one) / math.sqrt(15), rel=0.2)
    plain = resampled_parts([Part([rows, _ones(200)])] * 3, np.random.default_rng(2))
    assert np.array_equal(plain, resampled([[rows, _ones(200)]] * 3, np.random.default_rng(2)))


def test_a_cluster_draw_counts_each_item_as_often_as_its_cluster():
    """Two parts sharing clusters "a" and "b": in every replicate, each part's ratio is its items
    weighted by the count of their cluster in one draw of the stratum's 3 clusters (a, b, c)."""
    first = Part([np.array([1.0, 0.0]), _ones(2)], clusters=("a", "b"))
    second = Part([np.array([0.0, 1.0]), _ones(2)], clusters=("b", "c"))
    got = resampled_parts([first, second], np.random.default_rng(3), 20)
    drawn = np.random.default_rng(3).integers(0, 3, size=(20, 3))
    counts = np.stack([np.bincount(row, minlength=3) for row in drawn]).astype(float)  # of a, b, c
    want = (ratio(first.arrays[0], _ones(2), counts[:, [0, 1]]) + ratio(second.arrays[0], _ones(2), counts[:, [1, 2]])) / 2
    assert np.array_equal(got[:, 0], want)


def test_groups_sharing_clusters_are_one_stratum_others_stay_independent():
    shared = [Part([_ones(2), _ones(2)], clusters=("a", "b")), Part([_ones(2), _ones(2)], clusters=("b", "c"))]
    assert _strata([*shared, Part([_ones(2), _ones(2)], clusters=("x", "y")), Part([_ones(3), _ones(3)])]) == [[0, 1], [2], [3]]


def test_percentile_interval_leaves_out_undefined_replicates():
    assert percentile_interval(np.array([np.nan, 1.0, 2.0, 3.0]), 0.0) == (2.0, 2.0)
    assert all(math.isnan(v) for v in percentile_interval(np.array([np.nan, np.nan])))
