"""Which differences are real: per compression budget and baseline, the methods a score
cannot tell apart from the best one there.

Budgets are bins of a factor of two in the fraction kept on the chosen compression axis, bytes stored or
embedding parameters (:func:`harness.leaderboard.frames.budget_bins`). In each
bin, among the configurations whose %Base divides by the same baseline configuration (a rank is only
among those), the one of highest %Base (mean over seeds) is the best; every other one is compared
with it on the same items, through its run with the same baseline run as the best's newest
run (the same seed), by the paired bootstrap (:func:`harness.measure.metrics.resampled`:
items drawn once per replicate for both runs, the score recomputed on each), two-sided p-values of
the difference, Holm's correction over the bin's comparisons. A point whose corrected p is at least
``alpha`` is ``tied`` with the best; below it, ``below``; a point on other items (another baseline
run, as of another seed; the baseline itself is on its own items) or without per-item outputs is
``not compared``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from harness.leaderboard.frames import budget_bins

from harness.results.records import ItemOutputs

BEST, TIED, BELOW, APART = "best", "tied with best", "below best", "not compared"
# harness.measure (scipy.stats: 1.8 s of a cold page on a loaded machine) is imported inside the
# functions that resample, which run after the chart's first draw; the chart imports only the names above.


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error rate), in the input order."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p)
    stepped = np.maximum.accumulate(np.minimum(1.0, (len(p) - np.arange(len(p))) * p[order]))
    adjusted = np.empty_like(p)
    adjusted[order] = stepped
    return adjusted


def _arrays(out: ItemOutputs, ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """An output's (values, weights), or (predicted, gold) for a corpus statistic, on ``ids`` in that order."""
    from harness.measure.compare import split_metric

    where = {item: i for i, item in enumerate(out.ids)}
    idx = [where[i] for i in ids]
    values = np.asarray(out.values, dtype=float)[idx]
    if split_metric(out.metric)[1]:
        return values, np.asarray([float(g) for g in out.gold])[idx]
    return values, (np.asarray(out.weights, dtype=float)[idx] if out.weights else np.ones(len(idx)))


def behind(items: Sequence[ItemOutputs], task: str, language: str, metric: str) -> list[ItemOutputs]:
    """The outputs a headline score is computed from: its language's, or every language's for ``avg``."""
    from harness.measure.compare import AVERAGE, split_metric

    same = [i for i in items if i.task == task and split_metric(i.metric)[0] == metric]
    return [i for i in same if (i.language != AVERAGE if language == AVERAGE else i.language == language)]


def paired_p_values(best: list[ItemOutputs], others: list[list[ItemOutputs]], rng: np.random.Generator,
                    higher_is_better: bool = True, n_boot: int = 1000) -> np.ndarray:
    """Two-sided paired-bootstrap p-values of ``other - best`` for each of ``others``, all resampled
    together on the items every run scored (per language group)."""
    from harness.measure.compare import split_metric
    from harness.measure.metrics import resampled

    groups = []
    for out in best:
        partners = [next(o for o in other if o.language == out.language) for other in others]
        scored = [set(p.ids) for p in partners]
        ids = [i for i in out.ids if all(i in s for s in scored)]
        groups.append([a for o in (out, *partners) for a in _arrays(o, ids)])
    stats = resampled(groups, rng, n_boot, split_metric(best[0].metric)[1])
    diff = (stats[:, 1:] - stats[:, :1]) * (1 if higher_is_better else -1)
    return np.minimum(1.0, 2 * np.minimum((diff <= 0).mean(axis=0), (diff >= 0).mean(axis=0)))


def plan(runs: pd.DataFrame, axis: str = "emb_param_fraction") -> pd.DataFrame:
    """Who is compared with whom: one row per configuration (``variant``) of the view's runs (run_id,
    variant, baseline_run_id, optionally baseline_variant, the fraction kept in column ``axis``, pct_base,
    finished_at), with its seed-mean %Base, its ``budget``, its ``baseline`` (the configuration its %Base
    divides by: a rank only among runs on the same one), ``best`` (the run of the best configuration of
    its budget and baseline it is compared with) and ``run_id`` (its own run on the same items as that
    one, the newest; missing: not comparable)."""
    runs = runs.dropna(subset=[axis, "pct_base"])
    runs = runs.assign(paired_on=runs.baseline_run_id.fillna(runs.run_id))  # a baseline is paired with itself
    runs = runs.assign(baseline=runs.baseline_variant if "baseline_variant" in runs else runs.paired_on)
    configs = runs.groupby("variant").agg(pct_base=("pct_base", "mean"), fraction=(axis, "last"), baseline=("baseline", "last"))
    configs["budget"] = budget_bins(configs.fraction)
    cohort = pd.MultiIndex.from_frame(configs[["budget", "baseline"]])
    best_variant = configs.groupby(["budget", "baseline"]).pct_base.idxmax()
    newest = runs.sort_values("finished_at").groupby("variant").tail(1).set_index("variant")
    best_run = newest.loc[best_variant.to_numpy()].set_index(best_variant.index)
    configs["best"] = best_run.run_id.reindex(cohort).to_numpy()
    configs["best_variant"] = best_variant.reindex(cohort).to_numpy()
    on_items = best_run.paired_on.reindex(cohort).to_numpy()
    partner = runs.sort_values("finished_at").drop_duplicates(["variant", "paired_on"], keep="last").set_index(["variant", "paired_on"]).run_id
    configs["run_id"] = partner.reindex(list(zip(configs.index, on_items))).to_numpy()
    return configs.reset_index()


def groups(pairs: pd.DataFrame, items: dict[str, list[ItemOutputs]], rng: np.random.Generator, task: str, language: str,
           metric: str, higher_is_better: bool = True, alpha: float = 0.05, n_boot: int = 1000) -> pd.Series:
    """Each configuration's group (:data:`BEST`, :data:`TIED`, :data:`BELOW`, :data:`APART`), indexed by
    variant, from :func:`plan`'s pairs and the per-item outputs of their runs (``items``)."""
    out = pd.Series(APART, index=pairs.variant, dtype=object)
    for _, part in pairs.groupby(["budget", "baseline"]):
        best_variant, best_run = part.best_variant.iloc[0], part.best.iloc[0]
        out[best_variant] = BEST
        best_items = behind(items.get(best_run, []), task, language, metric)
        others = part[part.variant.ne(best_variant) & part.run_id.notna()]
        others = others[[bool(best_items) and len(behind(items.get(r, []), task, language, metric)) == len(best_items) for r in others.run_id]]
        if others.empty:
            continue
        p = paired_p_values(best_items, [behind(items[r], task, language, metric) for r in others.run_id], rng, higher_is_better, n_boot)
        out[others.variant.to_numpy()] = np.where(holm(p) >= alpha, TIED, BELOW)
    return out
