"""``harness bench`` (also ``python -m benchmarks``): every performance benchmark in one process."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness import devices
from harness.cli.common import err_console, user_errors
from harness.sidefiles import check_output

SectionsOption = Annotated[str, typer.Option("--only", help="Comma-separated sections: heads, decode, memory, fit, after-fit.")]


def bench(
    json_path: Annotated[Optional[Path], typer.Option("--json", help="Also write the rows and the environment as JSON here.")] = None,
    only: SectionsOption = "heads,decode,memory,fit,after-fit",
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N (CUDA events; peak memory with only the measured head resident).")] = "cpu",
    rounds: Annotated[int, typer.Option(help="Alternating base/method rounds per comparison; medians over them.")] = 5,
    random_weights: Annotated[bool, typer.Option("--random", help="Random weights at the real shapes (no model packages, no faiss).")] = False,
    smoke: Annotated[bool, typer.Option(help="Tiny shapes and MiniLM, one round: checks that everything runs.")] = False,
    niter: Annotated[int, typer.Option(help="k-means iterations of the ASG fit (speed does not depend on them).")] = 10,
    llama_layers: Annotated[int, typer.Option(help="Decoder layers of the Llama-3-sized random model.")] = 2,
    threads: Annotated[int, typer.Option(help="torch threads (0 = torch's default).")] = 0,
) -> None:
    """Output heads (each cold and hot), greedy decoding, resident memory, fit time and latency after a fit, as a markdown table."""
    with user_errors():
        from harness.benchmarks.run import BenchOptions, run_benchmarks

        if json_path is not None:
            check_output(json_path, "--json", folder=False)
        opts = BenchOptions(
            sections=tuple(s.strip() for s in only.split(",") if s.strip()), device=devices.resolve(device), rounds=rounds,
            random_weights=random_weights, smoke=smoke, niter=niter, llama_layers=llama_layers, threads=threads,
        )
        report = run_benchmarks(opts, say=lambda line: err_console.print(line, style="dim"))
    typer.echo(report.markdown())
    if json_path is not None:
        report.write_json(json_path)


def main() -> None:
    typer.run(bench)
