"""`harness run` end to end on the smoke profile for bpb, lm_eval (XNLI/SST-2 zero-shot and paper
003's seven few-shot tasks), tokenizer and mteb_clf.

Real packaged models (SmolLM2, MiniLM), real data, DuckDB in tmp_path; ASG with a small k and
m so that k-means stays cheap.
"""

from __future__ import annotations

import numpy as np
import pytest
from harness.suites.lm_eval import AVERAGE_TASK, PAPER003, PAPER_AVERAGE
from harness.suites.lm_eval_data import TASKS
from typer.testing import CliRunner

from harness.cli import app
from harness.results.store import Store
from harness.runner.run import RunRequest, execute
from tests.conftest import assert_items_reproduce_scores, read_sql, with_items

SMALL_ASG = ("k=64", "m=8", "niter=5")


def test_bpb_base_and_asg_with_inverted_pct_base_and_decode_efficiency(tmp_path):
    db = tmp_path / "results.duckdb"
    args = ["run", "--suite", "bpb", "--adapter", "asg", "--profile", "smoke", "--db", str(db)]
    result = CliRunner().invoke(app, args + [a for kv in SMALL_ASG for a in ("--set", kv)])
    assert result.exit_code == 0, result.output
    assert "bits_per_byte" in result.output and "timed in one run" in result.output and "decode (1 x 1)" in result.output
    store = Store(db)
    ids = read_sql(store.path, "SELECT run_id FROM runs ORDER BY started_at").run_id.tolist()
    base, asg = (store.load(i) for i in ids)
    asg_bpb = [s for s in asg.scores if s.metric == "bits_per_byte"]
    assert [s.task for s in base.scores] == [s.task for s in asg_bpb] == ["wikitext2", "c4"]  # two corpora
    b, a = base.scores[0], asg_bpb[0]
    assert b.metric == a.metric == "bits_per_byte" and not a.higher_is_better
    assert 0.5 < b.value < 3 and a.value > b.value  # post-hoc PQ of the tied table costs bits
    bpb = {}  # bits per byte by hand from the stored per-document items: total bits / total UTF-8 bytes
    for record in (base, asg):
        (it,) = [i for i in store.items(record.run_id) if (i.task, i.metric) == ("wikitext2", "bits_per_byte")]
        bpb[record.spec.adapter] = sum(it.values) / sum(it.weights)
    assert (b.value, a.value) == pytest.approx((bpb["none"], bpb["asg"]))
    assert a.pct_base == pytest.approx(100 * bpb["none"] / bpb["asg"]) and b.pct_base == pytest.approx(100)  # lower is better: inverted
    assert asg.compression.embedding_params_after == 64 * 576  # one codebook set, shared by the tied head
    phases = {e.phase: e for e in asg.efficiency}  # base:* phases time the unchanged model in the same run
    assert [e.phase for e in base.efficiency] == ["prefill", "decode"] and {"prefill", "decode"} <= set(phases)
    prefill, decode = phases["prefill"], phases["decode"]
    assert (prefill.batch, prefill.seq_len, decode.batch, decode.seq_len) == (1, 16, 1, 1)  # smoke shape
    assert decode.throughput == pytest.approx(1000 / decode.p50_ms) and decode.peak_mem_mb > 0
    assert asg.details["wikitext2"]["documents"] == asg.details["c4"]["documents"] == 3
    assert set(asg.details["kernel_paths"]["lm_head"]) == {"fused C++ kernel"} and base.details["kernel_paths"] == {}  # the path scored
    assert asg.details["c4"]["c4_sample.jsonl"]["scored"] == "documents 800-999" and "unk" in asg.details["wikitext2"]
    assert [s.metric for s in base.scores] == ["bits_per_byte"] * 2  # KL needs the unchanged model: method runs only
    kl = {s.task: s for s in asg.scores if s.metric == "kl_from_base"}
    assert set(kl) == {"wikitext2", "c4"} and all(0 < s.value and not s.higher_is_better for s in kl.values())
    assert all(s.setting == "post-hoc" for s in asg.scores)
    for record in (base, asg):
        items = store.items(record.run_id)
        assert_items_reproduce_scores(record.scores, items)
        assert all(int(i) >= 800 for it in items if it.task == "c4" for i in it.ids)  # c4 ids: lines of c4_sample.jsonl
    paired = {c.task: c for c in asg.comparisons if c.metric == "bits_per_byte"}
    assert paired["wikitext2"].n_paired == 3 and paired["wikitext2"].pct_base_ci_low <= a.pct_base <= paired["wikitext2"].pct_base_ci_high
    assert paired["wikitext2"].p_value is None and paired["wikitext2"].chance_adjusted_pct_base is None  # a ratio without chance


