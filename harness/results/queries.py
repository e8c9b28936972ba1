"""Every read of the results store, as SQL, behind typed functions: the one module that holds read SQL.

Each function takes a store (:class:`Readable`: :class:`~harness.results.store.Store` is one), reads
through its read-only connections to a database of this schema version, closed after each call, with
``?`` parameters (never values pasted into SQL), and returns typed records
(:class:`~harness.results.records.RunRecord`, :class:`~harness.results.records.ItemOutputs`) or a
DataFrame whose columns its docstring names; ``config``, ``suite_config``, ``recipe`` and
``fit_details`` are JSON text there. The ``results`` view (one row per score of a finished run, with
its comparison and compression) is part of the schema (:data:`harness.results.store.SCHEMA`).
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import duckdb
import pandas as pd

from harness.errors import StoreError
from harness.results import reference
from harness.results.fingerprint import code_fingerprint, is_stale
from harness.results.records import PART_TABLES, ItemOutputs, RunRecord, record_from_row


class Readable(Protocol):
    """What a read needs of a store (:class:`~harness.results.store.Store`): its path, the tables it
    holds, and a read-only connection to a database of this schema version."""

    path: Path

    def tables(self) -> set[str]: ...

    def reading(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]: ...


def _frame(store: Readable, sql: str, params: list | None = None) -> pd.DataFrame:
    with store.reading() as con:
        return con.execute(sql, params or []).df()


@dataclass(frozen=True)
class RunFilter:
    """Which runs a read takes: each name given must match; the runs in ``hidden`` are left out
    (stale runs, unless asked for)."""

    suite: str | None = None
    adapter: str | None = None
    model: str | None = None
    profile: str | None = None
    hidden: tuple[str, ...] = ()

    def sql(self, table: str = "") -> tuple[list[str], list]:
        """(conditions, parameters) on the columns of ``table`` (an alias with its dot, or none)."""
        conditions, params = [], []
        for column in ("suite", "adapter", "model", "profile"):
            if getattr(self, column) is not None:
                conditions.append(f"{table}{column} = ?")
                params.append(getattr(self, column))
        if self.hidden:
            conditions.append(f"NOT list_contains(?, {table}run_id)")
            params.append(list(self.hidden))
        return conditions, params

    def where(self) -> tuple[str, list]:
        conditions, params = self.sql()
        return (f"WHERE {' AND '.join(conditions)}" if conditions else ""), params


# -- runs ------------------------------------------------------------------------------------

def record(store: Readable, run_id: str) -> RunRecord:
    """One run with its scores, comparisons, compression, fit and efficiency (``items`` empty:
    :func:`run_items`); a StoreError naming the command that lists runs when there is none."""
    with store.reading() as con:
        row = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise StoreError(f"no run '{run_id}' in {store.path}; list runs with `harness list runs`")
        run = dict(zip([d[0] for d in con.description], row))
        parts = {cls: con.execute(f"SELECT {', '.join(f.name for f in dataclasses.fields(cls))} FROM {table} WHERE run_id = ?",
                                  [run_id]).fetchall() for table, cls in PART_TABLES.items()}
    return record_from_row(run, parts)


def run_id(store: Readable, prefix: str) -> str:
    """The run whose id is ``prefix``, else the one run whose id starts with it (as git takes a commit);
    a StoreError listing the matches of an ambiguous prefix, or naming the command that lists runs."""
    with store.reading() as con:
        ids = [r for (r,) in con.execute("SELECT run_id FROM runs WHERE starts_with(run_id, ?) ORDER BY run_id", [prefix]).fetchall()]
    if prefix in ids or len(ids) == 1:
        return prefix if prefix in ids else ids[0]
    if not ids:
        raise StoreError(f"no run '{prefix}' in {store.path}; list runs with `harness list runs`")
    shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
    raise StoreError(f"run id prefix '{prefix}' matches {len(ids)} runs in {store.path}: {shown}; give more of the id")


def run_items(store: Readable, run_id: str) -> list[ItemOutputs]:
    """A run's per-item outputs, one ItemOutputs per task x language x split x metric, items in stored order."""
    optional = "CASE WHEN count({0}) = 0 THEN NULL ELSE list({0} ORDER BY rowid) END"
    with store.reading() as con:
        rows = con.execute(
            "SELECT task, language, split, metric, list(item ORDER BY rowid), list(value ORDER BY rowid), "
            f"{optional.format('prediction')}, {optional.format('gold')}, {optional.format('weight')}, {optional.format('cluster')} "
            "FROM items WHERE run_id = ? GROUP BY task, language, split, metric ORDER BY min(rowid)",
            [run_id],
        ).fetchall()
    return [ItemOutputs(*row[:4], *(tuple(v or ()) for v in row[4:])) for row in rows]


