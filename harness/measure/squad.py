"""SQuAD exact match and token F1 of a predicted answer against gold answers (pure functions).

Two normalisations, both from the official scripts:

- ``language=None``: SQuAD v1.1's ``evaluate-v1.1.py`` (Rajpurkar et al., 2016): lower-case, drop
  ASCII punctuation (``string.punctuation``), drop the English articles a/an/the, split on whitespace.
- a language code: MLQA's ``mlqa_evaluation_v1.py`` (Lewis et al., 2020), which XTREME also uses for
  MLQA: every Unicode punctuation character (category P*) is dropped, the language's articles are
  removed (en, es, de, vi, ar; none for hi, zh), and Chinese is split into single CJK characters
  (mixed segmentation) so F1 gives partial credit there. Its Arabic rule removes every "ال", also
  inside words, as the official script does. Languages the script does not name (TyDiQA's fi, ko,
  ...) are split on whitespace with no articles removed.

Per question: 0 or 1 (EM) and 0-1 (F1); the scripts average them over questions and print x 100.
"""

from __future__ import annotations

import re
import string
import sys
import unicodedata
from collections import Counter
from functools import lru_cache
from typing import Sequence

ARTICLES = {
    "en": r"\b(a|an|the)\b",
    "es": r"\b(un|una|unos|unas|el|la|los|las)\b",
    "vi": r"\b(của|là|cái|chiếc|những)\b",
    "de": r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b",
    "ar": r"\sال^|ال",
}
MIXED_SEGMENTATION = frozenset({"zh"})
ASCII_PUNCTUATION = frozenset(string.punctuation)
_CJK = re.compile(r"[\u4e00-\u9fa5]")


@lru_cache(maxsize=1)
def unicode_punctuation() -> frozenset[str]:
    """Every Unicode punctuation character plus ASCII punctuation (MLQA's ``PUNCT``)."""
    return frozenset(c for c in map(chr, range(sys.maxunicode)) if unicodedata.category(c).startswith("P")) | ASCII_PUNCTUATION


def mixed_segmentation(text: str) -> list[str]:
    """Whitespace tokens, with every CJK character and punctuation character a token of its own."""
    punctuation = unicode_punctuation()
    tokens, run = [], ""
    for char in text:
        if _CJK.search(char) or char in punctuation:
            tokens += run.split() + [char]
            run = ""
        else:
            run += char
    return tokens + run.split()


def normalize_answer(text: str, language: str | None = None) -> str:
    """The official normalisation: SQuAD v1.1's (``language=None``) or MLQA's for ``language``."""
    text = text.lower()
    if language is None:
        text = "".join(c for c in text if c not in ASCII_PUNCTUATION)
        return " ".join(re.sub(ARTICLES["en"], " ", text).split())
    punctuation = unicode_punctuation()
    text = "".join(c for c in text if c not in punctuation)
    if language in ARTICLES:
        text = re.sub(ARTICLES[language], " ", text)
    tokens = mixed_segmentation(text) if language in MIXED_SEGMENTATION else text.split()
    return " ".join(t for t in tokens if t.strip())


def exact_match(prediction: str, gold: str, language: str | None = None) -> float:
    return float(normalize_answer(prediction, language) == normalize_answer(gold, language))


def token_f1(prediction: str, gold: str, language: str | None = None) -> float:
    """Harmonic mean of token precision and recall after normalisation (bag of tokens)."""
    predicted, truth = normalize_answer(prediction, language).split(), normalize_answer(gold, language).split()
    same = sum((Counter(predicted) & Counter(truth)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(truth)
    return 2 * precision * recall / (precision + recall)


def best_over_gold(prediction: str, golds: Sequence[str], language: str | None = None) -> tuple[float, float]:
    """(EM, F1) of one question: the best over its gold answers, as both scripts take it."""
    return (
        max(exact_match(prediction, g, language) for g in golds),
        max(token_f1(prediction, g, language) for g in golds),
    )
