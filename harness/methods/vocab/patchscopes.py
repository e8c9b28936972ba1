"""The Patchscopes probe of paper 003 (Section 5, Tables 1 and 7; the authors' ``posthoc/utils/patchscopes_utils.py``).

A vector v standing for a surface form (its own row, or base + transformations) is read back in two ways:

* ``embed``: v itself is put at every placeholder of the target prompt ``X, X, X, X,`` and the
  model continues the prompt; v is read back when the continuation's first word is the form.
* ``detok``: the model first runs over v without context (``[BOS] v``); the hidden state at v's
  position after each of the first layers is put into the target prompt in the same way; v is
  read back when any of the ``DETOK_STATES`` = 10 states (the embedding and the first nine
  layers' outputs, the authors' ``last_analysis_layer=10``) is. State 0 is v, so embed implies detok.

Choices:

* The prompt's unit is the placeholder followed by ``,``: with the form's leading space inside
  the vector, the prompt reads like `` walked, walked, walked, walked,`` (the authors write
  ``{word}, {word}, ...``, whose ``", "`` pieces add a space token of their own).
* Layer states are patched at the same layer of the target prompt (Patchscopes' source layer =
  target layer): the authors write them into the input embeddings, where SmolLM2, whose residual
  states are 20-60x the norm of its embeddings, reads none of them back (0 of 128 forms gained at
  layers 1-9), while at the same layer its own rows read back at layers 1-8. The prompt's X
  carries v from the input on; the state replaces X's hidden state after that layer.
* ``[BOS]`` opens both prompts: the token the tokenizer puts before every text (Llama-3's
  ``<|begin_of_text|>``, as the authors' code does), else the document separator ``<|endoftext|>``
  (SmolLM2, Qwen2.5, OLMo-2 pack their pretraining documents with it). SmolLM2's declared
  ``bos_token`` is the chat marker ``<|im_start|>``: with it the unchanged model reads back 33% of
  128 sampled forms' own rows, with no prefix 34%, with ``<|endoftext|>`` 88%.
* Greedy decoding of ``steps`` = 3 tokens (the authors: 10) with the KV cache; the first word must
  equal the form, case included (the authors accept a continuation that starts with it).
* A read stops at the first state that reads back, so a form costs one decode when it resolves
  at the embedding and at most ``DETOK_STATES`` when it does not.
* The classification of the first word for Table 7 (``outcome``): ``exact`` (the form), ``base``,
  ``diff_inflection`` (another form of the same base) or ``other``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import torch
from torch import nn

from harness.sources import layout

OUTCOMES = ("exact", "base", "diff_inflection", "other")
CRITERIA = ("embed", "detok")
DETOK_STATES = 10
_FIRST_WORD = re.compile(r"\s*([A-Za-z]+)")


@dataclass(frozen=True)
class Reading:
    """Per probed vector: read back at the embedding, after detokenization, and the embedding read's text."""

    embed: tuple[bool, ...]
    detok: tuple[bool, ...]
    texts: tuple[str, ...]

    def passed(self, criterion: str) -> tuple[bool, ...]:
        return getattr(self, criterion)


def _prefix(tokenizer: Any) -> list[int]:
    """The document-start token: the BOS the tokenizer puts before every text, else ``<|endoftext|>``, else none."""
    if tokenizer.bos_token_id is not None and tokenizer("a").input_ids[:1] == [tokenizer.bos_token_id]:
        return [tokenizer.bos_token_id]
    separator = tokenizer.get_vocab().get("<|endoftext|>")
    return [] if separator is None else [separator]


