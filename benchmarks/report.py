"""Benchmark rows, the markdown table and the JSON file."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.benchmarks.timing import Pair


@dataclass(frozen=True)
class Row:
    """One measured comparison: the reference (dense head, unchanged model) vs the method.

    ``ratio`` is the method's gain: base/method for times (> 1: faster), method/base for
    throughputs, and for memory the fall as a fraction of the removed table's bytes. ``target`` is
    the ratio the row must reach (None: reported only); ``low``/``high`` the range over rounds;
    ``floor``, where set, a value the whole range must lie above for the target to count as met.
    """

    section: str
    case: str
    unit: str
    base: float
    method: float
    ratio: float
    low: float
    high: float
    rounds: int
    target: float | None = None
    floor: float | None = None
    note: str = ""
    load: float = math.nan          # 1-minute load average when the row was measured
    base_peak_mb: float = math.nan  # CUDA peak with only that side resident (GPU runs)
    method_peak_mb: float = math.nan

    @classmethod
    def timed(cls, section: str, case: str, unit: str, pair: Pair, **kw) -> Row:
        return cls(section, case, unit, pair.base, pair.method, pair.speedup, pair.low, pair.high, pair.rounds,
                   base_peak_mb=pair.base_peak_mb, method_peak_mb=pair.method_peak_mb, **kw)

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return self.ratio >= self.target and (self.floor is None or self.low > self.floor)


@dataclass
class BenchReport:
    environment: dict[str, object]
    rows: list[Row] = field(default_factory=list)

    def markdown(self) -> str:
        gpu = any(not math.isnan(r.method_peak_mb) for r in self.rows)
        env = self.environment
        cache = f", last-level cache {env['last_level_cache_mib']:g} MiB" if "last_level_cache_mib" in env else ""
        lines = [
            (f"GPU {env['gpu']}, " if env.get("gpu") else "") + f"device {env['device']}, CPU {env['cpu']}{cache}, {env['cpu_cores']} cores, "
            f"{env['torch_threads']} torch threads, torch {env['torch']}, load {env.get('load_start', math.nan):.1f} at the start",
            "",
            "| section | case | base | method | ratio (range) | target | load | notes |" if not gpu else
            "| section | case | base | method | ratio (range) | target | peak MiB base / method | notes |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            floor = "" if r.floor is None else f", every round > {r.floor:g}x"
            target = "" if r.target is None else f"{r.target:g}x{floor} {'met' if r.met else 'NOT met'}"
            extra = f"{r.base_peak_mb:.0f} / {r.method_peak_mb:.0f}" if gpu else f"{r.load:.1f}"
            lines.append(
                f"| {r.section} | {r.case} | {r.base:.4g} {r.unit} | {r.method:.4g} {r.unit} "
                f"| {r.ratio:.2f}x ({r.low:.2f}-{r.high:.2f}) | {target} | {extra} | {r.note} |"
            )
        return "\n".join(lines)

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [{**asdict(r), "met": r.met} for r in self.rows]
        path.write_text(json.dumps({"environment": self.environment, "rows": rows}, indent=1, default=str) + "\n")
