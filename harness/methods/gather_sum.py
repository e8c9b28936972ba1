"""Fused output head for product-quantized tables (ASG, k-sub) on CPU.

A head whose table row t is the concatenation of m sub-vectors ``C_i[codes[i, t]]`` scores a hidden
state h as ``logit_t = sum_i S[i, codes[i, t]]`` with segment scores ``S[i, j] = h_i . C_i[j]``
(paper 000, Section 2.4). :func:`logits` computes the segment scores, then adds, for every token,
the m scores its codes select, in one pass over the (m, V) code map: no V x D table and no
(N, V, m) intermediate. It reads the codes in their stored dtype (uint8 for k <= 256, uint16 up
to 65,536), segment-major so that one segment's codes stream in order. The scores form a
concept-major table (m*k, N), one column per hidden state, so that one code selects N contiguous
floats; the gather-sum takes 16 columns at a time over blocks of 2,048 tokens whose partial sums
stay in L2.

The kernel (``gather_sum.cpp``) is compiled on first use with the system C++ compiler into
``cache_dir()/kernels`` (about two seconds) and called through ctypes, which releases the GIL. It
runs on up to ``torch.get_num_threads()`` threads of its own work-sharing pool rather than OpenMP:
helpers sleep between calls and claim blocks from one counter, and the caller never waits for a
helper the scheduler has not run, so a core taken by another process (a sweep's second job, a
browser) costs at most the caller's own single-thread speed instead of a scheduler slice per call
(and a forked child, which has none of the helpers, computes alone). Without a compiler
:func:`applies` is False and callers use their reference path.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import torch

from harness.sources.models import cache_dir

SCORING_FILES = ("gather_sum.cpp",)  # what the kernel computes decides scores: the code fingerprint hashes it
_SOURCE = Path(__file__).with_name(SCORING_FILES[0])
_CODE_BYTES = {torch.uint8: 1, torch.uint16: 2, torch.int32: 4}


def padded_width(n: int) -> int:
    """Columns of the score table the kernel reads for ``n`` hidden states: 1, or n rounded up to 8."""
    return 1 if n == 1 else -(-n // 8) * 8


def _flags() -> list[str]:
    flags = ["-O3", "-std=c++20", "-shared", "-fPIC", "-pthread"]  # C++20: std::atomic::wait (a futex)
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        flags += ["-mavx2", "-mfma"]
    return flags


def _compile(compiler: str, flags: list[str], target: Path) -> None:
    """Build into a temporary file, then rename: concurrent builds end with one complete library."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=target.name, suffix=".partial", dir=target.parent)
    os.close(fd)
    try:
        subprocess.run([compiler, *flags, str(_SOURCE), "-o", partial], check=True, capture_output=True, text=True)
        os.replace(partial, target)
    finally:
        Path(partial).unlink(missing_ok=True)


@functools.cache
def library() -> ctypes.CDLL | None:
    """The compiled kernel, built once per machine and flag set; None (with a warning) if it cannot be."""
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        warnings.warn("no C++ compiler found: product-quantized heads use their reference path on CPU", stacklevel=2)
        return None
    flags = _flags()
    digest = hashlib.sha256(_SOURCE.read_bytes() + " ".join(flags).encode()).hexdigest()[:16]
    target = cache_dir() / "kernels" / f"gather_sum-{digest}.so"
    try:
        if not target.exists():
            _compile(compiler, flags, target)
        lib = ctypes.CDLL(str(target))
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", "") or str(err)
        warnings.warn(f"gather_sum kernel unavailable ({detail.strip()[:300]}): using the reference path", stacklevel=2)
        return None
    lib.logits.argtypes = [
        *[ctypes.c_void_p] * 2, ctypes.c_int, *[ctypes.c_void_p] * 3, ctypes.c_int, ctypes.c_void_p,
        *[ctypes.c_int64] * 5, ctypes.c_int,
    ]
    lib.logits.restype = ctypes.c_int
    return lib


def applies(hidden: torch.Tensor) -> bool:
    """Whether the kernel can score these hidden states: float32 on CPU, and the kernel built."""
    return hidden.device.type == "cpu" and hidden.dtype == torch.float32 and library() is not None


def logits(hidden: torch.Tensor, codebooks: torch.Tensor, codes: torch.Tensor, shared: bool) -> torch.Tensor:
    """The whole head in one kernel call: segment scores, then the gather-sum (Section 2.4).

    ``hidden``: (N, D) float32 on CPU (callers check :func:`applies` first); ``codebooks``:
    (m*k, D/m), or (k, D/m) when ``shared``; ``codes``: (m, V) uint8, uint16 or int32, every value
    in [0, k). Returns (N, V) float32. No torch operation runs inside: a torch matrix product for
    the scores would start an OpenMP region, which on a busy machine waits a whole scheduler slice
    for a thread whose core another process holds.
    """
    if codes.dtype not in _CODE_BYTES:
        raise ValueError(f"ConceptIDs of dtype {codes.dtype}: the kernel reads uint8, uint16 or int32")
    (n, dim), (m, vocab) = hidden.shape, codes.shape
    k = codebooks.shape[0] // (1 if shared else m)
    hidden, codebooks, codes = hidden.contiguous(), codebooks.detach().float().contiguous(), codes.contiguous()
    width = padded_width(n)
    scores = torch.empty(m * k * width, dtype=torch.float32)  # (m*k, width) segment scores
    transposed = torch.empty(dim * width if n > 1 else 0, dtype=torch.float32)  # (D, width) hidden states
    out = torch.empty(n, vocab, dtype=torch.float32)
    status = library().logits(
        hidden.data_ptr(), codebooks.data_ptr(), int(shared), scores.data_ptr(), transposed.data_ptr(),
        codes.data_ptr(), _CODE_BYTES[codes.dtype], out.data_ptr(), n, m, k, dim // m, vocab, torch.get_num_threads(),
    )
    if status:
        raise RuntimeError(f"gather_sum kernel rejected {n} hidden states of {dim} for codes {tuple(codes.shape)}")
    return out
