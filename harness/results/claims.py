"""Each seed paper's headline claims against this harness's runs (issue 33.6): ``harness results --claims``.

A claim is declared data (:data:`CLAIMS`): the paper's rows that make its figure (selected from
``paper_results.csv``, never typed twice), the runs that make ours, and the comparison. Two kinds:

* level: one configuration's %Base (the paper's, derived as :mod:`harness.results.reference` does;
  ours with its stored paired interval) must reach ``threshold``;
* contrast: configuration A as a % of configuration B (the paper's ratio of its two printed values;
  ours paired over the items both runs scored, :func:`harness.measure.compare.compare` with B as
  the reference) must reach ``threshold`` (100: A at least as good as B).

The closest run is the newest current one in the paper's regime and setting, else the newest; a
contrast's two runs share model, profile, recovery, pretraining and every setting but those the claim
names. A run pretrained with the method (``--pretrain``) is in paper 001's regime only where the
pretraining mattered (:func:`_premise`): its baseline, the full table pretrained alike, is above the
same encoder not pretrained (``--pretrain 0``) by its paired interval. The
verdict: ``no run yet`` (no current run of the configuration), ``setting differs: why`` (the
run's regime or protocol is not the paper's row's, :func:`harness.results.reference.difference`, or
the pretraining premise fails; the figure is still shown), else :func:`verdict`'s direction and size
from the paired interval (``inconclusive; smaller``). Stale runs (other code) count only when asked.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from harness.results import queries
from harness.results.reference import (
    PAPER_IDS,
    PaperResult,
    difference,
    model_family,
    paper_regime,
    pretraining_of,
    recovery_of,
    read_paper_results,
    run_family,
    run_regime,
)
from harness.results.store import Store


@dataclass(frozen=True)
class Side:
    """One configuration: the paper's rows (field -> value of :class:`PaperResult`; several rows
    are averaged) and the harness runs (adapter and the settings its config must hold)."""

    rows: Mapping[str, Any]
    adapter: str
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    paper: str                      # the CSV's paper name (asg, ksub ...)
    table: str
    text: str                       # the claim, as the paper makes it
    suite: str                      # the harness score the figure is read from
    task: str
    metric: str
    first: Side
    threshold: float                # the figure must reach it (%Base, or A as % of B)
    second: Side | None = None      # a contrast's reference configuration
    language: str = "avg"
    emb_range: tuple[float, float] | None = None  # the embedding fractions the claim is about (runs outside are other configurations)
    min_freed: float | None = None  # the share of vocabulary rows the run must free


_ASG = {"paper": "asg", "table": "Table 1", "method": "asg", "base_model": "xlm-r", "config": "k=1024;m=48", "paper_suite": "xnli", "metric": "accuracy", "language": None}
_GLUE_K = {"paper": "multisense", "table": "Table 11", "method": "multisense_dropin", "task": "SST-2", "metric": "accuracy"}
_ADE = {"paper": "ade", "table": "Table 3", "config": "K=500", "metric": "accuracy"}
_KSUB = {"paper": "ksub", "table": "Table 4", "language": "avg", "paper_setting": "cross-lingual-transfer"}
_KSUB_SST2 = {"paper": "ksub", "table": "Table 3", "task": "SST-2", "metric": "accuracy"}
_KSUB_RANDOM = {**_KSUB_SST2, "method": "ksub_random", "config": "k=3;M=37"}
_VOCABDIET = {"paper": "vocabdiet", "method": "vocabdiet"}

CLAIMS: tuple[Claim, ...] = (
    Claim("asg", "Table 1", "ASG keeps >= 95% of XNLI accuracy at 0.4-0.5% of the embedding parameters (XLM-R, k=1024, m=48)",
          "xnli", "xnli", "accuracy", Side({**_ASG, "paper_setting": "multilingual"}, "asg"), 95.0, emb_range=(0.003, 0.006)),
    Claim("asg", "Table 1", "in zero-shot transfer from English ASG keeps about 94% (94.6% for XLM-R)",
          "xnli", "xnli", "accuracy", Side({**_ASG, "paper_setting": "zero-shot"}, "asg"), 94.0, emb_range=(0.003, 0.006)),
    Claim("ksub", "Table 4", "clustered allocation of 3-sub-embeddings >= random allocation (XNLI, cross-lingual transfer)",
          "xnli", "xnli", "accuracy", Side({**_KSUB, "method": "ksub_clustered"}, "ksub", {"allocation": "clustered"}), 100.0,
          Side({**_KSUB, "method": "ksub_random"}, "ksub", {"allocation": "random"})),
    Claim("ksub", "Table 3", "pretrained with clustered codes (Algorithm 2) >= random codes (Algorithm 1), 3-sub-embeddings (SST-2)",
          "glue", "sst2", "accuracy", Side({**_KSUB_SST2, "method": "ksub_clustered", "config": "k=3;M=100"}, "ksub", {"allocation": "clustered"}),
          100.0, Side(_KSUB_RANDOM, "ksub", {"allocation": "random"}), language="en"),
    Claim("ksub", "Table 3", "pretrained with 3-sub-embeddings (random codes) keeps >= 97% of the full table's SST-2 accuracy at < 1% of its embedding parameters",
          "glue", "sst2", "accuracy", Side(_KSUB_RANDOM, "ksub", {"allocation": "random"}), 97.0, language="en", emb_range=(0.0, 0.01)),
    Claim("ade", "Table 3", "ADE with SAT > without SAT (AG News, K=500)",
          "ag_news", "ag_news", "accuracy", Side({**_ADE, "method": "ade"}, "ade", {"sat": True}), 100.0,
          Side({**_ADE, "method": "ade_no_sat"}, "ade", {"sat": False}), language="en"),
    Claim("vocabdiet", "Table 6", "a compositional vocabulary frees >= 10% of the vocabulary within a small BPB loss (>= 98% of the base)",
          "bpb", "wikitext2", "bits_per_byte", Side({**_VOCABDIET, "table": "Table 6", "metric": "bpb", "language": "en"}, "vocabdiet", {"distill": "stage2"}),
          98.0, language="en", min_freed=0.10),
    Claim("vocabdiet", "Table 3", "after post-hoc training the compositional model stays competitive downstream (average 65.9 vs 66.9: >= 97%)",
          "lm_eval", "paper003_avg6", "acc", Side({**_VOCABDIET, "table": "Table 3", "task": "Average", "metric": "score"}, "vocabdiet", {"distill": "stage2"}), 97.0),
    Claim("multisense", "Table 11", "the drop-in with k = 15 senses > k = 1 (GLUE, SST-2 in the paper)",
          "glue", "glue", "score", Side({**_GLUE_K, "config": "k=15"}, "multisense", {"k": 15}), 100.0,
          Side({**_GLUE_K, "config": "k=1"}, "multisense", {"k": 1})),
    Claim("multisense", "Table 1", "the drop-in (k = 15) stays within 3% of the base on GLUE (mean %Base over the tasks)",
          "glue", "glue", "score", Side({"paper": "multisense", "table": "Table 1", "method": "multisense_dropin"}, "multisense", {"k": 15}), 97.0),
)

COLUMNS = ["paper", "table", "claim", "paper figure", "harness figure [95% CI]", "runs", "family (paper / run)", "verdict"]


def paper_rows(side: Side, rows: list[PaperResult]) -> list[PaperResult]:
    """The paper's rows of a configuration; a claim without any is a typo in :data:`CLAIMS`."""
    chosen = [r for r in rows if all(getattr(r, k) == v for k, v in side.rows.items())]
    if not chosen:
        raise ValueError(f"no paper row has {dict(side.rows)}")
    return chosen


