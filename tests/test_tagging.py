"""Token tagging (wikiann, bc5cdr): seqeval entity scores on hand-made sentences, first-sub-token
label alignment on MiniLM's real tokenizer, the BIO reader's errors, and ASG end to end."""

from __future__ import annotations

import numpy as np
import pytest
from harness.suites.finetune import IGNORED, tagging_features
from harness.suites.tagging import entity_counts, entity_items, entity_scores, macro_f1, read_bio
from seqeval.metrics import f1_score
from typer.testing import CliRunner

from harness.cli import app
from harness.measure.compare import compare
from harness.measure.metrics import resampled
from harness.suite import score_items
from harness.errors import DataError
from harness.runner.run import RunRequest, execute
from tests.conftest import with_items

GOLD = [("B-PER", "I-PER", "O", "B-LOC"), ("O", "B-ORG", "I-ORG")]
PREDICTED = [("B-PER", "I-PER", "O", "O"), ("O", "B-ORG", "O")]  # PER right, LOC missed, ORG cut short


def test_entity_scores_of_two_sentences():
    counts = entity_counts(GOLD, PREDICTED)
    assert counts.tolist() == [[1, 1, 2], [0, 1, 1]]  # correct, predicted, gold entities per sentence
    scores = {s.metric: s for s in entity_scores("t", "en", "dev", GOLD, PREDICTED, counts, np.random.default_rng(0))}
    assert scores["precision"].value == pytest.approx(1 / 2)
    assert scores["recall"].value == pytest.approx(1 / 3)
    assert scores["f1"].value == pytest.approx(2 * 1 / (2 + 3))  # = 2PR / (P + R)
    assert all(s.chance == 0.0 and s.n == 2 and s.ci_low <= s.value <= s.ci_high for s in scores.values())


def test_f1_items_give_seqevals_f1_and_a_hand_computed_paired_interval():
    """Two runs on three sentences. Per sentence (2 TP, 2 TP + FP + FN): baseline (2, 2), (0, 2),
    (2, 2); method (2, 2), (0, 2), (0, 3). F1 = 4/6 and 2/7; the ratio items reproduce seqeval's F1
    (to the last bit: seqeval divides 2PR by P + R), and a paired replicate's values are the pooled ratios of the drawn sentences (same
    draw for both runs), so the comparison's interval is that of the enumerated replicates."""
    gold = [("B-PER",), ("B-LOC", "O"), ("B-ORG", "I-ORG")]
    base_tags = [("B-PER",), ("O", "B-LOC"), ("B-ORG", "I-ORG")]
    method_tags = [("B-PER",), ("O", "B-LOC"), ("B-ORG", "B-ORG")]
    ids = ("1", "3", "6")
    runs = {}
    for name, tags in (("base", base_tags), ("method", method_tags)):
        counts = entity_counts(gold, tags)
        items = entity_items("t", "en", "dev", ids, counts, tags, gold)
        f1 = next(i for i in items if i.metric == "f1")
        score = score_items([f1], np.random.default_rng(0), chance=0.0)
        assert score.value == pytest.approx(f1_score([list(g) for g in gold], [list(t) for t in tags]), rel=1e-15, abs=0)  # seqeval's (2PR / (P + R): last bit)
        assert {i.metric for i in items} == {"f1", "precision", "recall"} and f1.predictions[2] == " ".join(tags[2])
        runs[name] = ([score], items, f1)
    assert runs["base"][0][0].value == pytest.approx(4 / 6) and runs["method"][0][0].value == pytest.approx(2 / 7)
    assert runs["method"][2].values == (2.0, 0.0, 0.0) and runs["method"][2].weights == (2.0, 2.0, 3.0)
    (c,) = compare(*runs["method"][:2], *runs["base"][:2], "base", np.random.default_rng(7))
    assert c.n_paired == 3 and c.difference == pytest.approx(2 / 7 - 4 / 6) and c.p_value is None  # weighted: no McNemar
    m, b = runs["method"][2], runs["base"][2]
    want = resampled([[m.values, m.weights, b.values, b.weights]], np.random.default_rng(7))
    with np.errstate(divide="ignore", invalid="ignore"):  # only sentence 3 drawn: the baseline's F1 is 0
        pct, diff = 100 * want[:, 0] / want[:, 1], want[:, 0] - want[:, 1]
    assert (c.pct_base_ci_low, c.pct_base_ci_high) == pytest.approx(tuple(np.quantile(pct[np.isfinite(pct)], [0.025, 0.975])))
    assert (c.difference_ci_low, c.difference_ci_high) == pytest.approx(tuple(np.quantile(diff, [0.025, 0.975])))
    assert c.difference_ci_low < 0 and c.difference_ci_high == pytest.approx(0.0)  # the method never finds more


def test_all_outside_tagger_scores_zero_and_perfect_one():
    nothing = [tuple("O" for _ in g) for g in GOLD]
    rng = np.random.default_rng(0)
    zero = {s.metric: s.value for s in entity_scores("t", "en", "dev", GOLD, nothing, entity_counts(GOLD, nothing), rng)}
    full = {s.metric: s.value for s in entity_scores("t", "en", "dev", GOLD, GOLD, entity_counts(GOLD, GOLD), rng)}
    assert zero == {"f1": 0.0, "precision": 0.0, "recall": 0.0}
    assert full == {"f1": 1.0, "precision": 1.0, "recall": 1.0}


