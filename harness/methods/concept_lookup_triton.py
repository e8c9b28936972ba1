"""Input lookup of product-quantized tables (ASG, k-sub) on CUDA, in Triton: one launch per call.

Token t's embedding is the concatenation of its m Concept Vectors (paper 000 Section 2.3, Eq. 1)::

    out[t, i*d:(i+1)*d] = codebooks[i*k + concept_ids[ids[t], i]]     (row s_i of codebook i; shared: row s_i)

The torch reference (:meth:`harness.adapters.asg.ConceptEmbedding.forward` in training, which the
tests check this against bit for bit: it only copies) takes four launches: the map's gather, its
widening, the offset add and ``F.embedding``. Here one program copies a (``BLOCK_T`` tokens,
``BLOCK_C`` columns) tile, reading each token's ConceptIDs from the (V, m) map as held on the
device (:mod:`harness.methods.index_maps`). Ids are read as torch's indexing reads them: an id in
[-V, 0) counts from the end. Ids outside [-V, V) never reach the kernel: the caller checks them first
(:func:`harness.methods.index_maps.check_ids`) and raises torch's ``IndexError``, as the CPU does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_T = 16   # tokens per program
BLOCK_C = 128  # embedding columns per program


@triton.jit
def _lookup_kernel(ids_ptr, map_ptr, books_ptr, out_ptr, T, V, M, D, d, step,
                   BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
    """One (BLOCK_T, BLOCK_C) tile of the (T, D) output; ``step`` = k (0 for a shared codebook)."""
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    ids = tl.load(ids_ptr + t, mask=t < T, other=0).to(tl.int64)
    ids = tl.where(ids < 0, ids + V, ids)  # torch's indexing: -1 is the last row
    ok = ((t < T) & (ids >= 0) & (ids < V))[:, None] & (c < D)[None, :]  # the caller checked the ids: a mask, not a test
    segment = c // d  # (BLOCK_C,) codebook of each column
    concept = tl.load(map_ptr + ids[:, None] * M + segment[None, :], mask=ok, other=0).to(tl.int64)
    row = concept + (segment * step)[None, :]
    values = tl.load(books_ptr + row * d + (c % d)[None, :], mask=ok, other=0.0)
    tl.store(out_ptr + t[:, None].to(tl.int64) * D + c[None, :], values, mask=(t < T)[:, None] & (c < D)[None, :])


def lookup(input_ids: torch.Tensor, codebooks: torch.Tensor, concept_ids: torch.Tensor, k: int, shared: bool) -> torch.Tensor:
    """(...) token ids -> (..., m * d) embeddings in the codebooks' dtype (callers check
    :func:`harness.methods.triton_support.runs` first). ``concept_ids``: (V, m); ``codebooks``:
    (m*k, d), or (k, d) when ``shared``."""
    vocab, m = concept_ids.shape
    d = codebooks.shape[1]
    flat = input_ids.reshape(-1).contiguous()
    out = torch.empty(flat.numel(), m * d, dtype=codebooks.dtype, device=codebooks.device)
    grid = (triton.cdiv(flat.numel(), BLOCK_T), triton.cdiv(m * d, BLOCK_C))
    _lookup_kernel[grid](flat, concept_ids.contiguous(), codebooks.detach().contiguous(), out, flat.numel(), vocab, m,
                         m * d, d, 0 if shared else k, BLOCK_T=BLOCK_T, BLOCK_C=BLOCK_C)
    return out.view(*input_ids.shape, m * d)