def paper_figure(claim: Claim, rows: list[PaperResult]) -> float:
    """The paper's figure: the mean %Base of the first side's rows, or the first side's mean value
    as a % of the second's."""
    first = paper_rows(claim.first, rows)
    if claim.second is None:
        return float(np.mean([r.pct_base for r in first]))
    return 100.0 * float(np.mean([r.value for r in first])) / float(np.mean([r.value for r in paper_rows(claim.second, rows)]))


def _runs(store: Store, claim: Claim, side: Side, stale: list[str]) -> pd.DataFrame:
    """Current runs of a side's configuration with the claim's score, newest first."""
    rows = queries.claim_runs(store, side.adapter, claim.suite, claim.task, claim.language, claim.metric, stale)
    holds = pd.Series([all(json.loads(c).get(k) == v for k, v in side.settings.items()) for c in rows.config], index=rows.index, dtype=bool)
    if claim.emb_range:  # the configurations the claim is about: those keeping this share of embedding parameters
        holds &= rows.emb_param_fraction.between(*claim.emb_range)
    return rows[holds]


def _training(recipe: str | None) -> str:
    """A run's recovery training and pretraining as text: a contrast pairs runs trained alike (a clustered
    run with 1,000 recovery steps is not set against a random one with 100)."""
    return json.dumps([recovery_of(recipe), pretraining_of(recipe)], sort_keys=True)


