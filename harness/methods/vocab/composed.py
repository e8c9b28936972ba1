"""Composed input embeddings and output logits over a Vocab Diet vocabulary (paper 003, Sections 3.1-3.2).

Every token id t of the composed vocabulary has a stored row ``rows[t]`` (its own, or its base's)
and a bit mask ``transforms[t]`` of the transformations applied to it:

* input: e_t = E[rows[t]] + sum_{i in mask(t)} E_T[i]
* output: logit_t = h . U[rows[t]] + sum_{i in mask(t)} h . U_T[i]  (one softmax over all ids)

The output side computes h . U over the K stored rows once, gathers the V columns through
``rows`` and adds (h . U_T) times the (V, T) mask: no (V, D) matrix is ever built.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def mask_dtype(n_transforms: int) -> torch.dtype:
    """Smallest integer dtype holding one bit per transformation."""
    return torch.uint8 if n_transforms <= 8 else torch.int32


def transform_bits(masks: torch.Tensor, n_transforms: int) -> torch.Tensor:
    """(...,) integer masks -> (..., T) 0/1 floats."""
    shifts = torch.arange(n_transforms, device=masks.device, dtype=masks.dtype)
    return ((masks.unsqueeze(-1) >> shifts) & 1).float()


class ComposedEmbedding(nn.Module):
    """Input side: e_t = E[rows[t]] + sum of the transformation vectors in t's mask."""

    def __init__(self, table: torch.Tensor, rows: torch.Tensor, masks: torch.Tensor, transforms: torch.Tensor):
        super().__init__()
        self.table = nn.Parameter(table)            # (K, D) stored rows: kept tokens, bases, new tokens
        self.transforms = nn.Parameter(transforms)  # (T, D) input transformation vectors E_T
        # (V,) row of every id and (V,) bit mask of its transformations; fixed maps, counted in storage
        self.register_buffer("rows", rows.to(torch.int32))
        self.register_buffer("masks", masks.to(mask_dtype(len(transforms))))

    @property
    def num_embeddings(self) -> int:
        return self.rows.shape[0]

    @property
    def embedding_dim(self) -> int:
        return self.table.shape[1]

    def composed(self) -> torch.Tensor:
        """(V,) bool: ids represented by base + transformations."""
        return self.masks != 0

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        base = F.embedding(self.rows[input_ids].long(), self.table)
        bits = transform_bits(self.masks[input_ids], len(self.transforms)).to(base.dtype)
        return base + bits @ self.transforms


class ComposedLMHead(nn.Module):
    """Output side: logit_t = h . U[rows[t]] + sum_{i in mask(t)} h . U_T[i].

    ``table`` is the input side's when the model ties its tables (the tie is kept), else the head's
    own stored rows. A bias, if the head had one, is stored per row and gathered like the scores.
    """

    def __init__(self, embedding: ComposedEmbedding, transforms: torch.Tensor, table: torch.Tensor | None = None,
                 bias: torch.Tensor | None = None):
        super().__init__()
        self.embedding = embedding
        self.table = None if table is None else nn.Parameter(table)  # (K, D) untied output rows U
        self.transforms = nn.Parameter(transforms)                    # (T, D) output transformation vectors U_T
        self.bias = None if bias is None else nn.Parameter(bias)       # (K,)
        # (V, T) 0/1 mask as floats for the matmul; derived from the embedding's masks, not stored
        self.register_buffer("bits", transform_bits(embedding.masks, len(transforms)), persistent=False)

    @property
    def out_features(self) -> int:
        return self.embedding.num_embeddings

    @property
    def weight(self) -> torch.Tensor:
        return self.embedding.table if self.table is None else self.table

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        scores = hidden @ self.weight.T  # (..., K)
        if self.bias is not None:
            scores = scores + self.bias
        logits = scores.index_select(-1, self.embedding.rows.long())  # (..., V)
        return logits + (hidden @ self.transforms.T) @ self.bits.to(hidden.dtype).T
