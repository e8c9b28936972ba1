"""The low-rank head's product on the fused heads' thread pool.

logits = (h B^T) A^T (+ bias) for a few hidden states (a decoding step, a short batch) is a small
matrix product: under torch's OpenMP pool its end barrier waits a whole scheduler slice for a thread
whose core another process holds (on 2 cores beside one busy process the head kept 0.23-0.48 of its
quiet speed-up over the dense head). ``low_rank_logits`` in ``gather_sum.cpp`` runs it on the
kernel's own work-sharing pool instead, where a taken core costs at most the caller's own speed.
Larger calls (:data:`MAX_STATES`) keep torch's matrix products: there the threads' start is paid
for, and a BLAS GEMM reuses each factor far better than the kernel's tiles.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from harness.methods import gather_sum

MAX_STATES = 64
"""Hidden states per call up to which the kernel scores them (a decoding step, a short batch)."""


@functools.cache
def _function():
    fn = gather_sum.library().low_rank_logits
    fn.argtypes = [*[ctypes.c_void_p] * 7, *[ctypes.c_int64] * 4, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def applies(hidden: torch.Tensor) -> bool:
    """Whether the kernel scores these (N, D) hidden states: few enough, float32 on CPU, kernel built."""
    return hidden.shape[0] <= MAX_STATES and gather_sum.applies(hidden)


def logits(hidden: torch.Tensor, projection: torch.Tensor, lookup: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """(N, V) logits of (N, D) ``hidden`` through ``projection`` B (r, D) and ``lookup`` A (V, r), plus
    ``bias`` (V) when given; callers check :func:`applies` first."""
    hidden = hidden.contiguous()
    projection, lookup = projection.detach().float().contiguous(), lookup.detach().float().contiguous()
    bias = None if bias is None else bias.detach().float().contiguous()
    (n, dim), (vocab, rank) = hidden.shape, lookup.shape
    low = torch.empty(n * rank, dtype=torch.float32)
    transposed = torch.empty(rank * -(-n // 16) * 16 if n > 1 else 0, dtype=torch.float32)  # (r, N rounded up to 16)
    out = torch.empty(n, vocab, dtype=torch.float32)
    status = _function()(hidden.data_ptr(), projection.data_ptr(), lookup.data_ptr(), 0 if bias is None else bias.data_ptr(),
                         low.data_ptr(), transposed.data_ptr(), out.data_ptr(), n, dim, rank, vocab, torch.get_num_threads())
    if status:
        raise RuntimeError(f"low_rank_logits rejected {n} hidden states of {dim} for a ({vocab}, {rank}) lookup")
    return out
