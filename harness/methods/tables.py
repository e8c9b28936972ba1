"""A model's token table: read from its input embedding, and a replacement put in its place that keeps
what the original module computed (a plain lookup, or transformers' scaled rows: Gemma, BART).

Methods replace tables through these (:func:`harness.adapter.replace_tables`, Vocab Diet); the model's
own semantics stay, or the replacement is refused in one line."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.errors import ConfigError


class ScaledEmbedding(nn.Module):
    """A replaced token table that keeps the scale the original module applied in its forward.

    transformers' Gemma (1, 2, 3), BART, mBART and M2M100 models multiply the looked-up rows by
    ``embed_scale`` (sqrt(D) where the config says so) inside their embedding module, so a table put
    in its place must do the same or every method scores another model. ``scalar`` says how the
    original multiplies: by a tensor cast to the rows' dtype (Gemma) or by a Python float (BART),
    which round differently in half precision."""

    def __init__(self, table: nn.Module, scale: float, scalar: bool):
        super().__init__()
        self.table, self.scale, self.scalar = table, scale, scalar

    @property
    def num_embeddings(self) -> int:
        return self.table.num_embeddings

    @property
    def embedding_dim(self) -> int:
        return self.table.embedding_dim

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        rows = self.table(input_ids)
        return rows * (self.scale if self.scalar else rows.new_tensor(self.scale))


def unscaled(module: nn.Module) -> nn.Module:
    """The table module inside a :class:`ScaledEmbedding`, or ``module`` itself."""
    return module.table if isinstance(module, ScaledEmbedding) else module


def _lookup_scale(module: nn.Module) -> tuple[float, bool] | None:
    """(scale, scalar) by which ``module``'s forward multiplies its table's rows: (1.0, True) for a
    plain lookup, its ``embed_scale`` for transformers' scaled embeddings, None for a forward that
    does anything else. Read from what the module computes on a few ids, not from its class.

    A padding index (``nn.Embedding.padding_idx``) only keeps that row's gradient at zero; the
    forward is a plain lookup, and the pad positions are masked out of attention, so a replaced
    table keeps what the model computes."""
    weight = module.weight
    ids = torch.arange(min(weight.shape[0], 16), device=weight.device)
    with torch.no_grad():
        out, rows = module(ids), F.embedding(ids, weight)
        if torch.equal(out, rows):
            return 1.0, True
        scale = getattr(module, "embed_scale", None)
        if scale is None:
            return None
        value = float(scale)
        for scalar in (False, True):
            if torch.equal(out, rows * (value if scalar else rows.new_tensor(value))):
                return value, scalar
    return None


def replaced_input(original: nn.Module, table: nn.Module, adapter: str = "the adapter") -> nn.Module:
    """What goes in place of the input embedding ``original``: ``table`` itself for a plain lookup,
    wrapped in :class:`ScaledEmbedding` when the original scales its rows; a module whose forward
    does anything else is refused (ConfigError) rather than silently changed."""
    found = _lookup_scale(original)
    if found is None:
        raise ConfigError(
            f"the model's input embedding {type(original).__name__} computes more than a (scaled) row lookup, "
            f"so {adapter} cannot replace its table while keeping what it computes; use a model with a plain or scaled token table"
        )
    scale, scalar = found
    return table if scale == 1.0 else ScaledEmbedding(table, scale, scalar)


def input_table(model: nn.Module) -> torch.Tensor:
    """The (V, D) token table of ``model``'s input embedding (D its own width, which may differ from the hidden size)."""
    table = getattr(model.get_input_embeddings(), "weight", None)
    if not isinstance(table, torch.Tensor) or table.dim() != 2:
        raise ConfigError(f"{type(model).__name__}'s input embedding holds no (V, D) table; the adapter replaces tables")
    return table
