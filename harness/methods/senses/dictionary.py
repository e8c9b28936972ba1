"""The sense dictionary (paper 004 Section 3.1) and what is scored against it: the drop-in that
swaps each last-layer vector for its token's sense of largest dot product (Section 3.2,
:meth:`SenseDictionary.attach`), and SKD's labels and loss (Section 3.3, :func:`teacher_senses`,
:func:`sense_cross_entropy`). :mod:`harness.methods.senses.cluster` builds it.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from harness.adapter import TokenStorage
from harness.methods.senses.collect import backbone_of

TABLE6_SENSES = 15        # paper 004 Table 6 counts tokens with <= 15 and > 15 senses
SCORE_CHUNK = 4096        # positions scored at once by the drop-in (bounds the gathered senses)


class SenseDictionary(nn.Module, TokenStorage):
    """The senses of every token with an entry, stored ragged: token ``t`` owns rows
    ``senses[offsets[t]:offsets[t + 1]]`` (none when the two are equal). Both are persistent
    buffers, so the dictionary's bytes count in the model's storage.

    Marked :class:`~harness.adapter.TokenStorage`, so the compression report counts it with the
    token-embedding storage. ``align`` is SKD's W_align (paper 004 Section 3.3): a linear map from a
    narrower student's vectors into the dictionary's width, applied before the senses are scored;
    None when the widths match (a student cut from the teacher's own layers). ``mcl``: what Markov
    clustering found while building it (:func:`~harness.methods.senses.cluster.mcl_summary`; None
    for k-means), reported by :meth:`statistics` and kept as plain numbers, so a saved and reloaded
    dictionary still reports it.
    """

    def __init__(self, offsets: torch.Tensor, senses: torch.Tensor, align: nn.Module | None = None,
                 mcl: dict[str, float] | None = None):
        super().__init__()
        self.register_buffer("offsets", offsets.to(torch.int64))
        self.register_buffer("senses", senses)
        self.mcl = tuple(mcl.items()) if mcl is not None else None  # (name, number) pairs: data the saved model keeps
        self.align = align
        self.active = True  # False while suspended(): the hook passes the model's own vectors through

    @contextlib.contextmanager
    def suspended(self):
        """The attached model without the drop-in: its own last-layer vectors, for what paper 004
        builds from them (the word-level dictionary, Appendix E)."""
        self.active = False
        try:
            yield
        finally:
            self.active = True

    @property
    def dim(self) -> int:
        return self.senses.shape[1]

    def counts(self) -> torch.Tensor:
        """(V,) number of senses per token id (0 = no entry)."""
        return self.offsets[1:] - self.offsets[:-1]

    def gather(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N,) token ids -> their senses (N, kmax, D) float32, zero-padded, and the (N, kmax) mask
        of real senses."""
        start, count = self.offsets[ids], self.counts()[ids]
        slots = torch.arange(int(count.max()) if len(ids) else 0, device=ids.device)
        valid = slots[None, :] < count[:, None]
        rows = torch.where(valid, start[:, None] + slots[None, :], torch.zeros_like(valid, dtype=torch.int64))
        return self.senses[rows].float() * valid[..., None], valid

    def scores(self, ids: torch.Tensor, vectors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Dot products <m_t, s_t^(i)> (N, kmax), -inf on padding slots, and the gathered senses."""
        senses, valid = self.gather(ids)
        logits = torch.einsum("nkd,nd->nk", senses, vectors.float())
        return logits.masked_fill(~valid, float("-inf")), senses

    def choose(self, ids: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        """Paper 004 Section 3.2: (B, T) ids, (B, T, D) last-layer vectors -> each vector replaced by
        its token's sense of largest dot product; tokens without an entry keep their vector."""
        vectors = self.align(vectors) if self.align is not None else vectors
        out = vectors.clone()
        flat_ids, flat_out = ids.reshape(-1), out.view(-1, out.shape[-1])
        positions = torch.nonzero(self.counts()[flat_ids] > 0).flatten()
        for chunk in positions.split(SCORE_CHUNK) if len(positions) else ():  # split of an empty tensor gives one empty chunk
            logits, senses = self.scores(flat_ids[chunk], flat_out[chunk])
            best = logits.argmax(-1)
            flat_out[chunk] = senses[torch.arange(len(chunk)), best].to(out.dtype)
        return out

    def attach(self, model: nn.Module) -> None:
        """Install the drop-in: the dictionary becomes ``model.sense_dictionary`` and a forward hook
        on the model's backbone swaps its last hidden state for senses, recomputing a first-token
        pooler (BERT's) from the swapped states, so every head downstream reads senses."""
        model.sense_dictionary = self
        self.reattach(model)

    def reattach(self, model: nn.Module) -> None:
        """The forward hook alone: what :mod:`harness.runner.saved` reinstalls after rebuilding a saved model."""
        backbone_of(model).register_forward_hook(self._swap, with_kwargs=True)

    def _swap(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
        if not self.active:
            return output
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            raise ValueError("the sense drop-in needs input_ids (it looks senses up by token id), not inputs_embeds")
        hidden = self.choose(ids, output[0])
        pooler = getattr(module, "pooler", None)
        if isinstance(output, tuple):
            rest = output[1:]
            if pooler is not None and len(rest):
                rest = (pooler(hidden), *rest[1:])
            return (hidden, *rest)
        output["last_hidden_state"] = hidden
        if pooler is not None and output.get("pooler_output") is not None:
            output["pooler_output"] = pooler(hidden)
        return output

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.state_dict().values())

    def statistics(self, k: int) -> dict[str, Any]:
        """What paper 004 Tables 5-6 report: tokens with an entry ("valid tokens"), senses per token
        (the whole histogram, Table 5's share below ``k`` and Table 6's bins), bytes; with Markov
        clustering also what it found (``mcl``: :func:`~harness.methods.senses.cluster.mcl_summary`)."""
        counts = self.counts()
        have = counts[counts > 0]
        hist = torch.bincount(have).tolist() if len(have) else []
        return {
            "tokens_with_senses": int(len(have)),
            "senses": int(have.sum()),
            "senses_per_token_histogram": {n: c for n, c in enumerate(hist) if c},
            "tokens_below_k": int((have < k).sum()),
            "share_below_k": float((have < k).float().mean()) if len(have) else 0.0,
            "table6": table6_bins(have),
            "dictionary_bytes": self.nbytes(),
            "dtype": str(self.senses.dtype).removeprefix("torch."),
            **({"mcl": dict(self.mcl)} if self.mcl is not None else {}),
        }


def table6_bins(counts: torch.Tensor) -> dict[str, float]:
    """Senses per token in paper 004 Table 6's bins (its row names, as in paper_results.csv): tokens
    with at most / more than 15 senses, counts and percentages of the tokens with senses."""
    valid = len(counts)
    low = int((counts <= TABLE6_SENSES).sum())
    return {"n_valid_tokens": valid,
            f"n_tokens_le{TABLE6_SENSES}_senses": low, f"pct_tokens_le{TABLE6_SENSES}_senses": 100 * low / valid if valid else 0.0,
            f"n_tokens_gt{TABLE6_SENSES}_senses": valid - low,
            f"pct_tokens_gt{TABLE6_SENSES}_senses": 100 * (valid - low) / valid if valid else 0.0}


def teacher_senses(dictionary: SenseDictionary, ids: torch.Tensor, mask: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """SKD labels, paper 004 Section 3.3: per position the index of the teacher vector's sense of
    largest dot product, or -1 where there is nothing to choose (padding, no entry, one sense)."""
    flat_ids = ids.reshape(-1)
    labels = torch.full_like(flat_ids, -1)
    keep = torch.nonzero((mask.reshape(-1) > 0) & (dictionary.counts()[flat_ids] > 1)).flatten()
    for chunk in keep.split(SCORE_CHUNK):
        logits, _ = dictionary.scores(flat_ids[chunk], teacher.reshape(-1, teacher.shape[-1])[chunk])
        labels[chunk] = logits.argmax(-1)
    return labels.view(ids.shape)


def sense_cross_entropy(dictionary: SenseDictionary, ids: torch.Tensor, labels: torch.Tensor,
                        student: torch.Tensor) -> tuple[torch.Tensor, float]:
    """SKD loss, paper 004 Section 3.3: mean over labelled positions of the cross-entropy of the
    softmax over the token's senses of their dot products with the (W_align-mapped) student vector,
    against the teacher's sense (:func:`teacher_senses`). Padding senses get -inf (the authors'
    script sets them to 0, which lets a padding slot win the softmax). Returns (loss, share of
    positions where the student's arg-max sense already is the teacher's)."""
    keep = torch.nonzero(labels.reshape(-1) >= 0).flatten()
    if not len(keep):
        return student.sum() * 0.0, 1.0
    s = student.reshape(-1, student.shape[-1])[keep]
    s = dictionary.align(s) if dictionary.align is not None else s
    logits, _ = dictionary.scores(ids.reshape(-1)[keep], s)
    target = labels.reshape(-1)[keep]
    return F.cross_entropy(logits, target), float((logits.argmax(-1) == target).float().mean())
