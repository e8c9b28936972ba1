"""GLUE and word similarity: metrics on hand-made cases with known answers, the staged GLUE files as
read (counts, QNLI's split by question), the word-pair reader, bad input (exit 2, one line), a
smoke run of word_sim with a table adapter (the static score moves, %Base per data set) and with
multisense's word senses, and the suite's word vectors read from real models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from harness.suites import glue, word_sim
from harness.suites.word_vectors import alone_vectors, word_occurrences, word_vectors
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import ConfigError, DataError
from harness.measure.metrics import Part, bootstrap_intervals
from harness.measure.statistics import spearman as weighted_spearman
from harness.methods.senses.cluster import kmeans_senses
from harness.runner.run import RunRequest, execute
from tests.conftest import with_items


def test_spearman_of_known_rankings():
    spearman, pearson = glue.METRICS["spearman"], glue.METRICS["pearson"]
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert spearman(x, x ** 3) == pytest.approx(1.0)            # monotone, not linear: rho 1, Pearson < 1
    assert pearson(x, x ** 3) < 0.99
    assert spearman(x, -x) == pytest.approx(-1.0)
    # ranks (1,2,3,4,5) vs (2,1,4,3,5): sum d^2 = 4, rho = 1 - 6*4 / (5*24) = 0.8
    assert spearman(x, np.array([2.0, 1.0, 4.0, 3.0, 5.0])) == pytest.approx(0.8)
    assert math.isnan(spearman(x, np.ones(5)))                   # constant side: undefined, not 0


def test_matthews_and_f1_of_a_known_confusion():
    # tp=3 fn=1 fp=1 tn=3: MCC = (9 - 1) / sqrt(4*4*4*4) = 0.5; F1 = 2*3 / (2*3 + 1 + 1) = 0.75
    matthews, binary_f1 = glue.METRICS["mcc"], glue.METRICS["f1"]
    gold = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    pred = np.array([1, 1, 1, 0, 1, 0, 0, 0])
    assert matthews(pred, gold) == pytest.approx(0.5)
    assert binary_f1(pred, gold) == pytest.approx(0.75)
    assert matthews(np.ones(8, dtype=int), gold) == 0.0          # one predicted class: CoLA's chance level
    assert binary_f1(np.zeros(8, dtype=int), gold) == 0.0


def test_spearman_interval_brackets_and_averages_groups():
    spearman = glue.METRICS["spearman"]
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = x + rng.normal(size=200)
    low, high = bootstrap_intervals([Part([x, y], weighted_spearman)], np.random.default_rng(1))[0]
    assert low < spearman(x, y) < high and high - low < 0.3
    # vectorised over replicates, it is scipy's spearmanr on the same draws
    brute = [spearman(x[row], y[row]) for row in np.random.default_rng(1).integers(0, 200, size=(1000, 200))]
    assert (low, high) == pytest.approx(tuple(np.quantile(brute, [0.025, 0.975])))
    # the mean over two groups: a perfect group and a noisy one sit around their average
    low2, high2 = bootstrap_intervals([Part([x, x], weighted_spearman), Part([x, y], weighted_spearman)], np.random.default_rng(1))[0]
    assert low2 == pytest.approx((1 + low) / 2, abs=0.03) and high2 == pytest.approx((1 + high) / 2, abs=0.03)


def test_chance_levels():
    gold = np.array([1, 1, 1, 0])
    assert glue.chance_level("accuracy", gold) == 0.75
    assert glue.chance_level("f1", gold) == pytest.approx(6 / 7)  # always 1: tp=3, fp=1
    assert glue.chance_level("mcc", gold) == 0.0


@pytest.fixture(scope="module")
def glue_data(data_dir):
    return glue.Glue().prepare(data_dir, glue.GlueConfig(), glue.BUDGETS.smoke).splits


def test_glue_files_as_staged(glue_data):
    sizes = {name: (len(s["train"]), len(s["dev"])) for name, s in glue_data.items()}
    assert {k: v for k, v in sizes.items() if k != "qnli"} == {
        "sst2": (67349, 872), "cola": (8551, 527), "mrpc": (4076, 1725), "stsb": (5749, 1500), "rte": (2490, 277)}
    assert sum(sizes["qnli"]) == 5463 and 0.2 < sizes["qnli"][1] / 5463 < 0.3
    assert glue_data["stsb"]["dev"].label.dtype == np.float32 and glue_data["stsb"]["dev"].label.max() <= 5.0
    assert np.bincount(glue_data["sst2"]["dev"].label).tolist() == [428, 444]
    assert np.bincount(glue_data["cola"]["dev"].label).tolist() == [162, 365]
    assert glue_data["sst2"]["dev"].second is None and glue_data["rte"]["dev"].second is not None


def test_qnli_split_keeps_each_question_on_one_side(glue_data):
    train, dev = glue_data["qnli"]["train"], glue_data["qnli"]["dev"]
    assert not set(train.first) & set(dev.first)
    assert not set(train.ids) & set(dev.ids)


def test_glue_tasks_setting():
    assert [t.name for t in glue.Glue().tasks(glue.GlueConfig("stsb, rte"))] == ["stsb", "rte"]
    assert glue.Glue().tasks(glue.GlueConfig("stsb"))[0].head.kind == "regression"
    with pytest.raises(ConfigError, match="unknown GLUE task mnli; valid: sst2, cola, mrpc, stsb, rte, qnli"):
        glue.GlueConfig("sst2,mnli")


def test_glue_budget_overrides_per_task():
    shared = dict(train_examples=1000, eval_examples=400, epochs=1, learning_rate=1e-4, batch_size=16)
    budget = glue.GlueBudget(**shared, tasks={"cola": {"train_examples": None, "epochs": 3}})
    cola, sst2 = budget.for_task("cola"), budget.for_task("sst2")
    assert (cola.train_examples, cola.epochs, cola.learning_rate) == (None, 3, 1e-4)
    assert (sst2.train_examples, sst2.epochs) == (1000, 1)
    with pytest.raises(ValueError, match="mnli"):
        glue.GlueBudget(**shared, tasks={"mnli": {"epochs": 2}})
    with pytest.raises(ValueError, match="epoch"):
        glue.GlueBudget(**shared, tasks={"cola": {"epoch": 2}})


def test_word_pairs_reader(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_text("tiger\tcat\t7.35\n\nbook\tpaper\t7.46\ncomputer\tkeyboard\t7.62\n")
    pairs = word_sim.read_pairs(path)
    assert pairs.first == ["tiger", "book", "computer"] and pairs.lines == [1, 3, 4]
    assert pairs.gold.tolist() == [7.35, 7.46, 7.62]
    path.write_text("tiger\tcat\t7.35\nbook\tpaper\thigh\ncomputer\tkeyboard\t7.62\n")
    with pytest.raises(DataError, match=r"pairs.txt:2: score 'high' is not a number"):
        word_sim.read_pairs(path)


def _one_line_error(args: list[str], fragment: str) -> None:
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr


def test_bad_input_exits_2_with_one_line(tmp_path, data_dir):
    _one_line_error(["--suite", "glue", "--profile", "smoke", "--set", "tasks=sst2,mnli"], "unknown GLUE task mnli; valid: sst2")
    (tmp_path / "word_similarity").mkdir()
    (tmp_path / "wikitext2").symlink_to(data_dir / "wikitext2")
    bad = tmp_path / "word_similarity" / "EN-MC-30.txt"
    bad.write_text("car\tautomobile\t3.92\ngem\tjewel\tn/a\n")
    _one_line_error(["--suite", "word_sim", "--profile", "smoke", "--set", "sets=MC-30", "--data-dir", str(tmp_path)],
                    "EN-MC-30.txt:2: score 'n/a' is not a number")


def test_word_sim_table_adapter_moves_static_score(baselines_store):
    """asg replaces the input table: the static score changes, each data set gets a %Base (against the
    session's word_sim baseline, which the suite contract and the sense runs share)."""
    request = RunRequest("word_sim", "asg", model="minilm", profile="smoke", settings=("k=256",))
    base, method = (o.record for o in execute(request, baselines_store))
    static = {(s.task, s.metric): s for s in method.scores}
    baseline = {(s.task, s.metric): s for s in base.scores}
    for name in word_sim.SETS:
        assert static[(name, "spearman")].pct_base is not None
    assert static[("word_sim", "spearman_static")].value != baseline[("word_sim", "spearman_static")].value
    for metric in ("spearman", "spearman_mean_context", "spearman_alone"):  # MiniLM's contextual word vectors rank pairs well
        assert baseline[("word_sim", metric)].value > 0.3, metric
    assert base.details["representation"] == "occurrences" and "unclustered" in base.details["headline"]


@pytest.fixture(scope="module")
def sense_runs(baselines_store):
    """multisense smoke runs with k = 1 and k = 3 (the smoke budget's contexts per word) beside the
    session's word_sim baseline, with their per-item outputs."""
    runs, bases = {}, []
    for k in (1, 3):
        request = RunRequest("word_sim", "multisense", model="minilm", profile="smoke", settings=("corpus=wikitext2_train", f"k={k}"))
        base, runs[k] = (with_items(baselines_store, o.record) for o in execute(request, baselines_store))
        bases.append(base)
    assert bases[1].run_id == bases[0].run_id  # one baseline for both
    return bases[0], runs


def _scores(record):
    return {(s.task, s.language, s.metric): s for s in record.scores}


def _predictions(record, language: str, metric: str = "spearman") -> np.ndarray:
    (item,) = [i for i in record.items if (i.task, i.language, i.metric) == ("word_sim", language, f"{metric}@spearman")]
    return np.array(item.values)


def _histogram(details: dict, key: str) -> dict[int, int]:
    return {int(n): c for n, c in details[key].items()}  # JSON keys are strings once stored


def test_word_senses_are_scored_as_the_baselines_occurrences(sense_runs):
    """Like with like (paper 004 Appendix E): the headline is the max dot product over a pair's senses,
    and the baseline's the same function over the unclustered occurrences the senses are built from.
    With k = the contexts per word every word keeps its occurrences as senses, so the headline is the
    baseline's, pair by pair (%Base 100); the references read the model through the token drop-in."""
    base, runs = sense_runs
    assert word_sim.BUDGETS.smoke.contexts_per_word == 3
    theirs, ours = _scores(base), _scores(runs[3])
    assert runs[3].details["representation"] == "senses" and runs[3].details["words_clustered"] == 0
    assert "%Base isolates the clustering" in runs[3].details["headline"]
    assert _histogram(runs[3].details, "senses_per_word_histogram") == _histogram(base.details, "occurrences_per_word_histogram")
    for name in word_sim.SETS:
        np.testing.assert_array_equal(_predictions(runs[3], name), _predictions(base, name))
    headline = ours[("word_sim", "avg", "spearman")]
    assert headline.value == theirs[("word_sim", "avg", "spearman")].value and headline.pct_base == pytest.approx(100.0)
    assert ours[("word_sim", "avg", "spearman_static")].value == theirs[("word_sim", "avg", "spearman_static")].value
    for metric in ("spearman_mean_context", "spearman_alone"):  # through the drop-in: moved, and paired with the baseline's
        assert ours[("word_sim", "avg", metric)].value != theirs[("word_sim", "avg", metric)].value
        assert ours[("word_sim", "avg", metric)].pct_base is not None


def test_one_word_sense_is_the_mean_occurrence(sense_runs):
    """k = 1: each word's one sense is the mean of its occurrences, so a pair scores at most the best
    occurrence pair (a mean's dot product is the mean of the occurrence pairs' dot products) and the
    words with several occurrences are counted as clustered."""
    base, runs = sense_runs
    one = runs[1]
    hist = _histogram(base.details, "occurrences_per_word_histogram")
    assert _histogram(one.details, "senses_per_word_histogram") == {1: one.details["words"]}
    assert one.details["words_clustered"] == sum(c for n, c in hist.items() if n > 1) > 0
    for name in word_sim.SETS:
        assert np.all(_predictions(one, name) <= _predictions(base, name) + 1e-4), name
    assert np.any(_predictions(one, "MEN-TR-3k") < _predictions(base, "MEN-TR-3k") - 1e-3)
    assert _scores(one)[("word_sim", "avg", "spearman")].pct_base is not None


def test_word_vectors_read_byte_level_bpe_text(smollm2_tokenizer):
    """A decoder's byte-level BPE (no pre-split words): a word's occurrence is the mean of the
    tokens of ' word' in the running text, cap and all."""
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    model = LlamaModel(LlamaConfig(vocab_size=len(smollm2_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1)).eval()
    text = "The snowboarding bank opened."
    found = word_vectors(model, smollm2_tokenizer, [text, text, text], ["snowboarding", "absent"], cap=2, seed=0)
    assert list(found.ids) == [0] and list(found.seen) == [3] and len(found.of(0)) == 2
    ids = smollm2_tokenizer(text)["input_ids"]
    pieces = smollm2_tokenizer(" snowboarding", add_special_tokens=False)["input_ids"]
    at = next(i for i in range(len(ids)) if ids[i:i + len(pieces)] == pieces)
    assert len(pieces) > 1
    with torch.no_grad():
        hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
    assert np.allclose(found.of(0)[0], hidden[at:at + len(pieces)].mean(0).numpy(), atol=1e-2)


def test_word_occurrences_average_a_words_tokens_and_score_by_the_best_pair(minilm_ref):
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(minilm_ref.location), AutoModel.from_pretrained(minilm_ref.location)
    texts = ["The river bank was muddy.", "She paid the bank, (the loan) in cash.", "Snowboarding is fun. A BANK!"]
    words = ["bank", "snowboarding", "absent"]
    occurrences = word_occurrences(word_vectors(model, tokenizer, texts, words, cap=10, seed=0),
                                   alone_vectors(model, tokenizer, words))
    assert [len(o) for o in occurrences] == [3, 1, 1]  # bank three times, "absent" alone
    found = kmeans_senses(occurrences, 2, seed=0)  # multisense's word senses with k = 2
    assert [len(s) for s in found] == [2, 1, 1]
    np.testing.assert_allclose(found[2], alone_vectors(model, tokenizer, ["absent"]), atol=1e-5)  # no occurrence: the word alone
    enc = tokenizer(["Snowboarding", "is", "fun.", "A", "BANK!"], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state[0]
    pieces = [i for i, w in enumerate(enc.word_ids(0)) if w == 0]
    assert len(pieces) > 1  # a word of several word pieces: its vector is their mean
    assert np.allclose(found[1][0], hidden[pieces].mean(0).numpy(), atol=1e-2)
    scores = word_sim.max_similarity([*found, found[2][:0]], np.array([0, 0, 0]), np.array([1, 2, 3]))
    assert scores[0] == pytest.approx(max(float(a @ b) for a in found[0] for b in found[1]))
    assert scores[1] == pytest.approx(max(float(a @ found[2][0]) for a in found[0]))
    assert np.isnan(scores[2])  # a word without rows