def newest_finished(store: Readable, config_hash: str) -> str | None:
    """The id of the newest finished run with this config hash (run reuse), if any."""
    with store.reading() as con:
        row = con.execute(
            "SELECT run_id FROM runs WHERE config_hash = ? AND status = 'finished' ORDER BY finished_at DESC LIMIT 1", [config_hash],
        ).fetchone()
    return row[0] if row else None


def stale_run_ids(store: Readable) -> list[str]:
    """Runs whose code fingerprint is not the installed code's (:func:`~harness.results.fingerprint.is_stale`)."""
    with store.reading() as con:
        runs = con.execute("SELECT run_id, adapter, suite, code FROM runs").fetchall()
    return [r for r, a, s, c in runs if is_stale(a, s, c)]


def runs(store: Readable, where: RunFilter = RunFilter()) -> pd.DataFrame:
    """Runs of every status, newest first: run_id, status, model, adapter, config, suite, profile, seed,
    wall_s (to 0.1 s), started_at, error, fit_details, recipe."""
    clause, params = where.where()
    return _frame(store, (
        "SELECT run_id, status, model, adapter, CAST(adapter_config AS VARCHAR) AS config, suite, profile, seed, "
        "round(wall_s, 1) AS wall_s, started_at, error, CAST(fit_details AS VARCHAR) AS fit_details, "
        f"CAST(recipe AS VARCHAR) AS recipe FROM runs {clause} ORDER BY started_at DESC, run_id DESC"), params)


def finished_runs(store: Readable) -> pd.DataFrame:
    """Finished runs, newest first: run_id, config_hash, model, adapter, suite, profile, seed,
    adapter_config, suite_config, recipe, minutes (wall time), finished_at."""
    return _frame(store, (
        "SELECT run_id, config_hash, model, adapter, suite, profile, seed, CAST(adapter_config AS VARCHAR) AS adapter_config, "
        "CAST(suite_config AS VARCHAR) AS suite_config, CAST(recipe AS VARCHAR) AS recipe, wall_s / 60 AS minutes, finished_at "
        "FROM runs WHERE status = 'finished' ORDER BY finished_at DESC"))


def runs_of_configs(store: Readable, hashes: list[str]) -> list[tuple]:
    """(config_hash, status, run_id, host, pid, started_at as text, wall_s, error) of the runs with these config hashes."""
    frame = _frame(store, (
        "SELECT config_hash, status, run_id, host, pid, CAST(started_at AS VARCHAR) AS started_at, wall_s, error "
        "FROM runs WHERE list_contains(?, config_hash)"), [hashes])
    return [tuple(r) for r in frame.itertuples(index=False)]


def finished_baselines_first(store: Readable) -> list[tuple[str, str | None]]:
    """(run_id, baseline_run_id) of every finished run: baselines first, then by start time."""
    with store.reading() as con:
        return con.execute(
            "SELECT run_id, baseline_run_id FROM runs WHERE status = 'finished' ORDER BY adapter <> 'none', started_at").fetchall()


def names(store: Readable, column: Literal["suite", "adapter", "model"]) -> pd.DataFrame:
    """Each stored ``column`` value of finished runs: name, runs (count), package (an adapter's
    package and version, else None)."""
    package = "any_value(adapter_package || ' ' || adapter_version)" if column == "adapter" else "NULL"
    return _frame(store, f"SELECT {column} AS name, count(*) AS runs, {package} AS package FROM runs WHERE status = 'finished' GROUP BY {column}")


