"""What ``harness run`` prints: each seed's scores beside the baseline's, the first seed's compression
report and efficiency, the seeds' mean ± sd, and a warning where a baseline is at chance; each table
fitted to the terminal (:mod:`harness.cli.tables`)."""

from __future__ import annotations

import json

import typer

from harness.cli.common import err_console
from harness.cli.result_tables import PERCENT_METRICS
from harness.cli.tables import Column, Prose, fold, output_width, print_table, rich_table
from harness.errors import printable
from harness.results.records import BASE_PHASE, RunRecord
from harness.results.store import Store
from harness.results.summary import fitted_settings, resolved_config, settings_label


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
