"""Vocab Diet's decomposition map (paper 003, Section 3): surface token -> (base token, transformations).

A vocabulary token whose surface form is an inflection of an in-vocabulary base word (UniMorph),
a capitalized form of it, or its variant without the leading space is represented by the base
token plus transformation vectors instead of a row of its own. Token strings are the tokenizer's
own vocabulary strings (byte-level BPE writes a leading space as ``Ġ``, SentencePiece as ``▁``).

Choices (the paper is silent; the authors' ``posthoc/utils/english_morphology.py`` decides):

* A base is a word-initial token (leading-space marker + lower-case ASCII letters) of at least
  four letters that is an English word (a UniMorph lemma or form, or a lower-case word of the
  given word counts: the authors check a spelling dictionary, we use the fit corpus's words),
  not a function word (the authors drop NLTK's stop words and auxiliaries), not a proper noun
  (the authors ask spaCy for PROPN / named entities; we call a word proper when the corpus writes
  it capitalized more often than in lower case: ``Jack``, ``March``, ``United``), and not itself
  an inflected form of another lemma. Capitalized tokens are never bases.
* Three transformation groups, at most one of each per form (null choices have no vector):
  the UniMorph inflection tag, ``no_space`` (the form lacks the leading space) and
  ``capitalized`` (first letter upper case). The staged UniMorph release (2019 ``eng``) holds
  verbal paradigms only, so the inflections are V;PST, V;V.PTCP;PST, V;V.PTCP;PRS and
  V;3;SG;PRS; plural nouns and adjective degrees (paper Table 1) have no rows there and no map.
* A form tagged both V;PST and V;V.PTCP;PST (``walked``) is V;PST, as the authors keep it; a form
  with any other pair of tags, a form that two bases claim, and a tag that one lemma realises by
  two forms (``dreamed``/``dreamt``) are left out: base + transformations must name exactly
  one surface form, or input and output could not tell them apart.
* A form that is itself a base (``found``, the lemma, and the past of ``find``) stays a base.
* Special tokens are never forms.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.errors import ConfigError, DataError

NO_SPACE = "no_space"
CAPITALIZED = "capitalized"
PAST, PAST_PARTICIPLE = "V;PST", "V;V.PTCP;PST"
_LEMMA_TAG = "V;NFIN"
_LOWER_WORD = re.compile(r"[a-z]+")
_ASCII_WORD = re.compile(r"[A-Za-z]+")
# Function words of four or more letters (NLTK's English stop words; the authors' base filter).
FUNCTION_WORDS = frozenset(
    "myself ours ourselves your yours yourself yourselves himself hers herself itself they them their theirs "
    "themselves what which whom this that these those were been being have having does doing because until "
    "while about against between into through during before after above below from down over under again "
    "further then once here there when where with both each more most other some such only same than very "
    "will just should".split()
)


@dataclass(frozen=True)
class UniMorph:
    """UniMorph inflection table: lemma -> surface form -> tags (``V;NFIN`` rows dropped)."""

    paradigms: Mapping[str, Mapping[str, frozenset[str]]]

    @property
    def words(self) -> set[str]:
        return set(self.paradigms) | {f for forms in self.paradigms.values() for f in forms}

    @property
    def inflected(self) -> set[str]:
        return {f for forms in self.paradigms.values() for f in forms}


def read_unimorph(path: Path) -> UniMorph:
    """Read a UniMorph file (``lemma<TAB>form<TAB>features`` per line; blank lines skipped)."""
    if not path.is_file():
        raise DataError(f"UniMorph file {path} not found; put the UniMorph 'eng' table there (lemma<TAB>form<TAB>features)")
    table: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise DataError(f"{path}:{n}: expected lemma<TAB>form<TAB>features, got {line[:60]!r}")
        lemma, form, tags = parts
        table[lemma]  # a lemma row alone still makes the lemma known
        if tags != _LEMMA_TAG and form != lemma:
            table[lemma][form].add(tags)
    if not table:
        raise DataError(f"UniMorph file {path} has no lemma<TAB>form<TAB>features rows; use the UniMorph 'eng' table")
    return UniMorph({lemma: {f: frozenset(t) for f, t in forms.items()} for lemma, forms in table.items()})


def leading_space_marker(tokenizer: Any) -> str:
    """The character the vocabulary writes for a word's leading space (``Ġ``, ``▁``).

    Raises ConfigError for vocabularies without one (WordPiece marks continuations instead).
    """
    pieces = tokenizer.convert_ids_to_tokens(tokenizer.encode(" the", add_special_tokens=False))
    last = pieces[-1] if pieces else ""
    if len(last) == 4 and last.endswith("the") and not (last[0].isascii() and last[0].isalnum()):
        return last[0]
    raise ConfigError(
        f"the tokenizer writes ' the' as {pieces} with no leading-space marker; vocabdiet needs a byte-level BPE "
        "or SentencePiece vocabulary whose word-initial tokens start with a marker such as 'Ġ' or '▁'"
    )


@dataclass(frozen=True)
class Decomposition:
    """token id -> (base token id, transformation indices into ``transformations``)."""

    transformations: tuple[str, ...]
    forms: Mapping[int, tuple[int, tuple[int, ...]]]
    english_words: int = 0  # vocabulary tokens that are an English word (marker aside), removed ones included
    details: Mapping[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Forms per transformation type (a form with two transformations counts for each)."""
        c = Counter(t for _, ts in self.forms.values() for t in ts)
        return {name: c[i] for i, name in enumerate(self.transformations)}

    def without(self, ids: Iterable[int]) -> Decomposition:
        """The same map with the forms ``ids`` left out (they keep their own rows)."""
        drop = set(ids)
        return Decomposition(self.transformations, {i: v for i, v in self.forms.items() if i not in drop},
                             self.english_words, self.details)


