"""``harness run``: one method on one suite, with its baseline run or reused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from harness.cli.common import DbOption, RichProgress, console, err_console, fitted_settings, quiet_transformers, user_errors
from harness.errors import ConfigError, printable
from harness.results.records import BASE_PHASE, RunRecord
from harness.results.store import Store

if TYPE_CHECKING:
    from harness.runner.plan import RunRequest


def run(
    suite: Annotated[str, typer.Option("--suite", "-s", help="Suite to run (see `harness list suites`).")],
    adapter: Annotated[str, typer.Option("--adapter", "-a", help="Method (see `harness list adapters`).")] = "none",
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Packaged alias, local directory or hub id; default: the suite's.")] = None,
    profile: Annotated[str, typer.Option(help="smoke (tests), quick (2-core CPU), paper (the papers' recipe).")] = "quick",
    seed: Annotated[int, typer.Option(help="Seed for sampling, k-means and training.")] = 0,
    seeds: Annotated[Optional[str], typer.Option("--seeds", help="Several seeds, comma-separated (e.g. 0,1,2): each runs with its own baseline; replaces --seed.")] = None,
    settings: Annotated[Optional[List[str]], typer.Option("--set", help="Adapter or suite setting key=value (repeatable), e.g. --set k=1024.")] = None,
    db: DbOption = None,
    data_dir: Annotated[Optional[str], typer.Option("--data-dir", help="Dataset folder (default: $HARNESS_DATA_DIR).")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    force: Annotated[bool, typer.Option("--force", help="Re-run even if an identical finished run is stored.")] = False,
    recover: Annotated[int, typer.Option("--recover", help="Recovery training steps after the adapter's fit: the compressed model trained toward the unchanged one on the fit corpora (0: off).")] = 0,
    recover_lora: Annotated[bool, typer.Option("--recover-lora", help="Recovery also trains LoRA on the top quarter of the layers.")] = False,
    pretrain: Annotated[Optional[int], typer.Option("--pretrain", help="Masked-LM steps of a small encoder built from scratch with the method's table, before the suite (paper 001's regime, small scale; the baseline is the full table pretrained alike); 0: not pretrained (the control). Default: off.")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="Precision the model loads in: float32 (default), bfloat16 or float16; part of the run's identity.")] = "float32",
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", help="Run code shipped with the model (its config's auto_map); off by default, recorded with the run.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check the whole request and print what would run: each run reused from the store or made; loads no model weights, trains and stores nothing.")] = False,
) -> None:
    """Run ADAPTER on SUITE; the unchanged baseline is run (or reused) too, so %Base is known."""
    from harness.runner.run import RunRequest, execute

    quiet_transformers()
    store = Store(db)
    runs = []
    with user_errors(), RichProgress() as progress:
        requests = [RunRequest(suite, adapter, model, profile, s, tuple(settings or ()), data_dir, device, force, recover, recover_lora,
                               pretrain, dtype, trust_remote_code)
                    for s in (parse_seeds(seeds) if seeds is not None else (seed,))]
        if dry_run:
            lines = [line for request in requests for line in would_run(request, store)]
        else:
            runs = [execute(request, store, progress, say=lambda line: err_console.print(line, highlight=False)) for request in requests]
    if dry_run:
        for line in lines:
            typer.echo(printable(line))
        return
    for outcomes in runs:
        console.print(_scores_table(outcomes))
    console.print(_compression_table(runs[0]))
    console.print(_efficiency_table(runs[0]))
    if len(runs) > 1:
        console.print(_seeds_table(runs))
    for o in (o for outcomes in runs for o in outcomes):
        if not o.stored:
            err_console.print(printable(f"note: {store.path} was busy; run {o.record.run_id} is kept in {store.records_dir} and will be ingested by the next run"), markup=False)
    console.print(f"results in {printable(str(store.path))}", markup=False)
    for line in chance_warnings([outcomes[-1].record for outcomes in runs]):
        err_console.print(line, highlight=False, markup=False)


def would_run(request: RunRequest, store: Store) -> list[str]:
    """What ``harness run`` would do for ``request``, read-only: the request planned (everything checked
    that a run checks before its first model loads), then one line per run, baseline first, each
    reused from the store (a finished run with its identity) or made."""
    from harness.runner.plan import plan

    p = plan(request)
    lines = []
    for spec in [p.spec.baseline(), *([p.spec] if p.spec.adapter != "none" else [])]:
        what = f"{spec.adapter} on {spec.suite} ({spec.model}, {spec.profile}, seed {spec.seed}, config {spec.config_hash})"
        done = None if p.force and spec == p.spec else store.find_finished(spec)
        lines.append(f"reuse {what}: run {done.run_id}" if done else f"make  {what}" + (" (--force)" if p.force and spec == p.spec else ""))
    if p.spec.recipe.get("recovery") and lines[-1].startswith("make"):
        lines.append("  a recovery step is timed first: a recovery estimated above the cap for a run is refused (--force runs it)")
    return lines


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0,1,2"`` -> ``(0, 1, 2)``; anything else (a seed out of range too) is a ConfigError, before any seed runs."""
    from harness.runner.plan import check_seed

    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"--seeds {text!r} is not a comma-separated list of integers; write e.g. --seeds 0,1,2") from None
    if not values or len(set(values)) != len(values):
        raise ConfigError(f"--seeds {text!r} needs distinct integers, e.g. --seeds 0,1,2")
    for value in values:
        check_seed(value, "--seeds")
    return values


