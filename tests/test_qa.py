"""Extractive QA: the official answer normalisations (SQuAD v1.1, MLQA), span features over
overlapping windows on MiniLM's real tokenizer, span post-processing, and errors on bad SQuAD JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
from harness.suites import squad
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import DataError
from harness.measure.squad import best_over_gold, exact_match, normalize_answer, token_f1


@pytest.mark.parametrize(
    "text, language, expected",
    [
        ("The Quick, brown fox!", None, "quick brown fox"),  # SQuAD v1.1: case, ASCII punctuation, articles
        ("  an   apple\ta day ", None, "apple day"),
        ("Der Hund", None, "der hund"),                     # SQuAD's rules know English articles only
        ("Der Hund", "de", "hund"),
        ("¡El perro!", None, "¡el perro"),                  # ¡ is not ASCII punctuation ...
        ("¡El perro!", "es", "perro"),                      # ... but MLQA drops every Unicode punctuation mark
        ("北京大学。", "zh", "北 京 大 学"),                  # MLQA's mixed segmentation: one token per CJK character
        ("Hà Nội", "vi", "hà nội"),
    ],
)
def test_official_normalisation(text, language, expected):
    assert normalize_answer(text, language) == expected


def test_exact_match_and_token_f1():
    assert exact_match("the Eiffel Tower.", "Eiffel tower") == 1.0
    assert exact_match("Eiffel", "Eiffel tower") == 0.0
    assert token_f1("the cat sat", "a cat sat on the mat") == pytest.approx(2 * 1.0 * 0.5 / 1.5)  # P 2/2, R 2/4
    assert token_f1("cat cat", "cat") == pytest.approx(2 * 0.5 * 1.0 / 1.5)  # bag of tokens: one cat counts once
    assert token_f1("", "cat") == 0.0 and token_f1("dog", "cat") == 0.0
    assert token_f1("北京", "北京大学", "zh") == pytest.approx(2 * 1.0 * 0.5 / 1.5)  # partial credit in Chinese
    assert token_f1("北京", "北京大学") == 0.0                                        # whitespace tokens: none shared
    assert best_over_gold("Paris", ["the city of Paris", "Paris"]) == (1.0, 1.0)  # the best gold answer counts


@pytest.fixture(scope="module")
def tokenizer(minilm_ref):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_ref.location)


def _long_question() -> squad.Question:
    filler = " ".join(f"Sentence {i} says nothing at all about the matter." for i in range(30))
    context = f"{filler} The bridge was opened in 1932 by the governor. {filler}"
    start = context.index("1932")
    return squad.Question("When was the bridge opened?", context, ("1932",), (start,))


def test_training_windows_point_at_the_answer_or_at_cls(tokenizer):
    q = _long_question()
    features = squad.training_features(tokenizer, [q], max_length=64, stride=16)
    _, windows = squad.evaluation_features(tokenizer, [q], max_length=64, stride=16)
    assert len(features) == len(windows) > 5  # the context overflows into overlapping windows
    holding = [i for i, f in enumerate(features) if f["start_positions"] > 0]
    assert holding and len(holding) < len(features)  # windows without the answer point at [CLS] (0, 0)
    for i in holding:
        f, offsets = features[i], windows[i].offsets
        assert f["start_positions"] <= f["end_positions"] < len(f["input_ids"]) <= 64
        span = q.context[offsets[f["start_positions"]][0]:offsets[f["end_positions"]][1]]
        assert span == "1932"
    assert all(f["start_positions"] == f["end_positions"] == 0 for i, f in enumerate(features) if i not in holding)


def test_best_span_over_windows():
    q = squad.Question("?", "hello wide world", ("world",), (11,))
    offsets = [None, None, (0, 5), (6, 10), (11, 16), None]  # [CLS] question ... [SEP]: None outside the context
    windows = [squad.Window(0, offsets), squad.Window(0, offsets)]
    logits = [  # start, end per window; [CLS] scores high but lies outside the context
        (np.array([9.0, 9.0, 1.0, 0.0, 2.0, 0.0]), np.array([9.0, 9.0, 0.0, 0.0, 3.0, 0.0])),  # best: "world" (5)
        (np.array([0.0, 0.0, 4.0, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 2.0, 0.0, 0.0])),  # best: "hello wide" (6)
    ]
    starts, ends = zip(*logits)
    assert squad.best_answers([q], windows, list(starts), list(ends)) == ["hello wide"]
    assert squad.best_answers([q], windows[:1], list(starts[:1]), list(ends[:1])) == ["world"]
    assert squad.best_answers([q], windows[:1], list(starts[:1]), list(ends[:1]), max_answer_tokens=0) == [""]
    backwards = (np.array([0.0, 0.0, 0.0, 0.0, 5.0, 0.0]), np.array([0.0, 0.0, 5.0, 0.0, -9.0, 0.0]))
    assert squad.best_answers([q], windows[:1], [backwards[0]], [backwards[1]]) != ["hello wide world"]


def _squad_file(path, answer_start: int) -> None:
    context = "The bridge was opened in 1932."
    qas = [
        {"id": "q1", "question": "What was opened?", "answers": [{"text": "The bridge", "answer_start": 0}]},
        {"id": "q2", "question": "When?", "answers": [{"text": "1932", "answer_start": answer_start}]},
    ]
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}, indent=1), encoding="utf-8")


def test_reads_squad_json(tmp_path):
    _squad_file(tmp_path / "ok.json", 25)
    (first, second) = squad.read_squad(tmp_path / "ok.json")
    assert second.context[second.starts[0]:].startswith("1932") and first.answers == ("The bridge",)


def test_answer_outside_its_context_names_file_and_line(tmp_path):
    path = tmp_path / "bad.json"
    _squad_file(path, 400)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), start=1) if '"id": "q2"' in text)
    with pytest.raises(DataError, match=rf"bad.json:{line}: question 'q2': answer '1932' at 400 lies outside its context"):
        squad.read_squad(path)


def test_bad_squad_file_is_one_line_error_exit_2(tmp_path):
    (tmp_path / "qa").mkdir()
    _squad_file(tmp_path / "qa" / "train.json", 400)
    _squad_file(tmp_path / "qa" / "dev.json", 25)
    args = [
        "run", "--suite", "qa", "--model", "minilm", "--profile", "smoke", "--data-dir", str(tmp_path), "--db", str(tmp_path / "r.duckdb"),
        "--set", "train=qa/train.json", "--set", "eval=qa/dev.json", "--set", "languages=en",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "qa/train.json:" in errors[0] and "lies outside its context" in errors[0], result.stderr
    assert "Traceback" not in result.output
