"""Efficiency measured on every run, chosen by model kind, at fixed shapes.

Encoders: forward latency at batch 8 x 128 tokens. Decoders: prefill latency of a 128-token
prompt and per-token decode latency with the KV cache, both at batch 1. Each phase records
p50/p95, tokens/s and peak memory. Synthetic token ids are enough: speed and memory do not depend
on the text. A method's run times the unchanged model too, in rounds that alternate with the
compressed one, so compressed/base ratios come from one process under one machine load.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from harness.results.records import LatencyStats
from harness.sources.models import Kind

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


def _prefill_kwargs(model: nn.Module) -> dict:
    """Logits for the last prompt position only, as generation does, where the model supports it."""
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}


def _timed_ms(fn, device: str):
    _sync(device)
    start = time.perf_counter()
    out = fn()
    _sync(device)
    return out, (time.perf_counter() - start) * 1000.0


@torch.inference_mode()
def decode_latency(
    model: nn.Module, vocab_size: int, device: str, prompt_len: int = 128, new_tokens: int = 16,
    repeats: int = 3, seed: int = 0,
) -> list[LatencyStats]:
    """Prefill and per-token decode latency at batch 1 (greedy-decoding shape, synthetic ids).

    Each repeat prefills a ``prompt_len`` prompt, then feeds ``new_tokens`` single tokens with the
    KV cache. Phase ``prefill`` keeps one sample per repeat (seq_len = prompt_len); phase
    ``decode`` keeps one sample per generated token (seq_len 1, so tokens/s = 1000 / p50 ms).
    The first repeat is a warm-up and is not kept; peak memory covers it.
    """
    model.eval().to(device)
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, vocab_size, (1, prompt_len), generator=gen).to(device)
    steps = torch.randint(0, vocab_size, (new_tokens, 1, 1), generator=gen).to(device)
    prefill_kwargs = _prefill_kwargs(model)
    prefill_ms: list[float] = []
    decode_ms: list[float] = []
    with PeakMemory(model, device) as peak:
        for repeat in range(repeats + 1):
            out, ms = _timed_ms(lambda: model(input_ids=prompt, use_cache=True, **prefill_kwargs), device)
            cache, times = out.past_key_values, [ms]
            for step in steps:
                out, ms = _timed_ms(lambda: model(input_ids=step, past_key_values=cache, use_cache=True), device)
                cache = out.past_key_values
                times.append(ms)
            if repeat:  # repeat 0 warms up
                prefill_ms.append(times[0])
                decode_ms.extend(times[1:])
    return [
        LatencyStats.from_samples("prefill", 1, prompt_len, prefill_ms, peak.mb),
        LatencyStats.from_samples("decode", 1, 1, decode_ms, peak.mb),
    ]


ROUNDS = 3
"""Rounds of :func:`measure`: models are timed in turn, round after round (ABAB...), so drift in
machine load hits every model alike; a phase pools its samples over the rounds."""


def _round(model: nn.Module, kind: Kind, device: str, seed: int, smoke: bool) -> list[LatencyStats]:
    """One round of timing at the fixed shapes (``smoke``: small shapes, few samples)."""
    vocab_size = model.config.vocab_size
    if kind == "decoder":
        shape = {"prompt_len": 16, "new_tokens": 4, "repeats": 1} if smoke else {"repeats": 2}
        return decode_latency(model, vocab_size, device, seed=seed, **shape)
    shape = {"batch": 2, "seq_len": 32, "warmup": 1, "repeats": 2} if smoke else {"repeats": 4}
    return [forward_latency(model, vocab_size, device, seed=seed, **shape)]


def _pooled(rounds: list[list[LatencyStats]]) -> list[LatencyStats]:
    """Per phase: the samples of all rounds, the largest peak memory."""
    pooled = []
    for same in zip(*rounds):
        first = same[0]
        peaks = [s.peak_mem_mb for s in same if not math.isnan(s.peak_mem_mb)]
        samples = [ms for s in same for ms in s.samples_ms]
        pooled.append(LatencyStats.from_samples(first.phase, first.batch, first.seq_len, samples, max(peaks, default=math.nan)))
    return pooled


def measure(
    models: Sequence[nn.Module], kind: Kind, device: str, seed: int = 0, smoke: bool = False, rounds: int = ROUNDS,
) -> list[list[LatencyStats]]:
    """The efficiency phases of each model, timed in alternating rounds; decoders decode, encoders
    run forward passes. Returns one list of phases per model, in the order given.

    ``smoke`` (the test profile) times small shapes a few times: the figures only show that the
    measurement runs; the recorded batch and seq_len say which shape was timed.
    """
    timed: list[list[list[LatencyStats]]] = [[] for _ in models]
    for _ in range(rounds):
        for model, out in zip(models, timed):
            out.append(_round(model, kind, device, seed, smoke))
    return [_pooled(out) for out in timed]
