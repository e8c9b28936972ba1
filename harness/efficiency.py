"""Efficiency measured on every run: forward latency, throughput and peak memory at a fixed shape.

Synthetic token ids are enough here: speed and memory do not depend on the text.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch import nn

from harness.records import LatencyStats

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _rss_kib(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def model_bytes(model: nn.Module) -> int:
    tensors = {t.data_ptr(): t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()]}
    return sum(tensors.values())


class PeakMemory:
    """Peak memory of a block: CUDA max allocated, or on CPU model bytes plus the growth of the
    process high-water mark (Linux ``/proc/self/clear_refs`` resets it); NaN where neither works."""

    def __init__(self, model: nn.Module, device: str):
        self.model, self.device = model, device
        self.mb = float("nan")

    def __enter__(self) -> PeakMemory:
        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        else:
            try:
                _CLEAR_REFS.write_text("5")
            except OSError:
                pass
            self._start = _rss_kib("VmRSS")
        return self

    def __exit__(self, *exc) -> None:
        if self.device.startswith("cuda"):
            self.mb = torch.cuda.max_memory_allocated() / 2**20
            return
        peak = _rss_kib("VmHWM")
        if peak is not None and self._start is not None:
            self.mb = model_bytes(self.model) / 2**20 + max(peak - self._start, 0) / 1024


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@torch.inference_mode()
def forward_latency(
    model: nn.Module, vocab_size: int, device: str, batch: int = 8, seq_len: int = 128,
    warmup: int = 2, repeats: int = 10, seed: int = 0,
) -> LatencyStats:
    """Time ``repeats`` forward passes of a (batch, seq_len) input after ``warmup`` passes."""
    model.eval().to(device)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (batch, seq_len), generator=gen).to(device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    with PeakMemory(model, device) as peak:
        for _ in range(warmup):
            model(**inputs)
    samples = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        model(**inputs)
        _sync(device)
        samples.append((time.perf_counter() - start) * 1000.0)
    return LatencyStats.from_samples("forward", batch, seq_len, samples, peak.mb)
