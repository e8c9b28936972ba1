"""Paired timing: a reference and a method timed in alternating rounds (ABAB), so drift in machine
load hits both; medians per side and the median of the per-round ratios. CUDA: events around the
calls, and peak memory with only the measured module resident (:func:`resident_peak_mb`).

Each call is timed hot (back to back: what it reads stays in the caches) and cold (:class:`Evictor`:
a buffer twice the last-level cache is read before each call, and only the call is timed), as a
head runs after a model's layers have filled the caches with their own weights."""

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
    base_peak_mb: float = math.nan  # CUDA peak of a call with only that side resident (NaN on CPU)
    method_peak_mb: float = math.nan


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def last_level_cache_bytes(device: str) -> int:
    """The last cache before memory: CUDA's L2, else the largest CPU cache sysfs lists (32 MiB when
    it lists none)."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_properties(device).L2_cache_size
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip()
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * scale)
    return max(sizes, default=32 * 2**20)


class Evictor:
    """Evicts a call's tensors from the caches: ``evictor()`` touches a buffer twice the last-level
    cache (CPU: reads it; CUDA: writes it, since a GPU's L2 keeps what was read)."""

    def __init__(self, device: str):
        self.device = device
        self.bytes = 2 * last_level_cache_bytes(device)
        self.buffer = torch.ones(self.bytes // 4, device=device)

    def __call__(self) -> None:
        if self.device.startswith("cuda"):
            self.buffer.zero_()
        else:
            self.buffer.sum()


def time_ms(fn: Callable[[], object], device: str, inner: int, evict: Evictor | None = None) -> float:
    """Milliseconds per call of ``fn``, averaged over ``inner`` calls: back to back, or with
    ``evict`` each call alone after the caches were evicted."""
    if evict is not None:
        return sum(_one_cold_call(fn, device, evict) for _ in range(inner)) / inner
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


def _one_cold_call(fn: Callable[[], object], device: str, evict: Evictor) -> float:
    evict()
    if device.startswith("cuda"):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    begin = time.perf_counter()
    fn()
    return (time.perf_counter() - begin) * 1000.0


def tensor_bytes(*modules: torch.nn.Module) -> int:
    """Bytes of the parameters and buffers of ``modules``, each storage counted once (a tied table once)."""
    storages = {}
    for module in modules:
        for t in [*module.parameters(), *module.buffers()]:
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def resident_peak_mb(fn: Callable[[], object], resident_bytes: int, device: str) -> float:
    """CUDA memory high-water mark (MiB) of one call of ``fn`` as if only ``resident_bytes`` (the
    measured head's own tensors and inputs) were allocated beside it: those bytes plus what the call
    allocates above what was allocated when it started; NaN on CPU."""
    if not device.startswith("cuda"):
        return math.nan
    _sync(device)
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    _sync(device)
    return (resident_bytes + torch.cuda.max_memory_allocated() - before) / 2**20


def one_round(fns: dict[str, Callable[[], object]], device: str, inner: int, evict: Evictor | None = None) -> dict[str, float]:
    """Milliseconds per call of every function in ``fns``, one after another (cold with ``evict``)."""
    return {name: time_ms(fn, device, inner, evict) for name, fn in fns.items()}


REGIMES = ("cold", "hot")


def rounds_of(fns: dict[str, Callable[[], object]], device: str, rounds: int, inner: int,
              evict: Evictor, warmup: int = 3) -> dict[str, dict[str, list[float]]]:
    """Every function in ``fns`` in turn, round after round (A B C ... A B C ...), cold and then hot
    in every round, after ``warmup`` calls each (first-call costs: kernel builds, the allocator, a
    head's CUDA graph capture): per regime ("cold", "hot") and function its ms per call in every
    round. Ratios between any two are taken round by round (:func:`from_samples`), so drift in
    machine load hits both sides."""
    with torch.inference_mode():
        for fn in fns.values():
            for _ in range(warmup):
                fn()
        times = [(one_round(fns, device, inner, evict), one_round(fns, device, inner)) for _ in range(rounds)]
    return {regime: {name: [t[i][name] for t in times] for name in fns} for i, regime in enumerate(REGIMES)}


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
        "last_level_cache_mib": round(last_level_cache_bytes("cpu") / 2**20, 1),
    }
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(device)
    return env
