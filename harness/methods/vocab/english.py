"""English inflection tables from ``lemminflect`` (its own lookup dictionary, no out-of-vocabulary rules).

Paper 003 (Section 4, Table 1) decomposes noun plurals, adjective degrees and verb forms; the
staged UniMorph ``eng`` table holds verbs only, so nouns and adjectives come from here, as the
authors fill UniMorph's gaps with pyinflect, lemminflect's predecessor
(``posthoc/utils/english_morphology.py``: NNS -> N;PL, JJR -> ADJ;CMPR, JJS -> ADJ;SPRL, verb tags).
Tags are written as UniMorph's, as the staged table spells them. All words are lower case.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

import lemminflect

PLURAL, COMPARATIVE, SUPERLATIVE = "N;PL", "ADJ;CMPR", "ADJ;SPRL"
NOUN_ADJECTIVE_TAGS = {"NNS": PLURAL, "JJR": COMPARATIVE, "JJS": SUPERLATIVE}
VERB_TAGS = {"VBD": "V;PST", "VBN": "V;V.PTCP;PST", "VBG": "V;V.PTCP;PRS", "VBZ": "V;3;SG;PRS"}


@lru_cache(maxsize=None)
def _lemmas(word: str) -> frozenset[str]:
    return frozenset(lemma for lemmas in lemminflect.getAllLemmas(word).values() for lemma in lemmas)


def known(word: str) -> bool:
    """The word is a lemma or an inflected form in lemminflect's dictionary."""
    return bool(_lemmas(word))


def is_lemma(word: str) -> bool:
    return word in _lemmas(word)


def is_inflected(word: str) -> bool:
    """The word is a form of some other lemma (``walked`` of ``walk``; ``data`` of ``datum``)."""
    return bool(_lemmas(word) - {word})


def inflections(lemma: str, verbs: bool = True) -> dict[str, set[str]]:
    """form -> UniMorph tags of ``lemma``'s noun plural, adjective degrees and (``verbs``) verb forms."""
    tags = NOUN_ADJECTIVE_TAGS | (VERB_TAGS if verbs else {})
    out: dict[str, set[str]] = defaultdict(set)
    for penn, forms in lemminflect.getAllInflections(lemma).items():
        for form in forms:
            if penn in tags and form != lemma:
                out[form].add(tags[penn])
    return dict(out)
