"""The low-rank head's second product on CUDA, in Triton, for a few hidden states.

logits = (h B^T) A^T (+ bias) (ALBERT's factorization, :mod:`harness.adapters.lowrank`): the first
product, (N, D) x (D, r), is a small cuBLAS call; the second reads the whole (V, r) lookup A, which
at batch 1 is a matrix-vector product with a short inner dimension (r = 64) that cuBLAS serves with a
general kernel. :func:`logits` reads each tile of A once and scores up to 64 hidden states
against it in block products (r in chunks of 64), writing each logit once with its bias added.
The torch reference it is tested against is the head's own path (``F.linear(h @ B^T, A, bias)``), which also serves training and
more than :data:`harness.methods.low_rank_head.MAX_STATES` states, as on the CPU (a GEMM there
reuses A better). Sums in float32 (products in IEEE float32 arithmetic: no TF32).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_BLOCK_N = 64  # hidden states per program (callers send at most low_rank_head.MAX_STATES = 64)
BLOCK_V = 64      # lookup rows per program
BLOCK_R = 64      # inner dimension per block product


@triton.jit
def _low_rank_kernel(low_ptr, lookup_ptr, bias_ptr, out_ptr, N, V, R, R_PADDED: tl.constexpr,
                     HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_R: tl.constexpr):
    """out[n, v] = low[n] . lookup[v] (+ bias[v]) for one (BLOCK_N, BLOCK_V) tile of (N, V)."""
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    v = tl.program_id(0) * BLOCK_V + tl.arange(0, BLOCK_V)
    acc = tl.zeros((BLOCK_N, BLOCK_V), dtype=tl.float32)
    for start in range(0, R_PADDED, BLOCK_R):  # each chunk of the tile of A is read once, for all states
        r = start + tl.arange(0, BLOCK_R)
        a = tl.load(lookup_ptr + v[:, None].to(tl.int64) * R + r[None, :], mask=(v < V)[:, None] & (r < R)[None, :], other=0.0)
        h = tl.load(low_ptr + n[:, None] * R + r[None, :], mask=(n < N)[:, None] & (r < R)[None, :], other=0.0)
        acc += tl.dot(h, tl.trans(a), input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(bias_ptr + v, mask=v < V, other=0.0)[None, :]
    tl.store(out_ptr + n[:, None].to(tl.int64) * V + v[None, :], acc, mask=(n < N)[:, None] & (v < V)[None, :])


def logits(hidden: torch.Tensor, projection: torch.Tensor, lookup: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """(N, V) float32 logits of (N, D) ``hidden`` through ``projection`` B (r, D) and ``lookup`` A (V, r)."""
    low = (hidden @ projection.detach().T).contiguous()  # (N, r)
    lookup = lookup.detach().float().contiguous()
    (n, rank), vocab = low.shape, lookup.shape[0]
    out = torch.empty(n, vocab, dtype=torch.float32, device=hidden.device)
    bias_arg = out if bias is None else bias.detach().float().contiguous()  # any pointer when there is no bias
    block_n = min(max(16, triton.next_power_of_2(n)), MAX_BLOCK_N)  # tl.dot takes 16 rows at least
    _low_rank_kernel[(triton.cdiv(vocab, BLOCK_V), triton.cdiv(n, block_n))](
        low, lookup, bias_arg, out, n, vocab, rank, R_PADDED=triton.cdiv(rank, BLOCK_R) * BLOCK_R,
        HAS_BIAS=bias is not None, BLOCK_N=block_n, BLOCK_V=BLOCK_V, BLOCK_R=BLOCK_R,
    )
    return out
