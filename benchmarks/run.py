"""Every benchmark in one process: output heads, greedy decoding, resident memory.

Sections run in this order, each as ratios of ABAB rounds: for SmolLM2 (packaged weights and a
fitted ASG, or random weights at its shapes) and a Llama-3-sized decoder (random weights, a few
layers), the output heads at batch 1 and 32 (on CPU also quiet vs one busy process), then
greedy decoding; the memory and disk reads of me5-small and SmolLM2 loaded from their saved files
with and without ASG, one fresh process per measurement; the fit time of ASG and SG on
me5-small's table; encoder latency after a faiss fit vs in a fresh process.
"""

from __future__ import annotations

import gc
from dataclasses import asdict, dataclass
from typing import Callable

import torch
from harness.adapters.asg import AsgAdapter, AsgConfig, ConceptEmbedding, ConceptLMHead
from torch import nn

from harness.adapter import FitContext
from harness.benchmarks.contention import contention_rows
from harness.benchmarks.decode import decode_rows, decode_target
from harness.benchmarks.fit import after_fit_rows, fit_rows
from harness.benchmarks.heads import LLAMA3, SMOLLM2, Shape, compressed_heads, head_rows, head_targets, random_concepts
from harness.benchmarks.memory import memory_rows
from harness.benchmarks.models import LLAMA3_LAYOUT, SMOLLM2_LAYOUT, TINY_LAYOUT, load_packaged, random_decoder
from harness.benchmarks.report import BenchReport
from harness.benchmarks.timing import environment, load_average
from harness.config import require_positive
from harness.errors import ConfigError

SECTIONS = ("heads", "decode", "memory", "fit", "after-fit")
TINY = Shape("tiny", 512, 64, k=16, m=8, K=2, r=8)


@dataclass(frozen=True)
class BenchOptions:
    sections: tuple[str, ...] = SECTIONS
    device: str = "cpu"
    rounds: int = 5               # ABAB rounds per comparison (medians over them)
    random_weights: bool = False  # random weights at the real shapes: no model package, no faiss fit
    smoke: bool = False           # tiny shapes and MiniLM for memory: checks that everything runs
    niter: int = 10               # k-means iterations of the ASG fits; speed and memory do not depend on them
    llama_layers: int = 2         # decoder layers of the Llama-3-sized model
    threads: int = 0              # torch threads; 0 = torch's default

    def __post_init__(self) -> None:
        require_positive(rounds=self.rounds, niter=self.niter, llama_layers=self.llama_layers)
        unknown = sorted(set(self.sections) - set(SECTIONS))
        if unknown or not self.sections:
            raise ConfigError(f"unknown benchmark section(s) {unknown or '(none)'}; pick from {', '.join(SECTIONS)}")
        if self.threads < 0:
            raise ConfigError(f"threads={self.threads} must be 0 (torch's default) or positive")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"device {self.device} asked for, but torch sees no CUDA device; use --device cpu")
        packaged = sorted({"memory", "fit"} & set(self.sections))
        if packaged and self.random_weights:
            raise ConfigError(f"{', '.join(packaged)} measure(s) packaged models (me5-small, SmolLM2); drop it (--only heads,decode) with --random")


@dataclass(frozen=True)
class DecoderCase:
    shape: Shape
    build: Callable[[], tuple[nn.Module, ConceptEmbedding]]  # -> (unchanged decoder, its ASG table)


def _fitted(model: nn.Module, shape: Shape, niter: int) -> tuple[nn.Module, ConceptEmbedding]:
    table = model.get_input_embeddings().weight
    return model, AsgAdapter(AsgConfig(k=shape.k, m=shape.m, niter=niter)).fit(table, FitContext(seed=0))


def _random(layout: dict, shape: Shape, layers: int | None = None) -> tuple[nn.Module, ConceptEmbedding]:
    return random_decoder(layout, layers), random_concepts(shape.vocab, shape.dim, shape.k, shape.m)


def decoder_cases(opts: BenchOptions) -> list[DecoderCase]:
    if opts.smoke:
        return [DecoderCase(TINY, lambda: _random(TINY_LAYOUT, TINY))]
    smollm2 = (lambda: _random(SMOLLM2_LAYOUT, SMOLLM2)) if opts.random_weights else \
        (lambda: _fitted(load_packaged("smollm2", "causal_lm"), SMOLLM2, opts.niter))
    return [
        DecoderCase(SMOLLM2, smollm2),
        DecoderCase(LLAMA3, lambda: _random(LLAMA3_LAYOUT, LLAMA3, opts.llama_layers)),
    ]


def run_benchmarks(opts: BenchOptions, say: Callable[[str], None] = lambda message: None) -> BenchReport:
    """Run the selected sections; ``say`` gets one line per step."""
    if opts.threads:
        torch.set_num_threads(opts.threads)
    report = BenchReport({**environment(opts.device), "load_start": load_average(), "options": asdict(opts)})
    rounds = 1 if opts.smoke else opts.rounds
    if {"heads", "decode"} & set(opts.sections):
        for case in decoder_cases(opts):
            say(f"{case.shape.label()}: building the model and its ASG table")
            model, asg = case.build()
            model = model.to(opts.device)
            table = model.get_input_embeddings().weight.detach()
            if "heads" in opts.sections:
                say(f"{case.shape.label()}: output heads")
                heads = compressed_heads(case.shape, table, asg)
                report.rows += head_rows(case.shape, table, heads, opts.device, rounds, targets=head_targets(case.shape, opts.device))
                if opts.device == "cpu":
                    say(f"{case.shape.label()}: output heads, quiet vs one busy process")
                    report.rows += contention_rows(case.shape, table, heads, rounds)
            if "decode" in opts.sections:
                say(f"{case.shape.label()}: greedy decoding")
                report.rows += decode_rows(case.shape.label(), model, (asg, ConceptLMHead(asg)), opts.device, rounds,
                                           target=decode_target(case.shape.name, opts.device))
            del model, asg, table
            gc.collect()
    if "memory" in opts.sections:
        names, profile = (("minilm",), "smoke") if opts.smoke else (("me5-small", "smollm2"), "quick")
        report.rows += memory_rows(names, min(rounds, 3), profile, opts.niter, say)
    if "fit" in opts.sections:
        name, profile = ("minilm", "smoke") if opts.smoke else ("me5-small", "quick")
        say(f"{name}: ASG and SG fit time under the {profile} budget")
        report.rows += fit_rows(name, profile)
    if "after-fit" in opts.sections:
        say("encoder latency after a faiss fit vs a fresh process, one child per measurement")
        report.rows += after_fit_rows(min(rounds, 3))
    report.environment["load_end"] = load_average()
    return report