def _rest(config: str, side: Side) -> dict[str, Any]:
    """A run's settings other than those its side names: a contrast pairs runs equal in all of them
    (clustered against random allocation at one M, not a clustered M = 200 against a random M = 32)."""
    return {k: v for k, v in json.loads(config).items() if k not in side.settings}


def _interval(low, high) -> str:
    return "" if low is None or pd.isna(low) else f" [{low:.1f}, {high:.1f}]"


def _contrast(store: Store, claim: Claim, first: pd.Series, second: pd.Series) -> tuple[float, float | None, float | None]:
    """A as % of B on the items both scored (paired interval), from their stored scores and items
    (the paired statistics import scipy: only when a contrast has its two runs)."""
    from harness.measure.compare import compare

    a, b = store.load(first.run_id), store.load(second.run_id)
    key = (claim.task, claim.language, claim.metric)
    scores = [s for s in a.scores if (s.task, s.language, s.metric) == key]
    (c,) = [c for c in compare(scores, store.items(a.run_id), b.scores, store.items(b.run_id), b.run_id, np.random.default_rng(0))
            if (c.task, c.language, c.metric) == key]
    (sa,), (sb,) = scores, [s for s in b.scores if (s.task, s.language, s.metric) == key]
    ratio = 100.0 * (sa.value / sb.value if sa.higher_is_better else sb.value / sa.value)
    return ratio, c.pct_base_ci_low, c.pct_base_ci_high


def verdict(figure: float, low: float | None, high: float | None, threshold: float, paper: float, setting: str = "") -> str:
    """A claim's verdict from our figure and its paired 95% interval [low, high]: ``direction; size``.

    Direction, the interval against the claim's ``threshold`` (the figure must reach it): ``agrees``
    (the interval lies at or beyond it), ``disagrees`` (wholly short of it), ``inconclusive`` (it spans
    the threshold). Size, the interval against the ``paper``'s figure: ``matches`` (it holds the
    paper's figure), ``smaller`` (wholly below it), ``larger`` (wholly above). Paper 002's SAT contrast,
    101.5% [97.2, 106.0] against a threshold of 100 and the paper's 124.9%: ``inconclusive; smaller``.
    Without an interval, the direction by the point estimate, marked ``(no interval)``; a run in
    another regime or protocol: ``setting differs: why`` (``setting``)."""
    if setting:
        return f"setting differs: {setting}"
    if low is None or pd.isna(low):
        return ("agrees" if figure >= threshold else "disagrees") + " (no interval)"
    direction = "agrees" if low >= threshold else "disagrees" if high < threshold else "inconclusive"
    size = "matches" if low <= paper <= high else "smaller" if high < paper else "larger"
    return f"{direction}; {size}"


