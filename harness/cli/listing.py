"""``harness list adapters|suites|models|runs`` and ``harness show RUN_ID``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.common import DbOption, console, fitted_settings, no_runs_yet, user_errors
from harness.errors import PluginError
from harness.leaderboard.frames import config_label
from harness.registry import ADAPTERS, SUITES
from harness.results import queries
from harness.results.fingerprint import code_fingerprint, is_stale
from harness.results.records import Provenance
from harness.results.store import Store
from harness.results.summary import with_resolved_config
from harness.sources import models

STALE = " (stale)"  # after a run's status when made by other code
list_app = typer.Typer(help="List adapters, suites, models or stored runs.", no_args_is_help=True)


def _defaults(cls: type) -> str:
    return ", ".join(f"{f.name}={f.default}" for f in dataclasses.fields(cls)) or "-"


def _budgets(budgets) -> str:
    """One line per profile: ``quick: fit_texts=200 steps=100 ...``; '-' without a budget table."""
    if budgets is None:
        return "-"
    return "\n".join(f"{profile}: " + " ".join(f"{k}={v}" for k, v in row.items()) for profile, row in budgets.rows().items())


@list_app.command("adapters")
def list_adapters() -> None:
    """Installed adapters (entry-point group harness.adapters): settings, fit corpora, stage and budgets."""
    table = Table("adapter", "package", "settings (defaults)", "needs", "budget per profile", show_lines=True)
    with user_errors():
        for name in ADAPTERS.names():
            origin = ADAPTERS.origin(name)
            try:
                cls = ADAPTERS.get(name)
            except PluginError as err:  # one broken plugin does not hide the others
                table.add_row(name, f"{origin.package} {origin.version}", f"[red]unusable: {err}[/red]", "", "")
                continue
            needs = [f"stage {cls.stage}", *(f"corpus {c}" for c in cls().corpora()), *(["teacher"] if cls.needs_teacher else []),
                     *([f"heads {', '.join(cls.heads)}"] if cls.heads is not None else [])]
            table.add_row(name, f"{origin.package} {origin.version}", _defaults(cls.config_class), "\n".join(needs), _budgets(cls.budgets))
    console.print(table)


@list_app.command("suites")
def list_suites() -> None:
    """Installed suites (entry-point group harness.suites)."""
    table = Table("suite", "default model", "settings (defaults)", "budget per profile", "description", show_lines=True)
    with user_errors():
        for name in SUITES.names():
            suite = SUITES.get(name)
            table.add_row(name, models.preferred(suite.default_model), _defaults(suite.config_class), _budgets(suite.budgets), suite.description)
    console.print(table)


@list_app.command("models")
def list_models() -> None:
    """Packaged models that work offline; any hub id or local directory works too."""
    table = Table("alias", "kind", "package", "description")
    for spec in models.PACKAGED.values():
        table.add_row(spec.alias, spec.kind, spec.package, spec.description)
    console.print(table)
    console.print("Also: any Hugging Face hub id (online) or a local model directory.")


@list_app.command("runs")
def list_runs(
    db: DbOption = None,
    limit: Annotated[int, typer.Option(help="Newest N runs; 0: all.")] = 50,
    include_stale: Annotated[bool, typer.Option("--include-stale", help="Also runs made by other code (marked stale; never reused).")] = False,
) -> None:
    """Stored runs, newest first, with status (running, finished, failed) and the config as resolved;
    runs made by other code (stale) only with --include-stale, as in `harness results` and the leaderboard."""
    with user_errors(), no_runs_yet():
        every = runs_frame(Store(db), 0)
    frame = every if include_stale else every[~every.status.str.endswith(STALE)]
    shown = frame.head(limit) if limit > 0 else frame
    table = Table(*shown.columns)
    for row in shown.assign(config=shown.config.map(config_label)).itertuples(index=False):
        table.add_row(*[str(v) for v in row])
    console.print(table)
    hidden = len(every) - len(frame)
    if len(shown) < len(frame):
        console.print(f"the newest {len(shown)} of {len(frame)} runs; --limit 0 lists all")
    if hidden:
        console.print(f"{hidden} stale runs (made by other code) are hidden; --include-stale lists them")


def runs_frame(store: Store, limit: int, include_stale: bool = True):
    """The newest ``limit`` runs (0: all) as ``harness list runs`` prints them: status marked stale where
    made by other code (those left out unless ``include_stale``), and the config as the fit resolved it
    (as ``harness results``: ASG's chosen k, ``recover``), as JSON."""
    frame = queries.runs(store).drop(columns="error")
    stale = frame.run_id.isin(store.stale_run_ids())
    frame = frame.assign(status=frame.status.where(~stale, frame.status + STALE))[~stale | include_stale]
    frame = frame.head(limit) if limit > 0 else frame
    return with_resolved_config(frame.reset_index(drop=True))


def show(
    run_id: Annotated[str, typer.Argument(help="A run id from `harness list runs`.")],
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole record as JSON.")] = False,
) -> None:
    """Everything stored about one run: config, provenance, scores, compression, efficiency."""
    with user_errors():
        store = Store(db)
        record = store.load(run_id)
    if as_json:
        typer.echo(record.to_json())
        return
    body = json.loads(record.to_json())
    for section in ("spec", "provenance", "compression", "details"):
        console.rule(section)
        console.print_json(data=body[section])
    console.rule("status")
    console.print(f"{record.status}  started {record.started_at}  finished {record.finished_at}  wall {record.wall_s}s")
    console.print(f"settings (as fitted): {fitted_settings(record.spec.adapter_config, record.fit and record.fit.details, record.spec.recipe)}",
                  highlight=False, markup=False)
    console.print(code_origin(record.provenance, store.journal.patch_path(run_id)), highlight=False, markup=False, soft_wrap=True)
    if is_stale(record.spec.adapter, record.spec.suite, record.spec.code):
        console.print(
            f"[yellow]stale:[/yellow] made by other code (fingerprint {record.spec.code or 'none'}, installed "
            f"{code_fingerprint(record.spec.adapter, record.spec.suite) or 'none'}); never reused, hidden from results by default"
        )
    if record.error:
        console.print(f"[red]error:[/red] {record.error}")
    table = Table(
        "task", "language", "metric", "setting", "value", "95% CI", "n", "chance", "%Base", "%Base paired CI",
        "chance-adj.", "p (McNemar)", "flips", "base above chance", title="scores, and against the baseline run",
    )
    compared = {c.key(): c for c in record.comparisons}
    for s in record.scores:
        c = compared.get((s.task, s.language, s.split, s.metric))
        table.add_row(
            s.task, s.language, s.metric, s.setting or "-", f"{s.value:.4f}", _interval(s.ci_low, s.ci_high, 4), str(s.n),
            _number(s.chance, 4), _number(s.pct_base, 1),
            f"unpaired: {c.unpaired}" if c is not None and c.unpaired else _interval(c and c.pct_base_ci_low, c and c.pct_base_ci_high, 1),
            _number(c and c.chance_adjusted_pct_base, 1), _number(c and c.p_value, 3), _number(c and c.flip_rate, 3),
            "-" if c is None or c.baseline_above_chance is None else ("yes" if c.baseline_above_chance else "NO"),
        )
    console.print(table)
    for e in record.efficiency:
        console.print(f"{e.phase}: batch {e.batch} x {e.seq_len}: p50 {e.p50_ms:.1f} ms, p95 {e.p95_ms:.1f} ms, {e.throughput:,.0f} tokens/s, peak {e.peak_mem_mb:.0f} MB")


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
