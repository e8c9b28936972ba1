"""The landing table: a row per method configuration of one model, a column per suite
holding the headline %Base (a number, shown with its paired interval and marked where it needs a
caveat), rows ranked only against comparable rows. Pure: summary rows
(:func:`harness.leaderboard.queries.headline_rows`) in, DataFrames out.

A rank compares like with like: rows of the same model and profile that cover the same suites (of
those shown) with the same suite settings against the same baselines (a **group**), inside one
compression budget (a factor of two in the fraction kept, :func:`~harness.leaderboard.frames.budget_bins`),
by their mean %Base over those suites. Groups are listed one after another (most suites first), never
ranked against each other."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd
from harness.leaderboard.frames import AXES, Axis, budget_bins, budget_label, key_settings, over_seeds

from harness.results import disclosure
from harness.results.queries import MARKERS
from harness.results.summary import settings_label

ROW = ["model", "adapter", "config", "profile"]  # one overview row
# cell caveats: symbol and meaning; the summary's markers, plus this table's own
SYMBOLS = {"at_chance": "°", "unpaired": "†", "other_settings": "‡", "disclosed": "¶", "stale": "§"}
MEANINGS = {
    **{name: text for name, (_, text) in MARKERS.items()}, "other_settings": "run with other suite settings than most of its column",
    "disclosed": f"rests on a {disclosure.LABEL}",
}
NOTES = {"unpaired": "unpaired_reason", "disclosed": "disclosure"}  # markers numbered by their note: †1, ¶2


@dataclass(frozen=True)
class Overview:
    display: pd.DataFrame   # what the page shows: row labels, rank, budget, compression, then one %Base column per suite (numbers: they sort as numbers)
    texts: pd.DataFrame     # each suite cell as shown (:func:`cell_texts`; "" where the row has no run), same index, one column per suite
    pct_base: pd.DataFrame  # the cells' %Base (for the colours), same index, one column per suite
    run_ids: pd.DataFrame   # the newest run behind each cell
    suites: list[str]       # the suite columns, as asked (else most covered first)
    notes: dict[str, list[str]]  # marker -> its notes: ``†1`` is notes["unpaired"][0]
    groups: pd.Series       # each row's group (the suites it covers with their settings and baselines), same index


def coverage(summary: pd.DataFrame) -> list[str]:
    """The suites of the method rows, most covered (configurations with a run on it) first."""
    methods = summary[summary.adapter.ne("none")]
    counts = methods.drop_duplicates(["suite", *ROW]).suite.value_counts(sort=False).sort_index()
    return list(counts.sort_values(ascending=False, kind="stable").index)


def _cells(summary: pd.DataFrame, aggregate: bool) -> pd.DataFrame:
    """Method runs reduced to one cell per overview row and suite: the newest configuration's seed mean,
    marked ``other_settings`` where its suite settings differ from the commonest in its column, and
    ``disclosed`` where it rests on a disclosed budget change."""
    cells = over_seeds(summary[summary.adapter.ne("none")], by_seed=not aggregate)
    row_keys = ROW + ([] if aggregate else ["seed"])
    cells = cells.sort_values("finished_at").drop_duplicates([*row_keys, "suite"], keep="last")
    common = cells.groupby(["suite", "model", "profile"]).suite_config.agg(lambda s: s.mode().iloc[0])
    cells["other_settings"] = cells.suite_config.ne(common.reindex(pd.MultiIndex.from_frame(cells[["suite", "model", "profile"]])).to_numpy())
    cells["disclosed"] = cells.disclosure.fillna("").ne("")
    cells["method"] = key_settings(cells)
    return cells


def _one_decimal(values: pd.Series) -> pd.Series:
    return values.map("{:.1f}".format)


def cell_texts(cells: pd.DataFrame, notes: dict[str, list[str]]) -> pd.Series:
    """Each cell's text, ``98.3 [95.1, 101.2] °`` (mean ± sd over seeds when there are several); ``-``
    where %Base is not defined; a marker of :data:`NOTES` carries the number of its note in ``notes``
    (``98.3 †2``). Column-wise: a call per cell took 0.27 s of the 10,000-run store's page."""
    text = _one_decimal(cells.pct_base)
    text = text.mask(cells.seeds > 1, text + " ±" + _one_decimal(cells.pct_base_sd))
    interval = " [" + _one_decimal(cells.pct_base_ci_low) + ", " + _one_decimal(cells.pct_base_ci_high) + "]"
    text = text.mask(cells.pct_base_ci_low.notna(), text + interval)
    marks = pd.Series("", index=cells.index)
    for name, symbol in SYMBOLS.items():
        number = {note: str(i) for i, note in enumerate(notes.get(name, []), start=1)}
        numbers = cells[NOTES[name]].map(lambda note: number.get(note, "")) if name in NOTES else ""
        marks = marks.mask(cells[name].astype(bool), marks + symbol + numbers)
    return (text + " " + marks).str.rstrip().where(cells.pct_base.notna(), "-")


