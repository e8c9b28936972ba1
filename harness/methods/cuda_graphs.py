"""A compressed head's inference call replayed from a CUDA graph where a run repeats its shape.

At a few hidden states (a decoding step: one) a compressed head on CUDA costs its launches, not its
work: ASG's eager head, a matmul and a Triton launch with their Python around them, took 0.43x the
dense head's one GEMV on an H100 at SmolLM2's shape, and 2.85x replayed from a CUDA graph.
:class:`GraphedCalls` gives a module that replay inside an ordinary forward: the first call of a
shape runs eagerly (kernels build, the allocator settles), the second captures the call into a
graph, and every later call of that shape copies its input into the graph's input, replays it and
returns a copy of the graph's output (the graph writes the same memory on every replay, and a
caller may keep a result across calls). Decoding repeats one shape at every step; rolling windows
and loglikelihood batches mostly do not, and run eagerly.

Where capture cannot help or cannot work the call runs eagerly: more than :data:`MAX_STATES`
states (the call is work-bound there, and its output would be held by the graph), more than
:data:`MAX_GRAPHS` shapes, tensors off CUDA, gradients, or a caller that is itself capturing a graph
(its graph takes the launches). A capture that fails says so in one line, once per module, and the
module runs eagerly from then on. The path taken is returned with every result
(:mod:`harness.methods.kernel_paths` counts it).
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Callable

import torch

from harness.methods.triton_support import first_line

MAX_STATES = 64
"""Hidden states per call up to which a shape is captured (a (64, V) float32 output: 32 MiB at V = 128,256)."""
MAX_GRAPHS = 4
"""Shapes captured per module at most; later shapes run eagerly."""

Call = Callable[[torch.Tensor], "tuple[torch.Tensor, str]"]


class GraphedCalls:
    """The CUDA graphs of one module's inference call, per input shape (see the module docstring).
    Never copied: a deep copy or a pickled module starts with none."""

    def __init__(self) -> None:
        self.seen: Counter[tuple] = Counter()
        self.graphs: dict[tuple, tuple[torch.Tensor, torch.cuda.CUDAGraph, torch.Tensor, str]] = {}
        self.failed: str | None = None  # the one line a failed capture gave

    def __reduce__(self):
        return GraphedCalls, ()

    def __call__(self, call: Call, x: torch.Tensor, *identity: object) -> tuple[torch.Tensor, str]:
        """``call(x)`` -> (output, path), from a graph where one is held or made for this shape;
        ``identity`` names what else the graph reads (the module's tensors' addresses), so a moved or
        replaced tensor is captured anew."""
        if not self._eligible(x):
            return call(x)
        key = (tuple(x.shape), x.dtype, x.device, torch.is_inference_mode_enabled(), *identity)
        entry = self.graphs.get(key)
        if entry is None:
            if len(self.graphs) >= MAX_GRAPHS:
                return call(x)
            self.seen[key] += 1
            if self.seen[key] < 2:
                return call(x)
            entry = self._capture(call, x, key)
            if entry is None:
                out, path = call(x)
                return out, f"{path} (CUDA graph capture failed)"
        static_in, graph, static_out, path = entry
        static_in.copy_(x)
        graph.replay()
        return static_out.clone(), f"{path}, CUDA graph"

    def held_bytes(self) -> int:
        """Bytes of the graphs' input and output tensors (their intermediates live in the graphs' pools)."""
        return sum(t.numel() * t.element_size() for static_in, _, static_out, _ in self.graphs.values() for t in (static_in, static_out))

    def _eligible(self, x: torch.Tensor) -> bool:
        return (self.failed is None and x.is_cuda and x.shape[0] <= MAX_STATES and not torch.is_grad_enabled()
                and not torch.cuda.is_current_stream_capturing())

    def _capture(self, call: Call, x: torch.Tensor, key: tuple):
        """Capture ``call`` on a copy of ``x`` after one warm-up call on a side stream (as torch's
        CUDA graph recipe asks: lazy workspaces are made outside the capture); None, with one line
        of warning, when the capture fails."""
        caller = torch.cuda.current_stream(x.device)
        with torch.cuda.stream(caller):  # the caller's stream is current again however the capture ends
            try:
                static_in = x.clone()
                stream = torch.cuda.Stream(device=x.device)
                stream.wait_stream(caller)
                with torch.cuda.stream(stream):
                    call(static_in)
                caller.wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    static_out, path = call(static_in)
            except Exception as err:  # noqa: BLE001  (whatever capture refused: a synchronizing op, an allocator limit)
                self.failed = first_line(err)
                _end_generator_capture(x.device)
                warnings.warn(f"CUDA graph capture failed ({self.failed}): the head runs eagerly", stacklevel=4)
                return None
        self.graphs[key] = (static_in, graph, static_out, path)
        return self.graphs[key]


def _end_generator_capture(device: torch.device) -> None:
    """A capture that fails leaves the device's CUDA random generator marked as capturing (torch clears
    the mark only when a capture ends well), and every later random op there (dropout in training)
    raises "Offset increment outside graph capture"; one small capture that ends well clears it."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.device(device), torch.cuda.graph(graph):
        torch.zeros(1, device=device).add_(1)
