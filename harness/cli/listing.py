"""``harness list adapters|suites|models|runs``: what is installed and what is stored, as tables fitted to the
terminal (:mod:`harness.cli.tables`)."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from harness.cli.common import DbOption, WideOption, no_runs_yet, user_errors
from harness.cli.tables import Column, fold, output_width, print_table, rich_table, text
from harness.errors import PluginError
from harness.registry import ADAPTERS, SUITES
from harness.sources import models

list_app = typer.Typer(help="List adapters, suites, models or stored runs.", no_args_is_help=True)


def _defaults(cls: type) -> str:
    """A config class's settings and defaults as typed on the command line (``k=0, m=48, shared=false``)."""
    def default(f: dataclasses.Field):
        return f.default_factory() if f.default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING else f.default
    from harness.results.summary import setting_text

    return ", ".join(setting_text(f.name, default(f)) for f in dataclasses.fields(cls)) or "-"


def _budgets(budgets) -> str:
    """One line per profile: ``quick: fit_texts=200 steps=100 ...``; '-' without a budget table."""
    if budgets is None:
        return "-"
    return "\n".join(f"{profile}: " + " ".join(f"{k}={v}" for k, v in row.items()) for profile, row in budgets.rows().items())


def _print(columns: list[Column], rows: list[list[str]], **options) -> None:
    print_table(rich_table(columns, rows, output_width(), **options))


@list_app.command("adapters")
def list_adapters() -> None:
    """Installed adapters (entry-point group harness.adapters): settings, fit corpora, stage and budgets."""
    columns = [Column("adapter"), Column("package", 3, prose=True), Column("settings (defaults)", prose=True), Column("needs", 1, prose=True),
               Column("budget per profile", 2, prose=True)]
    rows = []
    with user_errors():
        for name in ADAPTERS.names():
            origin = f"{ADAPTERS.origin(name).package} {ADAPTERS.origin(name).version}"
            try:
                cls = ADAPTERS.get(name)
            except PluginError as err:  # one broken plugin does not hide the others
                rows.append([name, origin, f"unusable: {err}", "", ""])
                continue
            needs = [f"stage {cls.stage}", *(f"corpus {c}" for c in cls().corpora()), *(["teacher"] if cls.needs_teacher else []),
                     *([f"heads {', '.join(cls.heads)}"] if cls.heads is not None else [])]
            rows.append([name, origin, _defaults(cls.config_class), "\n".join(needs), _budgets(cls.budgets)])
    _print(columns, rows, show_lines=True)


@list_app.command("suites")
def list_suites() -> None:
    """Installed suites (entry-point group harness.suites)."""
    columns = [Column("suite"), Column("default model", 1), Column("settings (defaults)", 2, prose=True),
               Column("budget per profile", 3, prose=True), Column("description", prose=True)]
    with user_errors():
        rows = [[name, models.preferred(s.default_model), _defaults(s.config_class), _budgets(s.budgets), s.description]
                for name, s in ((n, SUITES.get(n)) for n in SUITES.names())]
    _print(columns, rows, show_lines=True)


@list_app.command("models")
def list_models() -> None:
    """Packaged models that work offline; any hub id or local directory works too."""
    columns = [Column("alias"), Column("kind", 1), Column("package", 2), Column("description", prose=True)]
    _print(columns, [[m.alias, m.kind, m.package, m.description] for m in models.PACKAGED.values()])
    typer.echo(fold("Also: any Hugging Face hub id (online) or a local model directory.", output_width()))


RUN_COLUMNS = (  # (title, rank, prose, right) of harness list runs, in display order
    ("run_id", 0, False, False), ("status", 0, False, False), ("model", 3, False, False), ("adapter", 1, False, False),
    ("config", 4, True, False), ("suite", 0, False, False), ("profile", 5, False, False), ("seed", 5, False, True),
    ("wall s", 6, False, True), ("started (UTC)", 6, False, False),
)


@list_app.command("runs")
def list_runs(
    db: DbOption = None,
    limit: Annotated[int, typer.Option(help="Newest N runs; 0: all.")] = 50,
    include_stale: Annotated[bool, typer.Option("--include-stale", help="Also runs made by other code (marked stale; never reused).")] = False,
    wide: WideOption = False,
) -> None:
    """Stored runs, newest first, with status (running, finished, failed) and the config as resolved;
    runs made by other code (stale) only with --include-stale, as in `harness results` and the leaderboard."""
    from harness.cli.result_views import STALE, run_rows, runs_frame
    from harness.results.store import Store

    with user_errors(), no_runs_yet():
        every = runs_frame(Store(db), 0)
    frame = every if include_stale else every[~every.status.str.endswith(STALE)]
    shown = frame.head(limit) if limit > 0 else frame
    rows = run_rows(shown)
    typer.echo(text([Column(*c) for c in RUN_COLUMNS], rows, output_width(), wide))
    hidden = len(every) - len(frame)
    if len(shown) < len(frame):
        typer.echo(f"the newest {len(shown)} of {len(frame)} runs; --limit 0 lists all")
    if hidden:
        typer.echo(fold(f"{hidden} stale runs (made by other code) are hidden; --include-stale lists them", output_width()))
