"""Greedy decoding with the KV cache: ms per generated token of the unchanged model vs the ASG model.

Both variants are one model object whose input and output embedding modules are swapped between
rounds (the transformer layers are shared, so they cannot differ, and only one copy is held); which
variant goes first in a round is drawn at random (seeded), so neither always meets the caches or
clocks the other left. The shares of a base decode step taken by the head (p_h) and the lookup
(p_e), and their speed-ups s_h and s_e, are measured in the same rounds; swapping those two
modules alone can lift the whole step to at most 1 / ((1 - p_h - p_e) + p_h / s_h + p_e / s_e), the
bound the row prints beside its ratio (and, where the median lies above it, says that the excess is
not the modules' doing). The ASG modules run as in a scored run: their kernels where they apply (the
fused C++ head on CPU; on CUDA the Triton kernels, the head replayed from its own CUDA graph once its
shape repeats), and the row's note names the paths they actually took
(:mod:`harness.methods.kernel_paths`).
"""

from __future__ import annotations

import inspect
import random
import statistics

import torch
from torch import nn

from harness.benchmarks.report import Row
from harness.benchmarks.timing import from_samples, load_average, resident_peak_mb, tensor_bytes, time_ms
from harness.methods import kernel_paths


def decode_target(shape: str, device: str) -> float | None:
    """The goal: on CUDA, greedy decoding with ASG's modules >= 1.05x the unchanged
    model's tokens/s on the Llama-3 shape, every round above 1x (:attr:`Row.floor`)."""
    return 1.05 if device.startswith("cuda") and shape == "llama3-size" else None


def install(model: nn.Module, embed: nn.Module, head: nn.Module) -> None:
    """Make ``model`` use ``embed`` and ``head`` (an untied pair may share nothing)."""
    model.set_input_embeddings(embed)
    model.set_output_embeddings(head)


def ms_per_token(model: nn.Module, prompt: torch.Tensor, steps: int, device: str) -> float:
    """Prefill ``prompt`` (untimed), then time ``steps`` greedy steps, each fed the argmax of the last."""
    keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    out = model(input_ids=prompt, use_cache=True, **keep)
    state = [out.past_key_values, out.logits[:, -1:].argmax(-1)]

    def decode() -> None:
        for _ in range(steps):
            step = model(input_ids=state[1], past_key_values=state[0], use_cache=True)
            state[0], state[1] = step.past_key_values, step.logits[:, -1:].argmax(-1)

    return time_ms(decode, device, 1) / steps


def amdahl_bound(step: float, parts: list[tuple[float, float]]) -> float:
    """The most a step of ``step`` ms can gain from replacing parts of it: ``parts`` lists each
    replaced part's (ms in the step, ms of its replacement)."""
    kept = step - sum(base for base, _ in parts)
    return step / (kept + sum(new for _, new in parts))


def paths_note(embed: nn.Module, head: nn.Module) -> str:
    """The paths the ASG modules took, with their calls: "head Triton kernels x1 + Triton kernels, CUDA
    graph x96; lookup Triton kernel x97"."""
    parts = []
    for what, module in (("head", head), ("lookup", embed)):
        counts = kernel_paths.taken(module).get("", {})
        parts.append(f"{what} " + " + ".join(f"{path} x{calls}" for path, calls in counts.items()))
    return "; ".join(parts)


@torch.inference_mode()
def decode_rows(label: str, model: nn.Module, asg: tuple[nn.Module, nn.Module], device: str, rounds: int,
                prompt_len: int = 16, steps: int = 16, target: float | None = None, seed: int = 0) -> list[Row]:
    """Rows for greedy decoding of ``model`` (unchanged) vs ``model`` with ``asg`` = (embedding, head)."""
    base = (model.get_input_embeddings(), model.get_output_embeddings())
    model.eval().to(device)
    asg = tuple(module.to(device) for module in asg)
    vocab, dim = model.config.vocab_size, model.config.hidden_size
    prompt = torch.randint(0, vocab, (1, prompt_len), generator=torch.Generator().manual_seed(seed)).to(device)
    hidden, token = torch.randn(1, 1, dim, device=device), prompt[:, :1]
    times: dict[str, tuple[list[float], list[float]]] = {part: ([], []) for part in ("step", "head", "lookup")}
    peaks = []
    for variant in (base, asg):  # warm-up (kernel builds, the head's graph capture), then the peak of one decode
        install(model, *variant)
        ms_per_token(model, prompt, steps, device)
        peaks.append(resident_peak_mb(lambda: ms_per_token(model, prompt, steps, device), tensor_bytes(model), device))
    order = random.Random(seed)
    for _ in range(rounds):
        for side in order.sample((0, 1), 2):
            variant = (base, asg)[side]
            install(model, *variant)
            times["step"][side].append(ms_per_token(model, prompt, steps, device))
            times["head"][side].append(time_ms(lambda: variant[1](hidden), device, 10))
            times["lookup"][side].append(time_ms(lambda: variant[0](token), device, 10))
    install(model, *base)
    return [_row(label, times, peaks, device, target, paths_note(*asg))]


def _row(label: str, times: dict[str, tuple[list[float], list[float]]], peaks: list[float], device: str,
         target: float | None, paths: str) -> Row:
    step = from_samples(*times["step"], peaks=tuple(peaks))
    (base_steps, _), (head_base, head_asg), (lookup_base, lookup_asg) = times["step"], times["head"], times["lookup"]
    bound = statistics.median(amdahl_bound(s, [(hb, ha), (lb, la)])
                              for s, hb, ha, lb, la in zip(base_steps, head_base, head_asg, lookup_base, lookup_asg))
    share_h = statistics.median(h / s for h, s in zip(head_base, base_steps))
    share_e = statistics.median(e / s for e, s in zip(lookup_base, base_steps))
    speed_h, speed_e = from_samples(head_base, head_asg).speedup, from_samples(lookup_base, lookup_asg).speedup
    note = (f"head share p_h={share_h:.3f} of a base step, ASG head s_h={speed_h:.1f}x; lookup p_e={share_e:.3f}, "
            f"s_e={speed_e:.2f}x: bound 1/((1-p_h-p_e)+p_h/s_h+p_e/s_e) = {bound:.2f}x")
    if step.speedup > bound:
        note += (f"; the median {step.speedup:.2f}x lies above this bound: the steps differed by more than the two modules "
                 f"can make them (round-to-round noise, range {step.low:.2f}-{step.high:.2f}x), not a gain to quote")
    return Row("decode", f"greedy tokens/s, KV cache @ {label}", "tokens/s", 1000 / step.base, 1000 / step.method,
               step.speedup, step.low, step.high, step.rounds, target=target, floor=None if target is None else 1.0,
               note=f"{note}; ASG paths taken: {paths}", load=load_average(),
               base_peak_mb=step.base_peak_mb, method_peak_mb=step.method_peak_mb)