def test_inside_tag_after_outside_opens_an_entity():
    """seqeval's default (CoNLL) mode: I-PER after O is a PER entity, so it matches a gold B-PER."""
    assert entity_counts([("O", "B-PER")], [("O", "I-PER")]).tolist() == [[1, 1, 1]]


def test_macro_average_over_languages():
    rng = np.random.default_rng(0)
    en, de = entity_counts(GOLD, GOLD), entity_counts(GOLD, PREDICTED)
    rows = entity_scores("t", "en", "dev", GOLD, GOLD, en, rng) + entity_scores("t", "de", "dev", GOLD, PREDICTED, de, rng)
    avg = macro_f1("t", "dev", rows, [en, de], rng)
    assert avg.language == "avg" and avg.value == pytest.approx((1.0 + 0.4) / 2)
    assert avg.ci_low <= avg.value <= avg.ci_high and avg.n == 4


def test_labels_sit_on_each_words_first_sub_token(minilm_ref):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_ref.location)
    words = [("Mozambique", "unbelievably", "hot")]
    features, (first,) = tagging_features(tokenizer, words, [[5, 0, 3]], max_length=32)
    ids, labels = features[0]["input_ids"], features[0]["labels"]
    assert len(labels) == len(ids) > len(words[0]) + 2  # the first two words split into several sub-tokens
    assert first[0] == 1 and all(np.diff(first) > 0)  # after [CLS], in word order
    assert [labels[p] for p in first] == [5, 0, 3]
    assert sum(label != IGNORED for label in labels) == 3  # other sub-tokens, [CLS] and [SEP] are ignored
    assert labels[0] == labels[-1] == IGNORED
    cut, (cut_first,) = tagging_features(tokenizer, words, None, max_length=4)
    assert "labels" not in cut[0] and cut_first[-1] == -1  # a word past max_length has no position


def test_a_lone_sentencepiece_word_start_does_not_take_the_label():
    """me5's tokenizer splits a Chinese character into "▁" + the character: the label goes on the character."""
    from transformers import AutoTokenizer

    from harness.sources import models

    tokenizer = AutoTokenizer.from_pretrained(models.resolve("me5-small").location)
    features, (first,) = tagging_features(tokenizer, [("北", "京", "Paris")], [[5, 6, 1]], max_length=32)
    pieces = tokenizer.convert_ids_to_tokens(features[0]["input_ids"])
    assert [pieces[p] for p in first] == ["北", "京", "▁Paris"]
    assert [label for label in features[0]["labels"] if label != IGNORED] == [5, 6, 1]


def test_malformed_bio_line_names_file_and_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("EU\tB-ORG\nrejects\tO\n\nGerman B-MISC\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train.tsv:4: malformed line 'German B-MISC'"):
        read_bio(path, ("O", "B-ORG", "I-ORG"))


def test_bad_bio_file_is_one_line_error_exit_2(tmp_path, data_dir):
    (tmp_path / "bc5cdr").mkdir()
    (tmp_path / "bc5cdr" / "train.tsv").write_text("Aspirin\tB-Chemical\ncauses\tO\nulcers\tB-Illness\n", encoding="utf-8")
    (tmp_path / "bc5cdr" / "test.tsv").write_bytes((data_dir / "bc5cdr" / "test.tsv").read_bytes())
    args = ["run", "--suite", "bc5cdr", "--profile", "smoke", "--data-dir", str(tmp_path), "--db", str(tmp_path / "r.duckdb")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "bc5cdr/train.tsv:3: malformed line" in errors[0], result.stderr
    assert "Traceback" not in result.output


def test_asg_runs_on_wikiann_with_pct_base_per_language(baselines_store):
    """Against the session's baselines: the suite contract's wikiann baseline, made here or there."""
    outcomes = execute(RunRequest("wikiann", "asg", model="minilm", profile="smoke", settings=("k=256",)), baselines_store)
    method = with_items(baselines_store, outcomes[-1].record)
    assert method.status == "finished" and method.spec.adapter == "asg"
    f1 = {s.language: s for s in method.scores if s.metric == "f1"}
    assert set(f1) == {"en", "de", "es", "fr", "ru", "zh", "ar", "avg"}
    items = {(it.language, it.metric) for it in method.items}
    assert {("de", "f1"), ("de", "precision"), ("de", "recall")} <= items
    paired = {c.language: c for c in method.comparisons if c.metric == "f1"}
    assert set(paired) == set(f1) and all(c.n_paired > 0 and c.pct_base_ci_low is not None for c in paired.values())
    assert paired["avg"].difference == pytest.approx(f1["avg"].value - next(
        s.value for s in outcomes[0].record.scores if (s.language, s.metric) == ("avg", "f1")))
    assert method.compression.emb_param_fraction < 0.5
