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
    """The configuration as the fit resolved it: a setting the fit reports under the same name with a
    value of the setting's own type takes that value (ASG's ``k=0``, paper 000's size rule, is the ``k``
    it chose, 1,024 on a 250k vocabulary; the rule stays in the run's fit details as ``k_rule``); a
    detail of another type is a note on what the fit did with the setting (Vocab Diet's ``filter=true``
    reports ``probed``), not its value, so the setting keeps its own; a run with recovery training (the
    recipe's ``recovery``, ``--recover``) shows ``recover`` (and ``recover_lora``) after it, so a
    recovered run and its post-hoc one read as two configurations; a pretrained run (the recipe's
    ``pretraining``, ``--pretrain``) likewise shows ``pretrain`` (0: the control)."""
    written = json.loads(config) if isinstance(config, str) else {}
    fit = json.loads(fit_details) if isinstance(fit_details, str) else None  # NULL (a failed run) reads as NaN
    resolved = written if not isinstance(fit, dict) else {k: fit[k] if _resolves(v, fit.get(k)) else v for k, v in written.items()}
    recovery = recovery_of(recipe)
    if recovery:
        resolved = {**resolved, "recover": recovery["steps"], **({"recover_lora": True} if recovery.get("lora") else {})}
    pretraining = pretraining_of(recipe)
    if pretraining:
        resolved = {**resolved, "pretrain": pretraining["steps"]}
    return json.dumps(resolved) if resolved != written or not isinstance(config, str) else config


def _resolves(written, reported) -> bool:
    """A fit detail is the resolved value of a setting: a plain value of the setting's type (a number for
    a number, a bool only for a bool), or any plain value for a setting left unset (None)."""
    if not isinstance(reported, (bool, int, float, str)):
        return False
    if written is None:
        return True
    return isinstance(reported, bool) == isinstance(written, bool) and isinstance(reported, type(written))


def setting_text(key: str, value) -> str:
    """One setting as typed on the command line, one spelling for every view: ``k=256``,
    ``allocation=clustered``, ``sat=false`` (booleans and null as JSON writes them); recovery with LoRA
    (``recover_lora``, :func:`resolved_config`) as ``+LoRA``."""
    if key == "recover_lora" and value is True:
        return "+LoRA"
    return f"{key}={value if isinstance(value, str) else json.dumps(value)}"


def settings_label(config: str | None) -> str:
    """A configuration (JSON text, as :func:`resolved_config` gives it) as typed on the command line:
    ``{"k": 1024, "m": 48, "shared": false}`` -> ``k=1024 m=48 shared=false``; none (the baseline) -> ``-``."""
    items = json.loads(config) if isinstance(config, str) and config else {}
    return " ".join(setting_text(k, v) for k, v in items.items()) or "-"


def fitted_settings(config: dict, fit_details: dict | None, recipe: dict) -> str:
    """A run's settings as its fit resolved them (:func:`settings_label` of :func:`resolved_config`), then
    in parentheses the rule behind each value the fit chose and what the fit reports of a setting it did
    not change: ``k=1024 m=48 shared=false output=true niter=25 (k: paper 000: power of two nearest 0.45% of V)``."""
    fit = fit_details or {}
    resolved = json.loads(resolved_config(json.dumps(config), json.dumps(fit) if fit_details is not None else None, json.dumps(recipe)))
    rules = [f"{k.removesuffix('_rule')}: {v}" for k, v in fit.items() if k.endswith("_rule") and v != "set"]
    notes = [f"{k}: {fit[k]}" for k, v in config.items() if k in fit and isinstance(fit[k], str) and resolved.get(k) != fit[k]]
    return settings_label(json.dumps(resolved)) + (f" ({'; '.join(rules + notes)})" if rules or notes else "")
