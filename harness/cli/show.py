"""``harness show RUN_ID``: everything stored about one run, its scores as a table fitted to the terminal
(:mod:`harness.cli.tables`); a unique prefix of the id is enough (:func:`harness.results.queries.run_id`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.json import JSON
from rich.text import Text

from harness.cli.common import DbOption, WideOption, user_errors
from harness.cli.tables import Column, fold, output_width, print_table, rich_table, stdout_console
from harness.results.fingerprint import code_fingerprint, is_stale
from harness.results.records import Provenance, RunRecord

# (title, rank) of the scores table, in display order; rank 0 stays at any width (docs/cli.md)
SCORE_COLUMNS = (
    ("task", 0), ("split", 6), ("language", 0), ("metric", 0), ("setting", 5), ("value", 0), ("95% CI", 3), ("n", 5),
    ("chance", 4), ("%Base", 1), ("paired CI", 2), ("chance-adj.", 3), ("p (McNemar)", 4), ("flips", 5),
    ("base above chance", 3), ("unpaired because", 6),
)
NUMBERS = {"value", "n", "chance", "%Base", "chance-adj.", "p (McNemar)", "flips"}


def show(
    run_id: Annotated[str, typer.Argument(help="A run id from `harness list runs`, or a unique prefix of one.")],
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole record as JSON.")] = False,
    wide: WideOption = False,
) -> None:
    """Everything stored about one run: config, provenance, scores, compression, efficiency."""
    from harness.results import queries
    from harness.results.store import Store
    from harness.results.summary import fitted_settings

    with user_errors():
        store = Store(db)
        record = store.load(queries.run_id(store, run_id))
    if as_json:
        typer.echo(record.to_json())
        return
    console = stdout_console()
    console.print(Text(f"run {record.run_id}", style="bold"))  # the whole id, whatever prefix found it
    body = json.loads(record.to_json())
    for section in ("spec", "provenance", "compression", "details"):
        console.print(Text(section, style="bold"))
        console.print(JSON.from_data(body[section]))  # wrapped at spaces to the terminal, unlike print_json
    console.print(Text("status", style="bold"))
    wall = "-" if record.wall_s is None else f"{record.wall_s:.1f} s"
    console.print(f"{record.status}  started {record.started_at}  finished {record.finished_at}  wall {wall}", highlight=False)
    console.print(f"settings (as fitted): {fitted_settings(record.spec.adapter_config, record.fit and record.fit.details, record.spec.recipe)}",
                  highlight=False, markup=False)
    typer.echo(fold(code_origin(record.provenance, store.journal.patch_path(record.run_id)), output_width()))  # a path stays whole
    if is_stale(record.spec.adapter, record.spec.suite, record.spec.code):
        console.print(
            f"[yellow]stale:[/yellow] made by other code (fingerprint {record.spec.code or 'none'}, installed "
            f"{code_fingerprint(record.spec.adapter, record.spec.suite) or 'none'}); never reused, hidden from results by default"
        )
    if record.error:
        console.print(f"[red]error:[/red] {record.error}")
    columns = [Column(title, rank, prose=title == "unpaired because", right=title in NUMBERS) for title, rank in SCORE_COLUMNS]
    if len({(s.task, s.language, s.metric) for s in record.scores}) < len(record.scores):
        columns[1] = Column("split")  # a task scored on several splits: the split tells its rows apart
    print_table(rich_table(columns, _score_rows(record), output_width(), wide, title="scores, and against the baseline run"))
    for e in record.efficiency:
        console.print(f"{e.phase}: batch {e.batch} x {e.seq_len}: p50 {e.p50_ms:.1f} ms, p95 {e.p95_ms:.1f} ms, {e.throughput:,.0f} tokens/s, peak {e.peak_mem_mb:.0f} MB")


def _score_rows(record: RunRecord) -> list[list[str]]:
    """A row per score (:data:`SCORE_COLUMNS`), with its comparison against the baseline run where there is one."""
    compared = {c.key(): c for c in record.comparisons}
    rows = []
    for s in record.scores:
        c = compared.get((s.task, s.language, s.split, s.metric))
        rows.append([
            s.task, s.split, s.language, s.metric, s.setting or "-", f"{s.value:.4f}", _interval(s.ci_low, s.ci_high, 4), str(s.n),
            _number(s.chance, 4), _number(s.pct_base, 1),
            "unpaired" if c is not None and c.unpaired else _interval(c and c.pct_base_ci_low, c and c.pct_base_ci_high, 1),
            _number(c and c.chance_adjusted_pct_base, 1), _number(c and c.p_value, 3), _number(c and c.flip_rate, 3),
            "-" if c is None or c.baseline_above_chance is None else ("yes" if c.baseline_above_chance else "NO"),
            c.unpaired if c is not None and c.unpaired else "",
        ])
    return rows


def code_origin(provenance: Provenance, patch: Path) -> str:
    """Where the code that made a run can be recovered: its commit, and the patch of the uncommitted
    changes it was made with (``git apply`` it on a checkout of the commit)."""
    if provenance.commit == "unknown":
        return "code: made outside a git checkout (commit unknown): it cannot be recovered"
    if not provenance.dirty:
        return f"code: commit {provenance.commit}"
    if patch.is_file():
        return f"code: commit {provenance.commit} with uncommitted changes: patch {patch} (sha256 {provenance.patch_sha256 or 'not recorded'})"
    return f"code: commit {provenance.commit} with uncommitted changes whose patch is not at {patch}: they cannot be recovered"


def _number(v: float | None, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _interval(low: float | None, high: float | None, digits: int) -> str:
    return "-" if low is None else f"[{low:.{digits}f}, {high:.{digits}f}]"
