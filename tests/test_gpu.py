"""The gpu tier's end-to-end checks (``pytest -m gpu``; skipped where torch sees no CUDA device).

The rest of the tier sits beside the CPU tests it mirrors: every adapter's fit, inference, backward
and one recovery step on CUDA (test_conformance.py), the Triton kernels against their references
(test_triton_kernels.py). Here: the README's main job and the benchmark with ``--device cuda``, the
compressed modules' scored forward staying on the device, the head's own CUDA graphs, and an id
outside the vocabulary raising the CPU's error.
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
    assert "lut=bfloat16" in result.output and "hot, graphed" in result.output and ", cold |" in result.output
    assert "ASG paths taken: head Triton kernels x1 + Triton kernels, CUDA graph x" in result.output  # captured on its second call


@pytest.mark.parametrize("adapter", ["asg", "ksub", "lowrank", "sg", "quant"])
def test_scored_forward_stays_on_the_device(adapter):
    """No synchronizing call in the compressed heads' inference (torch's sync debug mode raises on
    .item(), .cpu(), nonzero ...), and no copy to the host in a whole decoder's scored forward but
    one: ASG's and k-sub's lookups read the ids' smallest and largest value to raise the CPU's
    IndexError for an id outside the vocabulary (:func:`harness.methods.index_maps.check_ids`)."""
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
        hidden = embedding(ids)  # compile and warm up outside the checks; the head's second call captures its graph
        head(hidden)
        head(hidden)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            head(hidden)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        with _HostCopies() as copies:
            model(input_ids=ids)
    # the one copy is a dtype-and-device conversion; torch names its overload by version (_to_copy, to.dtype_layout)
    assert len(copies.ops) == (1 if adapter in ("asg", "ksub") else 0)
    assert all(op.startswith(("aten._to_copy.", "aten.to.")) for op in copies.ops)


def _asg_head(vocab: int = 1001, m: int = 8, k: int = 300, d: int = 4):
    from harness.adapters.asg import ConceptEmbedding, ConceptLMHead

    gen = torch.Generator().manual_seed(0)
    concepts = ConceptEmbedding(torch.randn(m * k, d, generator=gen), torch.randint(0, k, (vocab, m), generator=gen), k, False)
    return ConceptLMHead(concepts, torch.randn(vocab, generator=gen)).cuda()


def test_head_replays_its_cuda_graph_from_the_second_call_of_a_shape():
    """A repeated shape is captured on its second call and replayed after; each result is its own
    tensor (a later call does not overwrite it) and equals the eager kernels'; another shape, or a
    call with gradients, runs eagerly."""
    from harness.methods import kernel_paths

    head = _asg_head()
    states = [torch.randn(1, 32, device="cuda") for _ in range(4)]
    with torch.no_grad():
        eager = [head.cuda_logits(h)[0] for h in states]
        got = [head(h) for h in states]
        head(torch.randn(3, 32, device="cuda"))
    head(states[0]).sum().backward()  # gradients: the torch reference, never a graph
    for g, e in zip(got, eager):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
    assert kernel_paths.taken(head)[""] == {"Triton kernels": 2, "Triton kernels, CUDA graph": 3, "torch reference, with gradients": 1}
    assert head.__dict__["_graphs"].held_bytes() == 4 * (32 + 1001)  # one graph: (1, 32) in, (1, 1001) out, float32


def test_a_call_that_cannot_be_captured_runs_eagerly_with_one_notice():
    import warnings

    from harness.methods.cuda_graphs import GraphedCalls

    graphs, x = GraphedCalls(), torch.randn(2, 3, device="cuda")
    call = lambda t: (t * float(t.sum()), "eager")  # noqa: E731  (float(): a host read, which capture refuses)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paths = [graphs(call, x)[1] for _ in range(4)]
    assert paths == ["eager", "eager (CUDA graph capture failed)", "eager", "eager"]
    assert len(caught) == 1 and graphs.failed
    # the failed capture left the caller's stream current and torch's CUDA generator usable (dropout in training)
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    torch.nn.functional.dropout(torch.randn(4, device="cuda"), 0.5, training=True)


def test_an_id_outside_the_vocabulary_raises_the_cpus_error():
    head = _asg_head()
    ids = torch.tensor([[3, 1001, 2]])
    with pytest.raises(IndexError) as cpu:
        head.concepts.cpu()(ids)
    head.cuda()
    with torch.no_grad(), pytest.raises(IndexError) as cuda:
        head.concepts(ids.cuda())
    assert str(cuda.value) == str(cpu.value) == "index 1001 is out of bounds for dimension 0 with size 1001"
