"""``harness results``: one row per run x task x language x metric, as a table, CSV or JSON; with
``--aggregate``, one row per configuration over its seeds (mean and sd); with ``--paper``, each
run's headline beside the papers' points of its regime, protocol and metric, and the papers' other
points with why they differ; with ``--claims``, each seed paper's headline claims against the runs
(:mod:`harness.results.claims`). Configs read as resolved (``k=0`` -> the ``k`` the fit chose)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from harness.budgets import PROFILES
from harness.cli.common import DbOption, WideOption, no_runs_yet, user_errors
from harness.cli.tables import fold, output_width
from harness.errors import ConfigError, did_you_mean

def results(
    db: DbOption = None,
    suite: Annotated[Optional[str], typer.Option(help="Only this suite.")] = None,
    adapter: Annotated[Optional[str], typer.Option(help="Only this adapter.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Only this model.")] = None,
    profile: Annotated[Optional[str], typer.Option(help="Only this profile (smoke, quick, paper).")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table, csv or json.")] = "table",
    aggregate: Annotated[bool, typer.Option("--aggregate", help="One row per configuration: mean and sd over its seeds.")] = False,
    include_stale: Annotated[bool, typer.Option("--include-stale", help="Also runs made by other code (marked stale; never reused).")] = False,
    paper: Annotated[bool, typer.Option("--paper", help="Each run's headline beside the papers' points of its regime, setting and metric; the others with why they differ.")] = False,
    claims: Annotated[bool, typer.Option("--claims", help="Each seed paper's headline claims: the paper's figure, ours with its paired CI, a verdict.")] = False,
    wide: WideOption = False,
) -> None:
    """Scores of finished runs with CIs, %Base (raw, paired CI, chance-adjusted), McNemar p, flip rate,
    embedding-parameter fraction and storage; runs whose baseline is not above chance are flagged.
    Runs made by other code than the installed one are stale: hidden unless --include-stale."""
    with user_errors():
        _check_options(format, paper, claims, aggregate, profile, bool(suite or adapter or model))
    from harness.cli import filters
    from harness.cli.paper_table import paper_tables
    from harness.cli.result_tables import aggregate_table, at_chance, results_table
    from harness.cli.result_views import fetch, fetch_aggregate, fetch_paper, stale_hidden, write_tables
    from harness.results import claims as paper_claims
    from harness.results.store import Store

    with user_errors(), no_runs_yet(format):
        store = Store(db)
        for note in filters.check(store, suite, adapter, model):  # on stderr, whichever view follows
            typer.echo(note, err=True)
        if claims:
            frame = paper_claims.table(store, include_stale=include_stale)
            return write_tables(frame, format, "", width=output_width(), wide=wide)
        hidden = 0 if include_stale else stale_hidden(store, suite, adapter, model, profile, paper)
        if paper:
            beside, other = fetch_paper(store, suite, adapter, model, include_stale, profile)
            if format == "table":
                sys.stdout.write(paper_tables(beside, other, output_width(), wide) + "\n")
            else:
                write_tables(beside, format, "paper points beside runs (same regime, setting and metric)", other,
                       "paper, other setting (not beside the run: reason)")
            return _say_hidden(hidden, format)
        frame = (fetch_aggregate if aggregate else fetch)(store, suite, adapter, model, include_stale, profile)
    if format == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif format == "json":
        sys.stdout.write(frame.to_json(orient="records", indent=1) + "\n")
    else:
        sys.stdout.write((aggregate_table if aggregate else results_table)(frame, output_width(), wide) + "\n")
        if any(at_chance(v) for v in frame.baseline_above_chance):
            sys.stdout.write(fold("at chance: the baseline's 95% CI reaches the chance level, so %Base there is not meaningful "
                                  "(read chance-adj.)", output_width()) + "\n")
    _say_hidden(hidden, format)


def _check_options(format: str, paper: bool, claims: bool, aggregate: bool, profile: str | None, filtered: bool) -> None:
    """ConfigError for a format the view has not, two views at once, or an unknown profile."""
    formats = ("table", "csv", "json", "markdown") if claims or paper else ("table", "csv", "json")
    if format not in formats:
        raise ConfigError(f"unknown format '{format}'; use {', '.join(formats)}")
    if paper and (claims or aggregate):
        raise ConfigError("--paper shows runs' headlines; drop --claims / --aggregate (one view at a time)")
    if profile is not None and profile not in PROFILES:
        raise ConfigError(f"unknown profile '{profile}'; {did_you_mean(profile, PROFILES)}profiles: {', '.join(PROFILES)}")
    if claims and (aggregate or filtered or profile):
        raise ConfigError("--claims reads every current run; drop --aggregate, --suite, --adapter, --model and --profile")


def _say_hidden(hidden: int, format: str) -> None:
    """Below a table (on stderr for csv and json): how many stale runs the view leaves out, and the option that shows them."""
    if hidden:
        runs = "runs (made by other code) are" if hidden != 1 else "run (made by other code) is"
        line = f"{hidden} stale {runs} hidden; --include-stale shows {'them' if hidden != 1 else 'it'}"
        typer.echo(fold(line, output_width()), err=format != "table")


