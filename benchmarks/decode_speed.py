"""Decoder efficiency, base vs ASG on SmolLM2: prefill latency, decode tokens/s and peak memory.

Paired and alternating (drift hits both models), each pair measured with the runner's own
``harness.measure.efficiency.decode_latency`` (batch 1, 128-token prompt, KV-cached decode steps);
reported as medians over pairs and as ratios ASG / base.

    python -m benchmarks.decode_speed [--pairs 5] [--k 1024] [--m 48] [--device cpu|cuda]
                                      [--out benchmarks/out/decode_speed.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
from pathlib import Path

import torch
from harness.adapters.asg import AsgAdapter, AsgConfig

from harness.adapter import FitContext
from harness.measure.efficiency import decode_latency, model_bytes
from harness.sources import models
from harness.sources.heads import Head


def measure_pairs(base, asg, device: str, pairs: int, new_tokens: int) -> dict:
    """Alternate base and ASG ``pairs`` times; medians per model and of the per-pair ratios."""
    rows = {"base": [], "asg": []}
    for _ in range(pairs):
        for name, model in (("base", base), ("asg", asg)):
            prefill, decode = decode_latency(model, model.config.vocab_size, device, new_tokens=new_tokens, repeats=2)
            rows[name].append({"prefill_ms": prefill.p50_ms, "decode_ms": decode.p50_ms, "peak_mem_mb": decode.peak_mem_mb})
    out = {}
    for key in ("prefill_ms", "decode_ms", "peak_mem_mb"):
        base_v, asg_v = [r[key] for r in rows["base"]], [r[key] for r in rows["asg"]]
        out[key] = {
            "base": statistics.median(base_v), "asg": statistics.median(asg_v),
            "ratio_asg_over_base": statistics.median(a / b for a, b in zip(asg_v, base_v)),
        }
    out["decode_tokens_per_s"] = {
        "base": 1000 / out["decode_ms"]["base"], "asg": 1000 / out["decode_ms"]["asg"],
        "ratio_asg_over_base": statistics.median(b["decode_ms"] / a["decode_ms"] for a, b in zip(rows["asg"], rows["base"])),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--m", type=int, default=48)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/decode_speed.json"))
    args = parser.parse_args()
    base, _ = models.load(models.resolve("smollm2"), Head("causal_lm"))
    applied = AsgAdapter(AsgConfig(k=args.k, m=args.m)).apply(copy.deepcopy(base), FitContext(seed=0))
    asg, report = applied.model, applied.report
    results = {
        "device": args.device,
        "torch_threads": torch.get_num_threads(),
        "model": "smollm2",
        "asg": {"k": args.k, "m": args.m, "emb_param_fraction": report.emb_param_fraction},
        "model_mb": {"base": model_bytes(base) / 2**20, "asg": model_bytes(asg) / 2**20},
        **measure_pairs(base.eval(), asg.eval(), args.device, args.pairs, args.new_tokens),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