def _groups(cells: pd.DataFrame, row_keys: list[str], suites: list[str]) -> pd.DataFrame:
    """Per overview row: its group (the suites it covers with their settings and baselines, as text; a
    baseline's variant names its model and profile too), how many suites it covers and the column of
    its first (where its group is listed: most suites first, then by that column)."""
    order = {s: i for i, s in enumerate(suites)}
    cells = cells.assign(part=[json.dumps([s, c, t or "", b]) for s, c, t, b in
                               zip(cells.suite, cells.suite_config, cells.setting, cells.baseline_variant)],
                         column=cells.suite.map(order))
    return cells.sort_values("column").groupby(row_keys, sort=False).agg(
        group=("part", " ".join), suites=("suite", "size"), first=("column", "min"))


def build(summary: pd.DataFrame, aggregate: bool = True, axis: Axis = AXES["bytes"], columns: list[str] | None = None) -> Overview:
    """The overview of the summary rows given (the sidebar's filters applied), on the suite ``columns``
    (default: every suite, most covered first), its rows ranked within their group and budget on ``axis``
    (module docstring): groups one after another, in each the most compressed budget first and, inside
    a budget, the best mean %Base first; a row without a fraction last."""
    suites = [s for s in (columns or coverage(summary)) if s in set(summary.suite)]
    cells = _cells(summary[summary.suite.isin(suites)], aggregate)
    if cells.empty:
        empty = pd.DataFrame()
        return Overview(empty, empty, empty, empty, [], {}, pd.Series(dtype=object))
    row_keys = ["method", *ROW] + ([] if aggregate else ["seed"])
    suites = [s for s in suites if s in set(cells.suite)]
    notes = {name: sorted(set(cells[column][cells[name]])) for name, column in NOTES.items()}
    cells = cells.assign(text=cell_texts(cells, notes))
    pct, text, runs = (cells.pivot(index=row_keys, columns="suite", values=v)[suites] for v in ("pct_base", "text", "run_id"))
    newest = cells.sort_values("finished_at").groupby(row_keys).tail(1).set_index(row_keys)
    bins = budget_bins(newest[axis.column])
    groups = _groups(cells, row_keys, suites)
    rows = pd.DataFrame({
        "budget": bins.map(budget_label), "params kept": newest.emb_param_fraction, "bytes kept": newest.storage_fraction,
        "storage MB": newest.storage_bytes / 1e6, "mean": pct.mean(axis=1), "bin": bins,
    }).loc[pct.index].join(groups)
    rows["avg %Base"] = rows["mean"].where(rows.suites > 1)  # an average across suites; one suite's is its cell
    order = rows.sort_values(["suites", "first", "group", "bin", "mean"], ascending=[False, True, True, True, False], na_position="last").index
    rows = rows.loc[order]
    place = rows.groupby(["group", "bin"], dropna=False)["mean"]
    rows["rank"] = place.cumcount().add(1).astype(str) + " of " + place.transform("size").astype(str)
    labels = order.to_frame(index=False).assign(config=lambda d: d.config.map(settings_label)).rename(columns={"config": "settings"})
    shown = rows[["rank", "budget", "params kept", "bytes kept", "storage MB", "avg %Base"]].reset_index(drop=True)
    display = pd.concat([labels, shown, pct.loc[order].reset_index(drop=True)], axis=1)
    return Overview(display, text.loc[order].fillna("").reset_index(drop=True), pct.loc[order].reset_index(drop=True),
                    runs.loc[order].reset_index(drop=True), suites, notes, rows.group.reset_index(drop=True))


def legend(view: Overview) -> str:
    """The markers' meanings, one line; a numbered marker with the view's notes."""
    def numbered(name: str) -> str:
        return "".join(f"; {SYMBOLS[name]}{i} {note}" for i, note in enumerate(view.notes.get(name, []), start=1))

    return "; ".join(f"{SYMBOLS[name]} {MEANINGS[name]}" + numbered(name) for name in SYMBOLS)
