"""ASG speed, measured as ratios within one process (compressed vs base), medians of several runs.

1. MiniLM encoder forward throughput: base vs ASG input side (k=512, m=48).
2. Output side: ASG logits (segment scores + embedding_bag gather-sum) vs the dense projection
   at V=49152, D=576 (SmolLM2's head), for batch 1 and 32 decode steps.

    python -m benchmarks.asg_speed [--repeats 7] [--device cpu|cuda] [--out benchmarks/out/asg_speed.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch
from harness.adapters.asg import AsgAdapter, AsgConfig, ConceptEmbedding, ConceptLMHead

from harness.adapter import FitContext
from harness.sources import models
from harness.sources.heads import Head


def _time(fn, device: str, inner: int) -> float:
    """Seconds per call, averaged over ``inner`` calls."""
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / inner


@torch.inference_mode()
def paired(base_fn, method_fn, device: str, repeats: int, inner: int) -> dict:
    """Alternate base and method runs (drift hits both); report medians and the median ratio."""
    for fn in (base_fn, method_fn):
        _time(fn, device, 2)  # warm-up
    base, method = [], []
    for _ in range(repeats):
        base.append(_time(base_fn, device, inner))
        method.append(_time(method_fn, device, inner))
    ratios = [b / m for b, m in zip(base, method)]
    return {
        "base_ms": 1000 * statistics.median(base),
        "asg_ms": 1000 * statistics.median(method),
        "speedup_median": statistics.median(ratios),  # >1: ASG faster
        "speedup_min": min(ratios),
        "speedup_max": max(ratios),
    }


def encoder_forward(device: str, repeats: int, batch: int = 32, seq_len: int = 128) -> dict:
    base, _ = models.load(models.resolve("minilm"), Head("base"))
    applied = AsgAdapter(AsgConfig(k=512, m=48)).apply(copy.deepcopy(base), FitContext(seed=0))
    asg, report = applied.model, applied.report
    base, asg = base.eval().to(device), asg.eval().to(device)
    ids = torch.randint(0, base.config.vocab_size, (batch, seq_len), device=device)
    mask = torch.ones_like(ids)
    out = paired(lambda: base(input_ids=ids, attention_mask=mask), lambda: asg(input_ids=ids, attention_mask=mask), device, repeats, inner=3)
    out.update(batch=batch, seq_len=seq_len, emb_param_fraction=report.emb_param_fraction)
    out["base_tokens_per_s"] = batch * seq_len / (out["base_ms"] / 1000)
    out["asg_tokens_per_s"] = batch * seq_len / (out["asg_ms"] / 1000)
    return out


def output_head(device: str, repeats: int, batch: int, V: int = 49152, D: int = 576, k: int = 1024, m: int = 48) -> dict:
    gen = torch.Generator().manual_seed(0)
    dense = torch.nn.Linear(D, V, bias=False).to(device)
    concepts = ConceptEmbedding(torch.randn(m * k, D // m, generator=gen), torch.randint(0, k, (V, m), generator=gen), k, shared=False)
    head = ConceptLMHead(concepts).to(device)
    hidden = torch.randn(batch, D, device=device)
    out = paired(lambda: dense(hidden), lambda: head(hidden), device, repeats, inner=20)
    out.update(batch=batch, V=V, D=D, k=k, m=m)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/asg_speed.json"))
    args = parser.parse_args()
    results = {
        "device": args.device,
        "torch_threads": torch.get_num_threads(),
        "encoder_forward_minilm": encoder_forward(args.device, args.repeats),
        "output_head_batch1": output_head(args.device, args.repeats, batch=1),
        "output_head_batch32": output_head(args.device, args.repeats, batch=32),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
