"""A generated results store of realistic shape for the leaderboard benchmark.

``python -m harness.benchmarks.leaderboard_store OUT.duckdb [--runs 10000]`` writes, through the
store's own schema, sweeps of 10 methods x 5 suites x 2 models x 3 seeds (each method's setting grid
sized to reach ``--runs``), every method run beside its seed's baseline, with per-item outputs
(0/1 correctness, or entity counts as weights for wikiann) whose means are the stored scores. The
paired columns are normal approximations: the benchmark measures reading, not statistics. Each run
carries the installed code's fingerprint, so only ``asg_shared`` (no such adapter is installed) is stale.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from harness.results.fingerprint import code_fingerprint
from harness.results.store import SCHEMA, SCHEMA_VERSION


@dataclass(frozen=True)
class SuiteShape:
    task: str
    metric: str
    groups: tuple[str, ...]   # languages (an ``avg`` row is added when there are several) or tasks
    items: int                # items per group
    base: float               # the baseline's mean score


SUITES = (
    SuiteShape("xnli", "accuracy", ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh"), 40, 0.62),
    SuiteShape("wikiann", "f1", ("ar", "de", "en", "es", "fr", "ru", "zh"), 60, 0.55),
    SuiteShape("qa", "f1", ("ar", "de", "en", "es", "hi", "vi", "zh"), 30, 0.40),
    SuiteShape("ag_news", "accuracy", ("en",), 400, 0.88),
    SuiteShape("word_sim", "spearman", ("MC-30", "RG-65", "WS-353-ALL", "MEN-TR-3k"), 50, 0.72),
)
# method -> (setting swept, its values, embedding fraction of a value)
METHODS = {
    "asg": ("k", (64, 128, 256, 512, 1024, 2048), lambda v: v / 30522),
    "sg": ("fraction", (0.05, 0.1, 0.2, 0.4, 0.6), lambda v: v),
    "ksub": ("M", (50, 100, 200, 400), lambda v: 3 * v / 30522),
    "lowrank": ("r", (8, 16, 32, 64, 128, 256), lambda v: v * (30522 + 384) / (30522 * 384)),
    "quant": ("bits", (2, 4, 8), lambda v: 1.0),
    "multisense": ("k", (1, 3, 5, 10, 15, 30), lambda v: 1.0 + v * 0.02),
    "skd": ("layers", (1, 2, 3, 4), lambda v: 1.0 + 0.3),
    "ade": ("K", (100, 250, 500, 1000), lambda v: v / 30522),
    "vocabdiet": ("reallocate", (0, 500, 1000, 2000), lambda v: 0.9),
    "asg_shared": ("k", (256, 512, 1024, 4096), lambda v: v / 30522 / 48),
}
MODELS = ("minilm", "me5-small")
SEEDS = (0, 1, 2)


def plan(runs: int) -> list[tuple[str, str, float, str, int, str]]:
    """(adapter, config JSON, emb fraction, model, seed, suite) of every method run: each method's grid
    values repeated with a ``niter`` setting until the store reaches about ``runs`` runs."""
    per_point = len(SUITES) * len(MODELS) * len(SEEDS)
    points = max(1, round(runs / per_point))
    grid = [(a, key, v, frac) for a, (key, values, frac) in METHODS.items() for v in values]
    out = []
    for i in range(points):
        adapter, key, value, frac = grid[i % len(grid)]
        config = json.dumps({key: value, "niter": 10 + 5 * (i // len(grid))})
        for model in MODELS:
            for seed in SEEDS:
                out += [(adapter, config, frac(value), model, seed, s.task) for s in SUITES]
    return out


@cache
def _code(adapter: str, suite: str) -> str:
    return code_fingerprint(adapter, suite)


def _run_row(run_id: str, adapter: str, config: str, model: str, suite: str, seed: int, baseline: str | None, when) -> dict:
    variant = hashlib.sha256(f"{adapter}{config}{model}{suite}".encode()).hexdigest()[:16]
    return {
        "run_id": run_id, "config_hash": f"{variant}-{seed}", "status": "finished", "model": model, "model_revision": "gen",
        "code": _code(adapter, suite),
        "adapter": adapter, "adapter_config": config, "suite": suite, "suite_config": "{}", "profile": "quick", "seed": seed,
        "recipe": "{}", "device": "cpu", "started_at": when, "finished_at": when, "wall_s": 60.0,
        "baseline_run_id": baseline, "variant": variant,
    }


def _items(run_id: str, shape: SuiteShape, quality: float, rng: np.random.Generator) -> pd.DataFrame:
    n = shape.items * len(shape.groups)
    values = (rng.random(n) < shape.base * quality).astype(float)
    return pd.DataFrame({
        "run_id": run_id, "task": shape.task, "language": np.repeat(shape.groups, shape.items), "split": "test",
        "metric": shape.metric, "item": [f"{g}-{i}" for g in shape.groups for i in range(shape.items)], "value": values,
    })


def _scores(run_id: str, shape: SuiteShape, items: pd.DataFrame, base: dict | None) -> tuple[list[dict], dict]:
    """Score and comparison rows of one run; returns them and the scores by language (for its methods)."""
    by_group = items.groupby("language", sort=False).value.agg(["mean", "count", "std"])
    if len(shape.groups) > 1:
        by_group.loc["avg"] = [by_group["mean"].mean(), by_group["count"].sum(), by_group["std"].mean()]
    rows, means = [], {}
    for language, (mean, count, sd) in by_group.iterrows():
        half = 1.96 * (sd or 0.3) / np.sqrt(count)
        b = base[language] if base else mean
        pct = 100 * mean / b if b else None
        rows.append({
            "run_id": run_id, "task": shape.task, "language": language, "split": "test", "metric": shape.metric, "value": mean,
            "ci_low": mean - half, "ci_high": mean + half, "n": int(count), "higher_is_better": True, "pct_base": pct,
            "chance": 0.0, "setting": "zero-shot", "baseline_run_id": None, "n_paired": int(count),
            "pct_base_ci_low": pct - 100 * half / b if pct else None, "pct_base_ci_high": pct + 100 * half / b if pct else None,
            "baseline_above_chance": True,
        })
        means[language] = mean
    return rows, means


def generate(path: Path, runs: int = 10_000, seed: int = 0) -> int:
    """Write the store; returns the number of runs."""
    rng = np.random.default_rng(seed)
    when = pd.Timestamp("2026-01-01", tz="UTC")
    shapes = {s.task: s for s in SUITES}
    run_rows, score_rows, item_frames, comp_rows, eff_rows, bases = [], [], [], [], [], {}
    for model in MODELS:
        for seed_ in SEEDS:
            for shape in SUITES:
                run_id = f"base-{model}-{shape.task}-{seed_}"
                items = _items(run_id, shape, 1.0, rng)
                scores, means = _scores(run_id, shape, items, None)
                bases[(model, shape.task, seed_)] = (run_id, means)
                run_rows.append(_run_row(run_id, "none", "{}", model, shape.task, seed_, None, when))
                score_rows += scores
                item_frames.append(items)
                comp_rows.append((run_id, 1.0))
    for i, (adapter, config, fraction, model, seed_, suite) in enumerate(plan(runs)):
        run_id = f"run-{i:06d}-{adapter}"
        base_id, base_means = bases[(model, suite, seed_)]
        quality = min(1.05, 0.75 + 0.08 * np.log10(max(fraction, 1e-4) * 1e4) + rng.normal(0, 0.02))
        items = _items(run_id, shapes[suite], quality, rng)
        scores, _ = _scores(run_id, shapes[suite], items, base_means)
        run_rows.append(_run_row(run_id, adapter, config, model, suite, seed_, base_id, when + pd.Timedelta(seconds=i)))
        score_rows += [{**s, "baseline_run_id": base_id} for s in scores]
        item_frames.append(items)
        comp_rows.append((run_id, fraction))
        eff_rows.append((run_id, "forward", 8, 128, 40.0 * (1 + rng.random()), 50.0, 25000.0, 300.0))
    _write(path, pd.DataFrame(run_rows), pd.DataFrame(score_rows), pd.concat(item_frames, ignore_index=True), comp_rows, eff_rows)
    return len(run_rows)


def _write(path: Path, runs: pd.DataFrame, scores: pd.DataFrame, items: pd.DataFrame, comp: list, eff: list) -> None:
    path.unlink(missing_ok=True)
    compression = pd.DataFrame(comp, columns=["run_id", "emb_param_fraction"]).assign(
        embedding_params_before=11_720_448, storage_bytes_before=46_881_792, total_params_before=22_713_216,
    )
    compression = compression.assign(
        embedding_params_after=(compression.emb_param_fraction * 11_720_448).astype("int64"),
        storage_bytes_after=(compression.emb_param_fraction * 46_881_792).astype("int64") + 30522 * 48,
        total_params_after=22_713_216, storage_fraction=compression.emb_param_fraction,
    )
    efficiency = pd.DataFrame(eff, columns=["run_id", "phase", "batch", "seq_len", "p50_ms", "p95_ms", "throughput", "peak_mem_mb"])
    with duckdb.connect(str(path)) as con:
        con.execute(SCHEMA)
        con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        for table, frame in (("runs", runs), ("scores", scores), ("comparisons", scores), ("items", items),
                             ("compression", compression), ("efficiency", efficiency)):
            con.register("frame", frame)
            columns = [c for c in con.execute(f"SELECT * FROM {table} LIMIT 0").df().columns if c in frame.columns]
            con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(columns)} FROM frame")
            con.unregister("frame")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the DuckDB file to write (replaced)")
    parser.add_argument("--runs", type=int, default=10_000, help="about this many runs")
    args = parser.parse_args()
    n = generate(args.out, args.runs)
    print(f"{n} runs written to {args.out}")


if __name__ == "__main__":
    main()
