"""Fused output head for product-quantized tables (ASG, k-sub) on CUDA, in Triton.

The sum of :mod:`harness.methods.gather_sum` (the CPU kernel) and of its torch reference,
:meth:`harness.adapters.asg.ConceptLMHead.reference_sum`, which the tests check it against
(paper 000, Section 2.4)::

    logit[n, t] = sum_i LUT[i, codes[i, t], n],    LUT[i, j, n] = h_{n,i} . C_i[j]

in two steps, neither forming a (V, D) table nor an (N, V, m) intermediate:

1. :func:`lookup_table`: the (m, k, N) table of segment scores for all segments at once, one
   batched matmul (cuBLAS, float32; with a shared codebook one plain matmul), hidden states
   innermost: one gather of a code fetches its scores for every state of a tile from one cache
   line (an (m, N, k) table put each state's score in another line, and the batch-32 kernel ran
   at 0.26x the torch reference on an H100). At batch 1 on SmolLM2 (m = 48, k = 1,024) it is
   192 KiB: it stays in L2 while step 2 gathers from it.
2. :func:`gather_sum`: one program per tile of ``BLOCK_V`` tokens and ``BLOCK_N`` hidden states
   walks the m segments, ``BLOCK_S`` at a time; each segment's codes of the tile are one
   contiguous load (codes are segment-major, (m, V), in the dtype :mod:`harness.methods.index_maps`
   holds them in: uint8, or int32 widened from uint16), read once and used for every hidden state
   of the tile, which at batch <= ``BLOCK_N`` means every code is read once per call. A step keeps
   ``GATHERS`` independent gathers per token in flight (8 segments for a lone state: decoding),
   so the latency of one does not wait on the last. Sums accumulate in float32 registers; each
   logit is written once.

``lut_dtype`` float16 or bfloat16 stores step 1's table in half precision (half the bytes the
gathers touch; sums still in float32): an option the benchmark measures beside float32, never the
scored path. The tile sizes are a first choice, not tuned on a GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_BLOCK_N = 32
"""Hidden states per program at most: a tile's (BLOCK_N, BLOCK_V) float32 sums stay in registers, and
at batch 32 one program reads its tile's codes once for every state."""
BLOCK_V = 128
"""Tokens per program: 384 programs for SmolLM2's 49,152, 1,002 for a Llama-3 vocabulary."""
GATHERS = 8
"""Gathers in flight per token and step: BLOCK_N states x BLOCK_S segments (a lone state's step
reads 8 segments' codes at once, so its 8 gathers do not wait on one another)."""


def block_n(n: int) -> int:
    """Hidden states per program for a call on ``n``: n rounded up to a power of two, at most MAX_BLOCK_N."""
    return min(triton.next_power_of_2(n), MAX_BLOCK_N)


@triton.jit
def _gather_sum_kernel(
    lut_ptr, codes_ptr, out_ptr, N, V, K,
    M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_V: tl.constexpr,
):
    """out[n, t] = sum_i lut[i, codes[i, t], n] for one (BLOCK_N, BLOCK_V) tile of (N, V), BLOCK_S
    segments per step."""
    v = tl.program_id(0) * BLOCK_V + tl.arange(0, BLOCK_V)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    v_ok = v < V
    n_ok = n < N
    acc = tl.zeros((BLOCK_N, BLOCK_V), dtype=tl.float32)
    for start in range(0, M, BLOCK_S):
        segment = start + tl.arange(0, BLOCK_S)
        codes_ok = (segment < M)[:, None] & v_ok[None, :]
        code = tl.load(codes_ptr + segment[:, None].to(tl.int64) * V + v[None, :], mask=codes_ok, other=0)  # read once
        row = (segment[:, None].to(tl.int64) * K + code.to(tl.int64)) * N  # (BLOCK_S, BLOCK_V): a code's scores, N in a row
        score = tl.load(lut_ptr + row[None, :, :] + n[:, None, None], mask=n_ok[:, None, None] & codes_ok[None, :, :], other=0.0)
        acc += tl.sum(score.to(tl.float32), axis=1)
    tl.store(out_ptr + n[:, None].to(tl.int64) * V + v[None, :], acc, mask=n_ok[:, None] & v_ok[None, :])


def lookup_table(hidden: torch.Tensor, codebooks: torch.Tensor, m: int, shared: bool, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(N, D) hidden states -> (m, k, N) segment scores h_{n,i} . C_i[j], one batched matmul.

    ``codebooks``: (m*k, D/m), or (k, D/m) when ``shared``."""
    n, dim = hidden.shape
    segments = hidden.view(n, m, dim // m)  # (N, m, d)
    books = codebooks.detach().to(hidden.dtype)
    if shared:  # (N*m, d) x (d, k) -> (N, m, k) -> (m, k, N)
        table = (segments.reshape(n * m, -1) @ books.T).view(n, m, -1).permute(1, 2, 0)
    else:  # (m, k, d) x (m, d, N) -> (m, k, N)
        table = torch.bmm(books.view(m, -1, books.shape[1]), segments.permute(1, 2, 0))
    return table.to(dtype).contiguous()


def gather_sum(table: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """(m, k, N) segment scores and (m, V) codes -> (N, V) float32 logits, one kernel launch."""
    m, k, n = table.shape
    vocab = codes.shape[1]
    out = torch.empty(n, vocab, dtype=torch.float32, device=table.device)
    rows = block_n(n)
    grid = (triton.cdiv(vocab, BLOCK_V), triton.cdiv(n, rows))
    _gather_sum_kernel[grid](table, codes.contiguous(), out, n, vocab, k, M=m, BLOCK_N=rows,
                             BLOCK_S=max(1, GATHERS // rows), BLOCK_V=BLOCK_V)
    return out


def logits(hidden: torch.Tensor, codebooks: torch.Tensor, codes: torch.Tensor, shared: bool,
           lut_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The whole head: (N, D) float32 ``hidden`` -> (N, V) float32 logits (callers check
    :func:`harness.methods.triton_support.runs` first). ``codes``: (m, V), every value in [0, k)."""
    return gather_sum(lookup_table(hidden.contiguous(), codebooks, codes.shape[0], shared, lut_dtype), codes)
