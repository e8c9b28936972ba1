"""Vocab Diet's decomposition map (paper 003, Section 4): surface token -> (base token, transformations).

A vocabulary token whose surface form is an English inflection of an in-vocabulary base word or
a capitalized form of it (and, with ``unspaced``, its variant without the leading space) is
represented by the base token plus transformation vectors instead of a row of its own. Token
strings are the tokenizer's own vocabulary strings (byte-level BPE writes a leading space as
``Ġ``, SentencePiece as ``▁``).

Choices (the paper is silent; the authors' ``posthoc/utils/english_morphology.py`` decides):

* Inflections: UniMorph's verb paradigms where the table has the lemma (the staged 2019 ``eng``
  table holds verbs only), and lemminflect's tables (``harness.methods.vocab.english``) for noun
  plurals (N;PL), adjective degrees (ADJ;CMPR, ADJ;SPRL) and the verbs UniMorph lacks, as the
  authors fill UniMorph with pyinflect. A form with two readings of one base is one transformation
  named by both tags, as paper Table 1's "Plural (N) & Present Singular (V)" (``walks``:
  ``N;PL+V;3;SG;PRS``); a form tagged both V;PST and V;V.PTCP;PST (``walked``) is V;PST, as the
  authors keep it.
* A base is a word-initial token (leading-space marker + lower-case ASCII letters) of at least
  four letters that is an English word (UniMorph, lemminflect, or a lower-case word of the given
  word counts: the authors check a spelling dictionary), not a function word (the authors drop
  NLTK's stop words and auxiliaries), not a proper noun (the authors ask spaCy for PROPN / named
  entities; we call a word proper when the corpus writes it capitalized more often than in lower
  case: ``Jack``, ``March``, ``United``), and not only an inflected form of another lemma.
  Capitalized tokens are never bases.
* Transformation groups, at most one of each per form: the inflection, ``capitalized`` (first
  letter upper case) and, only with ``unspaced``, ``no_space`` (the form lacks the leading space).
  The post-hoc setup leaves unspaced tokens their own rows (the authors' ``posthoc/adapt.py``
  defaults to ``--dont_decompose_spaces``); paper Section 7 composes them only in pretraining.
* A form that two bases claim, and a tag that one base realises by two forms (``dreamed`` /
  ``dreamt``), are left out: base + transformations must name exactly one surface form, or input
  and output could not tell them apart.
* A form that is itself a base (``found``, a lemma, and the past of ``find``) stays a base.
* Special tokens are never forms.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.errors import ConfigError, DataError
from harness.methods.vocab import english

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

    @cached_property
    def words(self) -> set[str]:
        return set(self.paradigms) | self.inflected

    @cached_property
    def inflected(self) -> set[str]:
        return {f for forms in self.paradigms.values() for f in forms}


def read_unimorph(path: Path) -> UniMorph:
    """Read a UniMorph file (``lemma<TAB>form<TAB>features`` per line; blank lines skipped), once per
    version of the file in a process (planning checks it for every run it plans, the fit reads it)."""
    if not path.is_file():
        raise DataError(f"UniMorph file {path} not found; put the UniMorph 'eng' table there (lemma<TAB>form<TAB>features)")
    st = path.stat()
    return _read_unimorph(path.resolve(), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=4)
def _read_unimorph(path: Path, size: int, mtime_ns: int) -> UniMorph:
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
    english_words: int = 0  # whole-word tokens (leading space + letters) that are an English word, forms included
    details: Mapping[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Forms per transformation type (a form with two transformations counts for each)."""
        c = Counter(t for _, ts in self.forms.values() for t in ts)
        return {name: c[i] for i, name in enumerate(self.transformations)}

    def whole_word_forms(self) -> int:
        """Forms with the leading space (paper footnote 3's whole-word tokens)."""
        unspaced = self.transformations.index(NO_SPACE) if NO_SPACE in self.transformations else -1
        return sum(1 for _, ts in self.forms.values() if unspaced not in ts)

    def only(self, ids: Iterable[int]) -> Decomposition:
        """The same map restricted to the forms ``ids`` (the others keep their own rows)."""
        keep = set(ids)
        return Decomposition(self.transformations, {i: v for i, v in self.forms.items() if i in keep},
                             self.english_words, self.details)


