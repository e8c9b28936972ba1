"""Low-rank table: ALBERT's factorized embedding parameterization, a reference point beyond the papers.

ALBERT (Lan et al., 2020, Section 3.1, "Factorized embedding parameterization") looks tokens up in a
V x E table and projects to the hidden size H with an E x H matrix, so the embedding costs
E(V + H) instead of V*H. Paper 001 (Section 2) cites it as the matrix-factorization alternative to
sub-embeddings. Here the pretrained table is factorized E ~ A B with A (V, r) and B (r, D):
embedding params r(V + D), fraction r(V + D) / (V D), about r/D for V >> D.

Choices, written down here:

* A and B start from the truncated SVD of the pretrained table, E = U S V^T: A = U_r S_r^(1/2),
  B = S_r^(1/2) V_r^T, the best rank-r approximation (Eckart-Young) with the singular values split
  evenly so both factors train at the same scale (computed through the D x D Gram matrix in
  float64). ALBERT trains from scratch instead.
* No bias on the projection (ALBERT's projection has one): the table stays a pure product, so the
  output side is a pure factorization too.
* r must satisfy r(V + D) < V D, or nothing is saved.
* Output side: logits = (h B^T) A^T, an (N, r) product then (N, V): no V x D matrix, and fewer
  multiply-adds than the dense head for r < D. A tied base shares the input's factors (the tie is
  preserved; ``tie_weights()`` is told to leave the head alone); an untied head is factorized
  from its own table; an output bias is kept. ``--set output=false`` keeps a dense head.
* In inference on up to 64 states on the CPU the second product runs in a kernel
  (:mod:`harness.methods.low_rank_head`); otherwise, in training and on CUDA, torch's two products
  (the reference). On an H100 cuBLAS beat a Triton kernel for the second product at every shape
  measured (SmolLM2 and Llama-3 shapes, batch 1 and 32, eager and graphed: the kernel 0.43-0.58x
  the reference; docs/performance.md), so CUDA keeps cuBLAS: in inference replayed from the head's
  own CUDA graph where a shape repeats (:mod:`harness.methods.cuda_graphs`), as ASG's head. Each
  call counts the path it took (:mod:`harness.methods.kernel_paths`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits
from torch import nn

from harness.adapter import Adapter, FitContext, replace_tables
from harness.config import require_positive
from harness.errors import ConfigError
from harness.methods import kernel_paths, low_rank_head
from harness.methods.cuda_graphs import GraphedCalls


@dataclass(frozen=True)
class LowrankConfig:
    r: int = 64          # inner dimension of E ~ A B (ALBERT's E); fraction kept ~ r/D
    output: bool = True  # also factorize the output embedding when the model has one

    def __post_init__(self) -> None:
        require_positive(r=self.r)

    def check_table(self, vocab: int, dim: int) -> None:
        largest = (vocab * dim - 1) // (vocab + dim)
        if self.r > largest:
            raise ConfigError(f"r={self.r} stores r*(V+D) >= V*D={vocab * dim} values, so nothing is saved; pick r <= {largest}")


def factorize(table: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank-r truncated SVD of a (V, D) table -> A (V, r), B (r, D) with A B the best rank-r fit.

    Computed from the (D, D) Gram matrix E^T E = V S^2 V^T in float64 (``eigh``), then
    U_r S_r = E V_r: the same factors as a full SVD for the kept directions, several times faster.
    """
    values = table.detach().cpu().double()
    with threadpool_limits(1):  # a D x D problem: threads only add fork-join waits (seconds on a busy CPU)
        eigenvalues, eigenvectors = torch.linalg.eigh(values.T @ values)  # ascending
    right = eigenvectors.flip(1)[:, :r]  # V_r: (D, r)
    root = eigenvalues.flip(0)[:r].clamp(min=0).sqrt().sqrt()  # S_r^(1/2)
    lookup = (values @ right) / root.clamp(min=1e-12)  # U_r S_r^(1/2)
    return lookup.to(table.dtype), (root[:, None] * right.T).to(table.dtype)


class FactorizedEmbedding(nn.Module):
    """Input side: token n -> A[n] B."""

    def __init__(self, lookup: torch.Tensor, projection: torch.Tensor):
        super().__init__()
        self.lookup = nn.Parameter(lookup)          # A: (V, r)
        self.projection = nn.Parameter(projection)  # B: (r, D)

    @property
    def num_embeddings(self) -> int:
        return self.lookup.shape[0]

    @property
    def embedding_dim(self) -> int:
        return self.projection.shape[1]

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(input_ids, self.lookup) @ self.projection  # (..., r) @ (r, D)

    def dense(self) -> torch.Tensor:
        """The reconstructed (V, D) table; for checks and export, never on the forward path."""
        return self.lookup @ self.projection


class FactorizedLMHead(nn.Module):
    """Output side: logits = (h B^T) A^T (+ bias), through the (N, r) bottleneck."""

    def __init__(self, factors: FactorizedEmbedding, bias: torch.Tensor | None = None):
        super().__init__()
        self.factors = factors
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone())

    @property
    def out_features(self) -> int:
        return self.factors.num_embeddings

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        flat = hidden.reshape(-1, hidden.shape[-1])
        factors = self.factors
        training = torch.is_grad_enabled() and (flat.requires_grad or factors.lookup.requires_grad or factors.projection.requires_grad)
        if training:
            out, path = self.products(flat)[0], "torch products, with gradients"
        elif flat.is_cuda:
            graphs = self.__dict__.setdefault("_graphs", GraphedCalls())
            bias = 0 if self.bias is None else self.bias.data_ptr()
            out, path = graphs(self.products, flat, factors.lookup.data_ptr(), factors.projection.data_ptr(), bias)
        elif low_rank_head.applies(flat):  # a few states: the fused heads' thread pool
            out, path = low_rank_head.logits(flat, factors.projection, factors.lookup, self.bias), "fused C++ kernel"
        else:
            out, path = self.products(flat)
        kernel_paths.record(self, path)
        return out.reshape(*hidden.shape[:-1], -1)

    def products(self, flat: torch.Tensor) -> tuple[torch.Tensor, str]:
        """(N, D) hidden states -> (N, V) logits by torch's two products (the reference), and that path."""
        low = flat @ self.factors.projection.T  # (N, r)
        return F.linear(low, self.factors.lookup, self.bias), "torch products"  # (N, V)

    def _apply(self, fn, recurse=True):
        self.__dict__.pop("_graphs", None)
        return super()._apply(fn, recurse)


class LowrankAdapter(Adapter):
    """E ~ A B on the input embedding, and on the output embedding when the model has one."""

    name = "lowrank"
    kinds = ("encoder", "decoder", "encoder-decoder")  # an encoder-decoder's shared input table and its head alike
    config_class = LowrankConfig
    recovers = ("lookup", "projection")  # A and B

    def check(self, vocab_size: int, hidden_size: int) -> None:
        self.config.check_table(vocab_size, hidden_size)

    def fit(self, table: torch.Tensor, fit: FitContext) -> FactorizedEmbedding:
        self.config.check_table(*table.shape)
        lookup, projection = factorize(table, self.config.r)
        return FactorizedEmbedding(lookup.to(table.device), projection.to(table.device))

    def compress(self, model: nn.Module, fit: FitContext) -> nn.Module:
        return replace_tables(model, lambda table: self.fit(table, fit), FactorizedLMHead, self.config.output)
