"""Output heads: the dense V x D projection vs ASG's, k-sub's and low-rank's heads, at batch 1 and 32.

Each head is called as a model calls it: its kernel where one applies (CPU: the fused C++ kernel;
CUDA: the Triton kernels, replayed from the head's own CUDA graph once its shape repeats), else its
torch reference. Every call is timed cold (the caches evicted before it, as after a model's layers:
the headline) and hot (back to back: a compressed head's few MiB stay cached, the dense table of
108 MiB - 2 GiB cannot). For each head the row also gives the bytes one call moves (the
memory-bandwidth model: weights or code map + score table + logits), the bandwidth that reaches,
and its arithmetic, so a missed target can be read against the bound: the dense head at batch 1
streams V*D*4 bytes, ASG's m*V code bytes. On CUDA every head is also timed hot from a CUDA graph
of the whole call (", graphed": no launch latency at all), its kernels eagerly without the head's
own graphs ("<name> eager"), and against its own torch reference; its peak memory is taken with
only that head resident (:func:`harness.benchmarks.timing.resident_peak_mb`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from harness.adapters.asg import ConceptEmbedding, ConceptLMHead
from harness.adapters.ksub import min_sub_embeddings, random_codes
from harness.adapters.lowrank import FactorizedEmbedding, FactorizedLMHead
from torch import nn

from harness.benchmarks.report import Row
from harness.benchmarks.timing import (REGIMES, Evictor, Pair, copy_bandwidth, from_samples, graphed, load_average,
                                       resident_peak_mb, rounds_of, tensor_bytes)
from harness.methods import triton_support
from harness.methods.gather_sum import padded_width


@dataclass(frozen=True)
class Shape:
    """A head's shape and the compressed configurations timed against its dense projection."""

    name: str
    vocab: int
    dim: int
    k: int = 1024      # ASG Concept Vectors per codebook
    m: int = 48        # ASG segments
    K: int = 3         # k-sub sub-tables (M = ceil(V^(1/K)), Algorithm 1)
    r: int = 64        # low-rank inner dimension

    def label(self) -> str:
        return f"{self.name} (V={self.vocab:,}, D={self.dim:,})"


SMOLLM2 = Shape("smollm2", 49152, 576)
LLAMA3 = Shape("llama3-size", 128256, 4096, m=64, K=4)  # m = 64: D/m = 64 (4096 is not divisible by 48)


