"""Output heads: the dense V x D projection vs ASG's, k-sub's and low-rank's heads, at batch 1 and 32.

For each head the table row also gives the bytes one call moves (the memory-bandwidth model:
weights or code map + score table + logits) and its arithmetic, so a missed target can be read
against the bound: the dense head at batch 1 streams V*D*4 bytes, ASG's m*V code bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from harness.adapters.asg import ConceptEmbedding, ConceptLMHead
from harness.adapters.ksub import min_sub_embeddings, random_codes
from harness.adapters.lowrank import FactorizedEmbedding, FactorizedLMHead
from torch import nn

from harness.benchmarks.report import Row
from harness.benchmarks.timing import against, load_average
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


def _bytes(head: nn.Module, n: int) -> tuple[int, int]:
    """(bytes moved, multiply-adds) of one call on n hidden states, by the head's own layout."""
    if isinstance(head, nn.Linear):
        vocab, dim = head.weight.shape
        return 4 * (vocab * dim + n * dim + n * vocab), n * vocab * dim
    if isinstance(head, ConceptLMHead):
        c = head.concepts
        m, vocab = head.codes.shape
        rows, width = c.codebooks.shape
        table = 2 * 4 * m * c.k * padded_width(n)  # score table written, then read
        moved = head.codes.numel() * head.codes.element_size() + 4 * rows * width + table + 4 * n * vocab
        return moved, n * (vocab * m + m * c.k * width)
    if isinstance(head, FactorizedLMHead):
        vocab, r = head.factors.lookup.shape
        dim = head.factors.projection.shape[1]
        return 4 * (vocab * r + r * dim + n * vocab), n * r * (vocab + dim)
    raise TypeError(f"no byte model for {type(head).__name__}")


def head_calls(dense: nn.Linear, heads: dict[str, nn.Module], hidden: torch.Tensor) -> dict[str, Callable[[], object]]:
    """One call of each head on the (n, D) ``hidden`` states, the dense one first under "dense"
    ("asg reference": the embedding_bag path of the ASG head)."""
    n = hidden.shape[0]
    calls = {"dense": lambda: dense(hidden)}
    calls |= {name: (lambda head=head: head(hidden)) for name, head in heads.items() if name != "asg reference"}
    if "asg reference" in heads:
        asg = heads["asg reference"]
        calls["asg reference"] = lambda: asg.reference_sum(asg.score_table(hidden, max(n, 2)), n)
    return calls


def inner_calls(shape: Shape, n: int) -> int:
    """Back-to-back calls per timing: about 10 ms of the dense head on 2 cores."""
    return max(1, min(10, round(3e8 / (shape.vocab * shape.dim * n))))


def head_rows(shape: Shape, table: torch.Tensor, heads: dict[str, nn.Module], device: str, rounds: int,
              batches: tuple[int, ...] = (1, 32), targets: dict[tuple[str, int], float] | None = None) -> list[Row]:
    """Each head in ``heads`` against the dense projection of ``table``, per batch size; all heads
    and the dense one take turns within every round."""
    dense = dense_head(table).to(device)
    heads = {name: head.to(device) for name, head in heads.items()}
    rows = []
    for n in batches:
        calls = head_calls(dense, heads, torch.randn(n, shape.dim, device=device))
        pairs = against(calls.pop("dense"), calls, device, rounds, inner_calls(shape, n))
        base_bytes, base_macs = _bytes(dense, n)
        for name, pair in pairs.items():
            moved, macs = _bytes(heads[name], n)
            rows.append(Row.timed(
                "head", f"{name} @ {shape.label()}, batch {n}", "ms", pair,
                target=(targets or {}).get((name, n)),
                note=f"bytes/call {base_bytes / 2**20:.1f} -> {moved / 2**20:.2f} MiB (bound {base_bytes / moved:.0f}x); "
                     f"multiply-adds {base_macs / 1e6:.0f}M -> {macs / 1e6:.1f}M",
                load=load_average(),
            ))
    return rows


def compressed_heads(shape: Shape, table: torch.Tensor, asg: ConceptEmbedding) -> dict[str, nn.Module]:
    """The heads timed against the dense one: ASG (fast path and its embedding_bag reference),
    k-sub (Algorithm 1) and low-rank."""
    asg_head = ConceptLMHead(asg)
    return {
        f"asg k={shape.k} m={shape.m}": asg_head,
        "asg reference": asg_head,
        f"ksub K={shape.K}": ConceptLMHead(ksub_concepts(shape)),
        f"lowrank r={shape.r}": FactorizedLMHead(lowrank_factors(table, shape.r)),
    }


def asg_targets(shape: Shape) -> dict[tuple[str, int], float]:
    """Issue 20's targets for ASG's head: >= 10x dense at batch 1, >= 5x at batch 32."""
    name = f"asg k={shape.k} m={shape.m}"
    return {(name, 1): 10.0, (name, 32): 5.0}
