"""Without Triton a CUDA model keeps its torch reference path and says so once (issue 43.2)."""

from __future__ import annotations

import sys
import warnings

import torch

from harness.methods import triton_support


def test_without_triton_the_kernels_stand_aside_with_one_notice(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    triton_support.available.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert not triton_support.available()
            assert not triton_support.available()
        assert len(caught) == 1 and "torch reference path" in str(caught[0].message)
        assert "\n" not in str(caught[0].message)
    finally:
        triton_support.available.cache_clear()


def test_kernels_take_only_cuda_tensors():
    assert not triton_support.runs(torch.zeros(2), torch.zeros(2, dtype=torch.int32))
    assert not triton_support.runs(torch.zeros(2, device="meta"))