def counts(store: Readable, papers: bool) -> tuple[int, int, int]:
    """(runs, failed runs, paper rows; 0 without ``papers``, a store without the paper_results table)."""
    rows = "(SELECT count(*) FROM paper_results)" if papers else "0"
    with store.reading() as con:
        return con.execute(f"SELECT count(*), count(*) FILTER (status = 'failed'), {rows} FROM runs").fetchone()


# -- scores: harness results -----------------------------------------------------------------

RESULT_COLUMNS = (
    "run_id", "model", "adapter", "config", "suite", "profile", "seed", "task", "language", "metric", "setting",
    "value", "ci_low", "ci_high", "chance", "pct_base", "pct_base_ci_low", "pct_base_ci_high", "chance_adjusted_pct_base",
    "difference", "difference_ci_low", "difference_ci_high", "p_value", "flip_rate", "agreement", "n_paired", "unpaired",
    "baseline_above_chance", "emb_param_fraction", "model_param_fraction", "storage_bytes", "split", "n", "baseline_run_id", "variant",
)
# averaged over seeds by results_over_seeds (mean and sample sd); a configuration is a run's variant (its config hash without the seed)
SEED_AVERAGED = ("value", "pct_base", "chance_adjusted_pct_base", "difference", "flip_rate")
CONFIGURATION = ("variant", "model", "adapter", "config", "suite", "profile", "task", "language", "split", "metric", "setting")

# the results view with each run's recipe and fit details, and the share of all the model's parameters it
# keeps (SKD's student/teacher ratio, paper 004 Tables 7-8, sits here beside its scores)
_SOURCE = ("(SELECT v.*, CAST(r.recipe AS VARCHAR) AS recipe, CAST(r.fit_details AS VARCHAR) AS fit_details, "
           "c.total_params_after::DOUBLE / nullif(c.total_params_before, 0) AS model_param_fraction "
           "FROM results v JOIN runs r USING (run_id) LEFT JOIN compression c USING (run_id))")


def results(store: Readable, where: RunFilter) -> pd.DataFrame:
    """Finished runs' scores: :data:`RESULT_COLUMNS`, recipe, fit_details; by finish time, run, task, language, metric."""
    clause, params = where.where()
    return _frame(store, f"SELECT {', '.join(RESULT_COLUMNS)}, recipe, fit_details FROM {_SOURCE} {clause} "
                         "ORDER BY finished_at, run_id, task, language, metric", params)


def results_over_seeds(store: Readable, where: RunFilter) -> pd.DataFrame:
    """One row per configuration and score (:data:`CONFIGURATION`) over its seeds, the newest run of each
    seed counting: seeds, seed_list, ``<c>_mean`` and ``<c>_sd`` of each :data:`SEED_AVERAGED` column,
    baseline_above_chance (for every seed), and the lowest seed's emb_param_fraction, model_param_fraction, recipe, fit_details."""
    clause, params = where.where()
    stats = ", ".join(f"avg({c}) AS {c}_mean, stddev_samp({c}) AS {c}_sd" for c in SEED_AVERAGED)
    return _frame(store, (
        f"SELECT {', '.join(CONFIGURATION)}, count(*) AS seeds, list(seed ORDER BY seed) AS seed_list, {stats}, "
        "bool_and(baseline_above_chance) AS baseline_above_chance, arg_min(emb_param_fraction, seed) AS emb_param_fraction, "
        "arg_min(model_param_fraction, seed) AS model_param_fraction, "
        "arg_min(recipe, seed) AS recipe, arg_min(fit_details, seed) AS fit_details "
        f"FROM (SELECT *, row_number() OVER (PARTITION BY variant, seed, task, language, split, metric ORDER BY finished_at DESC, run_id DESC) AS newest "
        f"FROM {_SOURCE} {clause}) WHERE newest = 1 GROUP BY {', '.join(CONFIGURATION)} "
        "ORDER BY suite, model, adapter, config, variant, profile, task, language, split, metric, setting"
    ), params)


