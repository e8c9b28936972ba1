"""Fused output head for product-quantized tables (ASG, k-sub) on CUDA, in Triton.

The sum of :mod:`harness.methods.gather_sum` (the CPU kernel) and of its torch reference,
:meth:`harness.adapters.asg.ConceptLMHead.reference_sum`, which the tests check it against
(paper 000, Section 2.4)::

    logit[n, t] = sum_i LUT[i, n, codes[i, t]],    LUT[i, n, j] = h_{n,i} . C_i[j]

in two steps, neither forming a (V, D) table nor an (N, V, m) intermediate:

1. :func:`lookup_table`: the (m, N, k) table of segment scores for all segments at once, one
   batched matmul (cuBLAS, float32; with a shared codebook one plain matmul). At batch 1 on SmolLM2
   (m = 48, k = 1,024) it is 192 KiB: it stays in L2 while step 2 gathers from it.
2. :func:`gather_sum`: one program per tile of ``BLOCK_V`` tokens and ``BLOCK_N`` hidden states
   walks the m segments; each segment's codes of the tile are one contiguous load (codes are
   segment-major, (m, V), in the dtype :mod:`harness.methods.index_maps` holds them in: uint8, or
   int32 widened from uint16), read once and used for every hidden state of the tile, which at
   batch <= ``BLOCK_N`` means every code is read once per call. Sums accumulate in float32
   registers; each logit is written once.

``lut_dtype`` float16 or bfloat16 stores step 1's table in half precision (half the bytes the
gathers touch; sums still in float32): an option the benchmark measures beside float32, never the
scored path. The tile sizes are a first choice, not tuned on a GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_BLOCK_N = 16
"""Hidden states per program at most: a tile's (BLOCK_N, BLOCK_V) float32 sums stay in registers."""


def block_n(n: int) -> int:
    """Hidden states per program for a call on ``n``: n rounded up to a power of two, at most MAX_BLOCK_N."""
    return min(triton.next_power_of_2(n), MAX_BLOCK_N)


def block_v(rows: int) -> int:
    """Tokens per program: 256 for one hidden state, fewer as the tile gets taller (same register budget)."""
    return max(64, 256 // rows)


@triton.jit
def _gather_sum_kernel(
    lut_ptr, codes_ptr, out_ptr, N, V, K,
    M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr,
):
    """out[n, t] = sum_i lut[i, n, codes[i, t]] for one (BLOCK_N, BLOCK_V) tile of (N, V)."""
    v = tl.program_id(0) * BLOCK_V + tl.arange(0, BLOCK_V)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    v_ok = v < V
    tile_ok = (n < N)[:, None] & v_ok[None, :]
    rows = lut_ptr + n[:, None].to(tl.int64) * K  # (BLOCK_N, 1) each state's row of segment 0's table
    code_ptrs = codes_ptr + v  # (BLOCK_V,) the tile's codes of segment 0
    acc = tl.zeros((BLOCK_N, BLOCK_V), dtype=tl.float32)
    for _ in range(M):
        code = tl.load(code_ptrs, mask=v_ok, other=0).to(tl.int64)  # read once, used by every state of the tile
        score = tl.load(rows + code[None, :], mask=tile_ok, other=0.0)  # (BLOCK_N, BLOCK_V) gathered
        acc += score.to(tl.float32)
        rows += N * K  # the next segment: its table and its codes
        code_ptrs += V
    tl.store(out_ptr + n[:, None].to(tl.int64) * V + v[None, :], acc, mask=tile_ok)


def lookup_table(hidden: torch.Tensor, codebooks: torch.Tensor, m: int, shared: bool, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(N, D) hidden states -> (m, N, k) segment scores h_{n,i} . C_i[j], one batched matmul.

    ``codebooks``: (m*k, D/m), or (k, D/m) when ``shared``."""
    n, dim = hidden.shape
    segments = hidden.view(n, m, dim // m)  # (N, m, d)
    books = codebooks.detach().to(hidden.dtype)
    if shared:  # (N*m, d) x (d, k) -> (N, m, k)
        table = (segments.reshape(n * m, -1) @ books.T).view(n, m, -1).transpose(0, 1)
    else:  # (m, N, d) x (m, d, k) -> (m, N, k)
        table = torch.bmm(segments.transpose(0, 1), books.view(m, -1, books.shape[1]).transpose(1, 2))
    return table.to(dtype).contiguous()


def gather_sum(table: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """(m, N, k) segment scores and (m, V) codes -> (N, V) float32 logits, one kernel launch."""
    m, n, k = table.shape
    vocab = codes.shape[1]
    out = torch.empty(n, vocab, dtype=torch.float32, device=table.device)
    rows = block_n(n)
    tokens = block_v(rows)
    grid = (triton.cdiv(vocab, tokens), triton.cdiv(n, rows))
    _gather_sum_kernel[grid](table, codes.contiguous(), out, n, vocab, k, M=m, BLOCK_N=rows, BLOCK_V=tokens)
    return out


def logits(hidden: torch.Tensor, codebooks: torch.Tensor, codes: torch.Tensor, shared: bool,
           lut_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The whole head: (N, D) float32 ``hidden`` -> (N, V) float32 logits (callers check
    :func:`harness.methods.triton_support.runs` first). ``codes``: (m, V), every value in [0, k)."""
    return gather_sum(lookup_table(hidden.contiguous(), codebooks, codes.shape[0], shared, lut_dtype), codes)
