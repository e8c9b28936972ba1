"""``harness run``: one method on one suite, with its baseline run or reused."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer
from rich.table import Table

from harness.cli.common import DbOption, RichProgress, console, err_console, user_errors
from harness.results.records import RunRecord
from harness.results.store import Store
from harness.run import BASE_PHASE, RunOutcome, RunRequest, execute


def run(
    suite: Annotated[str, typer.Option("--suite", "-s", help="Suite to run (see `harness list suites`).")],
    adapter: Annotated[str, typer.Option("--adapter", "-a", help="Method (see `harness list adapters`).")] = "none",
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Packaged alias, local directory or hub id; default: the suite's.")] = None,
    profile: Annotated[str, typer.Option(help="smoke (tests), quick (2-core CPU), paper (the papers' recipe).")] = "quick",
    seed: Annotated[int, typer.Option(help="Seed for sampling, k-means and training.")] = 0,
    settings: Annotated[Optional[List[str]], typer.Option("--set", help="Adapter or suite setting key=value (repeatable), e.g. --set k=1024.")] = None,
    db: DbOption = None,
    data_dir: Annotated[Optional[str], typer.Option("--data-dir", help="Dataset folder (default: $HARNESS_DATA_DIR).")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    force: Annotated[bool, typer.Option("--force", help="Re-run even if an identical finished run is stored.")] = False,
) -> None:
    """Run ADAPTER on SUITE; the unchanged baseline is run (or reused) too, so %Base is known."""
    request = RunRequest(suite, adapter, model, profile, seed, tuple(settings or ()), data_dir, device, force)
    store = Store(db)
    with user_errors(), RichProgress() as progress:
        outcomes = execute(request, store, progress)
    console.print(_scores_table(outcomes))
    console.print(_summary_table(outcomes))
    for o in outcomes:
        if not o.stored:
            err_console.print(f"note: {store.path} was busy; run {o.record.run_id} is kept in {store.records_dir} and will be ingested by the next run")
    console.print(f"results in {store.path}")


# Metrics that are proportions, shown in percent; other metrics (bits per byte, bytes per token,
# vocabulary size) are shown as they are.
PERCENT_METRICS = frozenset({"accuracy", "acc", "acc_norm", "f1", "whole_word_share"})


def _fmt(v: float | None, digits: int = 2, scale: float = 100.0) -> str:
    return "-" if v is None else f"{v * scale:.{digits}f}"


def _value(v: float | None, metric: str) -> str:
    if metric in PERCENT_METRICS or v is None:
        return _fmt(v)
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4f}"


def _scores_table(outcomes: list[RunOutcome]) -> Table:
    base, method = outcomes[0].record, outcomes[-1].record
    spec = method.spec
    table = Table(title=f"{spec.suite} | {spec.model} | {spec.adapter} {spec.adapter_config or ''} | profile {spec.profile}, seed {spec.seed}")
    table.add_column("task / language")
    table.add_column("metric")
    table.add_column("baseline [95% CI]", justify="right")
    if method is not base:
        table.add_column(f"{spec.adapter} [95% CI]", justify="right")
        table.add_column("%Base", justify="right")
    base_scores = {(s.task, s.language, s.metric): s for s in base.scores}
    for s in method.scores:
        b = base_scores.get((s.task, s.language, s.metric))
        row = [f"{s.task} / {s.language}", s.metric, _with_ci(b)]
        if method is not base:
            row += [_with_ci(s), _fmt(s.pct_base, 1, 1.0)]
        table.add_row(*row, style="bold" if s.language == "avg" else None)
    return table


def _with_ci(s) -> str:
    if s is None:
        return "-"
    if s.ci_low is None:
        return _value(s.value, s.metric)
    return f"{_value(s.value, s.metric)} [{_value(s.ci_low, s.metric)}, {_value(s.ci_high, s.metric)}]"


def _summary_table(outcomes: list[RunOutcome]) -> Table:
    table = Table(title="compression and efficiency")
    table.add_column("")
    for o in outcomes:
        table.add_column(f"{o.record.spec.adapter}{' (reused)' if o.reused else ''}", justify="right")
    phases = [e.phase for e in outcomes[0].record.efficiency]
    labels = [*SUMMARY_ROWS, *(f"{phase} {what}" for phase in phases for what in ("p50 / p95 ms", "tokens/s")), "peak memory MB", "wall time s"]
    rows = [_summary_column(o.record, phases) for o in outcomes]
    for i, label in enumerate(labels):
        table.add_row(label, *[col[i] for col in rows])
    for phase in phases:
        table.add_row(f"{phase} latency × base (same run)", *[_same_run_ratio(o.record, phase) for o in outcomes])
    return table


def _same_run_ratio(r: RunRecord, phase: str) -> str:
    """p50 of the compressed model / p50 of the unchanged model timed in the same process."""
    by_phase = {e.phase: e for e in r.efficiency}
    e, base = by_phase.get(phase), by_phase.get(BASE_PHASE + phase)
    return f"{e.p50_ms / base.p50_ms:.2f}" if e and base else "-"


SUMMARY_ROWS = ("run id", "embedding params", "embedding-param fraction", "storage bytes (id maps incl.)", "total params")


def _summary_column(r: RunRecord, phases: list[str]) -> list[str]:
    """One column: compression, then p50/p95 and tokens/s per efficiency phase (forward, or
    prefill and decode), peak memory over the phases, wall time."""
    c = r.compression
    by_phase = {e.phase: e for e in r.efficiency}
    timing = []
    for phase in phases:
        e = by_phase.get(phase)
        timing += [f"{e.p50_ms:.1f} / {e.p95_ms:.1f}", f"{e.throughput:,.0f}"] if e else ["-", "-"]
    peak = max((e.peak_mem_mb for e in r.efficiency if e.phase in phases), default=None)
    return [
        r.run_id,
        f"{c.embedding_params_before:,} -> {c.embedding_params_after:,}",
        f"{c.emb_param_fraction:.2%}",
        f"{c.storage_bytes_before:,} -> {c.storage_bytes_after:,}",
        f"{c.total_params_after:,}",
        *timing,
        f"{peak:.0f}" if peak is not None else "-",
        f"{r.wall_s:.1f}" if r.wall_s is not None else "-",
    ]
