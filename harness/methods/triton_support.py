"""Whether the Triton kernels run: on CUDA tensors, in inference, where Triton builds them.

The GPU kernels (:mod:`harness.methods.gather_sum_triton`, :mod:`harness.methods.concept_lookup_triton`)
are an optional extra (``pip install 'embedding-harness[gpu]'``, Triton 3.6.0). Callers ask
:func:`runs` before importing one, so Triton is imported only where a kernel will run. Importing is
not enough: on an older GPU, or with a ``ptxas`` that does not match the driver, Triton imports and
then fails to build a kernel. :func:`available` therefore builds and runs both kernels once per
process and device type, at a tiny shape, and checks them against their torch references; and
:func:`attempt` runs each later launch so that a kernel that fails to build (a specialization the
probe did not meet) stands aside for the rest of the process. Either way a CUDA model keeps its
torch reference path, and says so in one line, once.

On a machine without a GPU the tests run the same kernels on CPU tensors through Triton's
interpreter (``TRITON_INTERPRET=1``, set by ``tests/conftest.py`` before Triton is imported).
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable, TypeVar

import torch

T = TypeVar("T")
FALLBACK = "compressed heads and lookups on CUDA use their torch reference path"
_failed: dict[str, str] = {}  # kernel name -> the one line its build failure gave


def _notice(message: str) -> None:
    warnings.warn(message, stacklevel=4)


def first_line(err: BaseException) -> str:
    """An error as one short line: its type and the first non-empty line of its message."""
    text = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    return f"{type(err).__name__}: {text}"[:200]


@functools.cache
def available(device_type: str = "cuda") -> bool:
    """Whether Triton imports and its kernels build and run on ``device_type`` (``"cpu"`` only
    under the interpreter); False with a one-line warning, once per process, when they do not."""
    try:
        import triton  # noqa: F401
    except ImportError:
        _notice(f"Triton is not installed: {FALLBACK} (pip install 'embedding-harness[gpu]' for the GPU kernels)")
        return False
    try:
        _probe(device_type)
    except Exception as err:  # noqa: BLE001  (whatever the build raises: a ptxas error, an unsupported GPU)
        _notice(f"Triton cannot build its kernels here ({first_line(err)}): {FALLBACK}")
        return False
    return True


def _probe(device_type: str) -> None:
    """Both kernels on a 5-token, 2-segment table, compared with their torch references."""
    from harness.methods import concept_lookup_triton, gather_sum_triton

    gen = torch.Generator().manual_seed(0)
    books, codes = torch.randn(4, 2, generator=gen), torch.randint(0, 2, (2, 5), generator=gen, dtype=torch.int32)
    books, codes, hidden = books.to(device_type), codes.to(device_type), torch.randn(1, 4, generator=gen).to(device_type)
    rows = codes.long() + torch.tensor([[0], [2]], device=device_type)  # (m, V) rows of the stacked codebooks
    want = (hidden.view(2, 2) @ books.T).gather(1, rows).sum(0)  # segment i's scores h_i . C[r], summed over i
    got = gather_sum_triton.logits(hidden, books, codes, shared=False)[0]
    looked = concept_lookup_triton.lookup(torch.arange(5, device=device_type), books, codes.T.contiguous(), 2, shared=False)
    if not torch.allclose(got, want, atol=1e-5) or not torch.equal(looked, books[rows.T].flatten(1)):
        raise RuntimeError("a probe kernel built but computed a wrong result")


def attempt(kernel: str, launch: Callable[[], T]) -> T | None:
    """``launch()``, or None when ``kernel`` failed to build in this process (in this call or an earlier one): the
    caller then takes its torch path. The first failure of each kernel gives one line of warning
    and stays in :func:`failures`. Only the launch may run inside: a check that must raise (an id
    outside the vocabulary) belongs before it."""
    if kernel in _failed:
        return None
    try:
        return launch()
    except Exception as err:  # noqa: BLE001  (a build failure surfaces as whatever the compiler raised)
        _failed[kernel] = first_line(err)
        _notice(f"Triton kernel {kernel} failed to build ({_failed[kernel]}): {FALLBACK}")
        return None


def failures() -> dict[str, str]:
    """The kernels that failed to build in this process, each with its one-line error."""
    return dict(_failed)


def runs(*tensors: torch.Tensor) -> bool:
    """Whether a Triton kernel takes these tensors: all on CUDA, and the kernels build there."""
    return all(t.is_cuda for t in tensors) and available("cuda")