def claim_runs(store: Readable, adapter: str, suite: str, task: str, language: str, metric: str, hidden: list[str]) -> pd.DataFrame:
    """Finished runs of ``adapter`` on ``suite`` with that score, newest first, those in ``hidden`` left out:
    run_id, model, profile, finished_at, config, recipe, value, pct_base, setting, shots, pct_base_ci_low,
    pct_base_ci_high, emb_param_fraction, freed_slots, vocab_size_before."""
    return _frame(store, """
SELECT r.run_id, r.model, r.profile, r.finished_at, CAST(r.adapter_config AS VARCHAR) AS config, CAST(r.recipe AS VARCHAR) AS recipe,
       s.value, s.pct_base, s.setting, s.shots, k.pct_base_ci_low, k.pct_base_ci_high, c.emb_param_fraction,
       c.freed_slots, c.vocab_size_before
FROM runs r JOIN scores s USING (run_id) LEFT JOIN compression c USING (run_id)
LEFT JOIN comparisons k ON k.run_id = s.run_id AND k.task = s.task AND k.language = s.language AND k.split = s.split AND k.metric = s.metric
WHERE r.status = 'finished' AND r.adapter = ? AND r.suite = ? AND s.task = ? AND s.language = ? AND s.metric = ?
  AND NOT list_contains(?, r.run_id)
ORDER BY r.finished_at DESC, r.run_id, s.split
""", [adapter, suite, task, language, metric, hidden])


# -- the summary: one headline row per finished run --------------------------------------------

# suite -> (task, metric) of its headline score, where the first stored avg row is not it
HEADLINES = {
    "bpb": ("wikitext2", "bits_per_byte"),
    "lm_eval": ("paper003_avg6", "acc"),
    "mteb_clf": ("banking77", "accuracy"),
    "patchscopes": ("all", "exact_rate"),
    "tokenizer": ("wikitext2", "bytes_per_token"),
    "word_sim": ("word_sim", "spearman"),
}
# marker -> (SQL over the joined headline row: true when the caveat applies, what it tells the reader)
MARKERS = {
    "at_chance": (
        "coalesce(NOT k.baseline_above_chance, FALSE)",
        "the baseline is not significantly above chance: %Base divides by noise",
    ),
    "unpaired": (
        "r.adapter <> 'none' AND s.pct_base IS NOT NULL AND k.pct_base_ci_low IS NULL",
        "no paired interval",  # why: the comparison's ``unpaired`` (column ``unpaired_reason``), where stored
    ),
    "stale": (
        "coalesce(r.code, '') = '' OR r.code IS DISTINCT FROM f.code",  # as fingerprint.is_stale
        "made by other code than the installed one (never reused; rerun it to refresh)",
    ),
}
UNPAIRED = "no per-item outputs matched with the baseline run"  # the reason where a comparison stored none

_HEADLINE_VALUES = ", ".join(f"('{suite}', '{task}', '{metric}')" for suite, (task, metric) in HEADLINES.items())
_MARKER_COLUMNS = "".join(f", {sql} AS {name}" for name, (sql, _) in MARKERS.items())

