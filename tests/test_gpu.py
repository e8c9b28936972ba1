"""The gpu tier's end-to-end checks (``pytest -m gpu``; skipped where torch sees no CUDA device).

The rest of the tier sits beside the CPU tests it mirrors: every adapter's fit, inference, backward
and one recovery step on CUDA (test_conformance.py), the Triton kernels against their references
(test_triton_kernels.py). Here: the README's main job and the benchmark with ``--device cuda``, and
the compressed modules' scored forward staying on the device.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from typer.testing import CliRunner

from harness.cli import app

pytestmark = pytest.mark.gpu


class _HostCopies(TorchDispatchMode):
    """Records every operation that takes a CUDA tensor and returns a CPU one (a copy to the host)."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if any(t.is_cuda for t in inputs) and any(t.device.type == "cpu" for t in outputs):
            self.ops.append(str(func))
        return out


def test_main_job_smoke_on_cuda(tmp_path):
    """The README's main job (baseline + ASG on XNLI) at the smoke profile, on CUDA."""
    args = ["run", "--suite", "xnli", "--adapter", "asg", "--profile", "smoke", "--device", "cuda",
            "--db", str(tmp_path / "gpu.duckdb")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


def test_bench_runs_on_cuda(tmp_path):
    """`harness bench --device cuda` (tiny shapes; the full table: benchmarks/gpu_check.sh)."""
    result = CliRunner().invoke(app, ["bench", "--device", "cuda", "--smoke", "--only", "heads,decode", "--json", str(tmp_path / "b.json")])
    assert result.exit_code == 0, result.output
    assert "lut=bfloat16" in result.output and ", graphed" in result.output and "ASG: Triton kernels" in result.output


@pytest.mark.parametrize("adapter", ["asg", "ksub", "lowrank", "sg", "quant"])
def test_scored_forward_stays_on_the_device(adapter):
    """No synchronizing call in the compressed modules' inference (torch's sync debug mode raises on
    .item(), .cpu(), nonzero ...), and no copy to the host in a whole decoder's scored forward."""
    from harness.adapter import FitContext
    from harness.benchmarks.models import TINY_LAYOUT, random_decoder
    from harness.registry import ADAPTERS

    model = random_decoder(TINY_LAYOUT)
    cls = ADAPTERS.get(adapter)
    settings = {"asg": {"k": 300, "m": 8}, "ksub": {"K": 2, "M": 300}, "lowrank": {"r": 8}}.get(adapter, {})
    model = cls(cls.config_class(**settings)).apply(model, FitContext(device="cuda")).model.to("cuda").eval()
    ids = torch.randint(0, TINY_LAYOUT["vocab_size"], (2, 9), device="cuda")
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    with torch.inference_mode():
        hidden = embedding(ids)  # compile and warm up outside the checks
        head(hidden)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            head(embedding(ids))
        finally:
            torch.cuda.set_sync_debug_mode("default")
        with _HostCopies() as copies:
            model(input_ids=ids)
    assert copies.ops == []
