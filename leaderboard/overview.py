"""The landing table (issues 35, 45.2): a row per method configuration and model, grouped by compression
budget, a column per suite holding the headline %Base (a number, shown with its paired interval and
marked where it needs a caveat). Pure: summary rows (:mod:`harness.results.summary`) in, DataFrames out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from harness.leaderboard.frames import AXES, Axis, budget_bins, budget_label, config_label, key_settings, over_seeds

from harness.results.queries import MARKERS

ROW = ["model", "adapter", "config", "profile"]  # one overview row
# cell caveats: symbol and meaning; the summary's markers, plus this table's own
SYMBOLS = {"at_chance": "°", "unpaired": "†", "other_settings": "‡", "stale": "§"}
MEANINGS = {**{name: text for name, (_, text) in MARKERS.items()}, "other_settings": "run with other suite settings than most of its column"}


@dataclass(frozen=True)
class Overview:
    display: pd.DataFrame   # what the page shows: row labels, budget, compression, then one %Base column per suite (numbers: they sort as numbers)
    texts: pd.DataFrame     # each suite cell as shown (:func:`cell_texts`; "" where the row has no run), same index, one column per suite
    pct_base: pd.DataFrame  # the cells' %Base (for the colours), same index, one column per suite
    run_ids: pd.DataFrame   # the newest run behind each cell
    suites: list[str]       # the suite columns, most covered first
    unpaired: list[str]     # why cells marked † have no interval: footnote i + 1 (``†1``) is unpaired[i]


def _cells(summary: pd.DataFrame, aggregate: bool) -> pd.DataFrame:
    """Method runs reduced to one cell per overview row and suite: the newest configuration's seed mean,
    marked ``other_settings`` where its suite settings differ from the commonest in its column."""
    cells = over_seeds(summary[summary.adapter.ne("none")], by_seed=not aggregate)
    row_keys = ROW + ([] if aggregate else ["seed"])
    cells = cells.sort_values("finished_at").drop_duplicates([*row_keys, "suite"], keep="last")
    common = cells.groupby(["suite", "model", "profile"]).suite_config.agg(lambda s: s.mode().iloc[0])
    cells["other_settings"] = cells.suite_config.ne(common.reindex(pd.MultiIndex.from_frame(cells[["suite", "model", "profile"]])).to_numpy())
    cells["method"] = key_settings(cells)
    return cells


def _one_decimal(values: pd.Series) -> pd.Series:
    return values.map("{:.1f}".format)


def cell_texts(cells: pd.DataFrame, unpaired: list[str]) -> pd.Series:
    """Each cell's text, ``98.3 [95.1, 101.2] °`` (mean ± sd over seeds when there are several); ``-``
    where %Base is not defined; an unpaired cell's † carries the number of its reason in ``unpaired``
    (``98.3 †2``). Column-wise: a call per cell took 0.27 s of the 10,000-run store's page."""
    text = _one_decimal(cells.pct_base)
    text = text.mask(cells.seeds > 1, text + " ±" + _one_decimal(cells.pct_base_sd))
    interval = " [" + _one_decimal(cells.pct_base_ci_low) + ", " + _one_decimal(cells.pct_base_ci_high) + "]"
    text = text.mask(cells.pct_base_ci_low.notna(), text + interval)
    number = {reason: str(i) for i, reason in enumerate(unpaired, start=1)}
    numbers = cells.unpaired_reason.map(lambda reason: number.get(reason, ""))
    marks = pd.Series("", index=cells.index)
    for name, symbol in SYMBOLS.items():
        marks = marks.mask(cells[name].astype(bool), marks + symbol + (numbers if name == "unpaired" else ""))
    return (text + " " + marks).str.rstrip().where(cells.pct_base.notna(), "-")


def build(summary: pd.DataFrame, aggregate: bool = True, axis: Axis = AXES["bytes"]) -> Overview:
    """The overview of the summary rows given (the sidebar's filters already applied), its rows grouped by
    compression budget on ``axis`` (:func:`~harness.leaderboard.frames.budget_bins`: most compressed
    first; a row without a fraction last) and, within a budget, ranked by their mean %Base over the
    suites they cover: a configuration is ranked against those of its own budget."""
    cells = _cells(summary, aggregate)
    if cells.empty:
        empty = pd.DataFrame()
        return Overview(empty, empty, empty, empty, [], [])
    row_keys = ["method", *ROW] + ([] if aggregate else ["seed"])
    suites = list(cells.suite.value_counts(sort=False).sort_index().sort_values(ascending=False, kind="stable").index)
    unpaired = sorted(cells.unpaired_reason[cells.unpaired].unique())
    cells = cells.assign(text=cell_texts(cells, unpaired))
    pct, text, runs = (cells.pivot(index=row_keys, columns="suite", values=v)[suites] for v in ("pct_base", "text", "run_id"))
    newest = cells.sort_values("finished_at").groupby(row_keys).tail(1).set_index(row_keys)
    bins = budget_bins(newest[axis.column])
    rows = pd.DataFrame({
        "budget": bins.map(budget_label), "params kept": newest.emb_param_fraction, "bytes kept": newest.storage_fraction,
        "storage MB": newest.storage_bytes / 1e6, "suites": pct.notna().sum(axis=1), "mean": pct.mean(axis=1), "bin": bins,
    }).loc[pct.index]
    covered = pd.Series(pct.notna().to_numpy() @ (1 << np.arange(len(suites))), index=pct.index)  # the suites a row covers, as bits
    rows["avg %Base"] = rows["mean"].where(covered.map(covered.value_counts()) > 1)
    order = rows.sort_values(["bin", "mean", "suites"], ascending=[True, False, False], na_position="last").index
    labels = order.to_frame(index=False).assign(config=lambda d: d.config.map(config_label)).rename(columns={"config": "settings"})
    shown = rows.loc[order].drop(columns=["mean", "bin"]).reset_index(drop=True)
    display = pd.concat([labels, shown, pct.loc[order].reset_index(drop=True)], axis=1)
    return Overview(display, text.loc[order].fillna("").reset_index(drop=True), pct.loc[order].reset_index(drop=True),
                    runs.loc[order].reset_index(drop=True), suites, unpaired)


def legend(view: Overview) -> str:
    """The markers' meanings, one line; † with the numbered reasons of the view's unpaired cells."""
    reasons = "".join(f", {SYMBOLS['unpaired']}{i} {reason}" for i, reason in enumerate(view.unpaired, start=1))
    return "; ".join(f"{SYMBOLS[name]} {MEANINGS[name]}" + (reasons if name == "unpaired" else "") for name in SYMBOLS)