def _is_word(word: str, unimorph: UniMorph, counts: Mapping[str, int]) -> bool:
    return word in unimorph.words or english.known(word) or (word in counts and _LOWER_WORD.fullmatch(word) is not None)


def _only_inflected(word: str, unimorph: UniMorph) -> bool:
    """An inflected form of another lemma that is no lemma itself (``walked``; not ``found``, ``building``)."""
    inflected = word in unimorph.inflected or english.is_inflected(word)
    return inflected and not (word in unimorph.paradigms or english.is_lemma(word))


def _bases(vocab: Mapping[str, int], marker: str, unimorph: UniMorph, counts: Mapping[str, int],
           min_letters: int) -> dict[str, int]:
    """lower-case base word -> its word-initial token id."""
    out = {}
    for token, i in vocab.items():
        word = token[len(marker):]
        if not token.startswith(marker) or len(word) < min_letters or not _LOWER_WORD.fullmatch(word):
            continue
        if word in FUNCTION_WORDS or not _is_word(word, unimorph, counts) or _only_inflected(word, unimorph):
            continue
        if counts.get(word.capitalize(), 0) > counts.get(word, 0):  # mostly written as a name
            continue
        out[word] = i
    return out


def paradigm(lemma: str, unimorph: UniMorph) -> dict[str, str]:
    """form -> its transformation (one tag, or the sorted tags joined by ``+``) for one base word."""
    tags: dict[str, set[str]] = defaultdict(set)
    verbs = unimorph.paradigms.get(lemma, {})
    for form, ts in verbs.items():
        tags[form] |= ts
    for form, ts in english.inflections(lemma, verbs=not verbs).items():
        tags[form] |= ts
    out = {}
    for form, ts in tags.items():
        if PAST in ts:
            ts = ts - {PAST_PARTICIPLE}
        out[form] = "+".join(sorted(ts))
    return out


def _inflections(unimorph: UniMorph, bases: Mapping[str, int]) -> dict[str, tuple[str, str | None]]:
    """surface word -> (base word, transformation or None) where exactly one reading exists."""
    readings: dict[str, set[tuple[str, str | None]]] = defaultdict(set)
    for base in bases:
        readings[base].add((base, None))
        by_tag: dict[str, list[str]] = defaultdict(list)
        for form, tag in paradigm(base, unimorph).items():
            by_tag[tag].append(form)
        for tag, forms in by_tag.items():
            if len(forms) == 1:
                readings[forms[0]].add((base, tag))
    # a base stays a base (its capitalized variant still decomposes)
    return {w: (w, None) if w in bases else next(iter(r)) for w, r in readings.items() if w in bases or len(r) == 1}


def build(vocab: Mapping[str, int], marker: str, unimorph: UniMorph, word_counts: Mapping[str, int] | None = None,
          special_ids: Iterable[int] = (), min_letters: int = 4, unspaced: bool = False) -> Decomposition:
    """The decomposition map of a vocabulary (``token string -> id``), see the module docstring.

    ``word_counts``: case-sensitive word frequencies of a corpus (English word list and proper-noun test).
    ``unspaced``: also compose each form's variant without the leading space (paper Section 7's pretraining map).
    """
    counts = word_counts or {}
    bases = _bases(vocab, marker, unimorph, counts, min_letters)
    readings = _inflections(unimorph, bases)
    tags = sorted({tag for _, tag in readings.values() if tag})
    names = tuple(tags) + ((NO_SPACE,) if unspaced else ()) + (CAPITALIZED,)
    index = {name: i for i, name in enumerate(names)}
    special = set(special_ids)
    forms: dict[int, tuple[int, tuple[int, ...]]] = {}
    for word, (base, tag) in readings.items():
        for spaced in (True, False) if unspaced else (True,):
            for capital in (False, True):
                token = (marker if spaced else "") + (word.capitalize() if capital else word)
                applied = ([tag] if tag else []) + ([] if spaced else [NO_SPACE]) + ([CAPITALIZED] if capital else [])
                if applied and token in vocab and vocab[token] not in special:
                    forms[vocab[token]] = (bases[base], tuple(index[t] for t in applied))
    whole = [t[len(marker):] for t in vocab if t.startswith(marker) and _ASCII_WORD.fullmatch(t[len(marker):])]
    english_words = sum(1 for w in whole if _is_word(w.lower(), unimorph, counts))
    return Decomposition(names, forms, english_words, {"bases": len(bases)})