HEADLINE_SQL = f"""
WITH installed AS (SELECT unnest(?::VARCHAR[]) AS adapter, unnest(?::VARCHAR[]) AS suite, unnest(?::VARCHAR[]) AS code),
ranked AS (
    SELECT s.rowid AS score_row, s.run_id, s.task, s.language, s.metric,
           (h.suite IS NOT NULL) AS named, s.language = 'avg' AS is_avg,
           bool_or(s.language = 'avg') OVER (PARTITION BY s.run_id, s.task, s.metric) AS task_has_avg
    FROM scores s JOIN runs r USING (run_id)
    LEFT JOIN (VALUES {_HEADLINE_VALUES}) h(suite, task, metric) ON h.suite = r.suite AND h.task = s.task AND h.metric = s.metric
    WHERE r.status = 'finished'
),
headline AS (
    SELECT score_row FROM ranked
    WHERE is_avg OR NOT task_has_avg
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY named DESC, is_avg DESC, score_row) = 1
)
SELECT r.run_id, r.model, r.adapter, CAST(r.adapter_config AS VARCHAR) AS config, r.suite,
       CAST(r.suite_config AS VARCHAR) AS suite_config, r.profile, r.seed, coalesce(r.variant, r.run_id) AS variant,
       s.task, s.language, s.metric, s.setting, s.shots, s.value, s.ci_low, s.ci_high, s.n, s.chance, s.higher_is_better,
       s.pct_base, k.pct_base_ci_low, k.pct_base_ci_high, k.chance_adjusted_pct_base, k.p_value, k.flip_rate,
       k.n_paired, CASE WHEN {MARKERS["unpaired"][0]} THEN coalesce(k.unpaired, '{UNPAIRED}') END AS unpaired_reason,
       c.emb_param_fraction, c.storage_fraction, c.storage_bytes_after AS storage_bytes, r.baseline_run_id, r.finished_at,
       CAST(r.recipe AS VARCHAR) AS recipe, CAST(r.adapter_budget AS VARCHAR) AS adapter_budget,
       CAST(r.fit_details AS VARCHAR) AS fit_details
       {_MARKER_COLUMNS}
FROM headline JOIN scores s ON s.rowid = headline.score_row JOIN runs r ON r.run_id = s.run_id
LEFT JOIN compression c ON c.run_id = r.run_id
LEFT JOIN installed f ON f.adapter = r.adapter AND f.suite = r.suite
LEFT JOIN comparisons k ON k.run_id = s.run_id AND k.task = s.task AND k.language = s.language AND k.split = s.split
     AND k.metric = s.metric
"""


def headlines(store: Readable) -> pd.DataFrame:
    """Each finished run's headline row (:data:`HEADLINE_SQL`'s columns; :mod:`harness.results.summary`
    says which score that is), after the installed fingerprints of the adapters and suites whose runs
    carry one (a run without is stale)."""
    pairs = _frame(store, "SELECT DISTINCT adapter, suite FROM runs WHERE status = 'finished' AND coalesce(code, '') <> ''")
    codes = [code_fingerprint(a, s) for a, s in zip(pairs.adapter, pairs.suite)]
    return _frame(store, HEADLINE_SQL, [list(pairs.adapter), list(pairs.suite), codes])


# -- what one leaderboard chart reads ----------------------------------------------------------

PAPER_COLUMNS = (
    "paper", "table", "method", "base_model", "config", "suite", "task", "setting", "paper_setting", "metric", "value",
    "pct_base", "emb_param_fraction", "notes",
)
_PAPER_SELECT = ", ".join(f'"{c}"' for c in PAPER_COLUMNS)  # quoted: "table" is a keyword


def scores(store: Readable, where: RunFilter) -> pd.DataFrame:
    """Finished runs' scores, every language: run_id, model, adapter, config, suite, profile, seed, variant,
    task, language, metric, setting, shots, value, pct_base, emb_param_fraction, finished_at, fit_details, recipe."""
    clause, params = where.where()
    return _frame(store, (
        "SELECT run_id, model, adapter, config, suite, profile, seed, variant, task, language, metric, setting, shots, value, "
        "pct_base, emb_param_fraction, finished_at, (SELECT CAST(fit_details AS VARCHAR) FROM runs r WHERE r.run_id = results.run_id) AS fit_details, "
        "(SELECT CAST(recipe AS VARCHAR) FROM runs r WHERE r.run_id = results.run_id) AS recipe "
        f"FROM results {clause} ORDER BY finished_at, run_id, task, language, metric"), params)


