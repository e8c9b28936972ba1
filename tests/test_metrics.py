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
