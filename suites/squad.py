"""Extractive QA in SQuAD v1 format: reading the JSON, span features for the shared fine-tuning
protocol, and the usual span post-processing (Devlin et al. 2019, Section 4.2; HF ``run_qa.py``).

File layout (SQuAD v1.1, also TyDiQA-GoldP's and MLQA's)::

    {"data": [{"title": ..., "paragraphs": [{"context": "...",
        "qas": [{"id": "...", "question": "...", "answers": [{"text": "...", "answer_start": 42}]}]}]}]}

Every question needs at least one answer whose text is ``context[answer_start:answer_start + len(text)]``;
anything else is a DataError naming the file, line and question.

Features: question (at most ``max_length // 4`` tokens) + context, the context cut into windows of ``max_length`` tokens that overlap by
``stride`` tokens. A training window that does not hold the whole (first) answer points at the
first token (CLS), as in BERT's SQuAD fine-tuning. Prediction: over all windows of a question, the
``n_best`` highest start and end logits form candidate spans inside the context, at most
``max_answer_tokens`` long; the best start + end logit wins, and its characters are cut from the
context through the tokenizer's offsets.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import DataError

Features = list[dict[str, Any]]


@dataclass(frozen=True)
class Question:
    question: str
    context: str
    answers: tuple[str, ...]
    starts: tuple[int, ...]  # character offset of each answer in the context
    id: str = ""             # the file's question id (MLQA: the same id for a question's translations)


@dataclass(frozen=True)
class Window:
    """Where one feature came from: its question, and each token's character span in the context (None outside it)."""

    question: int
    offsets: list[tuple[int, int] | None]


def _line_of(raw: str, qid: str) -> int:
    """The line of the file where question ``qid`` is written (1 when it cannot be found)."""
    match = re.search(r'"id"\s*:\s*' + re.escape(json.dumps(qid, ensure_ascii=False)), raw) or re.search(r'"id"\s*:\s*' + re.escape(json.dumps(qid)), raw)
    return raw.count("\n", 0, match.start()) + 1 if match else 1


def _question(qa: dict, context: str, path: Path, raw: str) -> Question:
    qid = str(qa.get("id", ""))
    answers = qa.get("answers") or []
    texts = tuple(str(a.get("text", "")) for a in answers)
    starts = tuple(a.get("answer_start", -1) for a in answers)
    where = f"{path}:{_line_of(raw, qid)}: question {qid!r}"
    if not answers or not isinstance(qa.get("question"), str):
        raise DataError(f"{where} has no question text or no answers; SQuAD v1 needs both for every question")
    for text, start in zip(texts, starts):
        if not isinstance(start, int) or start < 0 or start + len(text) > len(context):
            raise DataError(f"{where}: answer {text[:40]!r} at {start} lies outside its context of {len(context)} characters; fix answer_start")
        if context[start:start + len(text)] != text:
            raise DataError(f"{where}: answer {text[:40]!r} is not the context's text at {start}; fix answer_start or the answer text")
    return Question(qa["question"], context, texts, starts, qid)


def read_squad(path: Path) -> list[Question]:
    """Every question of a SQuAD v1 JSON file, in file order, validated."""
    raw = path.read_text(encoding="utf-8")
    try:
        data = json.loads(raw)["data"]
        paragraphs = [p for article in data for p in article["paragraphs"]]
        pairs = [(qa, p["context"]) for p in paragraphs for qa in p["qas"]]
    except (ValueError, KeyError, TypeError) as err:
        raise DataError(f"{path}: not SQuAD v1 JSON ({err.__class__.__name__}: {str(err)[:80]}); expected data[].paragraphs[].context/qas") from None
    if not pairs:
        raise DataError(f"{path}: no questions; expected data[].paragraphs[].qas")
    return [_question(qa, context, path, raw) for qa, context in pairs]


def _short_questions(tokenizer: Any, questions: list[Question], max_tokens: int) -> list[str]:
    """Each question (left-stripped, as HF ``run_qa.py`` does), cut after ``max_tokens`` tokens so
    that every window keeps room for more than ``stride`` context tokens."""
    texts = [q.question.lstrip() for q in questions]
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    return [t if len(o) <= max_tokens else t[: o[max_tokens - 1][1]] for t, o in zip(texts, enc["offset_mapping"])]


def _encode(tokenizer: Any, questions: list[Question], max_length: int, stride: int):
    return tokenizer(
        _short_questions(tokenizer, questions, max_length // 4), [q.context for q in questions], truncation="only_second",
        max_length=max_length, stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True,
    )


def _inputs(enc: Any, i: int) -> dict[str, Any]:
    return {k: enc[k][i] for k in enc.keys() if k not in ("offset_mapping", "overflow_to_sample_mapping")}


def _context_offsets(enc: Any, i: int) -> list[tuple[int, int] | None]:
    return [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][i], enc.sequence_ids(i))]


def _answer_positions(offsets: list[tuple[int, int] | None], start: int, end: int) -> tuple[int, int]:
    """Token positions of the first and last token of the character span [start, end), or (0, 0)
    (the first token) when the window does not hold all of it."""
    inside = [i for i, o in enumerate(offsets) if o is not None]
    if not inside or offsets[inside[0]][0] > start or offsets[inside[-1]][1] < end:
        return 0, 0
    first = next(i for i in inside if offsets[i][1] > start)
    last = next(i for i in reversed(inside) if offsets[i][0] < end)
    return first, last


def training_features(tokenizer: Any, questions: list[Question], max_length: int, stride: int) -> Features:
    """Windows with ``start_positions`` / ``end_positions`` of each question's first answer."""
    enc = _encode(tokenizer, questions, max_length, stride)
    features = []
    for i, source in enumerate(enc["overflow_to_sample_mapping"]):
        q = questions[source]
        start, end = _answer_positions(_context_offsets(enc, i), q.starts[0], q.starts[0] + len(q.answers[0]))
        features.append({**_inputs(enc, i), "start_positions": start, "end_positions": end})
    return features


def evaluation_features(tokenizer: Any, questions: list[Question], max_length: int, stride: int) -> tuple[Features, list[Window]]:
    """Windows without labels, and where each came from."""
    enc = _encode(tokenizer, questions, max_length, stride)
    sources = enc["overflow_to_sample_mapping"]
    return [_inputs(enc, i) for i in range(len(sources))], [Window(int(s), _context_offsets(enc, i)) for i, s in enumerate(sources)]


def best_answers(
    questions: list[Question], windows: list[Window], start_logits: list[np.ndarray], end_logits: list[np.ndarray],
    n_best: int = 20, max_answer_tokens: int = 30,
) -> list[str]:
    """The highest-scoring valid span of each question over its windows ("" when none is valid)."""
    best: list[tuple[float, str]] = [(-np.inf, "")] * len(questions)
    for window, starts, ends in zip(windows, start_logits, end_logits):
        offsets = window.offsets
        for s in np.argsort(starts)[::-1][:n_best]:
            for e in np.argsort(ends)[::-1][:n_best]:
                if offsets[s] is None or offsets[e] is None or e < s or e - s + 1 > max_answer_tokens:
                    continue
                score = float(starts[s] + ends[e])
                if score > best[window.question][0]:
                    best[window.question] = (score, questions[window.question].context[offsets[s][0]:offsets[e][1]])
    return [text for _, text in best]