def _bases(vocab: Mapping[str, int], marker: str, dictionary: set[str], counts: Mapping[str, int], inflected: set[str],
           lemmas: set[str], min_letters: int) -> dict[str, int]:
    """lower-case base word -> its word-initial token id."""
    out = {}
    for token, i in vocab.items():
        word = token[len(marker):]
        if not token.startswith(marker) or len(word) < min_letters or not _LOWER_WORD.fullmatch(word):
            continue
        if word in FUNCTION_WORDS or word not in dictionary or (word in inflected and word not in lemmas):
            continue
        if counts.get(word.capitalize(), 0) > counts.get(word, 0):  # mostly written as a name
            continue
        out[word] = i
    return out


def _inflections(unimorph: UniMorph, bases: Mapping[str, int]) -> dict[str, tuple[str, str | None]]:
    """surface word -> (base word, inflection tag or None) where exactly one reading exists."""
    readings: dict[str, set[tuple[str, str | None]]] = defaultdict(set)
    for base in bases:
        readings[base].add((base, None))
        by_tag: dict[str, list[str]] = defaultdict(list)
        for form, tags in unimorph.paradigms.get(base, {}).items():
            if PAST in tags:
                tags = tags - {PAST_PARTICIPLE}
            if len(tags) == 1:
                by_tag[next(iter(tags))].append(form)
        for tag, forms in by_tag.items():
            if len(forms) == 1:
                readings[forms[0]].add((base, tag))
    # a base stays a base (its capitalized and unspaced variants still decompose)
    return {w: (w, None) if w in bases else next(iter(r)) for w, r in readings.items() if w in bases or len(r) == 1}


def build(vocab: Mapping[str, int], marker: str, unimorph: UniMorph, word_counts: Mapping[str, int] | None = None,
          special_ids: Iterable[int] = (), min_letters: int = 4) -> Decomposition:
    """The decomposition map of a vocabulary (``token string -> id``), see the module docstring.

    ``word_counts``: case-sensitive word frequencies of a corpus (English word list and proper-noun test).
    """
    counts = word_counts or {}
    dictionary = unimorph.words | {w for w in counts if _LOWER_WORD.fullmatch(w)}
    bases = _bases(vocab, marker, dictionary, counts, unimorph.inflected, set(unimorph.paradigms), min_letters)
    tags = sorted({tag for forms in unimorph.paradigms.values() for ts in forms.values() for tag in ts})
    names = tuple(tags) + (NO_SPACE, CAPITALIZED)
    index = {name: i for i, name in enumerate(names)}
    special = set(special_ids)
    forms: dict[int, tuple[int, tuple[int, ...]]] = {}
    for word, (base, tag) in _inflections(unimorph, bases).items():
        for spaced in (True, False):
            for capital in (False, True):
                token = (marker if spaced else "") + (word.capitalize() if capital else word)
                applied = ([tag] if tag else []) + ([] if spaced else [NO_SPACE]) + ([CAPITALIZED] if capital else [])
                if applied and token in vocab and vocab[token] not in special:
                    forms[vocab[token]] = (bases[base], tuple(index[t] for t in applied))
    english = sum(1 for t in vocab if _ASCII_WORD.fullmatch(t.removeprefix(marker)) and t.removeprefix(marker).lower() in dictionary)
    return Decomposition(names, forms, english, {"bases": len(bases), "dictionary_words": len(dictionary)})
