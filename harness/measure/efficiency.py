"""Efficiency measured on every run, chosen by model kind, at fixed shapes.

Encoders: forward latency at batch 8 x 128 tokens. Decoders: prefill latency of a 128-token
prompt and per-token decode latency with the KV cache, both at batch 1. Encoder-decoders: one
forward at batch 8 x 128 tokens, the decoder reading the same 128 tokens (teacher-forced). Each
phase records p50/p95, tokens/s and peak memory. A run times the model on tokenized text (a fixed
English passage through the run's tokenizer, its special tokens included, as every suite feeds it:
an encoder-decoder such as T5 rejects input without its end-of-sequence token); without a tokenizer
(benchmarks of bare architectures) the ids are drawn at random. A method's run times the unchanged
model too, in rounds that alternate with the compressed one, so compressed/base ratios come from
one process under one machine load.

Peak memory is measured for each model alone, so it does not depend on which model came first or
on what else is resident: on CUDA the other models are moved off the device and the figure is
``torch.cuda.max_memory_allocated`` over one workload (weights included); on CPU it is the model's
tensor bytes (parameters and buffers) plus the peak of bytes live in torch's allocator during one
workload, read from the profiler's memory events. (The process high-water mark used before depended
on order: the first model measured paid the process's page growth.)
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from harness.results.records import LatencyStats
from harness.sources.models import Kind


def model_bytes(model: nn.Module) -> int:
    """Bytes of the model's unique parameter and buffer storages."""
    tensors = {t.data_ptr(): t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()]}
    return sum(tensors.values())


@contextlib.contextmanager
def _quiet_stderr():
    """The CPU profiler prints two lines per session on fd 2; keep them off the user's terminal."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _peak_live_bytes(workload) -> int:
    """Peak bytes live in torch's CPU allocator while ``workload()`` runs (profiler memory events)."""
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        workload()
    live = peak = 0
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()
        peak = max(peak, live)
    return peak