def chance_warnings(records: list[RunRecord]) -> list[str]:
    """One warning line per run whose baseline is not significantly above chance on some scores."""
    lines = []
    for r in records:
        flagged = [f"{c.task}/{c.language}" for c in r.comparisons if c.baseline_above_chance is False]
        if flagged:
            shown = ", ".join(flagged[:6]) + (f" and {len(flagged) - 6} more" if len(flagged) > 6 else "")
            lines.append(
                f"warning: seed {r.spec.seed}: the baseline is not significantly above chance (95% CI low <= chance) on "
                f"{len(flagged)} of {len(r.comparisons)} scores ({shown}); %Base there is not meaningful, read chance-adj."
            )
    return lines


# Metrics that are proportions, shown in percent; other metrics (bits per byte, bytes per token,
# vocabulary size) are shown as they are.
PERCENT_METRICS = frozenset({"accuracy", "acc", "acc_norm", "f1", "em", "precision", "recall", "whole_word_share"})


def _fmt(v: float | None, digits: int = 2, scale: float = 100.0) -> str:
    return "-" if v is None else f"{v * scale:.{digits}f}"



def _value(v: float | None, metric: str) -> str:
    if metric in PERCENT_METRICS or v is None:
        return _fmt(v)
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4f}"


def _scores_table(outcomes) -> Table:
    base, method = outcomes[0].record, outcomes[-1].record
    spec = method.spec
    table = Table(title=f"{spec.suite} | {spec.model} | {spec.adapter} {spec.adapter_config or ''} | profile {spec.profile}, seed {spec.seed}")
    table.add_column("task / language")
    table.add_column("metric")
    table.add_column("baseline [95% CI]", justify="right")
    if method is not base:
        table.add_column(f"{spec.adapter} [95% CI]", justify="right")
        table.add_column("%Base \\[paired CI]", justify="right")  # escaped: rich reads "[paired CI]" as a style tag
        table.add_column("chance-adj. %Base", justify="right")
        table.add_column("p (McNemar)", justify="right")
    table.add_column("chance", justify="right")
    base_scores = {(s.task, s.language, s.metric): s for s in base.scores}
    compared = {(c.task, c.language, c.metric): c for c in method.comparisons}
    for s in method.scores:
        b, c = base_scores.get((s.task, s.language, s.metric)), compared.get((s.task, s.language, s.metric))
        row = [f"{s.task} / {s.language}", s.metric, _with_ci(b)]
        if method is not base:
            row += [_with_ci(s), _pct_base(s.pct_base, c), _fmt(c and c.chance_adjusted_pct_base, 1, 1.0), _fmt(c and c.p_value, 3, 1.0)]
        flag = " (base at chance)" if c is not None and c.baseline_above_chance is False else ""
        table.add_row(*row, _value(s.chance, s.metric) + flag, style="bold" if s.language == "avg" else None)
    return table


def _pct_base(value: float | None, c) -> str:
    """%Base with its paired CI, or with the reason it has none (``unpaired: ...``)."""
    if c is not None and c.unpaired:
        return f"{_fmt(value, 1, 1.0)} (unpaired: {c.unpaired})"
    if c is None or c.pct_base_ci_low is None:
        return _fmt(value, 1, 1.0)
    return f"{_fmt(value, 1, 1.0)} [{_fmt(c.pct_base_ci_low, 1, 1.0)}, {_fmt(c.pct_base_ci_high, 1, 1.0)}]"


def _seeds_table(runs) -> Table:
    """Mean ± sd over seeds of the method's score, %Base and chance-adjusted %Base."""
    from harness.measure.metrics import mean_sd  # scipy: seconds of every command's start, for this table only

    records = [outcomes[-1].record for outcomes in runs]
    table = Table(title=f"over seeds {', '.join(str(r.spec.seed) for r in records)}: mean ± sd")
    for title in ("task / language", "metric", "score", "%Base", "chance-adj. %Base"):
        table.add_column(title, justify="left" if title in ("task / language", "metric") else "right")
    for s in records[0].scores:
        key = (s.task, s.language, s.split, s.metric)
        scores = [x for r in records for x in r.scores if (x.task, x.language, x.split, x.metric) == key]
        compared = [c for r in records for c in r.comparisons if c.key() == key]
        cells = [
            mean_sd([x.value for x in scores]), mean_sd([x.pct_base for x in scores]),
            mean_sd([c.chance_adjusted_pct_base for c in compared]),
        ]
        scale = 100.0 if s.metric in PERCENT_METRICS else 1.0
        table.add_row(
            f"{s.task} / {s.language}", s.metric, *(_pm(cells[0], scale), _pm(cells[1], 1.0), _pm(cells[2], 1.0)),
            style="bold" if s.language == "avg" else None,
        )
    return table