def assess(store: Store, claim: Claim, rows: list[PaperResult], stale: list[str]) -> dict[str, str]:
    """One claim's row of the table (see the module docstring)."""
    reference = paper_rows(claim.first, rows)[0]
    paper = paper_figure(claim, rows)
    out = {
        "paper": f"{PAPER_IDS[claim.paper]} {claim.paper}", "table": claim.table, "claim": claim.text,
        "paper figure": f"{paper:.1f}%", "harness figure [95% CI]": "-", "runs": "-",
        "family (paper / run)": model_family(reference.base_model), "verdict": "no run yet",
    }
    p = SimpleNamespace(regime=paper_regime(reference.paper, reference.table), setting=reference.setting, notes=reference.notes, metric=None)

    def differs(run: pd.Series) -> str:
        declared = run.setting if isinstance(run.setting, str) else ""
        return difference(p, None, run.shots, declared, {run_regime(run.recipe, claim.first.adapter, run.config)}) or _premise(store, claim, run)

    first = _runs(store, claim, claim.first, stale)
    first = first.assign(differs=[differs(r) for _, r in first.iterrows()]).sort_values("differs", key=lambda d: d.ne(""), kind="stable")
    if claim.second is not None:  # the closest run: in the paper's setting where one is, else the newest
        second = _runs(store, claim, claim.second, stale)
        pairs = [(a, b) for _, a in first.iterrows() for _, b in second.iterrows()
                 if (a.model, a.profile, _training(a.recipe)) == (b.model, b.profile, _training(b.recipe))
                 and _rest(a.config, claim.first) == _rest(b.config, claim.second)]
        if not pairs:
            return out
        run, other = pairs[0]
        figure, low, high = _contrast(store, claim, run, other)
        out["runs"] = f"{run.run_id} vs {other.run_id}"
    else:
        if first.empty:
            return out
        run = first.iloc[0]
        figure, low, high = run.pct_base, run.pct_base_ci_low, run.pct_base_ci_high
        out["runs"] = run.run_id
    setting = run.differs
    unmet = _unmet(claim, run)
    out.update({
        "harness figure [95% CI]": f"{figure:.1f}%{_interval(low, high)}",
        "family (paper / run)": f"{model_family(reference.base_model)} / {run_family(run.model, run.recipe)}",
        "verdict": f"disagrees: {unmet}" if unmet and not setting else verdict(figure, low, high, claim.threshold, paper, setting)
        + (f"; {unmet}" if unmet and setting else ""),
    })
    return out


def _premise(store: Store, claim: Claim, run: pd.Series) -> str:
    """Why a run pretrained with the method (``--pretrain``) is not in the paper's regime: its baseline
    (the full table, pretrained alike) is not above the same encoder not pretrained (``--pretrain 0``,
    the run of the same spec with 0 steps) by the paired interval on the claim's score, or that control
    has no run; "" where it is, or the run was not pretrained."""
    steps = pretraining_of(run.recipe).get("steps")
    if not steps:
        return ""
    full = store.load(store.load(run.run_id).baseline_run_id)
    recipe = {**full.spec.recipe, "pretraining": {**full.spec.recipe["pretraining"], "steps": 0}}
    control = store.find_finished(dataclasses.replace(full.spec, recipe=recipe))
    if control is None:
        return "no run of the encoder not pretrained (--pretrain 0) shows the pretraining mattered"
    figure, low, high = _contrast(store, claim, full, control)
    if low is not None and not pd.isna(low) and low > 100.0:
        return ""
    return f"pretraining too short to matter: the full table pretrained {steps:,} steps is {figure:.1f}%{_interval(low, high)} of not pretrained"


def _unmet(claim: Claim, run: pd.Series) -> str:
    """The claim's condition on what the run's compression achieved that it misses ("" where met)."""
    if claim.min_freed is not None:
        freed = (run.freed_slots or 0) / run.vocab_size_before if run.vocab_size_before else 0.0
        if freed < claim.min_freed:
            return f"frees {freed:.1%} of the vocabulary, the claim {claim.min_freed:.0%} or more"
    return ""


def table(store: Store, claims: tuple[Claim, ...] = CLAIMS, rows: list[PaperResult] | None = None, include_stale: bool = False) -> pd.DataFrame:
    """One row per claim (:data:`COLUMNS`), against the store's current runs (stale ones too if asked)."""
    rows = read_paper_results() if rows is None else rows
    stale = [] if include_stale else store.stale_run_ids()
    return pd.DataFrame([assess(store, c, rows, stale) for c in claims], columns=COLUMNS)


def markdown(frame: pd.DataFrame) -> str:
    """The table as GitHub markdown (for the README)."""
    cells = [[str(v).replace("|", "\\|") for v in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])
