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


def rounds_of(fns: dict[str, Callable[[], object]], device: str, rounds: int,
              inner: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Every function in ``fns`` in turn, round after round (A B C ... A B C ...), after one warm-up
    call each (first-call costs: kernel builds, the allocator): per function its ms per call in every
    round, and its peak memory (:func:`peak_mb`). Ratios between any two are taken round by round
    (:func:`from_samples`), so drift in machine load hits both sides."""
    with torch.inference_mode():
        for fn in fns.values():
            fn()
        peaks = {name: peak_mb(fn, device) for name, fn in fns.items()}
        times = [one_round(fns, device, inner) for _ in range(rounds)]
    return {name: [t[name] for t in times] for name in fns}, peaks


def graphed(fn: Callable[[], object], warmup: int = 3) -> Callable[[], object]:
    """``fn`` captured into a CUDA graph (after ``warmup`` calls on a side stream, so kernels are
    built and the allocator settled): the returned function replays it, one launch for all its
    kernels, writing into the same output tensors every time."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def copy_bandwidth(device: str, mib: int, repeats: int = 5) -> float:
    """Bytes per second of a plain copy of ``mib`` MiB on ``device`` (read + write counted), the
    median of ``repeats``: the memory bound the heads' bandwidth is read against."""
    source = torch.ones(mib * 2**20 // 4, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    ms = statistics.median(time_ms(lambda: target.copy_(source), device, 1) for _ in range(repeats))
    return 2 * source.numel() * 4 / (ms / 1000)


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