def efficiency(store: Readable, where: RunFilter) -> pd.DataFrame:
    """Timed phases of finished runs, each beside the unchanged model's timed inside the same run, in
    the same process (``base_`` p50_ms, throughput, peak_mem_mb: phase ``base:<phase>`` of the same shape;
    NULL where the run timed no base beside it, never another run's figures), with the device: run_id,
    model, adapter, config, fit_details, recipe, suite, profile, seed, device, phase, batch, seq_len,
    p50_ms, p95_ms, throughput, peak_mem_mb and the three base columns."""
    conditions, params = where.sql("r.")
    timed = ["r.status = 'finished'", "e.phase NOT LIKE 'base:%'", *conditions]
    base = "s.{0} AS base_{0}"
    return _frame(store, (
        "SELECT r.run_id, r.model, r.adapter, CAST(r.adapter_config AS VARCHAR) AS config, CAST(r.fit_details AS VARCHAR) AS fit_details, "
        "CAST(r.recipe AS VARCHAR) AS recipe, r.suite, r.profile, r.seed, r.device, e.phase, e.batch, e.seq_len, e.p50_ms, e.p95_ms, e.throughput, e.peak_mem_mb, "
        f"{base.format('p50_ms')}, {base.format('throughput')}, {base.format('peak_mem_mb')} "
        "FROM efficiency e JOIN runs r USING (run_id) "
        "LEFT JOIN efficiency s ON s.run_id = e.run_id AND s.phase = 'base:' || e.phase "
        "AND s.batch = e.batch AND s.seq_len = e.seq_len "
        f"WHERE {' AND '.join(timed)} "
        "ORDER BY r.finished_at, r.run_id, e.phase, e.batch, e.seq_len"), params)


def headline_items(store: Readable, run_ids: tuple[str, ...], task: str, metric: str) -> dict[str, list[ItemOutputs]]:
    """The per-item outputs behind one headline (``task``, ``metric``) of the given runs only, by run
    id (the significance groups of the chart on screen); predictions and clusters are left out."""
    rows = _frame(store, (
        "SELECT run_id, task, language, split, metric, list(item ORDER BY rowid) AS ids, list(value ORDER BY rowid) AS vals, "
        "list(gold ORDER BY rowid) FILTER (gold IS NOT NULL) AS gold, list(weight ORDER BY rowid) FILTER (weight IS NOT NULL) AS weights "
        "FROM items WHERE list_contains(?, run_id) AND task = ? AND split_part(metric, '@', 1) = ? "
        "GROUP BY run_id, task, language, split, metric ORDER BY run_id, min(rowid)"), [list(run_ids), task, metric])
    out: dict[str, list[ItemOutputs]] = {}
    for r in rows.itertuples(index=False):
        extra = tuple(() if v is None or v is pd.NA else tuple(v) for v in (r.gold, r.weights))
        out.setdefault(r.run_id, []).append(ItemOutputs(r.task, r.language, r.split, r.metric, tuple(r.ids), tuple(r.vals), (), *extra))
    return out


def paper_points(store: Readable, suites: tuple[str, ...], pareto: bool = True) -> pd.DataFrame:
    """Papers' headline numbers (:data:`PAPER_COLUMNS`): the overall or ``avg`` row, or the only language
    printed (baselines left out: they sit at 100% and 1.0 by definition), with their training regime and
    model family (:func:`harness.results.reference.annotate`); those with Pareto coordinates (%Base and an
    embedding fraction), or with ``pareto=False`` every quality metric's row (``harness results --paper``)."""
    if "paper_results" not in store.tables():
        return reference.annotate(pd.DataFrame(columns=list(PAPER_COLUMNS)))
    plotted = "pct_base IS NOT NULL AND emb_param_fraction IS NOT NULL" if pareto else "list_contains(?, metric)"
    quality = [] if pareto else [sorted(reference.HIGHER_IS_BETTER | reference.LOWER_IS_BETTER)]
    return reference.annotate(_frame(store, (
        f"SELECT {_PAPER_SELECT} FROM (SELECT *, count(*) OVER (PARTITION BY paper, \"table\", method, base_model, "
        "config, suite, task, setting, metric) AS languages FROM paper_results) "
        f"WHERE list_contains(?, suite) AND method <> 'baseline' AND {plotted} "
        "AND (coalesce(language, 'avg') = 'avg' OR languages = 1) "
        'ORDER BY paper, "table", base_model, method, config, suite, task, setting, metric, value'), [list(suites), *quality]))
