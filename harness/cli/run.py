"""``harness run``: one method on one suite, with its baseline run or reused."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, List, Optional

import typer

from harness.budgets import PROFILES
from harness.cli.common import DbOption, RichProgress, WideOption, err_console, quiet_transformers, user_errors
from harness.cli.result_tables import PERCENT_METRICS
from harness.cli.tables import Column, Prose, fold, output_width, print_table, rich_table
from harness.config import parse_assignments, route_settings
from harness.devices import refuse_without_torch
from harness.errors import ConfigError, printable
from harness.measure.metrics import mean_sd
from harness.results.records import BASE_PHASE, RunRecord
from harness.registry import ADAPTERS, SUITES
from harness.results.store import Store
from harness.results.summary import fitted_settings, resolved_config, settings_label

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
    lift_cap: Annotated[bool, typer.Option("--lift-cap", help="Run even if the recovery estimate is above the cap (12 h a run).")] = False,
    recover: Annotated[int, typer.Option("--recover", help="Recovery training steps after the adapter's fit: the compressed model trained toward the unchanged one on the fit corpora (0: off).")] = 0,
    recover_lora: Annotated[bool, typer.Option("--recover-lora", help="Recovery also trains LoRA on the top quarter of the layers.")] = False,
    pretrain: Annotated[Optional[int], typer.Option("--pretrain", help="Masked-LM steps of a small encoder built from scratch with the method's table, before the suite (paper 001's regime, small scale; the baseline is the full table pretrained alike); 0: not pretrained (the control). Default: off.")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="Precision the model loads in: float32 (default), bfloat16 or float16; part of the run's identity.")] = "float32",
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", help="Run code shipped with the model (its config's auto_map); off by default, recorded with the run.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check the whole request and print what would run: each run reused from the store or made; loads no model weights, trains and stores nothing.")] = False,
    wide: WideOption = False,
) -> None:
    """Run ADAPTER on SUITE; the unchanged baseline is run (or reused) too, so %Base is known."""
    with user_errors():
        refuse_early(suite, adapter, profile, settings or [], device)
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
            runs = [execute(request, store, progress, say=lambda line: err_console.print(line, highlight=False), lift_cap=lift_cap) for request in requests]
    if dry_run:
        for line in lines:
            typer.echo(printable(line))
        return
    print_tables(runs, store, wide)
    for line in chance_warnings([outcomes[-1].record for outcomes in runs]):
        err_console.print(line, highlight=False, markup=False)


def print_tables(runs: list, store: Store, wide: bool = False) -> None:
    """What the main job prints, fitted to the terminal: each seed's scores, the first seed's compression
    report (the runs' whole ids among it) and efficiency, the seeds' mean ± sd; then where the runs are."""
    width = output_width()
    for outcomes in runs:
        table, notes = _scores_table(outcomes, width, wide)
        print_table(table)
        for line in notes:
            typer.echo(fold(line, width))
    print_table(_compression_table(runs[0], width, wide))
    print_table(_efficiency_table(runs[0], width, wide))
    if len(runs) > 1:
        print_table(_seeds_table(runs, width, wide))
    for o in (o for outcomes in runs for o in outcomes):
        if not o.stored:
            err_console.print(printable(f"note: {store.path} was busy; run {o.record.run_id} is kept in {store.records_dir} and will be ingested by the next run"), markup=False)
    typer.echo(fold(f"results in {printable(str(store.path))}", width))


def refuse_early(suite: str, adapter: str, profile: str, settings: list[str], device: str) -> None:
    """What can be refused from names alone, before the runner imports torch and the models' libraries:
    a suite or adapter no package registers (entry points), an unknown profile, a malformed ``--set`` or
    one neither the adapter nor the suite has (their keys as cached by the registry), a ``--device``
    outside the rule or ``cuda`` where no GPU driver is loaded (:mod:`harness.devices`). The plan
    checks the rest (values against the settings' types, model, data, and CUDA through torch)."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile '{profile}'; use one of {', '.join(PROFILES)}")
    SUITES.check(suite)
    ADAPTERS.check(adapter)
    route_settings(parse_assignments(settings), ADAPTERS.setting_keys(adapter), SUITES.setting_keys(suite), adapter, suite)
    refuse_without_torch(device)


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
        lines.append("  a recovery step is timed first: a recovery estimated above the cap for a run is refused (--lift-cap runs it)")
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


def _fmt(v: float | None, digits: int = 2, scale: float = 100.0) -> str:
    return "-" if v is None else f"{v * scale:.{digits}f}"


def _value(v: float | None, metric: str) -> str:
    """A score as the tables print it: a proportion (:data:`PERCENT_METRICS`) in percent, other metrics
    (bits per byte, bytes per token, vocabulary size) as they are."""
    if metric in PERCENT_METRICS or v is None:
        return _fmt(v)
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4f}"


def _interval(s) -> str:
    return "-" if s is None or s.ci_low is None else f"[{_value(s.ci_low, s.metric)}, {_value(s.ci_high, s.metric)}]"


def _settings(r: RunRecord) -> str:
    """The run's settings as the fit resolved them, one spelling (:func:`~harness.results.summary.settings_label`)."""
    fit = r.fit.details if r.fit else None
    return settings_label(resolved_config(json.dumps(r.spec.adapter_config), json.dumps(fit) if fit is not None else None,
                                          json.dumps(r.spec.recipe)))


def _scores_table(outcomes, width: int | None, wide: bool):
    """Per task and language: the baseline's score and the method's with their 95% CIs, %Base with its
    paired CI, chance-adjusted %Base, McNemar's p and the chance level; ranks as docs/cli.md lists them."""
    base, method = outcomes[0].record, outcomes[-1].record
    spec, compares = method.spec, method is not base
    title = f"{spec.suite} | {spec.model} | {spec.adapter} {_settings(method)} | profile {spec.profile}, seed {spec.seed}"
    base_scores = {(s.task, s.language, s.split, s.metric): s for s in base.scores}
    compared = {c.key(): c for c in method.comparisons}
    several = len({(s.task, s.language, s.metric) for s in method.scores}) < len(method.scores)
    columns = [Column("task / language"), Column("split", 0 if several else 6), Column("metric"), Column("baseline", right=True),
               Column("95% CI", 2, right=True)]
    if compares:
        columns += [Column(spec.adapter, right=True), Column("95% CI", 2, right=True), Column("%Base", right=True), Column("paired CI", 1, right=True),
                    Column("chance-adj. %Base", 3, right=True), Column("p (McNemar)", 4, right=True)]
    columns.append(Column("chance", 3, right=True))
    rows, styles, unpaired = [], [], []
    for s in method.scores:
        key = (s.task, s.language, s.split, s.metric)
        b, c = base_scores.get(key), compared.get(key)
        row = [f"{s.task} / {s.language}", s.split, s.metric, _value(b and b.value, s.metric), _interval(b)]
        if compares:
            row += [_value(s.value, s.metric), _interval(s), _fmt(s.pct_base, 1, 1.0),
                    _paired(c),
                    _fmt(c and c.chance_adjusted_pct_base, 1, 1.0), _fmt(c and c.p_value, 3, 1.0)]
        flag = " (base at chance)" if c is not None and c.baseline_above_chance is False else ""
        rows.append(row + [_value(s.chance, s.metric) + flag])
        styles.append("bold" if s.language == "avg" else None)
        unpaired += [f"{s.task} / {s.language}: {c.unpaired}"] if c is not None and c.unpaired else []
    table = rich_table(columns, rows, width, wide, styles=styles, title=title)
    return table, [f"unpaired (no paired CI): {line}" for line in unpaired]


def _paired(c) -> str:
    """The paired CI of %Base, or ``unpaired`` where the comparison has none (its reason is printed below the table)."""
    if c is not None and c.unpaired:
        return "unpaired"
    if c is None or c.pct_base_ci_low is None:
        return "-"
    return f"[{_fmt(c.pct_base_ci_low, 1, 1.0)}, {_fmt(c.pct_base_ci_high, 1, 1.0)}]"


def _seeds_table(runs, width: int | None, wide: bool):
    """Mean ± sd over seeds of the method's score, %Base and chance-adjusted %Base."""
    from harness.measure.metrics import mean_sd  # scipy: seconds of every command's start, for this table only

    records = [outcomes[-1].record for outcomes in runs]
    columns = [Column("task / language"), Column("metric"), Column("score", right=True), Column("%Base", right=True),
               Column("chance-adj. %Base", 1, right=True)]
    rows, styles = [], []
    for s in records[0].scores:
        key = (s.task, s.language, s.split, s.metric)
        scores = [x for r in records for x in r.scores if (x.task, x.language, x.split, x.metric) == key]
        compared = [c for r in records for c in r.comparisons if c.key() == key]
        scale = 100.0 if s.metric in PERCENT_METRICS else 1.0
        rows.append([f"{s.task} / {s.language}", s.metric, _pm(mean_sd([x.value for x in scores]), scale),
                     _pm(mean_sd([x.pct_base for x in scores]), 1.0), _pm(mean_sd([c.chance_adjusted_pct_base for c in compared]), 1.0)])
        styles.append("bold" if s.language == "avg" else None)
    return rich_table(columns, rows, width, wide, styles=styles, title=f"over seeds {', '.join(str(r.spec.seed) for r in records)}: mean ± sd")


def _pm(mean_and_sd: tuple[float, float] | None, scale: float) -> str:
    if mean_and_sd is None:
        return "-"
    mean, sd = mean_and_sd
    return f"{mean * scale:.2f} ± {sd * scale:.2f}"


def _column_title(o) -> str:
    r = o.record
    reused = f" (reused: run of {r.finished_at[:16].replace('T', ' ')} on {r.device})" if o.reused else ""
    return f"{r.spec.adapter}{reused}"


COMPRESSION_ROWS = (
    "run id", "settings (as fitted)", "embedding params", "embedding-param fraction", "storage bytes (id maps incl.)", "total params",
    "vocabulary (rows)", "fit time s", "wall time s",
)


def _compression_table(outcomes, width: int | None, wide: bool):
    """A column per run (baseline, method): its whole id, settings as fitted (prose, folded), and the report."""
    columns = [Column("", prose=True), *(Column(_column_title(o), right=True) for o in outcomes)]
    cells = [_compression_column(o.record) for o in outcomes]
    return rich_table(columns, [[label, *(col[i] for col in cells)] for i, label in enumerate(COMPRESSION_ROWS)], width, wide, title="compression")


def _compression_column(r: RunRecord) -> list[str]:
    c = r.compression
    vocab = "-" if c.vocab_size_before is None else f"{c.vocab_size_before:,} -> {c.vocab_size_after:,}"
    if c.freed_slots:
        vocab += f" ({c.freed_slots:,} freed)"
    return [
        r.run_id,
        Prose(fitted_settings(r.spec.adapter_config, r.fit and r.fit.details, r.spec.recipe)),
        f"{c.embedding_params_before:,} -> {c.embedding_params_after:,}",
        f"{c.emb_param_fraction:.2%}",
        f"{c.storage_bytes_before:,} -> {c.storage_bytes_after:,}",
        f"{c.total_params_after:,}",
        vocab,
        f"{r.fit.seconds:.1f}" if r.fit else "-",
        f"{r.wall_s:.1f}" if r.wall_s is not None else "-",
    ]


def _efficiency_table(outcomes, width: int | None, wide: bool):
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
        title = f"efficiency: unchanged model and {method.spec.adapter}, timed in one run on {method.device}{when} in alternating rounds"
        sides = [("unchanged", in_run), (method.spec.adapter, own)]
    else:
        title = f"efficiency on {method.device}{when}"
        sides = [(method.spec.adapter, own)]
    columns = [Column("phase"), Column(""), *(Column(name, right=True) for name, _ in sides), *([Column("ratio", 1, right=True)] if in_run else [])]
    rows = []
    for phase, e in own.items():
        timed = [sides[0][1].get(phase), *([e] if in_run else [])]
        for label, fmt, ratio_of in _EFFICIENCY_ROWS:
            row = [f"{phase} ({e.batch} x {e.seq_len})", label, *(fmt(t) if t else "-" for t in timed)]
            if in_run:
                row.append(f"{ratio_of(timed[1]) / ratio_of(timed[0]):.2f}x" if timed[0] else "-")
            rows.append(row)
    return rich_table(columns, rows, width, wide, title=title)


_EFFICIENCY_ROWS = (
    ("p50 / p95 ms", lambda e: f"{e.p50_ms:.1f} / {e.p95_ms:.1f}", lambda e: e.p50_ms),
    ("tokens/s", lambda e: f"{e.throughput:,.0f}", lambda e: e.throughput),
    ("peak memory MB", lambda e: f"{e.peak_mem_mb:,.0f}", lambda e: e.peak_mem_mb),
)
