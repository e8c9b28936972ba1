"""Whether the Triton kernels run: on CUDA tensors, in inference, when Triton is installed.

The GPU kernels (:mod:`harness.methods.gather_sum_triton`, :mod:`harness.methods.concept_lookup_triton`)
are an optional extra (``pip install 'embedding-harness[gpu]'``,
Triton 3.6.0). Callers ask :func:`runs` before importing one, so Triton is imported only where a
kernel will run; without it a CUDA model keeps its torch reference path, and says so once.
On a machine without a GPU the tests run the same kernels on CPU tensors through Triton's
interpreter (``TRITON_INTERPRET=1``, set by ``tests/conftest.py`` before Triton is imported).
"""

from __future__ import annotations

import functools
import warnings

import torch


@functools.cache
def available() -> bool:
    """Whether Triton imports; False with a one-line warning (once per process) when it does not."""
    try:
        import triton  # noqa: F401
    except ImportError:
        warnings.warn(
            "Triton is not installed: compressed heads and lookups on CUDA use their torch reference path "
            "(pip install 'embedding-harness[gpu]' for the GPU kernels)", stacklevel=3,
        )
        return False
    return True


def runs(*tensors: torch.Tensor) -> bool:
    """Whether a Triton kernel takes these tensors: all on CUDA, and Triton installed."""
    return all(t.is_cuda for t in tensors) and available()
