"""Paired timing: a reference and a method timed in alternating rounds (ABAB), so drift in machine
load hits both; medians per side and the median of the per-round ratios. CUDA: events around the
calls and ``torch.cuda.max_memory_allocated`` per side."""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch


@dataclass(frozen=True)
class Pair:
    """Medians of ``rounds`` alternating rounds; ``speedup`` = median of per-round base/method."""

    base: float  # ms per call (or the unit of the caller)
    method: float
    speedup: float
    low: float  # smallest and largest per-round ratio
    high: float
    rounds: int
    base_peak_mb: float = math.nan  # CUDA max allocated while the side ran (NaN on CPU)
    method_peak_mb: float = math.nan


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_ms(fn: Callable[[], object], device: str, inner: int) -> float:
    """Milliseconds per call of ``fn``, averaged over ``inner`` back-to-back calls."""
    if device.startswith("cuda"):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / inner
    begin = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - begin) * 1000.0 / inner


def peak_mb(fn: Callable[[], object], device: str) -> float:
    """CUDA memory high-water mark (MiB) of one call of ``fn``; NaN on CPU."""
    if not device.startswith("cuda"):
        return math.nan
    _sync(device)
    torch.cuda.reset_peak_memory_stats()
    fn()
    _sync(device)
    return torch.cuda.max_memory_allocated() / 2**20


def one_round(fns: dict[str, Callable[[], object]], device: str, inner: int) -> dict[str, float]:
    """Milliseconds per call of every function in ``fns``, one after another."""
    return {name: time_ms(fn, device, inner) for name, fn in fns.items()}


def against(base: Callable[[], object], methods: dict[str, Callable[[], object]], device: str, rounds: int,
            inner: int) -> dict[str, Pair]:
    """``base`` and every method in turn, round after round (A B C ... A B C ...); each method's
    ratios are taken against the base time of the same round."""
    fns = {"": base, **methods}
    with torch.inference_mode():
        for fn in fns.values():  # warm-up: first-call costs (kernel build, allocator) stay out
            fn()
        peaks = {name: peak_mb(fn, device) for name, fn in fns.items()}
        times = [one_round(fns, device, inner) for _ in range(rounds)]
    return {name: from_samples([t[""] for t in times], [t[name] for t in times], peaks=(peaks[""], peaks[name]))
            for name in methods}


def from_samples(base: list[float], method: list[float], peaks: tuple[float, float] = (math.nan, math.nan),
                 higher_is_better: bool = False) -> Pair:
    """A :class:`Pair` from per-round values of two sides: times per call (ratio base/method), or
    with ``higher_is_better`` throughputs or speed-ups (ratio method/base)."""
    ratios = [m / b if higher_is_better else b / m for b, m in zip(base, method)]
    return Pair(
        statistics.median(base), statistics.median(method), statistics.median(ratios), min(ratios), max(ratios),
        len(ratios), *peaks,
    )


def load_average() -> float:
    """The 1-minute load average (NaN where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return math.nan


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: str) -> dict[str, object]:
    """Where the figures were taken: CPU, cores, torch threads, torch version, GPU name."""
    env: dict[str, object] = {
        "device": device,
        "cpu": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(device)
    return env
