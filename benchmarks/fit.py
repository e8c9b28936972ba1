"""Fit time of the clustering adapters on me5-small's table, and encoder latency after a fit.

* ``fit``: ASG (k = 1,024, m = 48) and SG at fraction 0.4 fitted on me5-small's 250,037 x 384
  input table under the quick profile's k-means budget, as the runner fits them; wall seconds
  against the targets (60 s and 300 s on 2 cores; the row's ratio is target / measured).
* ``after-fit``: an encoder of me5-small's widths (random weights, ``LAYERS`` layers) and the same
  encoder with a random ASG table (V = 250,037, k = 512, m = 48) timed at batch 8 x 128 in
  alternating passes, in fresh child processes: one that only times, one that first runs one
  faiss k-means over a table segment as a fit does. Children alternate (fresh, fitted, fresh ...).
  A fit that left threads or the OpenMP runtime in another state would show as fitted/fresh != 1.

    python -m harness.benchmarks.fit STATE    # one after-fit child (fresh | fitted); prints one JSON line
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

from harness.benchmarks.report import Row
from harness.benchmarks.timing import load_average

FIT_TARGETS_S = {"asg": 60.0, "sg": 300.0}
LAYERS = 4
ASG_SHAPE = {"k": 512, "m": 48}
STATES = ("fresh", "fitted")


def fit_rows(model_name: str = "me5-small", profile: str = "quick") -> list[Row]:
    """Seconds of one fit of ASG (k=1024, m=48) and SG (0.4) on ``model_name``'s table under ``profile``'s budget."""
    from harness.adapters.asg import BUDGETS as ASG_BUDGETS, AsgAdapter, AsgConfig
    from harness.adapters.sg import BUDGETS as SG_BUDGETS, SgAdapter, SgConfig

    from harness.adapter import FitContext
    from harness.benchmarks.models import load_packaged

    table = load_packaged(model_name, "base").get_input_embeddings().weight.detach()
    cases = {
        "asg": (AsgAdapter(AsgConfig(k=1024, m=48)), ASG_BUDGETS.select(profile, large=True), "k=1024 m=48"),
        "sg": (SgAdapter(SgConfig(fraction=0.4)), SG_BUDGETS.select(profile, large=True), "fraction=0.4"),
    }
    rows = []
    for name, (adapter, budget, label) in cases.items():
        fit = FitContext(profile=profile, budget=budget)
        start = time.perf_counter()
        adapter.fit(table, fit)
        seconds = time.perf_counter() - start
        target = FIT_TARGETS_S[name]
        settings = adapter.settings(fit, len(table)) if name == "sg" else adapter.settings(fit)
        rows.append(Row(
            "fit", f"{name} {label} on {model_name}'s {len(table):,} x {table.shape[1]} table, {profile} budget", "s",
            target, seconds, target / seconds, target / seconds, target / seconds, 1, target=1.0,
            note=f"base = the target seconds; ratio = target / fit time; k-means {settings.record()}", load=load_average(),
        ))
    return rows


def child(state: str) -> dict[str, float]:
    """One process: optionally one faiss k-means (``fitted``), then base and ASG encoders timed ABAB."""
    import numpy as np
    import torch
    from transformers import BertConfig, BertModel

    from harness.benchmarks.heads import random_concepts
    from harness.methods.kmeans import KmeansSettings, kmeans
    from harness.measure.efficiency import forward_latency

    vocab, dim = 250_037, 384
    torch.manual_seed(0)
    base = BertModel(BertConfig(vocab_size=vocab, hidden_size=dim, num_hidden_layers=LAYERS, num_attention_heads=12,
                                intermediate_size=1536), add_pooling_layer=False).eval()
    asg = BertModel(base.config, add_pooling_layer=False).eval()
    asg.load_state_dict(base.state_dict())
    asg.set_input_embeddings(random_concepts(vocab, dim, ASG_SHAPE["k"], ASG_SHAPE["m"]))
    if state == "fitted":
        segment = base.get_input_embeddings().weight.detach()[:, : dim // ASG_SHAPE["m"]].numpy()
        kmeans(np.ascontiguousarray(segment), ASG_SHAPE["k"], KmeansSettings(niter=25), seed=0)
    times: dict[str, list[float]] = {"base": [], "asg": []}
    for _ in range(3):
        for name, model in (("base", base), ("asg", asg)):
            times[name] += forward_latency(model, vocab, "cpu", warmup=1, repeats=2).samples_ms
    return {name: statistics.median(samples) for name, samples in times.items()} | {"threads": torch.get_num_threads()}


def _run_child(state: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-m", "harness.benchmarks.fit", state], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def after_fit_rows(rounds: int) -> list[Row]:
    """Encoder latency in a process that ran a faiss k-means vs a fresh one, ``rounds`` alternating child pairs."""
    runs = [{state: _run_child(state) for state in STATES} for _ in range(rounds)]
    rows = []
    for side in ("base", "asg"):
        fresh, fitted = [r["fresh"][side] for r in runs], [r["fitted"][side] for r in runs]
        ratios = [a / b for a, b in zip(fresh, fitted)]
        rows.append(Row(
            "after-fit", f"{side} encoder (me5-small widths, {LAYERS} layers) at batch 8 x 128: fresh vs after one faiss k-means",
            "ms", statistics.median(fresh), statistics.median(fitted), statistics.median(ratios), min(ratios), max(ratios),
            rounds, target=0.95, note=f"ratio = fresh / fitted p50; torch threads after the fit {runs[0]['fitted']['threads']}",
            load=load_average(),
        ))
    gap = [(r["fitted"]["asg"] / r["fitted"]["base"]) / (r["fresh"]["asg"] / r["fresh"]["base"]) for r in runs]
    rows.append(Row(
        "after-fit", "ASG/base latency ratio, after a fit vs fresh", "x",
        statistics.median(r["fresh"]["asg"] / r["fresh"]["base"] for r in runs),
        statistics.median(r["fitted"]["asg"] / r["fitted"]["base"] for r in runs),
        statistics.median(gap), min(gap), max(gap), rounds, note="ratio = (ASG/base after a fit) / (ASG/base fresh); 1 = no effect",
        load=load_average(),
    ))
    return rows


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1])))
