"""``harness results``: one row per run x task x language x metric, as a table, CSV or JSON; with
``--aggregate``, one row per configuration over its seeds (mean and sd); with ``--paper``, each
run's headline beside the papers' points of its regime, protocol and metric, and the papers' other
points with why they differ; with ``--claims``, each seed paper's headline claims against the runs
(:mod:`harness.results.claims`). Configs read as resolved (``k=0`` -> the ``k`` the fit chose)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import pandas as pd
import typer

from harness.budgets import PROFILES
from harness.cli import filters
from harness.cli.common import DbOption, WideOption, no_runs_yet, user_errors
from harness.cli.paper_table import paper_tables
from harness.cli.result_tables import aggregate_table, at_chance, cell, frame_table, interval, results_table
from harness.cli.tables import fold, output_width
from harness.leaderboard.frames import key_settings
from harness.errors import ConfigError, did_you_mean
from harness.results import claims as paper_claims
from harness.results import queries, summary
from harness.results.reference import placement
from harness.results.store import Store

def _filter(store: Store, suite: str | None, adapter: str | None, model: str | None, include_stale: bool,
            profile: str | None) -> tuple[queries.RunFilter, list[str]]:
    """The runs asked for (stale ones left out unless ``include_stale``) and the stale run ids."""
    stale = store.stale_run_ids()
    return queries.RunFilter(suite, adapter, model, profile, hidden=() if include_stale else tuple(stale)), stale


def fetch(store: Store, suite: str | None, adapter: str | None, model: str | None, include_stale: bool = False,
          profile: str | None = None) -> pd.DataFrame:
    """Finished runs' scores (:func:`harness.results.queries.results`), filtered (stale runs only when
    asked, marked in the column ``stale``), with the runs' resolved config, regime and family."""
    where, stale = _filter(store, suite, adapter, model, include_stale, profile)
    frame = summary.with_run_facts(queries.results(store, where))
    return frame.assign(stale=frame.run_id.isin(set(stale) if include_stale else set()))


