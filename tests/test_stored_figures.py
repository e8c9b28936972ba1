"""The committed store's figures are what the statistics give from its per-item outputs.

For every suite in the committed results.duckdb, its newest baseline run of each configuration and
the newest method run compared with it: each score's value is recomputed from the items behind it, each comparison (the
paired %Base and difference intervals, McNemar, flips) from both runs' items with the run's seed, as
the runner computes it, and each score's bootstrap CI by replaying the suite's own random stream where
that stream depends only on the seed (bpb, glue, word_sim, mteb_clf, xnli, ag_news; the other suites
draw their data samples from it first). Point estimates must match exactly; intervals to 1e-12
(relative), since a resample's sums are added in another order than the code that wrote them added
them (the random draws are the same). Read-only.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from harness.measure.compare import compare, group_weights, items_behind, parts_of, split_metric, value_of
from harness.measure.metrics import Part, bootstrap_intervals
from harness.measure.statistics import CLASSIFICATION_METRICS, confusion_statistic
from harness.results.records import ItemOutputs, RunRecord, Score
from harness.registry import SUITES
from harness.results.store import Store
from tests.conftest import read_sql

DB = Path(__file__).resolve().parents[1] / "results.duckdb"
XNLI_TEST_ROWS = 5010  # rows of each language of XNLI's test file, which the suite's row sample permutes
CORRELATIONS = ("spearman", "pearson")  # the store's one-set correlations are scipy's figures: they agree up to rounding
SEQEVAL = ("wikiann", "bc5cdr")  # entity scores are seqeval's figures: the items' ratios agree up to rounding
LAST_BIT = {"rel": 1e-15, "abs": 0}
PAIRED = ("pct_base_ci_low", "pct_base_ci_high", "difference_ci_low", "difference_ci_high")


def _suites() -> list[str]:
    if not DB.exists():
        return []
    return list(read_sql(DB, "SELECT DISTINCT suite FROM runs WHERE status = 'finished' ORDER BY suite").suite)


def _loaded(store: Store, run_id: str) -> RunRecord:
    return dataclasses.replace(store.load(run_id), items=store.items(run_id))


def _checked(suite: str) -> list[tuple[RunRecord, RunRecord]]:
    """(run, its baseline) for the suite's newest baseline run of each suite configuration (compared
    with itself) and the newest method run compared with it. Only runs that carry a code fingerprint:
    the store's older runs were scored by other statistics (scipy per replicate, float32 STS-B)."""
    store = Store(DB)
    runs = read_sql(DB, "SELECT run_id, adapter, CAST(suite_config AS VARCHAR) AS config, baseline_run_id FROM runs "
                         "WHERE status = 'finished' AND suite = ? AND code IS NOT NULL ORDER BY started_at DESC", [suite])
    out = []
    for config in dict.fromkeys(runs.config[runs.adapter == "none"]):
        base_id = next(r for r, a, c in zip(runs.run_id, runs.adapter, runs.config) if a == "none" and c == config)
        base = _loaded(store, base_id)
        method = next((r for r, b in zip(runs.run_id, runs.baseline_run_id) if b == base_id), None)
        out += [(base, base)] + ([(_loaded(store, method), base)] if method else [])
    return out


def _value(behind: list[ItemOutputs]) -> float:
    """The figure a score's items give, by the definition the suite reports it with."""
    return value_of(behind)


def test_the_store_holds_the_suites_whose_intervals_are_replayed():
    if not DB.exists():
        pytest.skip("no committed results.duckdb in this checkout")
    assert {"bpb", "glue", "word_sim", "mteb_clf", "xnli", "ag_news"} <= set(_suites())


