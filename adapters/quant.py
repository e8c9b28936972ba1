"""Quantized table: per-row scaled int8 / int4, dequantized on lookup; a reference point beyond the papers.

Every row e_n of the pretrained table gets one scale s_n = max_j |e_nj| / q_max (q_max = 127 for
int8, 7 for int4) and stores q_nj = round(e_nj / s_n), clamped to [-q_max, q_max]: symmetric
absmax quantization, so |e_nj - s_n q_nj| <= s_n / 2 for every entry (tested). Lookup returns
s_n * q_n in the scales' dtype.

Choices, written down here:

* Storage: int8 values as int8 (V*D bytes); int4 values offset to 1..15 and packed two per byte,
  low nibble first (V*ceil(D/2) bytes); scales in the table's dtype (float32 for MiniLM: 4V
  bytes). All are persistent buffers, so storage counts them.
* Embedding params: the number of quantized values, V*D, reported through the module's
  ``stored_values()`` (see :func:`harness.adapter.footprint`). Quantization saves bits, not values,
  so the parameter fraction stays 1.0 and the saving shows in storage (about 1/4 for int8, 1/8
  for int4, plus the scales); the scales are metadata, counted in storage only.
* The quantized table is frozen: fine-tuning trains everything else (no quantization-aware
  training, which would need a float copy of the table).
* Output side: models with an output head get logits h . (s_n q_n) computed in vocabulary chunks
  of 8192 rows, so no full V x D float matrix is formed. A tied base shares the input's quantized
  table (stored once; ``tie_weights()`` is told to leave the head alone); an untied head is
  quantized from its own table; an output bias is kept and trains. ``--set output=false`` keeps
  a dense head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from harness.adapter import Adapter, FitContext, replace_tables
from harness.config import require_positive
from harness.errors import ConfigError

Q_MAX = {8: 127, 4: 7}
LOGIT_CHUNK = 8192  # vocabulary rows dequantized at a time by the output head


@dataclass(frozen=True)
class QuantConfig:
    bits: int = 8        # 8 (int8) or 4 (int4, packed two per byte)
    output: bool = True  # also quantize the output embedding when the model has one

    def __post_init__(self) -> None:
        require_positive(bits=self.bits)
        if self.bits not in Q_MAX:
            raise ConfigError(f"bits={self.bits} is not supported; use --set bits=8 or --set bits=4")


def quantize(table: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(V, D) table -> (codes, scales (V,)): int8 (V, D), or for int4 uint8 (V, ceil(D/2)) packed."""
    values = table.detach().float()
    q_max = Q_MAX[bits]
    scales = values.abs().amax(dim=1) / q_max
    q = torch.round(values / torch.where(scales > 0, scales, 1.0)[:, None]).clamp(-q_max, q_max)
    if bits == 8:
        return q.to(torch.int8), scales.to(table.dtype)
    u = (q + 8).to(torch.uint8)  # 1..15; 8 is zero
    if u.shape[1] % 2:
        u = torch.cat([u, torch.full_like(u[:, :1], 8)], dim=1)
    return u[:, 0::2] | (u[:, 1::2] << 4), scales.to(table.dtype)


class QuantizedEmbedding(nn.Module):
    """Input side: token n -> s_n * q_n, dequantized on lookup."""

    def __init__(self, codes: torch.Tensor, scales: torch.Tensor, bits: int, dim: int):
        super().__init__()
        self.bits, self.dim = bits, dim
        # (V, D) int8, or (V, ceil(D/2)) uint8 with two int4 values per byte; fixed, not trained
        self.register_buffer("codes", codes)
        self.register_buffer("scales", scales)  # (V,) per-row scale

    @property
    def num_embeddings(self) -> int:
        return self.codes.shape[0]

    @property
    def embedding_dim(self) -> int:
        return self.dim

    def stored_values(self) -> int:
        """Quantized values held: V*D (the embedding params of this method; see the module docstring)."""
        return self.num_embeddings * self.dim

    def values(self, codes: torch.Tensor) -> torch.Tensor:
        """Integer values (..., D) of stored rows, as the scales' dtype."""
        if self.bits == 8:
            return codes.to(self.scales.dtype)
        nibbles = torch.stack([codes & 15, codes >> 4], dim=-1).flatten(-2)[..., :self.dim]
        return nibbles.to(self.scales.dtype) - 8

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.values(self.codes[input_ids]) * self.scales[input_ids].unsqueeze(-1)

    def dense(self) -> torch.Tensor:
        """The dequantized (V, D) table; for checks and export, never on the forward path."""
        return self.values(self.codes) * self.scales[:, None]


class QuantizedLMHead(nn.Module):
    """Output side: logits h . (s_n q_n), dequantizing LOGIT_CHUNK vocabulary rows at a time."""

    def __init__(self, table: QuantizedEmbedding, bias: torch.Tensor | None = None):
        super().__init__()
        self.table = table
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone())

    @property
    def out_features(self) -> int:
        return self.table.num_embeddings

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        t = self.table
        logits = hidden.new_empty(*hidden.shape[:-1], t.num_embeddings)
        for start in range(0, t.num_embeddings, LOGIT_CHUNK):
            rows = slice(start, start + LOGIT_CHUNK)
            weight = t.values(t.codes[rows]) * t.scales[rows, None]  # (chunk, D)
            logits[..., rows] = hidden @ weight.to(hidden.dtype).T
        return logits if self.bias is None else logits + self.bias


class QuantAdapter(Adapter):
    """Per-row int8/int4 table on the input embedding, and on the output embedding when there is one."""

    name = "quant"
    kinds = ("encoder", "decoder", "encoder-decoder")  # an encoder-decoder's shared input table and its head alike
    config_class = QuantConfig
    recovers = ("scales",)  # the per-row scales (float buffers); the integer codes stay fixed

    def fit(self, table: torch.Tensor, fit: FitContext) -> QuantizedEmbedding:
        codes, scales = quantize(table, self.config.bits)
        return QuantizedEmbedding(codes, scales, self.config.bits, table.shape[1])

    def compress(self, model: nn.Module, fit: FitContext) -> nn.Module:
        return replace_tables(model, lambda table: self.fit(table, fit), QuantizedLMHead, self.config.output)
