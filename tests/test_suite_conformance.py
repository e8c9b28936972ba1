"""Every registered suite runs its smoke profile end to end on the smallest model it supports, and
its result keeps the contract: declared data sources cover what it read, CIs bracket their values,
the baseline's %Base is 100, per-item outputs are aligned and reproduce the scores, efficiency is recorded."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.measure import chance
from harness.measure.compare import items_behind
from harness.errors import DataError
from harness.registry import SUITES
from harness.runner.run import RunRequest, execute
from harness.sources import corpora
from harness.sources.data import data_root, revisions
from tests.conftest import assert_items_reproduce_scores, with_items
from tests.families import BY_NAME, build, sentencepiece_tokenizer

SMALLEST = {"encoder": "minilm", "decoder": "smollm2"}
NOT_ON_HAND = {"dbpedia14"}  # suites whose data the README documents as not staged (put the release's CSVs there)


def _smallest(suite, tmp_path: Path) -> str:
    """The smallest model of a kind the suite takes: a packaged one, or for an encoder-decoder (none is
    packaged) a tiny random T5 built from its config with a SentencePiece-style tokenizer (tests/families.py)."""
    for kind in ("encoder", "decoder"):
        if kind in suite.kinds:
            return SMALLEST[kind]
    texts = list(corpora.load("wikitext2_train", data_root()).texts[:200])
    return str(build(BY_NAME["t5"], sentencepiece_tokenizer(texts), tmp_path / "t5"))


def _built_in_suites() -> list[str]:
    return [n for n in SUITES.names() if SUITES.get(n).__module__.startswith("harness.")]


@pytest.mark.parametrize("name", _built_in_suites())
def test_suite_smoke_run_keeps_the_contract(name, baselines_store, tmp_path):
    suite = SUITES.get(name)()
    try:
        revisions(data_root(), suite.sources(suite.config_class(), suite.budgets.smoke))
    except DataError as err:  # a staged file missing is a failure; only documented absences skip
        if name not in NOT_ON_HAND:
            raise
        pytest.skip(str(err))
    model = _smallest(suite, tmp_path)
    (outcome,) = execute(RunRequest(name, "none", model=model, profile="smoke"), baselines_store)  # made, or another test's reused
    rec = with_items(baselines_store, outcome.record)
    assert rec.status == "finished" and rec.scores and outcome.stored
    read = {Path(f).as_posix() for f in rec.provenance.data_files}
    assert rec.spec.data and all(any(f.endswith(declared) for declared in rec.spec.data) for f in read)  # sources() covers prepare()
    for s in rec.scores:
        assert math.isfinite(s.value), s
        if s.ci_low is not None:
            assert s.ci_low <= s.value + 1e-9 and s.value <= s.ci_high + 1e-9, s
        assert s.pct_base is None or s.pct_base == pytest.approx(100.0), s
    for it in rec.items:
        assert len(it.ids) == len(it.values) == len(set(it.ids)) > 0, (it.task, it.language)
        assert not it.predictions or len(it.predictions) == len(it.ids)
        assert not it.weights or len(it.weights) == len(it.ids)
    # a score with items behind it is sum(values) / sum(weights) of them (what the paired statistics resample)
    assert_items_reproduce_scores(rec.scores, rec.items, every=False)
    assert {c.key() for c in rec.comparisons} == {(s.task, s.language, s.split, s.metric) for s in rec.scores}
    # every score with items behind it gets the paired statistics (against itself: a point at 100)
    paired = {c.key(): c for c in rec.comparisons}
    for s in rec.scores:
        c = paired[(s.task, s.language, s.split, s.metric)]
        if items_behind(s, rec.items):
            assert c.n_paired == s.n and c.difference == 0.0, (s, c)
            assert c.pct_base_ci_low is not None and (s.value == 0 or c.pct_base_ci_low == pytest.approx(100.0)), (s, c)
    # one chance rule (harness.measure.chance): every classification-like score carries its level, and
    # the baseline is flagged exactly where its CI low is not above it
    for s in rec.scores:
        c = paired[(s.task, s.language, s.split, s.metric)]
        if not chance.has_level(s.metric, s.higher_is_better):
            continue
        assert s.chance is not None, s
        assert c.baseline_above_chance == (s.ci_low > s.chance), (s, c)
    assert rec.efficiency and all(e.p50_ms > 0 and e.peak_mem_mb > 0 for e in rec.efficiency)
    assert rec.compression.emb_param_fraction == 1.0 and rec.fit is not None
