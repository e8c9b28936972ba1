"""A Patchscopes-style decoding probe (paper 003, Section 4 and Appendix: Tables 1 and 7).

The prompt ``X, X, X, X,`` repeats one token four times; the model is asked to continue it. When
the vector standing for X is a composition (base + transformations), a continuation that spells
the surface form means the model resolves the composition to the right word. The continuation is
read greedily for a few tokens and its first word is compared with the form:

* ``exact``: the form's word (case-sensitive);
* ``base``: the base word (the composition lost its transformations);
* ``diff_inflection``: another inflection of the same base (paper Table 7);
* ``other``: anything else.

Choice: the authors' prompt is ``{word}, {word}, {word}, {word},``; the repeated unit here is the
token itself (with its leading-space marker, if any) followed by ``,`` so the same vector stands at
all four places. Greedy decoding, at most ``steps`` tokens (a word is rarely longer).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Sequence

import torch

OUTCOMES = ("exact", "base", "diff_inflection", "other")
_FIRST_WORD = re.compile(r"\s*([A-Za-z]+)")


def prompts(tokenizer: Any, token_ids: Sequence[int]) -> torch.Tensor:
    """(n, 8) ids of ``X , X , X , X ,`` for each token id X."""
    comma = tokenizer.encode(",", add_special_tokens=False)
    rows = [([t] + comma) * 4 for t in token_ids]
    return torch.tensor(rows)


@torch.no_grad()
def continuations(logits_of: Callable[[torch.Tensor], torch.Tensor], tokenizer: Any, prompt_ids: torch.Tensor,
                  steps: int = 3, batch: int = 64) -> list[str]:
    """Greedy continuation text (``steps`` tokens) of every prompt row; ``logits_of(ids) -> (n, L, V)``."""
    out: list[str] = []
    for start in range(0, len(prompt_ids), batch):
        ids = prompt_ids[start:start + batch]
        for _ in range(steps):
            ids = torch.cat([ids, logits_of(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
        out.extend(tokenizer.batch_decode(ids[:, prompt_ids.shape[1]:]))
    return out


def first_word(text: str) -> str:
    match = _FIRST_WORD.match(text)
    return match.group(1) if match else ""


def outcome(word: str, target: str, base: str, siblings: Iterable[str]) -> str:
    """Classify the first continued word against the form ``target`` (marker stripped) and its ``base``."""
    if word == target:
        return "exact"
    if word.lower() == base.lower():
        return "base"
    if word.lower() in {s.lower() for s in siblings} - {target.lower()}:
        return "diff_inflection"
    return "other"
