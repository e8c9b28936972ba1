"""Paired statistics against hand-computed cases and scipy; the runner's comparison of two runs' items."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import binomtest

from harness.measure.chance import majority
from harness.measure.compare import compare, group_weights, value_of
from harness.measure.metrics import Part, chance_adjusted_pct_base, mean_sd
from harness.measure.paired import PairedInterval, agreement, flip_rate, mcnemar_p, paired_interval
from harness.measure.statistics import STATISTICS, Statistic, ratio
from harness.results.records import ItemOutputs, Score
from harness.suite import statistic_items
from tests.test_statistics import ALL, case, library


def _ones(n: int) -> np.ndarray:
    return np.ones(n)


def _paired(method: list, base: list, rng: np.random.Generator, statistic: Statistic = ratio, **kwargs) -> PairedInterval:
    """:func:`paired_interval` of groups given as (a, b) per run, each group a part of its own."""
    return paired_interval([Part([*m, *b], statistic) for m, b in zip(method, base)], rng, **kwargs)


def test_paired_bootstrap_matches_the_enumerated_distribution():
    """Three items, method right on items 0 and 1, baseline on item 0 only: in a resample the
    difference is (times item 1 is drawn) / 3, Binomial(3, 1/3): P = 8/27, 12/27, 6/27, 1/27 for
    0, 1/3, 2/3, 1. So the 90% interval is (0, 2/3): P(0) > 5% and P(<= 2/3) = 26/27 > 95%."""
    method, base = np.array([1.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0])
    ci = _paired([(method, _ones(3))], [(base, _ones(3))], np.random.default_rng(0), n_boot=20000, confidence=0.9)
    assert ci.difference == pytest.approx((0.0, 2 / 3))


def test_paired_bootstrap_pct_base_of_two_items():
    """Baseline right on both items, method on the first: method mean 1, 1/2, 0 with P 1/4, 1/2, 1/4,
    baseline always 1, so %Base is 100, 50 or 0: the 40% interval (30th..70th percentile) is (50, 50)
    and the 90% interval (0, 100)."""
    method, base = np.array([1.0, 0.0]), np.array([1.0, 1.0])
    narrow = _paired([(method, _ones(2))], [(base, _ones(2))], np.random.default_rng(1), n_boot=20000, confidence=0.4)
    wide = _paired([(method, _ones(2))], [(base, _ones(2))], np.random.default_rng(1), n_boot=20000, confidence=0.9)
    assert narrow.pct_base == pytest.approx((50.0, 50.0)) and wide.pct_base == pytest.approx((0.0, 100.0))


def test_items_are_resampled_jointly_and_ratios_pooled():
    """Every document's NLL is 10% higher for the method: pooled over any resample of documents the
    BPB ratio is exactly 1.1, so the paired %Base interval collapses to 100 / 1.1 (lower is better),
    although the documents' own BPB varies a lot (independent resampling would give a wide interval)."""
    rng = np.random.default_rng(2)
    n_bytes = rng.integers(200, 5000, size=40).astype(float)
    bits = n_bytes * rng.uniform(0.5, 1.5, size=40)
    ci = _paired([(1.1 * bits, n_bytes)], [(bits, n_bytes)], np.random.default_rng(3), higher_is_better=False)
    assert ci.pct_base == pytest.approx((100 / 1.1, 100 / 1.1))
    low, high = ci.difference
    assert 0 < low < high  # method - base in bits per byte: always positive, resample-dependent


def test_identical_runs_have_a_point_interval():
    correct = (np.random.default_rng(4).random(300) < 0.6).astype(float)
    ci = _paired([(correct, _ones(300))] * 2, [(correct, _ones(300))] * 2, np.random.default_rng(5))
    assert ci.pct_base == (100.0, 100.0) and ci.difference == (0.0, 0.0)


@pytest.mark.parametrize("b, c, concordant", [(1, 6, 20), (0, 0, 5), (9, 3, 0), (40, 25, 100)])
def test_mcnemar_is_the_exact_binomial_test_on_discordant_pairs(b, c, concordant):
    base = np.r_[np.ones(b), np.zeros(c), np.ones(concordant)]       # b: baseline right only
    method = np.r_[np.zeros(b), np.ones(c), np.ones(concordant)]     # c: method right only
    p = mcnemar_p(method, base)
    if b + c == 0:
        assert p == 1.0
    else:
        assert p == pytest.approx(binomtest(b, b + c, 0.5).pvalue)
        by_hand = min(1.0, 2 * sum(math.comb(b + c, i) for i in range(min(b, c) + 1)) / 2 ** (b + c))
        assert p == pytest.approx(by_hand)
    assert flip_rate(method, base) == pytest.approx((b + c) / (b + c + concordant))