@pytest.mark.skipif(not DB.exists(), reason="no committed results.duckdb in this checkout")
@pytest.mark.parametrize("suite", _suites())
def test_values_intervals_and_comparisons_are_what_the_items_give(suite):
    for rec, base in _checked(suite):
        for s in rec.scores:
            behind = items_behind(s, rec.items)
            if not behind:
                continue
            # an average whose groups weigh unequally (GLUE's tasks) is np.dot, summed in the order of the
            # CPU's BLAS kernel: one stored GLUE average is 2 ulp off the order of this machine's
            loose = (suite in SEQEVAL or group_weights([i.language for i in behind]) is not None
                     or (len(behind) == 1 and split_metric(behind[0].metric)[1] in CORRELATIONS))
            assert _value(behind) == (pytest.approx(s.value, **LAST_BIT) if loose else s.value), (rec.run_id, s)
        for s, (low, high) in _replayed_intervals(rec).items():
            assert (low, high) == pytest.approx((s.ci_low, s.ci_high), rel=1e-12, abs=1e-15), (rec.run_id, s)
        got = compare(rec.scores, rec.items, base.scores, base.items, base.run_id, np.random.default_rng(rec.spec.seed))
        stored = {(c.task, c.language, c.split, c.metric): c for c in rec.comparisons}
        assert len(got) == len(stored)
        for c in got:
            kept = stored[(c.task, c.language, c.split, c.metric)]
            assert _same(dataclasses.replace(c, **{f: None for f in PAIRED}), dataclasses.replace(kept, **{f: None for f in PAIRED})), (rec.run_id, c)
            assert [getattr(c, f) for f in PAIRED] == pytest.approx([getattr(kept, f) for f in PAIRED], rel=1e-12, abs=1e-15, nan_ok=True), (rec.run_id, c)


def _same(a, b) -> bool:
    """Dataclass equality with NaN equal to NaN."""
    nan = lambda v: isinstance(v, float) and math.isnan(v)  # noqa: E731
    return all(x == y or (nan(x) and nan(y)) for x, y in zip(dataclasses.astuple(a), dataclasses.astuple(b)))


def _replayed_intervals(rec: RunRecord) -> dict[Score, tuple[float, float]]:
    """Each score's CI on the random stream its suite drew it from (suites whose stream holds only
    the bootstrap; none for the others)."""
    seed, scored = rec.spec.seed, [s for s in rec.scores if items_behind(s, rec.items)]
    suite = rec.spec.suite

    def ci(s: Score, rng: np.random.Generator) -> tuple[float, float]:
        return bootstrap_intervals(parts_of(items_behind(s, rec.items)), rng)[0]

    if suite == "bpb":  # a fresh generator for every score
        return {s: ci(s, np.random.default_rng(seed)) for s in scored}
    if suite == "glue":  # a fresh generator per task, one for the average
        out, task, rng = {}, None, None
        for s in scored:
            if s.task != task:
                task, rng = s.task, np.random.default_rng(seed)
            out[s] = ci(s, rng)
        return out
    if suite in ("word_sim", "mteb_clf", "xnli"):  # one generator, the scores in order
        rng = np.random.default_rng(seed + (suite == "xnli"))
        if suite == "xnli":
            _replay_row_sample(rec, rng)
        return {s: ci(s, rng) for s in scored}
    if suite in ("ag_news", "dbpedia14"):  # one draw for the four metrics
        (item,) = [i for i in rec.items if i.metric == "f1@macro_f1"]
        pred, gold = np.asarray(item.values), np.asarray([float(g) for g in item.gold])
        classes = len(SUITES.get(suite).head.labels)
        part = Part([pred, gold] * 4, tuple(confusion_statistic(m, classes) for m in CLASSIFICATION_METRICS))
        cis = dict(zip(CLASSIFICATION_METRICS, bootstrap_intervals([part], np.random.default_rng(seed + 2))))
        return {s: cis[s.metric] for s in scored}
    return {}


def _replay_row_sample(rec: RunRecord, rng: np.random.Generator) -> None:
    """Draw XNLI's row sample from ``rng`` as the suite does (nothing when it scored every row), and
    check that it is the run's items: then the stream is where the suite's bootstrap began."""
    ids = next(i for i in rec.items if i.language == "en").ids
    if len(ids) < XNLI_TEST_ROWS:
        kept = np.sort(rng.permutation(XNLI_TEST_ROWS)[:len(ids)])
        assert tuple(str(k) for k in kept) == ids, "the row sample is not the suite's: another stream"