def test_lm_eval_zero_shot_xnli_and_sst2(tmp_path):
    (out,) = execute(RunRequest("lm_eval", "none", profile="smoke", settings=("tasks=xnli,sst2", "languages=en,de")), Store(tmp_path / "r.duckdb"))
    scores = {(s.task, s.language): s for s in out.record.scores}
    assert set(scores) == {("xnli", "en"), ("xnli", "de"), ("xnli", "avg"), ("sst2", "en")}
    assert all(0 <= s.value <= 1 and s.metric == "acc" and s.ci_low <= s.value <= s.ci_high for s in scores.values())
    assert scores[("xnli", "en")].n == 3 and scores[("sst2", "en")].n == 4
    assert out.record.details["xnli_languages"] == ["en", "de"]
    assert {s.shots for s in scores.values()} == {0}
    for (task, language), s in scores.items():  # chance: the majority label share of the scored documents
        if language != "avg":
            classes = 3 if task == "xnli" else 2
            assert s.chance == out.record.details["chance"][f"{task}_{language}" if task == "xnli" else task]
            assert 1 / classes <= s.chance <= 1 and (s.chance * s.n) == pytest.approx(round(s.chance * s.n))
    assert scores[("xnli", "avg")].chance == pytest.approx((scores[("xnli", "en")].chance + scores[("xnli", "de")].chance) / 2)
    xnli_items = [i for i in out.record.items if i.task == "xnli"]
    assert all(i.clusters == i.ids for i in xnli_items)  # one row in every language: one resampling unit
    assert_items_reproduce_scores(out.record.scores, out.record.items)
    assert all(s.setting == "0-shot" for s in scores.values())


def test_tokenizer_statistics_on_minilm(baselines_store):
    (out,) = execute(RunRequest("tokenizer", "none", model="minilm", profile="smoke"), baselines_store)  # the suite contract's run
    record = with_items(baselines_store, out.record)
    scores = {(s.task, s.language, s.metric): s.value for s in record.scores}
    assert scores[("vocabulary", "all", "vocab_size")] == 30522
    assert 3 < scores[("wikitext2", "en", "bytes_per_token")] < 6
    assert 0 < scores[("xnli", "en", "whole_word_share")] <= 1
    assert len([k for k in scores if k[0] == "xnli" and k[2] == "bytes_per_token"]) == 15
    assert_items_reproduce_scores(record.scores, record.items, without=("vocab_size",))


def test_mteb_classification_base_and_asg(baselines_store):
    """Against the session's baselines: the suite contract's mteb_clf baseline, made here or there."""
    outcomes = execute(RunRequest("mteb_clf", "asg", profile="smoke", settings=SMALL_ASG), baselines_store)
    base, asg = (with_items(baselines_store, o.record) for o in outcomes)
    assert [(s.task, s.metric) for s in asg.scores] == [("banking77", "accuracy"), ("tweeteval_sentiment", "accuracy")]
    by_hand = {r.spec.adapter: {i.task: np.mean(i.values) for i in r.items} for r in (base, asg)}  # mean per-text correctness
    for b, a in zip(base.scores, asg.scores):
        assert 0 <= a.value <= 1 and a.ci_low <= a.value <= a.ci_high and a.n == 32
        expected = by_hand["asg"][a.task] / by_hand["none"][a.task]
        assert a.pct_base == (None if b.value == 0 else pytest.approx(100 * expected))
    assert asg.details["banking77"]["samples_per_label"] == 1 and asg.details["n_experiments"] == 2
    for record in (base, asg):
        assert_items_reproduce_scores(record.scores, record.items)
        assert all(1 / 77 <= s.chance < 1 for s in record.scores)  # majority class of the 32 scored texts
    assert [c.n_paired for c in asg.comparisons] == [32, 32] and all(c.p_value is None for c in asg.comparisons)  # 2 experiments: not 0/1


@pytest.fixture(scope="module")
def paper003_smoke(baselines_store):
    """One smoke run of paper 003's seven tasks (3 scored documents each, 1 in-context example), made
    once for the session's workers: whoever comes second reuses the stored run."""
    (out,) = execute(RunRequest("lm_eval", "none", profile="smoke"), baselines_store)
    return with_items(baselines_store, out.record)


@pytest.mark.parametrize("task", PAPER003)
def test_paper003_task_smoke(paper003_smoke, task):
    scores = {s.metric: s for s in paper003_smoke.scores if s.task == task}
    assert set(scores) == set(TASKS[task].metrics)  # acc, plus acc_norm where lm-eval reports it
    for s in scores.values():
        assert (s.n, s.shots, s.language, s.split) == (3, 1, "en", TASKS[task].split_name)
        assert 0 <= s.ci_low <= s.value <= s.ci_high <= 1 and s.pct_base == (None if s.value == 0 else pytest.approx(100))
    details = paper003_smoke.details
    assert details["num_fewshot"][task] == 1 and details["examples"][task] == 3
    assert 0.2 <= details["chance"][task] <= 0.8 and details["fewshot_pool"][task] >= 100


def test_paper003_average_is_the_mean_of_its_six_tasks(paper003_smoke):
    acc = {s.task: s.value for s in paper003_smoke.scores if s.metric == "acc"}
    avg = next(s for s in paper003_smoke.scores if s.task == AVERAGE_TASK)
    assert avg.value == pytest.approx(np.mean([acc[t] for t in PAPER_AVERAGE])) and avg.n == 18 and avg.shots == 1
    assert avg.language == "avg" and avg.ci_low <= avg.value <= avg.ci_high
    groups = [i for i in paper003_smoke.items if i.task == AVERAGE_TASK]  # each task's items again: the average is paired too
    assert sorted(i.language for i in groups) == sorted(PAPER_AVERAGE) and all(not i.clusters for i in groups)
    (c,) = [c for c in paper003_smoke.comparisons if c.task == AVERAGE_TASK]
    assert c.n_paired == 18 and c.unpaired is None
    assert "arc_easy" not in PAPER_AVERAGE and paper003_smoke.spec.recipe["num_fewshot"] == 1