@torch.inference_mode()
def peak_memory_mb(model: nn.Module, workload, device: str) -> float:
    """Peak memory of ``workload()`` on ``model`` alone (see the module docstring), in MiB."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        workload()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2**20
    return (model_bytes(model) + _peak_live_bytes(workload)) / 2**20


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


PASSAGE = (
    "The committee met on Tuesday to review the budget for the coming year. After a long discussion, "
    "the members agreed to fund the new library, repair two bridges and hire more teachers for the "
    "schools in the northern district, where the population has grown quickly since the factory opened. "
)
"""The text every model is timed on: plain English that any tokenizer cuts into ordinary tokens."""


def text_ids(tokenizer, rows: int, length: int, special: bool) -> torch.Tensor:
    """(rows, length) ids of :data:`PASSAGE` repeated, cut to ``length`` tokens, with the tokenizer's
    special tokens around it when ``special`` (encoders, encoder-decoders)."""
    text = PASSAGE * (1 + 2 * length // max(1, len(tokenizer(PASSAGE, add_special_tokens=False)["input_ids"])))
    ids = tokenizer([text] * rows, truncation=True, max_length=length, add_special_tokens=special)["input_ids"]
    return torch.tensor([row[:length] for row in ids])


def _forward_inputs(ids: torch.Tensor, kind: Kind) -> dict[str, torch.Tensor]:
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if kind == "encoder-decoder":
        inputs["decoder_input_ids"] = ids  # the decoder reads as many tokens, teacher-forced
    return inputs


@torch.inference_mode()
def forward_latency(
    model: nn.Module, vocab_size: int, device: str, batch: int = 8, seq_len: int = 128,
    warmup: int = 2, repeats: int = 10, seed: int = 0, ids: torch.Tensor | None = None, kind: Kind = "encoder",
) -> LatencyStats:
    """Time ``repeats`` forward passes of a (batch, seq_len) input after ``warmup`` passes: ``ids``
    when given (:func:`text_ids`), else ids drawn at random below ``vocab_size``."""
    model.eval().to(device)
    if ids is None:
        ids = torch.randint(0, vocab_size, (batch, seq_len), generator=torch.Generator().manual_seed(seed))
    inputs = _forward_inputs(ids.to(device), kind)
    batch, seq_len = ids.shape
    for _ in range(warmup):
        model(**inputs)
    samples = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        model(**inputs)
        _sync(device)
        samples.append((time.perf_counter() - start) * 1000.0)
    return LatencyStats.from_samples("forward", batch, seq_len, samples, math.nan)


def _prefill_kwargs(model: nn.Module) -> dict:
    """Logits for the last prompt position only, as generation does, where the model supports it."""
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}


def _timed_ms(fn, device: str):
    _sync(device)
    start = time.perf_counter()
    out = fn()
    _sync(device)
    return out, (time.perf_counter() - start) * 1000.0


def _decode_inputs(vocab_size: int, device: str, prompt_len: int, new_tokens: int, seed: int, tokenizer=None):
    """A (1, prompt_len) prompt and (new_tokens, 1, 1) tokens fed one by one: the passage's tokens
    (the tokens that follow the prompt) with a tokenizer, else random ids."""
    if tokenizer is not None:
        ids = text_ids(tokenizer, 1, prompt_len + new_tokens, special=False)
        return ids[:, :prompt_len].to(device), ids[0, prompt_len:].view(-1, 1, 1).to(device)
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, vocab_size, (1, prompt_len), generator=gen).to(device)
    steps = torch.randint(0, vocab_size, (new_tokens, 1, 1), generator=gen).to(device)
    return prompt, steps


def _generate(model: nn.Module, prompt: torch.Tensor, steps: torch.Tensor, device: str) -> list[float]:
    """Prefill ``prompt``, then feed each of ``steps`` with the KV cache; milliseconds of each call."""
    out, ms = _timed_ms(lambda: model(input_ids=prompt, use_cache=True, **_prefill_kwargs(model)), device)
    cache, times = out.past_key_values, [ms]
    for step in steps:
        out, ms = _timed_ms(lambda: model(input_ids=step, past_key_values=cache, use_cache=True), device)
        cache = out.past_key_values
        times.append(ms)
    return times


@torch.inference_mode()
def decode_latency(
    model: nn.Module, vocab_size: int, device: str, prompt_len: int = 128, new_tokens: int = 16,
    repeats: int = 3, seed: int = 0, tokenizer=None,
) -> list[LatencyStats]:
    """Prefill and per-token decode latency at batch 1 (greedy-decoding shape, synthetic ids).

    Each repeat prefills a ``prompt_len`` prompt, then feeds ``new_tokens`` single tokens with the
    KV cache. Phase ``prefill`` keeps one sample per repeat (seq_len = prompt_len); phase
    ``decode`` keeps one sample per generated token (seq_len 1, so tokens/s = 1000 / p50 ms).
    The first repeat is a warm-up and is not kept.
    """
    model.eval().to(device)
    prompt, steps = _decode_inputs(vocab_size, device, prompt_len, new_tokens, seed, tokenizer)
    prefill_ms: list[float] = []
    decode_ms: list[float] = []
    for repeat in range(repeats + 1):
        times = _generate(model, prompt, steps, device)
        if repeat:  # repeat 0 warms up
            prefill_ms.append(times[0])
            decode_ms.extend(times[1:])
    return [
        LatencyStats.from_samples("prefill", 1, prompt_len, prefill_ms, math.nan),
        LatencyStats.from_samples("decode", 1, 1, decode_ms, math.nan),
    ]


ROUNDS = 3
"""Rounds of :func:`measure`: models are timed in turn, round after round (ABAB...), so drift in
machine load hits every model alike; a phase pools its samples over the rounds."""


@dataclass(frozen=True)
class Shapes:
    """The fixed shapes of one profile: encoders' forward batch, decoders' prompt and generation."""

    batch: int = 8
    seq_len: int = 128
    warmup: int = 2
    repeats: int = 4
    prompt_len: int = 128
    new_tokens: int = 16
    decode_repeats: int = 2


FULL = Shapes()
SMOKE = Shapes(batch=2, seq_len=32, warmup=1, repeats=2, prompt_len=16, new_tokens=4, decode_repeats=1)
"""Smoke (the test profile) times small shapes a few times: the figures only show that the
measurement runs; the recorded batch and seq_len say which shape was timed."""


def _forward_ids(model: nn.Module, seed: int, shapes: Shapes, tokenizer) -> torch.Tensor:
    if tokenizer is not None:
        return text_ids(tokenizer, shapes.batch, shapes.seq_len, special=True)
    return torch.randint(0, model.config.vocab_size, (shapes.batch, shapes.seq_len), generator=torch.Generator().manual_seed(seed))


def _round(model: nn.Module, kind: Kind, device: str, seed: int, shapes: Shapes, tokenizer) -> list[LatencyStats]:
    """One round of timing at the fixed shapes."""
    vocab_size = model.config.vocab_size
    if kind == "decoder":
        return decode_latency(model, vocab_size, device, shapes.prompt_len, shapes.new_tokens, shapes.decode_repeats, seed, tokenizer)
    ids = _forward_ids(model, seed, shapes, tokenizer)
    return [forward_latency(model, vocab_size, device, warmup=shapes.warmup, repeats=shapes.repeats, ids=ids, kind=kind)]


def _workload(model: nn.Module, kind: Kind, device: str, seed: int, shapes: Shapes, tokenizer):
    """One forward (encoders, encoder-decoders), or one prefill and the decode steps (decoders), as a callable."""
    vocab_size = model.config.vocab_size
    if kind == "decoder":
        prompt, steps = _decode_inputs(vocab_size, device, shapes.prompt_len, shapes.new_tokens, seed, tokenizer)
        return lambda: _generate(model, prompt, steps, device)
    inputs = _forward_inputs(_forward_ids(model, seed, shapes, tokenizer).to(device), kind)
    return lambda: model(**inputs)


def _alone(models: Sequence[nn.Module], index: int, device: str) -> None:
    """Only ``models[index]`` on a CUDA device (the others on the CPU); nothing to do on the CPU."""
    if device.startswith("cuda"):
        for i, m in enumerate(models):
            if i != index:
                m.to("cpu")
        torch.cuda.empty_cache()
        models[index].to(device)


def _pooled(rounds: list[list[LatencyStats]], peak_mb: float) -> list[LatencyStats]:
    """Per phase: the samples of all rounds, and the model's peak memory."""
    return [
        LatencyStats.from_samples(same[0].phase, same[0].batch, same[0].seq_len, [ms for s in same for ms in s.samples_ms], peak_mb)
        for same in zip(*rounds)
    ]


def measure(
    models: Sequence[nn.Module], kind: Kind, device: str, seed: int = 0, smoke: bool = False, rounds: int = ROUNDS,
    tokenizer=None,
) -> list[list[LatencyStats]]:
    """The efficiency phases of each model: latency timed in alternating rounds (decoders decode,
    encoders and encoder-decoders run forward passes) on :data:`PASSAGE` through ``tokenizer`` (random
    ids without one), then each model's peak memory measured alone. Returns one list of phases per
    model, in the order given; the last model is left on ``device``."""
    shapes = SMOKE if smoke else FULL
    timed: list[list[list[LatencyStats]]] = [[] for _ in models]
    for _ in range(rounds):
        for model, out in zip(models, timed):
            model.to(device)
            out.append(_round(model, kind, device, seed, shapes, tokenizer))
    peaks = []
    for i, model in enumerate(models):
        _alone(models, i, device)
        model.eval()
        peaks.append(peak_memory_mb(model, _workload(model, kind, device, seed, shapes, tokenizer), device))
    return [_pooled(out, peak) for out, peak in zip(timed, peaks)]