def test_mcnemar_hand_value():
    assert mcnemar_p(np.r_[0, np.ones(6)], np.r_[1, np.zeros(6)]) == pytest.approx(2 * (1 + 7) / 128)  # b=1, c=6


def test_chance_adjusted_pct_base_and_helpers():
    assert chance_adjusted_pct_base(1 / 3, 0.3676, 1 / 3) == pytest.approx(0.0)  # a method at chance keeps nothing
    assert chance_adjusted_pct_base(0.3627, 0.3676, 1 / 3) == pytest.approx(100 * (0.3627 - 1 / 3) / (0.3676 - 1 / 3))
    assert chance_adjusted_pct_base(0.5, 0.33, 1 / 3) is None and chance_adjusted_pct_base(0.5, 0.6, None) is None
    assert majority(["a", "b", "b", "c"]) == 0.5
    assert agreement(["a", "b", "c"], ["a", "c", "c"]) == pytest.approx(2 / 3)
    assert mean_sd([1.0, 2.0, None, 3.0]) == pytest.approx((2.0, 1.0)) and mean_sd([None]) is None


def _accuracy(run_ids, values, language, preds=None):
    return ItemOutputs("xnli", language, "test", "accuracy", tuple(run_ids), tuple(values), tuple(preds or ()), ())


def test_compare_matches_items_by_id_and_macro_averages():
    """The method scored the items in another order and one item the baseline did not: pairs are
    matched by id, the extra item is left out, and the avg row pools both languages' pairs."""
    base_items = [_accuracy(["1", "2", "3", "4"], [1, 1, 0, 0], "en", list("eenn")), _accuracy(["1", "2"], [1, 0], "de")]
    items = [_accuracy(["4", "3", "2", "1", "9"], [1, 0, 1, 0, 1], "en", list("eeeen")), _accuracy(["2", "1"], [0, 0], "de")]

    def score(language, value, low=None):
        return Score("xnli", language, "test", "accuracy", value, low, 1.0, chance=0.25)

    base_scores = [score("en", 0.5, 0.3), score("de", 0.5, 0.1), score("avg", 0.5, 0.2)]
    scores = [score("en", 0.4), score("de", 0.0), score("avg", 0.2)]
    out = {c.language: c for c in compare(scores, items, base_scores, base_items, "base-run", np.random.default_rng(0))}
    en = out["en"]
    assert en.n_paired == 4 and en.flip_rate == pytest.approx(0.5)  # item 1 right -> wrong, item 4 wrong -> right
    assert en.agreement == pytest.approx(0.5)                       # predictions e/e/n/n vs e/e/e/e on items 1-4
    assert en.p_value == pytest.approx(1.0) and en.baseline_run_id == "base-run"
    assert en.difference == pytest.approx(-0.1) and en.chance_adjusted_pct_base == pytest.approx(100 * 0.15 / 0.25)
    assert en.baseline_above_chance and not out["de"].baseline_above_chance  # de's baseline CI low 0.1 <= 0.25
    assert out["avg"].n_paired == 6 and out["avg"].agreement is None        # de stored no predictions
    assert out["avg"].pct_base_ci_low <= 40.0 <= out["avg"].pct_base_ci_high


def test_compare_without_pairs_says_why():
    scores = [Score("t", "en", "test", "accuracy", 0.4, 0.3, 0.5, chance=0.25)]
    (c,) = compare(scores, [], scores, [], "self", np.random.default_rng(0))
    assert c.n_paired == 0 and c.pct_base_ci_low is None and c.p_value is None
    assert c.chance_adjusted_pct_base == pytest.approx(100.0) and c.baseline_above_chance
    assert c.unpaired == "this run stored no per-item outputs for this score"
    mine = [ItemOutputs("t", "en", "test", "accuracy", ("1", "2"), (1.0, 0.0))]
    (c,) = compare(scores, mine, scores, [], "base", np.random.default_rng(0))
    assert c.unpaired == "the baseline run stored no per-item outputs for this score" and c.n_paired == 0
    old_layout = [ItemOutputs("t", "en", "test", "accuracy", ("doc-1", "doc-2"), (1.0, 1.0))]
    (c,) = compare(scores, mine, scores, old_layout, "base", np.random.default_rng(0))
    assert c.unpaired.startswith("no item ids in common (en)") and c.pct_base_ci_low is None
    (c,) = compare(scores, mine, scores, mine, "base", np.random.default_rng(0))
    assert c.unpaired is None and c.n_paired == 2