def fetch_aggregate(store: Store, suite: str | None, adapter: str | None, model: str | None, include_stale: bool = False,
                    profile: str | None = None) -> pd.DataFrame:
    """Mean and sd over seeds per configuration and score (:func:`harness.results.queries.results_over_seeds`),
    with the resolved config, regime and family."""
    where, _ = _filter(store, suite, adapter, model, include_stale, profile)
    return summary.with_run_facts(queries.results_over_seeds(store, where))


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
    with user_errors(), no_runs_yet(format):
        _check_options(format, paper, claims, aggregate, profile, bool(suite or adapter or model))
        store = Store(db)
        for note in filters.check(store, suite, adapter, model):  # on stderr, whichever view follows
            typer.echo(note, err=True)
        if claims:
            frame = paper_claims.table(store, include_stale=include_stale)
            return _write(frame, format, "", width=output_width(), wide=wide)
        hidden = 0 if include_stale else _stale_hidden(store, suite, adapter, model, profile, paper)
        if paper:
            beside, other = fetch_paper(store, suite, adapter, model, include_stale, profile)
            if format == "table":
                sys.stdout.write(paper_tables(beside, other, output_width(), wide) + "\n")
            else:
                _write(beside, format, "paper points beside runs (same regime, setting and metric)", other,
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


def _stale_hidden(store: Store, suite: str | None, adapter: str | None, model: str | None, profile: str | None,
                  methods_only: bool) -> int:
    """How many finished runs the filter matches that are hidden as stale (``--paper``: method runs only)."""
    runs = queries.runs(store, queries.RunFilter(suite, adapter, model, profile))
    runs = runs[runs.status.eq("finished") & (runs.adapter.ne("none") if methods_only else True)]
    return int(runs.run_id.isin(set(store.stale_run_ids())).sum())


def _say_hidden(hidden: int, format: str) -> None:
    """Below a table (on stderr for csv and json): how many stale runs the view leaves out, and the option that shows them."""
    if hidden:
        runs = "runs (made by other code) are" if hidden != 1 else "run (made by other code) is"
        line = f"{hidden} stale {runs} hidden; --include-stale shows {'them' if hidden != 1 else 'it'}"
        typer.echo(fold(line, output_width()), err=format != "table")


PAPER_RUN = {"run_id": "run_id", "model": "model", "family_run": "family", "adapter": "adapter", "label": "label", "config": "config",
             "task": "task", "metric": "metric", "setting_run": "setting", "regime_run": "regime", "pct_base_run": "%Base"}
PAPER_SIDE = {"paper": "paper", "table": "table", "method": "method", "config_paper": "paper config", "base_model": "base model",
              "family": "paper family", "regime": "paper regime", "setting": "paper setting", "metric_paper": "paper metric",
              "value": "reported", "pct_base": "paper %Base", "emb_param_fraction": "paper emb. frac."}


def fetch_paper(store: Store, suite: str | None, adapter: str | None, model: str | None, include_stale: bool = False,
                profile: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each method run headline's paper points (:func:`harness.results.reference.placement` with the
    run's regime): those beside it, and the others of its suite and task with ``reason``. Baselines
    (100% by definition) have none."""
    runs = summary.read(store)
    keep = runs.adapter.ne("none")
    for column, value in (("suite", suite), ("adapter", adapter), ("model", model), ("profile", profile)):
        if value is not None:
            keep &= runs[column].eq(value)
    if not include_stale:
        keep &= ~runs.stale.astype(bool)
    runs = runs[keep].assign(label=lambda d: key_settings(d) if len(d) else [])
    papers = queries.paper_points(store, tuple(runs.suite.unique()), pareto=False)
    placed = []
    for r in runs.itertuples(index=False):
        rows = placement(papers, r.suite, r.task, r.metric, r.shots, r.setting if isinstance(r.setting, str) else "", {r.regime})
        run = {"run_id": r.run_id, "model": r.model, "family_run": r.family, "adapter": r.adapter, "label": r.label, "config": summary.settings_label(r.config),
               "task": r.task, "metric": r.metric, "setting_run": r.setting, "regime_run": r.regime,
               "pct_base_run": _pct_base(r.pct_base, r.pct_base_ci_low, r.pct_base_ci_high, r.unpaired_reason, ".1f")}
        placed.append(rows.rename(columns={"metric": "metric_paper", "config": "config_paper"}).assign(**run))
    frame = pd.concat(placed, ignore_index=True) if placed else pd.DataFrame(columns=[*PAPER_RUN, *PAPER_SIDE, "reason"])
    columns = {**PAPER_RUN, **PAPER_SIDE}
    beside = frame[frame.reason.eq("")][list(columns)].rename(columns=columns)
    other = frame[frame.reason.ne("")][["run_id", *PAPER_SIDE, "reason"]].rename(columns=PAPER_SIDE)
    return beside, other


def _write(frame: pd.DataFrame, format: str, title: str, other: pd.DataFrame | None = None, other_title: str = "",
           width: int | None = None, wide: bool = False) -> None:
    """One table (``--claims``) or two (``--paper``: beside, other setting) as table, markdown, CSV or JSON;
    CSV and JSON put the second below the first with ``reason`` filled."""
    frames = [(title, frame)] + ([(other_title, other)] if other is not None else [])
    if format in ("csv", "json"):
        rows = pd.concat([f for _, f in frames], ignore_index=True)
        rows.to_csv(sys.stdout, index=False) if format == "csv" else sys.stdout.write(rows.to_json(orient="records", indent=1) + "\n")
        return
    for name, f in frames:
        body = paper_claims.markdown(f) if format == "markdown" else frame_table(f, width, wide)
        sys.stdout.write((f"{name} ({len(f)} rows)\n" if name else "") + body + "\n\n")


def _pct_base(value, low, high, unpaired, spec: str = ".4g") -> str:
    """%Base with its paired CI, or with the reason it has none."""
    if isinstance(unpaired, str):
        return f"{cell(value, spec)} (unpaired: {unpaired})"
    return cell(value, spec) if pd.isna(low) else f"{cell(value, spec)} {interval(low, high, spec)}"
