"""Fused gather-sum for product-quantized output heads (ASG, k-sub) on CPU.

A head whose table row t is the concatenation of m sub-vectors ``C_i[codes[i, t]]`` scores a hidden
state h as ``logit_t = sum_i S[i, codes[i, t]]`` with segment scores ``S[i, j] = h_i . C_i[j]``
(paper 000, Section 2.4). :func:`gather_sum` adds, for every token, the m scores its codes select,
in one pass over the (m, V) code map: no V x D table and no (N, V, m) intermediate. It reads the
codes in their stored dtype (uint8 for k <= 256, uint16 up to 65,536), segment-major so that one
segment's codes stream in order. The scores come as a concept-major table (m*k, N), one column per
hidden state, so that one code selects N contiguous floats; the kernel takes 16 columns at a time
over blocks of 2,048 tokens whose partial sums stay in L2.

The kernel (``gather_sum.cpp``) is compiled on first use with the system C++ compiler into
``cache_dir()/kernels`` (about two seconds) and called through ctypes, which releases the GIL. It
runs on up to ``torch.get_num_threads()`` threads of its own work-sharing pool rather than OpenMP:
helpers sleep between calls and claim blocks from one counter, and the caller never waits for a
helper the scheduler has not run, so a core taken by another process (a sweep's second job, a
browser) costs at most the caller's own single-thread speed instead of a scheduler slice per call.
Without a compiler it is unavailable and :func:`gather_sum` returns None; callers then use their
reference path.
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

_SOURCE = Path(__file__).with_name("gather_sum.cpp")
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
    lib.gather_sum.argtypes = [
        ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, *[ctypes.c_int64] * 4,
        ctypes.c_int,
    ]
    lib.gather_sum.restype = ctypes.c_int
    lib.one_state_logits.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
        *[ctypes.c_int64] * 4, ctypes.c_int,
    ]
    lib.one_state_logits.restype = ctypes.c_int
    return lib


def applies(hidden: torch.Tensor) -> bool:
    """Whether the kernel can score these hidden states: float32 on CPU, and the kernel built."""
    return hidden.device.type == "cpu" and hidden.dtype == torch.float32 and library() is not None


def gather_sum(table: torch.Tensor, codes: torch.Tensor, n: int) -> torch.Tensor | None:
    """``logits[j, t] = sum_i table[i*k + codes[i, t], j]`` for j < n, or None where the kernel does not apply.

    ``table``: (m*k, padded_width(n)) float32 segment scores on CPU, one column per hidden state
    (columns from n on are padding and ignored); ``codes``: (m, V) uint8, uint16 or int32 on CPU,
    every value in [0, k). Returns (n, V) float32. None for CUDA tensors, other dtypes or widths,
    or when the kernel could not be built: the caller then computes the same sum its own way.
    """
    if table.device.type != "cpu" or codes.device.type != "cpu" or table.dtype != torch.float32:
        return None
    if codes.dtype not in _CODE_BYTES or table.shape[1] != padded_width(n):
        return None
    lib = library()
    if lib is None:
        return None
    m, vocab = codes.shape
    table, codes = table.contiguous(), codes.contiguous()
    out = torch.empty(n, vocab, dtype=torch.float32)
    status = lib.gather_sum(
        table.data_ptr(), table.shape[1], codes.data_ptr(), _CODE_BYTES[codes.dtype], out.data_ptr(),
        n, m, table.shape[0] // m, vocab, torch.get_num_threads(),
    )
    if status:
        raise RuntimeError(f"gather_sum kernel rejected table {tuple(table.shape)} for n={n}")
    return out


def one_state_logits(hidden: torch.Tensor, codebooks: torch.Tensor, codes: torch.Tensor, shared: bool) -> torch.Tensor:
    """The whole head for one hidden state in one kernel call: segment scores, then the gather-sum.

    ``hidden``: (D,) float32; ``codebooks``: (m*k, D/m), or (k, D/m) when ``shared``; ``codes``:
    (m, V) as for :func:`gather_sum`. Returns (1, V). Callers check :func:`applies` first. One call
    instead of a matrix product plus the kernel: torch's matrix product would start an OpenMP
    region, which on a busy machine can wait a whole scheduler slice for its second thread.
    """
    m, vocab = codes.shape
    d = hidden.shape[0] // m
    k = codebooks.shape[0] // (1 if shared else m)
    hidden, codebooks, codes = hidden.contiguous(), codebooks.detach().float().contiguous(), codes.contiguous()
    scores = torch.empty(m * k, dtype=torch.float32)
    out = torch.empty(1, vocab, dtype=torch.float32)
    status = library().one_state_logits(
        hidden.data_ptr(), codebooks.data_ptr(), int(shared), scores.data_ptr(), codes.data_ptr(),
        _CODE_BYTES[codes.dtype], out.data_ptr(), m, k, d, vocab, torch.get_num_threads(),
    )
    if status:
        raise RuntimeError(f"one_state_logits rejected codes of dtype {codes.dtype}")
    return out
