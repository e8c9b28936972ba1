"""``harness results`` as text (and ``--aggregate``, ``--claims``): the tables fitted to the terminal
(:mod:`harness.cli.tables`). A row says what it is: run (or configuration), suite, task, language and
metric, and the split where a task has several; a column that holds one value on every row is said
once above the table instead. The ranks below decide which columns a narrow terminal drops first
(docs/cli.md lists the order); CSV and JSON keep every column (:mod:`harness.cli.results`)."""

from __future__ import annotations

import pandas as pd

from harness.cli.tables import Column, fold, text
from harness.results.summary import settings_label

# metrics that are proportions: the main job prints them in percent, and a paper's figure of one reads in percent
PERCENT_METRICS = frozenset({"accuracy", "acc", "acc_norm", "f1", "em", "precision", "recall", "whole_word_share"})
SAID_ONCE = ("model", "adapter", "config", "suite", "profile", "seed", "seeds", "setting")  # above the table when one value
PROSE_FROM = 24  # a text column of --claims whose longest cell is longer folds at spaces


def at_chance(above) -> bool:
    """True where the baseline is not above chance; a missing value (no chance level) is not flagged."""
    return above is not None and not pd.isna(above) and not bool(above)


def cell(v, spec: str = ".4g") -> str:
    """A number as the tables print it (``-`` for none)."""
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "-"
    return f"{v:{spec}}" if isinstance(v, float) else str(v)


def interval(low, high, spec: str = ".4g") -> str:
    return "-" if low is None or pd.isna(low) else f"[{cell(low, spec)}, {cell(high, spec)}]"


def _split_rank(frame: pd.DataFrame, keys: list[str]) -> int:
    """The split tells rows apart (rank 0) where a key has several; else it is detail (rank 7)."""
    return 0 if frame.duplicated(keys, keep=False).any() else 7


def results_table(frame: pd.DataFrame, width: int | None, wide: bool) -> str:
    """One row per run x task x split x language x metric; ranks: 0 run_id, suite, task, (split),
    language, metric, value; 1 %Base, flag; 2 paired CI; 3 adapter, 95% CI, emb. frac.; 4 model,
    chance-adj.; 5 config, p, flips; 6 profile, seed, model frac., unpaired because; 7 split, setting."""
    unpaired = frame.unpaired.map(lambda u: u if isinstance(u, str) else "")
    flags = [", ".join(f for f in ("at chance" if at_chance(a) else "", "stale" if s else "") if f)
             for a, s in zip(frame.baseline_above_chance, frame.stale)]
    view = [
        (Column("run_id"), frame.run_id), (Column("model", 4), frame.model), (Column("adapter", 3), frame.adapter),
        (Column("config", 5, prose=True), frame.config.map(settings_label)), (Column("suite"), frame.suite),
        (Column("profile", 6), frame.profile), (Column("seed", 6, right=True), frame.seed.map(str)),
        (Column("task"), frame.task), (Column("split", _split_rank(frame, ["run_id", "task", "language", "metric"])), frame.split),
        (Column("language"), frame.language), (Column("metric"), frame.metric), (Column("setting", 7), frame.setting.fillna("-")),
        (Column("value", right=True), frame.value.map(cell)),
        (Column("95% CI", 3), [interval(lo, hi) for lo, hi in zip(frame.ci_low, frame.ci_high)]),
        (Column("%Base", 1, right=True), frame.pct_base.map(cell)),
        (Column("paired CI", 2), [("unpaired" if u else interval(lo, hi)) for u, lo, hi in zip(unpaired, frame.pct_base_ci_low, frame.pct_base_ci_high)]),
        (Column("chance-adj.", 4, right=True), frame.chance_adjusted_pct_base.map(cell)),
        (Column("p", 5, right=True), frame.p_value.map(cell)), (Column("flips", 5, right=True), frame.flip_rate.map(cell)),
        (Column("emb. frac.", 3, right=True), frame.emb_param_fraction.map(cell)),
        (Column("model frac.", 6, right=True), frame.model_param_fraction.map(cell)),
        (Column("flag", 1, prose=True), flags), (Column("unpaired because", 6, prose=True), unpaired),
    ]
    return _with_header(f"{len(frame)} result rows", view, width, wide)


def aggregate_table(frame: pd.DataFrame, width: int | None, wide: bool) -> str:
    """One row per configuration x task x split x language x metric, mean ± sd over its seeds; ranks:
    0 model, adapter, config, suite, profile, task, (split), language, metric, value; 1 %Base, flag;
    3 chance-adj.; 4 seeds; 7 split, setting."""
    configuration = ["model", "adapter", "config", "suite", "profile", "task", "language", "metric"]
    view = [
        (Column("model"), frame.model), (Column("adapter"), frame.adapter), (Column("config", prose=True), frame.config.map(settings_label)),
        (Column("suite"), frame.suite), (Column("profile"), frame.profile), (Column("task"), frame.task),
        (Column("split", _split_rank(frame, configuration)), frame.split), (Column("language"), frame.language),
        (Column("metric"), frame.metric), (Column("setting", 7), frame.setting.fillna("-")), (Column("seeds", 4, right=True), frame.seeds.map(str)),
        *((Column(title, rank, right=True), [_mean_sd(m, sd) for m, sd in zip(frame[f"{c}_mean"], frame[f"{c}_sd"])])
          for title, c, rank in (("value", "value", 0), ("%Base", "pct_base", 1), ("chance-adj.", "chance_adjusted_pct_base", 3))),
        (Column("flag", 1, prose=True), frame.baseline_above_chance.map(lambda a: "at chance" if at_chance(a) else "")),
    ]
    return _with_header(f"{len(frame)} configurations x scores, mean ± sd over seeds", view, width, wide)


def frame_table(frame: pd.DataFrame, width: int | None, wide: bool) -> str:
    """A DataFrame's columns as they come (``--claims``), all kept: numbers right-aligned, a text column
    whose longest cell is over :data:`PROSE_FROM` characters folded at spaces; where they cannot fit,
    a block per row."""
    view = []
    for name in frame.columns:
        cells = frame[name].map(cell)
        numeric = pd.api.types.is_numeric_dtype(frame[name])
        view.append((Column(str(name), prose=not numeric and max(cells.map(len), default=0) > PROSE_FROM, right=numeric), cells))
    return _render(view, width, wide) if len(frame) else "(no rows)"


def _with_header(title: str, view: list[tuple[Column, object]], width: int | None, wide: bool) -> str:
    """The title, then each column whose cells all hold one value (of :data:`SAID_ONCE`) as ``name value``,
    then the table of the others."""
    cells = [(c, [str(v) for v in values]) for c, values in view]
    once = [(c.title, values[0]) for c, values in cells if c.title in SAID_ONCE and values and len(set(values)) == 1]
    rest = [(c, values) for c, values in cells if c.title not in dict(once)]
    heading = title + (": " + ", ".join(f"{name} {value}" for name, value in once) if once else "")
    return fold(heading, width) + "\n" + (_render(rest, width, wide) if cells and cells[0][1] else "(no rows)")


def _render(view: list[tuple[Column, list[str]]], width: int | None, wide: bool) -> str:
    columns = [c for c, _ in view]
    rows = [list(r) for r in zip(*(list(values) for _, values in view))]
    return text(columns, rows, width, wide)


def _mean_sd(mean, sd) -> str:
    if pd.isna(mean):
        return "-"
    return cell(mean) if pd.isna(sd) else f"{cell(mean)} ± {cell(sd)}"