def random_concepts(vocab: int, dim: int, k: int, m: int, seed: int = 0) -> ConceptEmbedding:
    """An ASG table of the given shape with random codebooks and ConceptIDs (speed does not depend
    on the values)."""
    gen = torch.Generator().manual_seed(seed)
    return ConceptEmbedding(0.02 * torch.randn(m * k, dim // m, generator=gen), torch.randint(0, k, (vocab, m), generator=gen), k, shared=False)


def ksub_concepts(shape: Shape, seed: int = 0) -> ConceptEmbedding:
    """k-sub's table by Algorithm 1 (base-M digits; no fitting), random sub-tables."""
    M = min_sub_embeddings(shape.vocab, shape.K)
    gen = torch.Generator().manual_seed(seed)
    codes = torch.from_numpy(random_codes(shape.vocab, shape.K, M))
    return ConceptEmbedding(0.02 * torch.randn(shape.K * M, shape.dim // shape.K, generator=gen), codes, M, shared=False)


def lowrank_factors(table: torch.Tensor, r: int, seed: int = 0) -> FactorizedEmbedding:
    """Random factors A (V, r), B (r, D) of the low-rank head's shape."""
    gen = torch.Generator().manual_seed(seed)
    vocab, dim = table.shape
    return FactorizedEmbedding(torch.randn(vocab, r, generator=gen), torch.randn(r, dim, generator=gen) / dim**0.5)


def dense_head(table: torch.Tensor) -> nn.Linear:
    head = nn.Linear(table.shape[1], table.shape[0], bias=False)
    head.weight = nn.Parameter(table, requires_grad=False)
    return head


def _bytes(head: nn.Module, n: int, device: str, lut_bytes: int = 4) -> tuple[int, int]:
    """(bytes moved, multiply-adds) of one call on n hidden states, by the head's own layout on ``device``
    (``lut_bytes``: the bytes of one entry of ASG's segment-score table)."""
    if isinstance(head, nn.Linear):
        vocab, dim = head.weight.shape
        return 4 * (vocab * dim + n * dim + n * vocab), n * vocab * dim
    if isinstance(head, ConceptLMHead):
        c = head.concepts
        m, vocab = head.codes.shape
        rows, width = c.codebooks.shape
        columns = n if device.startswith("cuda") else padded_width(n)  # CUDA: (m, k, N) table; CPU: (m*k, padded N)
        table = 2 * lut_bytes * m * c.k * columns  # score table written, then read
        moved = head.codes.numel() * head.codes.element_size() + 4 * (rows * width + n * m * width) + table + 4 * n * vocab
        return moved, n * (vocab * m + m * c.k * width)
    if isinstance(head, FactorizedLMHead):
        vocab, r = head.factors.lookup.shape
        dim = head.factors.projection.shape[1]
        return 4 * (vocab * r + r * dim + n * (dim + r + vocab)), n * r * (vocab + dim)
    raise TypeError(f"no byte model for {type(head).__name__}")


def _reference_bytes(head: nn.Module, n: int) -> int:
    """Bytes one call of a head's torch reference moves: ASG's adds its (V, m) int32 index and a
    (V, max(n, 2)) sum; the low-rank reference reads what the CPU kernel reads."""
    if isinstance(head, ConceptLMHead):
        c, columns = head.concepts, max(n, 2)
        vocab = head.codes.shape[1]
        rows, width = c.codebooks.shape
        return 4 * (vocab * c.m + rows * width + 2 * c.m * c.k * columns + vocab * columns)
    return _bytes(head, n, "cuda")[0]


def reference_call(head: nn.Module, hidden: torch.Tensor) -> Callable[[], object]:
    """The torch reference path of a compressed head on ``hidden`` (what training runs)."""
    if isinstance(head, ConceptLMHead):
        return lambda: head.reference(hidden)
    if isinstance(head, FactorizedLMHead):
        f = head.factors
        return lambda: F.linear(hidden @ f.projection.T, f.lookup, head.bias)
    raise TypeError(f"no reference path for {type(head).__name__}")


def head_calls(dense: nn.Linear, heads: dict[str, nn.Module], hidden: torch.Tensor) -> dict[str, Callable[[], object]]:
    """One call of each head on the (n, D) ``hidden`` states, as a model calls it (its fast path:
    a kernel where one applies), the dense one first under "dense"."""
    return {"dense": lambda: dense(hidden)} | {name: (lambda head=head: head(hidden)) for name, head in heads.items()}


@dataclass(frozen=True)
class Timed:
    """One call the heads section times: its head, and how it differs from the head's own call."""

    head: nn.Module
    call: Callable[[], object]
    reference_of: str | None = None  # the head whose torch reference this is
    lut_bytes: int = 4


def timed_calls(dense: nn.Linear, heads: dict[str, nn.Module], hidden: torch.Tensor, device: str) -> dict[str, Timed]:
    """What the heads section times: the dense head ("dense") and every head's own call; its torch
    reference ("<name> reference"; on CPU only ASG's, as a head of its own kernel; on CUDA every
    head's but low-rank's, which runs cuBLAS there); on CUDA also every head's eager call, without its
    own CUDA graphs ("<name> eager"), and ASG's kernel with a half-precision
    score table ("<name> lut=bfloat16", "lut=float16": an option)."""
    calls = head_calls(dense, heads, hidden)
    cuda = device.startswith("cuda")
    out = {"dense": Timed(dense, calls["dense"])}
    for name, head in heads.items():
        out[name] = Timed(head, calls[name])
        if (cuda and not isinstance(head, FactorizedLMHead)) or name.startswith("asg"):  # low-rank on CUDA: its call is its reference
            out[f"{name} reference"] = Timed(head, reference_call(head, hidden), reference_of=name)
        if cuda:  # the head's eager call, as its own CUDA graph captures it
            eager = head.cuda_logits if isinstance(head, ConceptLMHead) else head.products
            out[f"{name} eager"] = Timed(head, lambda eager=eager: eager(hidden))
        if cuda and name.startswith("asg") and triton_support.available():
            from harness.methods import gather_sum_triton

            for dtype in (torch.bfloat16, torch.float16):
                out[f"{name} lut={str(dtype).removeprefix('torch.')}"] = Timed(head, functools.partial(
                    gather_sum_triton.logits, hidden, head.concepts.codebooks, head.codes, head.concepts.shared, dtype), lut_bytes=2)
    return out


def inner_calls(shape: Shape, n: int, device: str = "cpu") -> int:
    """Back-to-back calls per timing: about 10 ms of the dense head on 2 cores; 20 on CUDA, where a
    call takes tens of microseconds."""
    if device.startswith("cuda"):
        return 20
    return max(1, min(10, round(3e8 / (shape.vocab * shape.dim * n))))


def _head_row(case: str, t: Timed, pair: Pair, n: int, device: str, dense: tuple[int, int], bandwidth: float,
              target: float | None) -> Row:
    """A head's row against the dense head, with its bytes, the bound they set and the bandwidth reached."""
    moved, macs = _bytes(t.head, n, device, t.lut_bytes)
    if t.reference_of is not None:
        moved = _reference_bytes(t.head, n)
    rate = moved / (pair.method / 1000)
    return Row.timed("head", case, "ms", pair, target=target, load=load_average(), note=(
        f"bytes/call {dense[0] / 2**20:.1f} -> {moved / 2**20:.2f} MiB (bound {dense[0] / moved:.0f}x), {rate / 1e9:.3g} GB/s "
        f"= {rate / bandwidth:.2f} of the copy bandwidth; multiply-adds {dense[1] / 1e6:.0f}M -> {macs / 1e6:.1f}M"))


def resident_peaks(timed: dict[str, Timed], hidden: torch.Tensor, device: str) -> dict[str, float]:
    """Per timed call, its CUDA peak (MiB) with only its own head resident: the head's tensors, the
    hidden states and the head's CUDA graph buffers, plus what the call allocates; NaN on CPU."""
    def resident(head: nn.Module) -> int:
        graphs = head.__dict__.get("_graphs")
        return tensor_bytes(head) + hidden.numel() * hidden.element_size() + (graphs.held_bytes() if graphs else 0)

    with torch.inference_mode():
        return {name: resident_peak_mb(t.call, resident(t.head), device) for name, t in timed.items()}


def head_rows(shape: Shape, table: torch.Tensor, heads: dict[str, nn.Module], device: str, rounds: int,
              batches: tuple[int, ...] = (1, 32), targets: dict[tuple[str, int, str], float] | None = None) -> list[Row]:
    """Each head in ``heads`` (and what :func:`timed_calls` adds) against the dense projection of
    ``table``, per batch size, cold (caches evicted before each call) and hot; all calls take turns
    within every round. On CUDA the same calls are also timed hot replayed from CUDA graphs (rows
    "hot, graphed", against the graphed dense head: no launch latency), and every kernel against its
    own torch reference from the same rounds. ``targets`` maps (head, batch, "cold" / "hot" / "hot,
    graphed") to the ratio that row must reach. Each note gives the bytes a call moves, the bound
    that sets on the ratio, and the bandwidth reached as a share of a plain copy's on this device."""
    cuda = device.startswith("cuda")
    dense = dense_head(table).to(device)
    heads = {name: head.to(device) for name, head in heads.items()}
    bandwidth = copy_bandwidth(device, mib=1024 if cuda else 64)
    evict = Evictor(device)
    rows = []
    for n in batches:
        hidden = torch.randn(n, shape.dim, device=device)
        timed = timed_calls(dense, heads, hidden, device)
        fns = {name: t.call for name, t in timed.items()}
        if cuda:
            with torch.inference_mode():
                fns |= {f"{name}, graphed": graphed(fn) for name, fn in list(fns.items())}
        samples = rounds_of(fns, device, rounds, inner_calls(shape, n, device), evict)
        peaks = resident_peaks(timed, hidden, device)
        for regime in REGIMES:
            for suffix in ("", ", graphed") if cuda and regime == "hot" else ("",):
                label = regime + suffix
                side = lambda name: samples[regime][name + suffix]  # noqa: E731
                for name, t in timed.items():
                    if name == "dense":
                        continue
                    pair = from_samples(side("dense"), side(name), peaks=(peaks["dense"], peaks[name]))
                    rows.append(_head_row(f"{name} @ {shape.label()}, batch {n}, {label}", t, pair, n, device,
                                          _bytes(dense, n, device), bandwidth, (targets or {}).get((name, n, label))))
                rows += [Row.timed("head", f"{t.reference_of} kernel vs its torch reference @ {shape.label()}, batch {n}, {label}",
                                   "ms", from_samples(side(name), side(t.reference_of)), load=load_average())
                         for name, t in timed.items() if cuda and t.reference_of is not None]
    return rows


def compressed_heads(shape: Shape, table: torch.Tensor, asg: ConceptEmbedding) -> dict[str, nn.Module]:
    """The heads timed against the dense one: ASG, k-sub (Algorithm 1) and low-rank."""
    return {
        f"asg k={shape.k} m={shape.m}": ConceptLMHead(asg),
        f"ksub K={shape.K}": ConceptLMHead(ksub_concepts(shape)),
        f"lowrank r={shape.r}": FactorizedLMHead(lowrank_factors(table, shape.r)),
    }


def head_targets(shape: Shape, device: str) -> dict[tuple[str, int, str], float]:
    """The ratios over the dense head each head must reach, by (head, batch, regime). CPU: ASG >= 10x
    hot at batch 1, >= 5x hot at batch 32. CUDA, an H100: as a run calls it, cold, ASG >= 10x at
    batch 1 on the Llama-3 shape and >= 1.5x on SmolLM2's; replayed from a CUDA graph, hot, on the
    Llama-3 shape ASG >= 20x at batch 1 and >= 8x at batch 32, k-sub >= 30x at batch 1; on
    SmolLM2's, ASG >= 2x at batch 1."""
    asg, ksub = f"asg k={shape.k} m={shape.m}", f"ksub K={shape.K}"
    if not device.startswith("cuda"):
        return {(asg, 1, "hot"): 10.0, (asg, 32, "hot"): 5.0}
    if shape.name == "llama3-size":
        return {(asg, 1, "cold"): 10.0, (asg, 1, "hot, graphed"): 20.0, (asg, 32, "hot, graphed"): 8.0, (ksub, 1, "hot, graphed"): 30.0}
    if shape.name == "smollm2":
        return {(asg, 1, "cold"): 1.5, (asg, 1, "hot, graphed"): 2.0}
    return {}