def _pm(mean_and_sd: tuple[float, float] | None, scale: float) -> str:
    if mean_and_sd is None:
        return "-"
    mean, sd = mean_and_sd
    return f"{mean * scale:.2f} ± {sd * scale:.2f}"


def _with_ci(s) -> str:
    if s is None:
        return "-"
    if s.ci_low is None:
        return _value(s.value, s.metric)
    return f"{_value(s.value, s.metric)} [{_value(s.ci_low, s.metric)}, {_value(s.ci_high, s.metric)}]"


def _column_title(o) -> str:
    r = o.record
    reused = f" (reused: run of {r.finished_at[:16].replace('T', ' ')} on {r.device})" if o.reused else ""
    return f"{r.spec.adapter}{reused}"


COMPRESSION_ROWS = (
    "run id", "settings (as fitted)", "embedding params", "embedding-param fraction", "storage bytes (id maps incl.)", "total params",
    "vocabulary (rows)", "fit time s", "wall time s",
)


def _compression_table(outcomes) -> Table:
    table = Table(title="compression")
    table.add_column("")
    for o in outcomes:
        table.add_column(_column_title(o), justify="right")
    columns = [_compression_column(o.record) for o in outcomes]
    for i, label in enumerate(COMPRESSION_ROWS):
        table.add_row(label, *[col[i] for col in columns])
    return table


def _compression_column(r: RunRecord) -> list[str]:
    c = r.compression
    vocab = "-" if c.vocab_size_before is None else f"{c.vocab_size_before:,} -> {c.vocab_size_after:,}"
    if c.freed_slots:
        vocab += f" ({c.freed_slots:,} freed)"
    return [
        r.run_id,
        escape(fitted_settings(r.spec.adapter_config, r.fit and r.fit.details, r.spec.recipe)),
        f"{c.embedding_params_before:,} -> {c.embedding_params_after:,}",
        f"{c.emb_param_fraction:.2%}",
        f"{c.storage_bytes_before:,} -> {c.storage_bytes_after:,}",
        f"{c.total_params_after:,}",
        vocab,
        f"{r.fit.seconds:.1f}" if r.fit else "-",
        f"{r.wall_s:.1f}" if r.wall_s is not None else "-",
    ]


def _efficiency_table(outcomes) -> Table:
    """The method beside the unchanged model timed in the same run (alternating rounds), with ratios;
    a baseline-only run shows its own figures. The title names the device they were timed on (a
    reused run's, which may not be this one's: the device is not part of a run's identity), and a
    reused run's date."""
    method = outcomes[-1].record
    phases = {e.phase: e for e in method.efficiency}
    in_run = {p[len(BASE_PHASE):]: e for p, e in phases.items() if p.startswith(BASE_PHASE)}
    own = {p: e for p, e in phases.items() if not p.startswith(BASE_PHASE)}
    when = "" if not outcomes[-1].reused else f" (run of {method.finished_at[:16].replace('T', ' ')})"
    if in_run:
        table = Table(title=f"efficiency: unchanged model and {method.spec.adapter}, timed in one run on {method.device}{when} in alternating rounds")
        columns = [("unchanged", in_run), (method.spec.adapter, own)]
    else:
        table = Table(title=f"efficiency on {method.device}{when}")
        columns = [(method.spec.adapter, own)]
    table.add_column("phase")
    table.add_column("")
    for title, _ in columns:
        table.add_column(title, justify="right")
    if in_run:
        table.add_column("ratio", justify="right")
    for phase, e in own.items():
        cells = [columns[0][1].get(phase), *([e] if in_run else [])]
        for label, fmt, ratio_of in _EFFICIENCY_ROWS:
            row = [fmt(c) if c else "-" for c in cells]
            if in_run:
                row.append(f"{ratio_of(cells[1]) / ratio_of(cells[0]):.2f}x" if cells[0] else "-")
            table.add_row(f"{phase} ({e.batch} x {e.seq_len})", label, *row)
    return table


_EFFICIENCY_ROWS = (
    ("p50 / p95 ms", lambda e: f"{e.p50_ms:.1f} / {e.p95_ms:.1f}", lambda e: e.p50_ms),
    ("tokens/s", lambda e: f"{e.throughput:,.0f}", lambda e: e.throughput),
    ("peak memory MB", lambda e: f"{e.peak_mem_mb:,.0f}", lambda e: e.peak_mem_mb),
)
