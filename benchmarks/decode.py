"""Greedy decoding with the KV cache: ms per generated token of the unchanged model vs the ASG model.

Both variants are one model object whose input and output embedding modules are swapped between
rounds (the transformer layers are shared, so they cannot differ, and only one copy is held).
The head's share p of a base decode step and its speedup s are measured in the same rounds; a
faster head alone can lift the whole step to at most 1 / ((1 - p) + p / s). The ASG modules run as
in a scored run: their kernels where they apply (the fused C++ head on CPU, the Triton kernels on
CUDA), which the row's note names. Steps run eagerly (the heads section also times CUDA graphs).
"""

from __future__ import annotations

import inspect
import statistics

import torch
from torch import nn

from harness.benchmarks.report import Row
from harness.benchmarks.timing import from_samples, load_average, peak_mb, time_ms
from harness.methods import gather_sum, triton_support


def asg_path(device: str) -> str:
    """Which implementation ASG's head and lookup run on ``device`` in inference."""
    if device.startswith("cuda"):
        return "Triton kernels" if triton_support.available() else "torch reference (no Triton)"
    return "fused C++ kernel" if gather_sum.library() is not None else "torch reference (no compiler)"


def decode_target(shape: str, device: str) -> float | None:
    """Issue 43's goal: on CUDA, greedy decoding with ASG's modules >= 1.05x the unchanged model's
    tokens/s on the Llama-3 shape (the head's share bounds it at about 1.11x)."""
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


@torch.inference_mode()
def decode_rows(label: str, model: nn.Module, asg: tuple[nn.Module, nn.Module], device: str, rounds: int,
                prompt_len: int = 16, steps: int = 16, target: float | None = None) -> list[Row]:
    """Rows for greedy decoding of ``model`` (unchanged) vs ``model`` with ``asg`` = (embedding, head)."""
    base = (model.get_input_embeddings(), model.get_output_embeddings())
    model.eval().to(device)
    asg = tuple(module.to(device) for module in asg)
    vocab, dim = model.config.vocab_size, model.config.hidden_size
    prompt = torch.randint(0, vocab, (1, prompt_len), generator=torch.Generator().manual_seed(0)).to(device)
    hidden = torch.randn(1, 1, dim, device=device)
    steps_ms: tuple[list[float], list[float]] = ([], [])
    head_ms: tuple[list[float], list[float]] = ([], [])
    peaks = []
    for variant in (base, asg):  # warm-up, then the peak memory of one decode
        install(model, *variant)
        ms_per_token(model, prompt, steps, device)
        peaks.append(peak_mb(lambda: ms_per_token(model, prompt, steps, device), device))
    for _ in range(rounds):
        for variant, step_out, head_out in zip((base, asg), steps_ms, head_ms):
            install(model, *variant)
            step_out.append(ms_per_token(model, prompt, steps, device))
            head_out.append(time_ms(lambda: variant[1](hidden), device, 10))
    install(model, *base)
    step = from_samples(*steps_ms, peaks=tuple(peaks))
    head = from_samples(*head_ms)
    share = statistics.median(h / s for h, s in zip(head_ms[0], steps_ms[0]))
    bound = 1 / ((1 - share) + share / head.speedup)
    tokens = Row(
        "decode", f"greedy tokens/s, KV cache @ {label}", "tokens/s", 1000 / step.base, 1000 / step.method,
        step.speedup, step.low, step.high, step.rounds, target=target,
        note=f"head share p={share:.3f} of a base step, ASG head s={head.speedup:.1f}x: bound 1/((1-p)+p/s) = {bound:.2f}x; "
             f"ASG: {asg_path(device)}",
        load=load_average(), base_peak_mb=step.base_peak_mb, method_peak_mb=step.method_peak_mb,
    )
    return [tokens]
