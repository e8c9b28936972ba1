"""Collecting a model's last-layer vectors per token (paper 004 Section 3.1, the first step of a
sense dictionary): the fit text cut into model inputs (:class:`Window`, :func:`fit_windows`), run
through the model in padded batches (:func:`batches`, :func:`last_hidden`), and a uniform sample of
at most ``cap`` vectors kept per token id (:func:`collect` -> :class:`TokenVectors`).

Choices where paper 004 is silent, following the authors' code (Qitong-Wang/SenseDict,
DeBERTa/a1_gather_sense.py):

* The fit text is encoded as the scored model reads it (Sections 3.1-3.2: the senses are the
  model's own last-layer vectors, and the drop-in replaces the vectors of the scored inputs). A
  sentence pair of a pair task (MRPC, STS-B, RTE, QNLI, XNLI: ``task_train`` items (a, b),
  Section 4.1) is one input ``[CLS] a [SEP] b [SEP]`` with token type ids 0 / 1, truncated
  longest-first to the window, exactly as the suite encodes it
  (:func:`harness.suites.finetune.sentence_features`) and as the authors' a1_gather_sense.py
  encodes its pairs (BERT's longest-first truncation, segments with [SEP] and type ids). Joining
  the two into one segment made different vectors than those the drop-in later replaces (glue
  quick on MiniLM, k=15: QNLI fell from 0.67 to chance). QA's (question, context) pairs are read
  the same way, so only a context's first window is read (the suite also reads later, strided
  windows). A document or sentence is cut into consecutive windows.
* Every token the model emits a vector for gets senses, special tokens included ([CLS], [SEP],
  <s>): the authors' gathering script keeps all unpadded positions. A sentence head reads those
  positions (a mean over all tokens, or the first token), so they must be senses too for the
  drop-in to be a drop-in.
* The cap is a uniform sample without replacement of each token's occurrences (the ``cap``
  smallest of one random key per occurrence), seeded; the authors' streaming rule only
  approximates this. Sampled vectors are held in fp16, as the authors' fp16 teacher produced them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from harness.sources.corpora import Text

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Window:
    """One model input of the fit text: token ids with special tokens, and the segment ids
    (``token_type_ids``) where the tokenizer gives them (BERT's; XLM-R's and Llama's give none)."""

    ids: list[int]
    types: list[int] | None = None

    def __len__(self) -> int:
        return len(self.ids)


def encode(tokenizer: Any, text: Text, window: int) -> list[Window]:
    """``text`` as the model reads it (module docstring): a document in consecutive windows of at
    most ``window`` tokens; a pair (a, b) as one two-segment input truncated longest-first."""
    if isinstance(text, str):
        enc = tokenizer(text, truncation=True, max_length=window, return_overflowing_tokens=True)
        rows, types = enc["input_ids"], enc.get("token_type_ids")
    else:
        enc = tokenizer(*text, truncation=True, max_length=window)
        rows, types = [enc["input_ids"]], [enc["token_type_ids"]] if "token_type_ids" in enc else None
    return [Window(list(ids), list(types[i]) if types is not None else None) for i, ids in enumerate(rows)]


def fit_windows(tokenizer: Any, texts: Sequence[Text], window: int, max_tokens: int | None, seed: int) -> list[Window]:
    """Model inputs of at most ``window`` tokens (:func:`encode`), from the texts in a seeded
    random order, until ``max_tokens`` are taken."""
    windows: list[Window] = []
    total = 0
    for i in np.random.default_rng(seed).permutation(len(texts)):
        for w in encode(tokenizer, texts[i], window):
            if max_tokens is not None and total >= max_tokens:
                return windows
            windows.append(w)
            total += len(w)
    return windows


@dataclass(frozen=True)
class Batch:
    """Padded windows: (B, T) ids, attention mask and segment ids (None where the windows have none)."""

    ids: torch.Tensor
    mask: torch.Tensor
    types: torch.Tensor | None


def last_hidden(backbone: nn.Module, batch: Batch) -> torch.Tensor:
    """A batch -> (B, T, D) last-layer vectors of a transformers base model."""
    segments = {} if batch.types is None else {"token_type_ids": batch.types}
    return backbone(input_ids=batch.ids, attention_mask=batch.mask, **segments).last_hidden_state


def batches(windows: Sequence[Window], batch_size: int, pad_id: int, device: str):
    """:class:`Batch` es of ``batch_size`` windows each (segment ids padded with 0, as the suites' collator pads them)."""
    for start in range(0, len(windows), batch_size):
        chunk = windows[start:start + batch_size]
        width = max(len(w) for w in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        types = torch.zeros((len(chunk), width), dtype=torch.long) if chunk[0].types is not None else None
        for row, w in enumerate(chunk):
            ids[row, :len(w)] = torch.tensor(w.ids)
            mask[row, :len(w)] = 1
            if types is not None:
                types[row, :len(w)] = torch.tensor(w.types)
        yield Batch(ids.to(device), mask.to(device), types.to(device) if types is not None else None)


def backbone_of(model: nn.Module) -> nn.Module:
    """The transformers base model inside a task model (``model.bert``, ``model.model``, a
    MeanPooledClassifier's ``encoder``), or the model itself when it is one."""
    inner = getattr(model, getattr(model, "base_model_prefix", ""), None)
    return inner if isinstance(inner, nn.Module) else model


@dataclass(frozen=True)
class TokenVectors:
    """Sampled last-layer vectors grouped by token: token ``ids[i]`` owns
    ``vectors[offsets[i]:offsets[i + 1]]``; ``seen[i]`` counts its occurrences before the cap."""

    ids: np.ndarray      # (U,) int64, ascending
    offsets: np.ndarray  # (U + 1,) int64
    vectors: np.ndarray  # (N, D) float16
    seen: np.ndarray     # (U,) int64
    tokens_read: int     # unpadded positions the model ran over

    def of(self, i: int) -> np.ndarray:
        return self.vectors[self.offsets[i]:self.offsets[i + 1]]

    def capped(self, cap: int) -> TokenVectors:
        """The sample a smaller ``cap`` would have drawn: each token's vectors are kept in order of
        their random keys, so the first ``cap`` of them are exactly the bottom-``cap`` sample."""
        kept = np.minimum(np.diff(self.offsets), cap)
        rows = np.concatenate([np.arange(s, s + n) for s, n in zip(self.offsets[:-1], kept)]).astype(np.int64)
        return TokenVectors(self.ids, np.append(0, np.cumsum(kept)), self.vectors[rows], self.seen, self.tokens_read)


class Sample:
    """Per-token uniform sample of at most ``cap`` vectors: every occurrence draws a random key and
    each token keeps its ``cap`` smallest keys (bottom-k sampling), compacted in bulk."""

    def __init__(self, cap: int, vocab_size: int, seed: int):
        self.cap, self.rng = cap, np.random.default_rng(seed)
        self.seen = np.zeros(vocab_size, dtype=np.int64)
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.pending = self.kept = 0

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self.seen += np.bincount(ids, minlength=len(self.seen))
        self.parts.append((ids, self.rng.random(len(ids)), vectors.astype(np.float16)))
        self.pending += len(ids)
        if self.pending > max(self.kept, 65536):
            self._compact()

    def _compact(self) -> None:
        ids, keys, vecs = (np.concatenate(column) for column in zip(*self.parts))
        order = np.lexsort((keys, ids))  # by token, smallest key first
        grouped = ids[order]
        rank = np.arange(len(order)) - np.searchsorted(grouped, grouped, side="left")
        keep = order[rank < self.cap]  # exact at any compaction time, so the result is too
        self.parts = [(ids[keep], keys[keep], vecs[keep])]
        self.kept, self.pending = len(keep), 0

    def result(self, tokens_read: int) -> TokenVectors:
        if self.parts:
            self._compact()
            ids, _, vecs = self.parts[0]
        else:
            ids, vecs = np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float16)
        uniq, starts = np.unique(ids, return_index=True)
        offsets = np.append(starts, len(ids)).astype(np.int64)
        return TokenVectors(uniq.astype(np.int64), offsets, vecs, self.seen[uniq], tokens_read)


@torch.inference_mode()
def collect(backbone: nn.Module, windows: Sequence[Window], cap: int, vocab_size: int, *, pad_id: int,
            batch_size: int, seed: int, device: str = "cpu", progress: Progress | None = None) -> TokenVectors:
    """Run ``backbone`` over ``windows`` and sample at most ``cap`` last-layer vectors per token id."""
    backbone.eval().to(device)
    sample = Sample(cap, vocab_size, seed)
    steps, read = (len(windows) + batch_size - 1) // batch_size, 0
    for step, batch in enumerate(batches(windows, batch_size, pad_id, device)):
        real = batch.mask.bool()
        sample.add(batch.ids[real].cpu().numpy(), last_hidden(backbone, batch)[real].float().cpu().numpy())
        read += int(real.sum())
        if progress:
            progress("sense vectors", step + 1, steps)
    return sample.result(read)