def target_prompt(tokenizer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids of ``[BOS] X , X , X , X ,`` (X any id) and the (4,) positions of X."""
    ids, slots = _prefix(tokenizer), []
    comma = tokenizer.encode(",", add_special_tokens=False)
    for _ in range(4):
        slots.append(len(ids))
        ids = ids + [0] + comma
    return torch.tensor(ids), torch.tensor(slots)


@torch.no_grad()
def source_states(lm: nn.Module, tokenizer: Any, vectors: torch.Tensor, count: int = DETOK_STATES,
                  batch: int = 256) -> torch.Tensor:
    """(count, n, D): hidden states 0..count-1 at the last position of ``[BOS] v`` for each row v of ``vectors``."""
    prefix = lm.get_input_embeddings()(torch.tensor(_prefix(tokenizer), dtype=torch.long, device=vectors.device))
    out = []
    for chunk in vectors.split(batch):
        x = torch.cat([prefix.expand(len(chunk), -1, -1), chunk[:, None]], dim=1)
        states = lm(inputs_embeds=x, output_hidden_states=True, logits_to_keep=1).hidden_states
        out.append(torch.stack([h[:, -1] for h in states[:count]]))
    return torch.cat(out, dim=1)


@torch.no_grad()
def continuations(lm: nn.Module, tokenizer: Any, vectors: torch.Tensor, states: torch.Tensor | None = None,
                  layer: int = 0, steps: int = 3, batch: int = 64) -> list[str]:
    """Greedy continuation (``steps`` tokens) of the target prompt with each row of ``vectors`` (n, D) at X;
    with ``states`` (n, D), the row of ``states`` replaces X's hidden state after layer ``layer``."""
    ids, slots = target_prompt(tokenizer)
    template = lm.get_input_embeddings()(ids.to(vectors.device))  # (L, D)
    texts: list[str] = []
    for start in range(0, len(vectors), batch):
        x = template.expand(len(vectors[start:start + batch]), -1, -1).clone()
        x[:, slots] = vectors[start:start + batch, None].to(x.dtype)
        patch = None if states is None else _patch(layout.blocks(lm)[1][layer - 1], slots, states[start:start + batch])
        try:
            out = lm(inputs_embeds=x, use_cache=True, logits_to_keep=1)
        finally:
            if patch is not None:
                patch.remove()
        tokens = [out.logits[:, -1].argmax(-1)]
        for _ in range(steps - 1):
            out = lm(input_ids=tokens[-1][:, None], past_key_values=out.past_key_values, use_cache=True)
            tokens.append(out.logits[:, -1].argmax(-1))
        texts.extend(tokenizer.batch_decode(torch.stack(tokens, dim=1)))
    return texts


def _patch(module: nn.Module, slots: torch.Tensor, states: torch.Tensor) -> Any:
    """Hook ``module`` so its output holds ``states`` (b, D) at positions ``slots``."""
    def hook(_module: nn.Module, _args: Any, output: Any) -> Any:
        hidden = output[0] if isinstance(output, tuple) else output
        hidden[:, slots] = states[:, None].to(hidden.dtype)
        return output

    return module.register_forward_hook(hook)


def read_back(lm: nn.Module, tokenizer: Any, vectors: torch.Tensor, words: Sequence[str], layers: int = DETOK_STATES,
              batch: int = 64) -> Reading:
    """Which rows of ``vectors`` (n, D) the model reads back as ``words`` (marker stripped), by both criteria."""
    texts = continuations(lm, tokenizer, vectors, batch=batch)
    embed = [first_word(t) == w for t, w in zip(texts, words)]
    detok = list(embed)
    failed = torch.tensor([i for i, ok in enumerate(embed) if not ok], dtype=torch.long)
    states = source_states(lm, tokenizer, vectors[failed], layers) if len(failed) else None  # (<= layers, f, D)
    pending = torch.arange(len(failed))  # indices into ``failed`` not read back yet
    for layer in range(1, 1 if states is None else len(states)):  # a model of fewer layers has fewer states
        if not len(pending):
            break
        rows = failed[pending]
        read = continuations(lm, tokenizer, vectors[rows], states[layer, pending], layer, batch=batch)
        ok = torch.tensor([first_word(t) == words[i] for t, i in zip(read, rows.tolist())])
        for i in rows[ok].tolist():
            detok[i] = True
        pending = pending[~ok]
    return Reading(tuple(embed), tuple(detok), tuple(texts))


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