def test_an_average_over_tasks_weighs_tasks_alike_and_its_metrics_share_a_task():
    assert group_weights(["en", "de", "fr"]) is None
    assert group_weights(["cola", "mrpc/accuracy", "mrpc/f1", "sst2"]) == pytest.approx([1 / 3, 1 / 6, 1 / 6, 1 / 3])
    cola = statistic_items("glue", "cola", "eval", "score", "mcc", ["1", "2", "3", "4"], [1, 0, 1, 1], [1, 0, 0, 1])
    acc = ItemOutputs("glue", "mrpc/accuracy", "eval", "score", ("1", "2"), (1.0, 0.0))
    f1 = statistic_items("glue", "mrpc/f1", "eval", "score", "binary_f1", ["1", "2"], [1, 1], [1, 0])
    mcc = library("mcc")(np.array([1, 0, 1, 1]), np.array([1, 0, 0, 1]))
    assert value_of([cola, acc, f1]) == pytest.approx(mcc / 2 + (0.5 + 2 / 3) / 4)  # (mcc + mean(acc, f1)) / 2


def test_an_average_row_has_no_mcnemar_p():
    """Pooling (or stratifying) the languages' discordant pairs treats translations as independent."""
    ids = [str(i) for i in range(20)]
    right = [1.0] * 15 + [0.0] * 5
    base = [_accuracy(ids, right, lang) for lang in ("en", "de")]
    mine = [_accuracy(ids, right[::-1], lang) for lang in ("en", "de")]
    scores = [Score("xnli", lang, "test", "accuracy", 0.75, 0.5, 0.9, chance=1 / 3) for lang in ("en", "de", "avg")]
    out = {c.language: c for c in compare(scores, mine, scores, base, "b", np.random.default_rng(0))}
    assert out["en"].p_value is not None and out["avg"].p_value is None and out["avg"].flip_rate == pytest.approx(0.5)


@pytest.mark.parametrize("name", sorted(ALL))
def test_paired_interval_equals_a_brute_force_loop_over_the_same_draws(name):
    """Two groups of 9 and 7 items, 50 replicates: per replicate the same indices for both runs (the
    generator's draws in the bootstrap's order: per group, one (replicates, items) block), the
    library statistic on each side, averaged over the groups; percentile intervals of %Base and the
    difference."""
    data = np.random.default_rng(11)
    groups = [case(name, data, n) for n in (9, 7)]
    fn = library(name)
    draw = np.random.default_rng(5)
    m, b = np.zeros(50), np.zeros(50)
    for gold, base, method in groups:
        idx = draw.integers(0, len(gold), size=(50, len(gold)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a constant resample: NaN, as the bootstrap leaves out
            m += [fn(method[row], gold[row]) for row in idx]
            b += [fn(base[row], gold[row]) for row in idx]
    m, b = m / 2, b / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        pct, diff = 100 * m / b, m - b
    ci = _paired([(g[2], g[0]) for g in groups], [(g[1], g[0]) for g in groups], np.random.default_rng(5), ALL[name], n_boot=50)
    assert ci.pct_base == pytest.approx(tuple(np.quantile(pct[np.isfinite(pct)], [0.025, 0.975])))
    assert ci.difference == pytest.approx(tuple(np.quantile(diff[np.isfinite(diff)], [0.025, 0.975])))


def test_compare_recomputes_a_corpus_statistic_and_skips_mcnemar():
    """Spearman items (prediction, gold) behind a score: the comparison is the paired statistic
    bootstrap on the items both runs scored (matched by id), with no McNemar or flips."""
    rng = np.random.default_rng(3)
    gold, base, method = case("spearman", rng, 40)
    ids = [f"line{i}" for i in range(40)]
    base_items = [statistic_items("MEN", "en", "all", "spearman", "spearman", ids, base, gold)]
    order = rng.permutation(40)  # the method stored its items in another order: matched by id
    items = [statistic_items("MEN", "en", "all", "spearman", "spearman", [ids[i] for i in order], method[order], gold[order])]
    scores, base_scores = ([Score("MEN", "en", "all", "spearman", value_of(i), chance=0.0)] for i in (items, base_items))
    assert items[0].metric == "spearman@spearman" and value_of(items) == pytest.approx(library("spearman")(method, gold))
    (c,) = compare(scores, items, base_scores, base_items, "base", np.random.default_rng(9))
    want = _paired([(method, gold)], [(base, gold)], np.random.default_rng(9), STATISTICS["spearman"])
    assert (c.pct_base_ci_low, c.pct_base_ci_high) == pytest.approx(want.pct_base) and c.n_paired == 40
    assert c.difference == pytest.approx(scores[0].value - base_scores[0].value)
    assert c.p_value is None and c.flip_rate is None
