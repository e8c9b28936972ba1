"""The fused gather-sum (harness.methods.gather_sum) against the reference embedding_bag path of ConceptLMHead.

Tolerance: both paths add the same m float32 scores per logit in a different order, so they agree to
rounding: |fast - reference| <= 1e-4 + 1e-5 |logit| (logits here are of order 10-100; measured
differences are about 3e-5).
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from harness.adapters.asg import ConceptEmbedding, ConceptLMHead
from harness.adapters.ksub import random_codes

from harness.methods import gather_sum as gs

TOL = {"rtol": 1e-5, "atol": 1e-4}


def _head(vocab: int, dim: int, k: int, m: int, shared: bool = False, bias: bool = False) -> ConceptLMHead:
    gen = torch.Generator().manual_seed(k + m)
    books = torch.randn(k if shared else m * k, dim // m, generator=gen)
    ids = torch.randint(0, k, (vocab, m), generator=gen)
    return ConceptLMHead(ConceptEmbedding(books, ids, k, shared), torch.randn(vocab, generator=gen) if bias else None)


def _paths(head: ConceptLMHead, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(fast, reference) logits for (N, D) hidden states: the head's inference forward (one kernel
    call: segment scores, then the gather-sum) and its embedding_bag path on torch's scores."""
    n = hidden.shape[0]
    assert gs.applies(hidden), "the CPU kernel did not build"
    with torch.no_grad():
        fast = head(hidden)
        reference = head.reference_sum(head.score_table(hidden, max(n, 2)), n)
    return fast, reference


@pytest.mark.parametrize("k, code_dtype", [(203, torch.uint8), (1024, torch.uint16), (70000, torch.int32)])
@pytest.mark.parametrize("n", [1, 3, 8, 17, 32])
def test_fast_path_equals_reference_for_every_code_dtype_and_batch(k, code_dtype, n):
    head = _head(vocab=3001, dim=96, k=k, m=12)
    assert head.codes.dtype == code_dtype and tuple(head.codes.shape) == (12, 3001)  # segment-major map
    fast, reference = _paths(head, torch.randn(n, 96))
    assert fast.shape == (n, 3001)
    torch.testing.assert_close(fast, reference, **TOL)


@pytest.mark.parametrize("lead", [(1, 1), (2, 5)])
def test_fast_path_equals_dense_logits_with_shared_codebook_and_bias(lead):
    head = _head(vocab=5000, dim=64, k=256, m=8, shared=True, bias=True)
    hidden = torch.randn(*lead, 64)
    with torch.no_grad():
        logits = head(hidden)
        dense = hidden @ head.concepts.dense().T + head.bias
    assert logits.shape == (*lead, 5000)
    torch.testing.assert_close(logits, dense, **TOL)


def test_ksub_head_uses_the_uint8_fast_path():
    """k-sub (paper 001, Algorithm 1): K=3 sub-tables of M = ceil(V^(1/3)) = 37 for SmolLM2's V."""
    codes = torch.from_numpy(random_codes(49152, 3, 37))
    head = ConceptLMHead(ConceptEmbedding(torch.randn(3 * 37, 192), codes, 37, shared=False))
    assert head.codes.dtype == torch.uint8
    for n in (1, 32):
        fast, reference = _paths(head, torch.randn(n, 576))
        torch.testing.assert_close(fast, reference, **TOL)


def test_training_forward_uses_the_differentiable_reference():
    head = _head(vocab=2000, dim=48, k=64, m=6)
    hidden = torch.randn(4, 48, requires_grad=True)
    head(hidden).square().sum().backward()
    grad_books, grad_hidden = head.concepts.codebooks.grad.clone(), hidden.grad.clone()
    head.concepts.codebooks.grad, hidden.grad = None, None
    (hidden @ head.concepts.dense().T).square().sum().backward()
    torch.testing.assert_close(grad_books, head.concepts.codebooks.grad, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(grad_hidden, hidden.grad, rtol=1e-4, atol=1e-3)


def test_head_off_cpu_takes_the_reference_path():
    """Tensors on another device (meta stands in for CUDA here) never reach the CPU kernel."""
    head = _head(vocab=300, dim=32, k=16, m=4).to("meta")
    assert not gs.applies(torch.empty(1, 32, device="meta"))
    with torch.no_grad():
        assert head(torch.empty(2, 3, 32, device="meta")).shape == (2, 3, 300)
        assert head(torch.empty(1, 32, device="meta")).shape == (1, 300)


def test_kernel_applies_to_float32_cpu_states_and_stored_code_dtypes_only():
    assert gs.applies(torch.randn(2, 8)) and not gs.applies(torch.randn(2, 8).double())
    books, hidden = torch.randn(24, 2), torch.randn(3, 8)
    with pytest.raises(ValueError, match="uint8, uint16 or int32"):
        gs.logits(hidden, books, torch.randint(0, 6, (4, 100)), shared=False)  # int64 ConceptIDs
    assert [gs.padded_width(n) for n in (1, 2, 8, 9, 32)] == [1, 8, 8, 16, 32]


@pytest.fixture
def torch_threads():
    """Set torch's thread count for one test (the kernel's pool follows it), restored afterwards."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


# m * V >= 2^20 gathered scores per hidden state: large enough that the kernel shares the work out;
# at k = 1024 a lone state's segment scores (m * k * D/m >= 2^18 multiply-adds) are shared out too
POOLED = {"vocab": 50000, "dim": 384, "m": 24}


@pytest.mark.parametrize("threads", [1, 2, 5])
@pytest.mark.parametrize("k, n", [(256, 1), (1024, 1), (1024, 20)])
def test_pooled_kernel_equals_reference_at_any_thread_count(torch_threads, threads, k, n):
    """More threads than cores (5 on 2) still sums every block exactly once."""
    torch_threads(threads)
    head = _head(k=k, **POOLED)
    assert POOLED["m"] * POOLED["vocab"] >= 2**20 and (k * POOLED["dim"] >= 2**18) == (k == 1024)
    fast, reference = _paths(head, torch.randn(n, POOLED["dim"]))
    torch.testing.assert_close(fast, reference, **TOL)


def test_concurrent_callers_each_get_their_own_logits(torch_threads):
    """ctypes releases the GIL: calls from several Python threads at once (one shares the pool,
    the others run alone) never mix their blocks."""
    torch_threads(2)
    head = _head(k=1024, **POOLED)
    hidden = torch.randn(12, 1, POOLED["dim"])
    with torch.no_grad():
        expected = [head.reference_sum(head.score_table(h, 2), 1) for h in hidden]
        with ThreadPoolExecutor(4) as pool:
            for _ in range(5):
                for got, want in zip(pool.map(head, hidden), expected):
                    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_forked_child_computes_without_the_parents_helpers(torch_threads):
    """A forked child (a data-loader worker) inherits the pool's state but none of its threads:
    its caller does every block itself instead of waiting for helpers that do not exist. Each
    block's sum runs in the same order on any thread, so the logits are bit-identical; the child
    compares them with NumPy (torch's OpenMP ops hang in a child forked after they ran)."""
    torch_threads(2)
    head = _head(k=1024, **POOLED)
    hidden = torch.randn(1, POOLED["dim"])
    with torch.no_grad():
        expected = head(hidden)  # the parent's helpers are running now
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 iff its logits equal the parent's
            os._exit(0 if np.array_equal(head(hidden).numpy(), expected.numpy()) else 1)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung in the kernel")
    assert os.waitstatus_to_exitcode(done[1]) == 0
