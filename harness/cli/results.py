"""``harness results``: one row per run x task x language x metric, as a table, CSV or JSON; with
``--aggregate``, one row per configuration over its seeds (mean and sd)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import pandas as pd
import typer
from harness.leaderboard.frames import config_label

from harness.cli.common import DbOption, user_errors
from harness.errors import ConfigError
from harness.results.store import Store

COLUMNS = (
    "run_id", "model", "adapter", "config", "suite", "profile", "seed", "task", "language", "metric", "setting",
    "value", "ci_low", "ci_high", "chance", "pct_base", "pct_base_ci_low", "pct_base_ci_high", "chance_adjusted_pct_base",
    "difference", "difference_ci_low", "difference_ci_high", "p_value", "flip_rate", "agreement", "n_paired", "unpaired",
    "baseline_above_chance", "emb_param_fraction", "storage_bytes", "split", "n", "baseline_run_id", "variant",
)
# averaged over seeds by --aggregate (mean and sample sd); a configuration is a run's variant (its config hash without the seed)
AGGREGATED = ("value", "pct_base", "chance_adjusted_pct_base", "difference", "flip_rate")
GROUP = ("variant", "model", "adapter", "config", "suite", "profile", "task", "language", "split", "metric", "setting")


def _where(store: Store, suite: str | None, adapter: str | None, model: str | None, include_stale: bool) -> tuple[str, list]:
    filters, params = [], []
    for column, value in (("suite", suite), ("adapter", adapter), ("model", model)):
        if value is not None:
            filters.append(f"{column} = ?")
            params.append(value)
    stale = store.stale_run_ids()
    if stale and not include_stale:
        filters.append("NOT list_contains(?, run_id)")
        params.append(stale)
    return (f"WHERE {' AND '.join(filters)}" if filters else ""), params


def fetch(store: Store, suite: str | None, adapter: str | None, model: str | None, include_stale: bool = False) -> pd.DataFrame:
    """Finished runs' scores from the ``results`` view, filtered (stale runs only when asked, marked
    in the column ``stale``); parameterised SQL."""
    where, params = _where(store, suite, adapter, model, include_stale)
    sql = f"SELECT {', '.join(COLUMNS)} FROM results {where} ORDER BY finished_at, run_id, task, language, metric"
    frame = store.query(sql, params)
    stale = set(store.stale_run_ids()) if include_stale else set()
    return frame.assign(stale=frame.run_id.isin(stale))


def fetch_aggregate(store: Store, suite: str | None, adapter: str | None, model: str | None, include_stale: bool = False) -> pd.DataFrame:
    """Mean and sd over seeds per configuration and score (the newest run of each seed counts);
    ``baseline_above_chance`` holds only when it holds for every seed."""
    where, params = _where(store, suite, adapter, model, include_stale)
    stats = ", ".join(f"avg({c}) AS {c}_mean, stddev_samp({c}) AS {c}_sd" for c in AGGREGATED)
    sql = (
        f"SELECT {', '.join(GROUP)}, count(*) AS seeds, list(seed ORDER BY seed) AS seed_list, {stats}, "
        "bool_and(baseline_above_chance) AS baseline_above_chance, any_value(emb_param_fraction) AS emb_param_fraction "
        f"FROM (SELECT *, row_number() OVER (PARTITION BY variant, seed, task, language, split, metric ORDER BY finished_at DESC) AS newest "
        f"FROM results {where}) WHERE newest = 1 GROUP BY {', '.join(GROUP)} ORDER BY suite, model, adapter, config, task, language, metric"
    )
    return store.query(sql, params)


def results(
    db: DbOption = None,
    suite: Annotated[Optional[str], typer.Option(help="Only this suite.")] = None,
    adapter: Annotated[Optional[str], typer.Option(help="Only this adapter.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Only this model.")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table, csv or json.")] = "table",
    aggregate: Annotated[bool, typer.Option("--aggregate", help="One row per configuration: mean and sd over its seeds.")] = False,
    include_stale: Annotated[bool, typer.Option("--include-stale", help="Also runs made by other code (marked stale; never reused).")] = False,
) -> None:
    """Scores of finished runs with CIs, %Base (raw, paired CI, chance-adjusted), McNemar p, flip rate,
    embedding-parameter fraction and storage; runs whose baseline is not above chance are flagged.
    Runs made by other code than the installed one are stale: hidden unless --include-stale."""
    with user_errors():
        if format not in ("table", "csv", "json"):
            raise ConfigError(f"unknown format '{format}'; use table, csv or json")
        frame = (fetch_aggregate if aggregate else fetch)(Store(db), suite, adapter, model, include_stale)
    if format == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif format == "json":
        sys.stdout.write(frame.to_json(orient="records", indent=1) + "\n")
    else:
        sys.stdout.write((_aggregate_table(frame) if aggregate else _table(frame)) + "\n")
        if any(at_chance(v) for v in frame.baseline_above_chance):
            sys.stdout.write("at chance: the baseline's 95% CI reaches the chance level, so %Base there is not meaningful (read chance-adj.)\n")


def at_chance(above) -> bool:
    """True where the baseline is not above chance; a missing value (no chance level) is not flagged."""
    return above is not None and not pd.isna(above) and not bool(above)


def _table(frame: pd.DataFrame) -> str:
    """An aligned plain-text table (pandas): rich's table layout took seconds for a few hundred rows."""
    view = pd.DataFrame({
        "run_id": frame.run_id, "model": frame.model, "adapter": frame.adapter, "config": frame.config.map(config_label),
        "suite": frame.suite, "seed": frame.seed, "language": frame.language, "metric": frame.metric,
        "value [95% CI]": [_with_ci(*v) for v in zip(frame.value, frame.ci_low, frame.ci_high)],
        "%Base [paired CI]": [_pct_base(*v) for v in zip(frame.pct_base, frame.pct_base_ci_low, frame.pct_base_ci_high, frame.unpaired)],
        "chance-adj.": frame.chance_adjusted_pct_base.map(_cell), "p": frame.p_value.map(_cell), "flips": frame.flip_rate.map(_cell),
        "emb. frac.": frame.emb_param_fraction.map(_cell),
        "flag": [", ".join(f for f in (_flag(a), "stale" if s else "") if f) for a, s in zip(frame.baseline_above_chance, frame.stale)],
    })
    return f"{len(frame)} result rows\n" + (view.to_string(index=False) if len(view) else "(no rows)")


