"""The summary: one row per finished run, its headline score beside the baseline (what the
leaderboard's overview and Pareto charts read; per-item outputs stay in ``items`` until a run is opened).

A suite stores many scores (15 languages and their ``avg``, three metrics ...); its headline is the
(task, metric) of :data:`~harness.results.queries.HEADLINES`, else the first ``avg`` row stored, else
the first score stored; of that task and metric the ``avg`` language, or the first stored.
:data:`~harness.results.queries.MARKERS` is the one place that says which headline rows need a caveat
(a new marker is one entry: SQL over the joined row, where ``f.code`` is the installed code's
fingerprint of the run's adapter and suite, :func:`harness.results.fingerprint.code_fingerprint`).

A query, not a table (:func:`harness.results.queries.headlines`): it reads ``scores`` once (about
0.2 s on a store of 10,000 runs), so it needs no upkeep at write time and cannot go stale; a writer
could materialise it (``CREATE TABLE summary AS`` its SQL) if stores grow a hundredfold.
"""

from __future__ import annotations

import json

import pandas as pd

from harness.results import queries
from harness.results.reference import pretraining_of, recovery_of, run_family, run_regime
from harness.results.store import Store


def read(store: Store) -> pd.DataFrame:
    """The summary rows of every finished run (:func:`harness.results.queries.headlines`), ``config``
    as resolved (:func:`resolved_config`), with the run's training ``regime`` and model ``family``
    (:mod:`harness.results.reference`)."""
    return with_run_facts(queries.headlines(store))


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
