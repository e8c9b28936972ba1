"""The summary: one row per finished run, its headline score beside the baseline (what the
leaderboard's overview and Pareto charts read; per-item outputs stay in ``items`` until a run is opened).

A suite stores many scores (15 languages and their ``avg``, three metrics ...); its headline is the
(task, metric) of :data:`HEADLINES`, else the first ``avg`` row stored, else the first score stored;
of that task and metric the ``avg`` language, or the first stored. :data:`MARKERS` is the one place
that says which headline rows need a caveat (a new marker is one entry: SQL over the joined row, where
``f.code`` is the installed code's fingerprint of the run's adapter and suite,
:func:`harness.results.fingerprint.code_fingerprint`, computed here without importing either).

A query, not a table: it reads ``scores`` once (about 0.2 s on a store of 10,000 runs), so it needs no
upkeep at write time and cannot go stale; a writer could materialise it (``CREATE TABLE summary AS``
:data:`SQL`) if stores grow a hundredfold.
"""

from __future__ import annotations

import json

import pandas as pd

from harness.results.fingerprint import code_fingerprint
from harness.results.reference import pretraining_of, recovery_of, run_family, run_regime
from harness.results.store import Store

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

SQL = f"""
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
       CAST(r.recipe AS VARCHAR) AS recipe, CAST(r.fit_details AS VARCHAR) AS fit_details
       {_MARKER_COLUMNS}
FROM headline JOIN scores s ON s.rowid = headline.score_row JOIN runs r ON r.run_id = s.run_id
LEFT JOIN compression c ON c.run_id = r.run_id
LEFT JOIN installed f ON f.adapter = r.adapter AND f.suite = r.suite
LEFT JOIN comparisons k ON k.run_id = s.run_id AND k.task = s.task AND k.language = s.language AND k.split = s.split
     AND k.metric = s.metric
"""


def read(store: Store) -> pd.DataFrame:
    """The summary rows of every finished run (one DuckDB query: about 0.2 s on 10,000 runs), after
    the installed fingerprints of the adapters and suites whose runs carry one (a run without is stale);
    ``config`` as resolved (:func:`resolved_config`), with the run's training ``regime`` and model
    ``family`` (:mod:`harness.results.reference`)."""
    pairs = store.query("SELECT DISTINCT adapter, suite FROM runs WHERE status = 'finished' AND coalesce(code, '') <> ''")
    codes = [code_fingerprint(a, s) for a, s in zip(pairs.adapter, pairs.suite)]
    return with_run_facts(store.query(SQL, [list(pairs.adapter), list(pairs.suite), codes]))


def with_run_facts(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with a run's ``recipe`` and ``fit_details`` (JSON text) -> its resolved ``config``,
    ``regime`` and ``family`` in their place (worked out once per distinct run setup: 10,000 runs
    share a few dozen)."""
    keys = ["model", "adapter", "config", "recipe", "fit_details"]
    setups = rows[keys].drop_duplicates()
    setups = setups.assign(
        regime=[run_regime(r, a, c) for r, a, c in zip(setups.recipe, setups.adapter, setups.config)],
        resolved=[resolved_config(c, f, r) for c, f, r in zip(setups.config, setups.fit_details, setups.recipe)],
        family=[run_family(m, r) for m, r in zip(setups.model, setups.recipe)],
    )
    out = rows.merge(setups, on=keys, how="left").drop(columns="config").rename(columns={"resolved": "config"})
    kept = [c for c in rows.columns if c not in ("recipe", "fit_details")]
    return out[kept + ["regime", "family"]]


def with_resolved_config(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with ``config`` and the run's ``fit_details`` and ``recipe`` (JSON text) -> ``config`` as
    resolved (:func:`resolved_config`: the fit's chosen values, ``recover`` steps)."""
    resolved = [resolved_config(*run) for run in zip(rows.config, rows.fit_details, rows.recipe)]
    return rows.assign(config=resolved).drop(columns=["fit_details", "recipe"])


def resolved_config(config: str | None, fit_details: str | None, recipe: str | None = None) -> str:
    """The configuration as the fit resolved it: a setting the fit reports under the same name with
    another plain value takes that value (ASG's ``k=0``, paper 000's size rule, is the ``k`` it chose,
    1,024 on a 250k vocabulary; the rule stays in the run's fit details as ``k_rule``); a run with
    recovery training (the recipe's ``recovery``, ``--recover``) shows ``recover`` (and ``recover_lora``)
    after it, so a recovered run and its post-hoc one read as two configurations; a pretrained run
    (the recipe's ``pretraining``, ``--pretrain``) likewise shows ``pretrain`` (0: the control)."""
    written = json.loads(config) if isinstance(config, str) else {}
    fit = json.loads(fit_details) if isinstance(fit_details, str) else None  # NULL (a failed run) reads as NaN
    resolved = written if not isinstance(fit, dict) else {
        k: fit[k] if isinstance(fit.get(k), (bool, int, float, str)) else v for k, v in written.items()}
    recovery = recovery_of(recipe)
    if recovery:
        resolved = {**resolved, "recover": recovery["steps"], **({"recover_lora": True} if recovery.get("lora") else {})}
    pretraining = pretraining_of(recipe)
    if pretraining:
        resolved = {**resolved, "pretrain": pretraining["steps"]}
    return json.dumps(resolved) if resolved != written or not isinstance(config, str) else config
