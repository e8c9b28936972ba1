"""A Triton path that cannot crash a run: without Triton, or where its kernels
do not build, a CUDA model keeps its torch reference path and says so once; an id outside the
vocabulary raises on CUDA the IndexError it raises on the CPU.

Without a GPU the kernels run through Triton's interpreter (conftest.py). A kernel that does not
build on a machine (an older GPU, a ptxas that does not match the driver) cannot be produced here, so
the tests make the kernel's launch, the step where Triton builds it, raise the error ptxas gives."""

from __future__ import annotations

import sys
import warnings

import pytest
import torch

from harness.methods import index_maps, triton_support

PTXAS = "ptxas fatal   : Value 'sm_90a' is not defined for option 'gpu-name'"


@pytest.fixture
def fresh(monkeypatch):
    """Triton's state for one test: no cached probe, no kernel marked as failed."""
    triton_support.available.cache_clear()
    monkeypatch.setattr(triton_support, "_failed", {})
    yield
    triton_support.available.cache_clear()


@pytest.fixture
def unbuildable(monkeypatch):
    """The gather-sum kernel's launch raises what Triton raises when ptxas rejects it."""
    triton = pytest.importorskip("triton", reason="the gpu extra brings Triton")
    from harness.methods import gather_sum_triton

    def fails(*args, **kwargs):
        raise triton.runtime.errors.PTXASError(PTXAS)

    monkeypatch.setattr(gather_sum_triton._gather_sum_kernel, "run", fails)


def _notices(caught) -> list[str]:
    return [str(w.message) for w in caught]


def test_without_triton_the_kernels_stand_aside_with_one_notice(monkeypatch, fresh):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not triton_support.available()
        assert not triton_support.available()
    assert len(caught) == 1 and "torch reference path" in _notices(caught)[0]
    assert "\n" not in _notices(caught)[0]


def test_kernels_take_only_cuda_tensors():
    assert not triton_support.runs(torch.zeros(2), torch.zeros(2, dtype=torch.int32))
    assert not triton_support.runs(torch.zeros(2, device="meta"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter runs where torch sees no GPU")
def test_available_builds_and_checks_both_kernels(fresh):
    pytest.importorskip("triton", reason="the gpu extra brings Triton")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert triton_support.available("cpu")
    assert caught == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter runs where torch sees no GPU")
def test_a_kernel_that_does_not_build_makes_triton_unavailable_with_one_notice(fresh, unbuildable):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not triton_support.available("cpu")
        assert not triton_support.available("cpu")
    assert len(caught) == 1
    notice = _notices(caught)[0]
    assert "PTXASError" in notice and "sm_90a" in notice and "torch reference path" in notice and "\n" not in notice


def _head(vocab: int = 300, m: int = 6, k: int = 40, d: int = 4):
    from harness.adapters.asg import ConceptEmbedding, ConceptLMHead

    gen = torch.Generator().manual_seed(0)
    concepts = ConceptEmbedding(torch.randn(m * k, d, generator=gen), torch.randint(0, k, (vocab, m), generator=gen), k, False)
    return ConceptLMHead(concepts, torch.randn(vocab, generator=gen))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter runs where torch sees no GPU")
def test_head_falls_back_to_its_reference_when_its_kernel_does_not_build(monkeypatch, fresh, unbuildable):
    """The head's CUDA call (:meth:`ConceptLMHead.cuda_logits`) on CPU tensors, which the interpreter
    runs: routing is told that these tensors take the Triton path, as CUDA tensors would. A build
    failure gives the reference's logits, one notice for the whole process, and a path that says so;
    and the kernel is not tried again."""
    monkeypatch.setattr(triton_support, "runs", lambda *tensors: True)
    head = _head()
    hidden = torch.randn(3, 24, generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = head.reference(hidden) + head.bias
        for _ in range(3):
            logits, path = head.cuda_logits(hidden)
            assert torch.equal(logits, expected)
            assert path == "torch reference (a Triton kernel failed to build)"
    assert len(caught) == 1 and "gather_sum" in _notices(caught)[0] and "PTXASError" in _notices(caught)[0]
    assert list(triton_support.failures()) == ["gather_sum"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter runs where torch sees no GPU")
def test_head_takes_the_kernels_where_they_build(monkeypatch, fresh):
    pytest.importorskip("triton", reason="the gpu extra brings Triton")
    monkeypatch.setattr(triton_support, "runs", lambda *tensors: True)
    head = _head()
    hidden = torch.randn(3, 24, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits, path = head.cuda_logits(hidden)
        torch.testing.assert_close(logits, head.reference(hidden) + head.bias, rtol=1e-5, atol=1e-5)
    assert path == "Triton kernels" and triton_support.failures() == {}


@pytest.mark.parametrize("ids", [[1, 7, 9], [1, -7, 8, -9], [[0, 2], [5, 1]], [-6]])
def test_ids_outside_the_vocabulary_raise_what_the_cpu_raises(ids):
    """:func:`check_ids` (every CUDA lookup calls it first) gives torch's CPU IndexError, word for
    word, naming the first id outside [-V, V)."""
    table = torch.zeros(5, 3, dtype=torch.uint16)
    ids = torch.tensor(ids)
    with pytest.raises(IndexError) as cpu:
        table[ids]
    with pytest.raises(IndexError) as checked:
        index_maps.check_ids(ids, 5)
    assert str(checked.value) == str(cpu.value)


@pytest.mark.parametrize("ids", [[0, 4, -1, -5], [], [[3]]])
def test_ids_inside_the_vocabulary_pass(ids):
    index_maps.check_ids(torch.tensor(ids, dtype=torch.long), 5)  # negative ids count from the end, as torch indexes


def test_a_call_off_cuda_is_never_captured():
    """:class:`GraphedCalls` captures only CUDA tensors: a CPU call runs eagerly, holds no graph and
    warns nothing, however often its shape repeats. (A capture that fails on a GPU, its one notice and
    the generator left usable: tests/test_gpu.py.)"""
    from harness.methods.cuda_graphs import GraphedCalls

    graphs, x = GraphedCalls(), torch.randn(2, 3)
    call = lambda t: (t * 2, "eager kernels")  # noqa: E731
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [graphs(call, x) for _ in range(3)]
    assert all(torch.equal(out, x * 2) and path == "eager kernels" for out, path in results)
    assert graphs.failed is None and graphs.graphs == {} and graphs.held_bytes() == 0 and not caught
