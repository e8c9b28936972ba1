"""The frames and writers behind ``harness results`` and ``harness list runs``: finished runs' scores
(or their mean and sd over seeds) filtered as asked, each method run's paper points beside it or not
(with the reason), the ``--claims`` and ``--paper`` tables written as table, markdown, CSV or JSON,
and the stored runs with their status and resolved config. The command modules import this one
where they run, so that ``--help`` and refusals load no pandas."""

from __future__ import annotations

import sys

import pandas as pd

from harness.cli.result_tables import cell, frame_table, interval
from harness.leaderboard.frames import key_settings
from harness.results import claims as paper_claims
from harness.results import queries, summary
from harness.results.reference import placement
from harness.results.store import Store

STALE = " (stale)"  # after a run's status when made by other code


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


def stale_hidden(store: Store, suite: str | None, adapter: str | None, model: str | None, profile: str | None,
                  methods_only: bool) -> int:
    """How many finished runs the filter matches that are hidden as stale (``--paper``: method runs only)."""
    runs = queries.runs(store, queries.RunFilter(suite, adapter, model, profile))
    runs = runs[runs.status.eq("finished") & (runs.adapter.ne("none") if methods_only else True)]
    return int(runs.run_id.isin(set(store.stale_run_ids())).sum())


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


def write_tables(frame: pd.DataFrame, format: str, title: str, other: pd.DataFrame | None = None, other_title: str = "",
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


def run_rows(frame: pd.DataFrame) -> list[list[str]]:
    """``harness list runs``'s cells of each run in ``frame`` (:func:`runs_frame`)."""
    return [[r.run_id, r.status, r.model, r.adapter, summary.settings_label(r.config), r.suite, r.profile, str(r.seed),
             "-" if pd.isna(r.wall_s) else f"{r.wall_s:.0f}", _utc(r.started_at)]
            for r in frame.itertuples(index=False)]


def _utc(when: pd.Timestamp) -> str:
    when = pd.Timestamp(when)
    return (when.tz_convert("UTC") if when.tzinfo is not None else when).strftime("%Y-%m-%d %H:%M:%S")


def runs_frame(store: Store, limit: int, include_stale: bool = True):
    """The newest ``limit`` runs (0: all) as ``harness list runs`` prints them: status marked stale where
    made by other code (those left out unless ``include_stale``), and the config as the fit resolved it
    (as ``harness results``: ASG's chosen k, ``recover``), as JSON."""
    frame = queries.runs(store).drop(columns="error")
    stale = frame.run_id.isin(store.stale_run_ids())
    frame = frame.assign(status=frame.status.where(~stale, frame.status + STALE))[~stale | include_stale]
    frame = frame.head(limit) if limit > 0 else frame
    return summary.with_resolved_config(frame.reset_index(drop=True))