def _aggregate_table(frame: pd.DataFrame) -> str:
    view = pd.DataFrame({
        "model": frame.model, "adapter": frame.adapter, "config": frame.config.map(config_label), "suite": frame.suite,
        "language": frame.language, "metric": frame.metric, "seeds": frame.seeds,
        **{title: [_mean_sd(m, sd) for m, sd in zip(frame[f"{c}_mean"], frame[f"{c}_sd"])]
           for title, c in (("value", "value"), ("%Base", "pct_base"), ("chance-adj.", "chance_adjusted_pct_base"))},
        "flag": frame.baseline_above_chance.map(_flag),
    })
    return f"{len(frame)} configurations x scores, mean ± sd over seeds\n" + (view.to_string(index=False) if len(view) else "(no rows)")


def _flag(above) -> str:
    return "at chance" if at_chance(above) else ""


def _pct_base(value, low, high, unpaired) -> str:
    """%Base with its paired CI, or with the reason it has none."""
    return f"{_cell(value)} (unpaired: {unpaired})" if isinstance(unpaired, str) else _with_ci(value, low, high)


def _with_ci(value, low, high) -> str:
    return _cell(value) if pd.isna(low) else f"{_cell(value)} [{_cell(low)}, {_cell(high)}]"


def _mean_sd(mean, sd) -> str:
    if pd.isna(mean):
        return "-"
    return _cell(mean) if pd.isna(sd) else f"{_cell(mean)} ± {_cell(sd)}"


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)
