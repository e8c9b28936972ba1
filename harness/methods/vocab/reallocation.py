"""Reallocating freed vocabulary slots to new BPE merges (paper 003, Section 7 / Table 5).

New merges continue the base tokenizer's BPE on a corpus: every pre-tokenized word is first split
by the base tokenizer, each base token becomes one private-use character, and the ``tokenizers``
library's ``BpeTrainer`` learns merges over those characters. A learned merge of two character
runs is a merge of two base-token strings; the merges are appended after the base merges (lowest
priority), so the base segmentation is computed first and the new merges only join its pieces.
This is what the authors' ``reallocate_vocabulary.py`` requires of a replacement token (its
producing pair must be reachable from kept tokens), made certain by learning on the base pieces.

A learned token whose string the base vocabulary already holds is skipped together with every
later merge built on it (a base merge could otherwise fire on it and change the segmentation).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from typing import Any, Sequence

from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import AutoTokenizer

from harness.errors import ConfigError

_UNIT = 0xF0000  # base token id i is the character chr(_UNIT + i) (supplementary private use area A and B)


@dataclass(frozen=True)
class NewToken:
    text: str                  # vocabulary string, e.g. "ĠMissoula"
    merge: tuple[str, str]     # the two vocabulary strings it joins
    pieces: tuple[int, ...]    # base token ids it covers, in order


def _unit_words(tokenizer: Any, texts: Sequence[str]) -> list[str]:
    """Each pre-tokenized word of ``texts`` as a string of base-token characters."""
    backend = tokenizer.backend_tokenizer
    words = []
    for text in texts:
        normalized = backend.normalizer.normalize_str(text) if backend.normalizer else text
        for word, _ in backend.pre_tokenizer.pre_tokenize_str(normalized):
            words.append("".join(chr(_UNIT + t.id) for t in backend.model.tokenize(word)))
    return words


def learn_merges(tokenizer: Any, texts: Sequence[str], count: int) -> list[NewToken]:
    """``count`` new tokens, in merge order, learned on ``texts`` over the base segmentation."""
    words = _unit_words(tokenizer, texts)
    alphabet = len(set("".join(words)))
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # twice the merges asked for: some are skipped (string already in the base vocabulary)
    trainer = trainers.BpeTrainer(vocab_size=alphabet + 2 * count, min_frequency=2, show_progress=False)
    bpe.train_from_iterator(words, trainer=trainer)
    base = tokenizer.backend_tokenizer.model
    vocab = tokenizer.get_vocab()
    text_of = {chr(_UNIT + i): base.id_to_token(i) for i in {ord(c) - _UNIT for w in words for c in w}}
    tokens: list[NewToken] = []
    for merge in json.loads(bpe.to_str())["model"]["merges"]:
        left, right = merge if isinstance(merge, list) else merge.split(" ")
        if left not in text_of or right not in text_of:
            continue  # built on a skipped token
        text = text_of[left] + text_of[right]
        if text in vocab:
            continue
        text_of[left + right] = text
        tokens.append(NewToken(text, (text_of[left], text_of[right]), tuple(ord(c) - _UNIT for c in left + right)))
        if len(tokens) == count:
            return tokens
    raise ConfigError(f"the fit text yields only {len(tokens)} new merges, fewer than reallocate={count}; "
                      "lower reallocate or fit on more text")


def with_new_tokens(tokenizer: Any, tokens: Sequence[NewToken], first_id: int) -> Any:
    """A copy of ``tokenizer`` whose BPE also holds ``tokens`` (ids from ``first_id``) and their merges last."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    model = spec["model"]
    pairs = bool(model["merges"]) and isinstance(model["merges"][0], list)
    for i, token in enumerate(tokens):
        model["vocab"][token.text] = first_id + i
        model["merges"].append(list(token.merge) if pairs else " ".join(token.merge))
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        with open(f"{folder}/tokenizer.json", "w", encoding="utf-8") as f:
            json.dump(spec, f, ensure_ascii=False)
        return AutoTokenizer.from_pretrained(folder)
