"""The fused gather-sum (harness.methods.gather_sum) against the reference embedding_bag path of ConceptLMHead.

Tolerance: both paths add the same m float32 scores per logit in a different order, so they agree to
rounding: |fast - reference| <= 1e-4 + 1e-5 |logit| (logits here are of order 10-100; measured
differences are about 3e-5).
"""

from __future__ import annotations

import sys
from pathlib import Path

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
    """(fast, reference) logits for (N, D) hidden states: the head's inference forward (the kernel:
    one call at N = 1, scores then gather-sum above) and its embedding_bag path."""
    n = hidden.shape[0]
    assert gs.applies(hidden), "the CPU kernel did not build"
    with torch.no_grad():
        fast = head(hidden)
        reference = head.reference_sum(head.score_table(hidden, max(n, 2)), n)
    return fast, reference


@pytest.mark.parametrize("k, code_dtype", [(200, torch.uint8), (1024, torch.uint16), (70000, torch.int32)])
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


def test_gather_sum_alone_equals_reference():
    head = _head(vocab=3001, dim=96, k=1024, m=12)
    hidden = torch.randn(9, 96)
    with torch.no_grad():
        fast = gs.gather_sum(head.score_table(hidden, gs.padded_width(9)), head.codes, 9)
        torch.testing.assert_close(fast, head.reference_sum(head.score_table(hidden, 9), 9), **TOL)


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


def test_kernel_declines_what_it_does_not_handle():
    table, codes = torch.randn(24, 8), torch.randint(0, 4, (6, 100), dtype=torch.int32)
    assert gs.gather_sum(table.to("meta"), codes, 8) is None  # not CPU: the caller's reference path
    assert gs.gather_sum(table.double(), codes, 8) is None
    assert gs.gather_sum(table[:, :6], codes, 6) is None  # width not padded to 8
    assert gs.gather_sum(table, codes.long(), 8) is None
    assert [gs.padded_width(n) for n in (1, 2, 8, 9, 32)] == [1, 8, 8, 16, 32]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_kernel_shares_torchs_openmp_runtime():
    assert gs.library() is not None
    mapped = {Path(line.split()[-1]) for line in Path("/proc/self/maps").read_text().splitlines() if "libgomp" in line}
    torch_gomp = [p for p in mapped if p.name == "libgomp.so.1"]
    assert len(torch_gomp) == 1, mapped  # one GNU OpenMP for torch and the kernel (faiss ships its own, renamed)
