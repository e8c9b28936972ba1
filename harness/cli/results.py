"""``harness results``: one row per run x task x language x metric, as a table, CSV or JSON."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import pandas as pd
import typer

from harness.cli.common import DbOption, user_errors
from harness.errors import ConfigError
from harness.results.store import Store

COLUMNS = (
    "run_id", "model", "adapter", "config", "suite", "profile", "seed", "task", "language", "metric",
    "value", "ci_low", "ci_high", "pct_base", "emb_param_fraction", "storage_bytes", "split", "n", "baseline_run_id",
)


def fetch(store: Store, suite: str | None, adapter: str | None, model: str | None) -> pd.DataFrame:
    """Finished runs' scores from the ``results`` view, filtered; parameterised SQL."""
    filters, params = [], []
    for column, value in (("suite", suite), ("adapter", adapter), ("model", model)):
        if value is not None:
            filters.append(f"{column} = ?")
            params.append(value)
    where = f"WHERE {' AND '.join(filters)}" if filters else ""
    sql = f"SELECT {', '.join(COLUMNS)} FROM results {where} ORDER BY finished_at, run_id, task, language, metric"
    return store.query(sql, params)


def results(
    db: DbOption = None,
    suite: Annotated[Optional[str], typer.Option(help="Only this suite.")] = None,
    adapter: Annotated[Optional[str], typer.Option(help="Only this adapter.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Only this model.")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table, csv or json.")] = "table",
) -> None:
    """Scores of finished runs with CIs, %Base, embedding-parameter fraction and storage."""
    with user_errors():
        if format not in ("table", "csv", "json"):
            raise ConfigError(f"unknown format '{format}'; use table, csv or json")
        frame = fetch(Store(db), suite, adapter, model)
    if format == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif format == "json":
        sys.stdout.write(frame.to_json(orient="records", indent=1) + "\n")
    else:
        sys.stdout.write(_table(frame) + "\n")


def _table(frame: pd.DataFrame) -> str:
    """An aligned plain-text table (pandas): rich's table layout took seconds for a few hundred rows."""
    shown = ("run_id", "model", "adapter", "config", "suite", "profile", "language", "metric", "value", "ci_low", "ci_high", "pct_base", "emb_param_fraction")
    view = frame[list(shown)].copy()
    view["config"] = view.config.map(_config_label)
    text = view.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.4g}") if len(view) else "(no rows)"
    return f"{len(frame)} result rows\n{text}"


def _config_label(config: str | None) -> str:
    """``{"k": 256, "m": 48}`` -> ``k=256 m=48``; the baseline's empty config -> ``-``."""
    items = json.loads(config or "{}")
    return " ".join(f"{k}={v}" for k, v in items.items()) or "-"
