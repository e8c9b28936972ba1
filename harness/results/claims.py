"""Each seed paper's headline claims against this harness's runs: ``harness results --claims``.

The claims are data: ``claims.yaml``, validated by :mod:`harness.results.claim_schema`. A claim names
the paper's quantity and ours (task, metric, aggregation), the configurations it is about and a
threshold. Two kinds: a **level** claim (one configuration's %Base must reach the threshold) and a
**contrast** (the first configuration as a % of the second must reach it; 100: at least as good).
The figures: :mod:`harness.results.claim_figures` (ours with its paired 95% interval).

Like with like, before any verdict:

* **the quantity**: where the paper's and ours differ (another task set, metric or aggregation,
  :func:`~harness.results.claim_figures.proxy`), the verdict only names the proxy (``proxy: ours is
  ..., the paper's ...``) and judges neither direction nor size;
* **the runs**: read at the profile the claim names (never smoke), in the store's current runs (stale
  ones only when asked); the closest is the newest in the paper's regime and setting, else the newest.
  A contrast's two runs share every part of their identity (:data:`SHARED`: model and revision, suite
  settings, recipe with its training regime, adapter budget, data and fit data, the score's setting
  and shots, the adapter settings the sides do not name); where no pair does, ``no verdict: the
  sides differ in ...`` with the closest pair;
* **the regime and setting** of the paper's row (:func:`harness.results.reference.difference`), and
  for a run pretrained with the method (``--pretrain``) the premise that pretraining mattered
  (:func:`_premise`): its baseline, the full table pretrained alike, is above the same encoder not
  pretrained (``--pretrain 0``) by its paired interval; otherwise ``setting differs: why`` (the figure
  is still shown).

Then :func:`verdict`'s direction and size from the paired interval (``inconclusive; smaller``). A run
whose budget was changed after a method's score was seen (:mod:`harness.results.disclosure`) carries
that note beside its verdict.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace
from typing import Any

import pandas as pd

from harness.results import queries
from harness.results.claim_figures import Figure, contrast, has_scores, level, paper_figure, paper_rows, proxy, score_keys
from harness.results.claim_schema import Claim, Runs, load
from harness.results.disclosure import disclosures, note
from harness.results.records import RunRecord
from harness.results.reference import (
    PAPER_IDS,
    PaperResult,
    difference,
    model_family,
    paper_regime,
    pretraining_of,
    read_paper_results,
    run_family,
    run_regime,
)
from harness.results.store import Store

COLUMNS = ["paper", "table", "claim", "paper figure", "harness figure [95% CI]", "runs", "family (paper / run)", "verdict"]
SHARED = ("model", "model revision", "suite settings", "recipe", "adapter budget", "data", "fit data", "setting", "adapter settings")
"""What a contrast's two runs must share (besides the profile, which the claim fixes)."""


def table(store: Store, claims: tuple[Claim, ...] | None = None, rows: list[PaperResult] | None = None,
          include_stale: bool = False) -> pd.DataFrame:
    """One row per claim (:data:`COLUMNS`; default: the packaged ``claims.yaml``), against the store's
    current runs (stale ones too if asked)."""
    claims = load() if claims is None else claims
    rows = read_paper_results() if rows is None else rows
    hidden = [] if include_stale else store.stale_run_ids()
    return pd.DataFrame([assess(store, c, rows, hidden) for c in claims], columns=COLUMNS)


def assess(store: Store, claim: Claim, rows: list[PaperResult], hidden: list[str]) -> dict[str, str]:
    """One claim's row of the table (see the module docstring)."""
    reference = next(iter(paper_rows(claim, claim.first.paper, rows).values()))
    paper = paper_figure(claim, rows)
    out = {
        "paper": f"{PAPER_IDS[claim.paper]} {claim.paper}", "table": claim.table, "claim": claim.text,
        "paper figure": f"{paper:.1f}%", "harness figure [95% CI]": "-", "runs": "-",
        "family (paper / run)": model_family(reference.base_model), "verdict": "no run yet",
    }
    first = _candidates(store, claim, claim.first.harness, reference, hidden)
    second = None if claim.second is None else _candidates(store, claim, claim.second.harness, reference, hidden)
    if first.empty or (second is not None and second.empty):
        return out
    q = claim.quantity.harness
    if second is None:
        run = first.iloc[0]
        record = store.load(run.run_id)
        used = [record] + ([store.load(record.baseline_run_id)] if record.baseline_run_id else [])
        figure, out["runs"] = level(store, q, record), run.run_id
    else:
        run, other, unlike = _pair(store, claim, first, second)
        out["runs"] = f"{run.run_id} vs {other.run_id}"
        if unlike:
            return {**out, "verdict": f"no verdict: the sides differ in {unlike}"}
        used = [store.load(run.run_id), store.load(other.run_id)]
        figure = contrast(store, q, *used)
    out.update({
        "harness figure [95% CI]": f"{figure.value:.1f}%{_interval(figure)}",
        "family (paper / run)": f"{model_family(reference.base_model)} / {run_family(run.model, run.recipe)}",
        "verdict": _judged(claim, run, figure, paper, used),
    })
    return out


def _judged(claim: Claim, run: pd.Series, figure: Figure, paper: float, used: list[RunRecord]) -> str:
    """The verdict column: the proxy, or the setting that differs, or the unmet condition, or
    :func:`verdict`; then the budget disclosures of the runs it rests on."""
    unlike = proxy(claim.quantity.paper, claim.quantity.harness)
    unmet = _unmet(claim, run)
    if unlike:
        said = "; ".join(filter(None, [f"proxy: {unlike}", run.differs and f"setting differs: {run.differs}", unmet]))
    elif unmet and not run.differs:
        said = f"disagrees: {unmet}"
    else:
        said = verdict(figure.value, figure.low, figure.high, claim.threshold, paper, run.differs) + (f"; {unmet}" if unmet else "")
    disclosed = note(s for r in used for s in disclosures(r.spec.recipe, r.spec.adapter_budget))
    return f"{said}; {disclosed}" if disclosed else said


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


def _candidates(store: Store, claim: Claim, side: Runs, reference: PaperResult, hidden: list[str]) -> pd.DataFrame:
    """Finished runs of a side at the claim's profile, holding its settings, the claim's compression
    level and every score its quantity reads (a level claim's, with its %Base); each with ``differs`` (why its regime or setting is not
    the paper's row's, ""), those in the paper's setting first, newest first."""
    q = claim.quantity.harness
    runs = queries.claim_runs(store, side.adapter, q.suite, *score_keys(q)[0], hidden)
    holds = runs.profile.eq(q.profile) & pd.Series([_holds(c, side) for c in runs.config], index=runs.index, dtype=bool)
    if claim.emb_range:  # the configurations the claim is about: those keeping this share of embedding parameters
        holds &= runs.emb_param_fraction.between(*claim.emb_range)
    if claim.second is None:  # a level claim reads a %Base: the run has a baseline
        holds &= runs.pct_base.notna()
    runs = runs[holds]
    if len(score_keys(q)) > 1:
        runs = runs[pd.Series([has_scores(store.load(r), q) for r in runs.run_id], index=runs.index, dtype=bool)]
    p = SimpleNamespace(regime=paper_regime(reference.paper, reference.table), setting=reference.setting, notes=reference.notes)

    def differs(run: pd.Series) -> str:  # no metric here: proxy() compares the quantities
        declared = run.setting if isinstance(run.setting, str) else ""
        regime = run_regime(run.recipe, side.adapter, run.config)
        return difference(p, None, run.shots, declared, {regime}) or _premise(store, claim, run)

    runs = runs.assign(differs=[differs(r) for _, r in runs.iterrows()] if len(runs) else pd.Series(dtype=str))
    return runs.sort_values("differs", key=lambda d: d.ne(""), kind="stable")


def _holds(config: str, side: Runs) -> bool:
    stored = json.loads(config)
    return all(stored.get(k) == v for k, v in side.settings.items())


def _identity(store: Store, run: pd.Series, side: Runs) -> dict[str, Any]:
    """What a contrast's runs must share (:data:`SHARED`), of one run."""
    spec = store.load(run.run_id).spec
    return dict(zip(SHARED, (
        spec.model, spec.model_revision, spec.suite_config, spec.recipe, spec.adapter_budget, spec.data, spec.fit_data,
        {"setting": run.setting if isinstance(run.setting, str) else "", "shots": None if pd.isna(run.shots) else int(run.shots)},
        {k: v for k, v in json.loads(run.config).items() if k not in side.settings},
    )))


def _pair(store: Store, claim: Claim, first: pd.DataFrame, second: pd.DataFrame) -> tuple[pd.Series, pd.Series, str]:
    """The closest pair of runs that share their identity (""), else the closest pair and how they differ."""
    mine = [(a, _identity(store, a, claim.first.harness)) for _, a in first.iterrows()]
    theirs = [(b, _identity(store, b, claim.second.harness)) for _, b in second.iterrows()]
    for a, x in mine:
        for b, y in theirs:
            if x == y:
                return a, b, ""
    (a, x), (b, y) = mine[0], theirs[0]
    return a, b, _differences(x, y)


def _differences(x: dict[str, Any], y: dict[str, Any]) -> str:
    """How two identities differ: each part, and for a mapping the keys whose values differ."""
    def shown(d: dict, k: str) -> str:
        return json.dumps(d[k]) if k in d else "unset"

    out = []
    for part in SHARED:
        a, b = x[part], y[part]
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(k for k in a.keys() | b.keys() if a.get(k, shown) != b.get(k, shown))
            out.append(f"{part} ({', '.join(f'{k}: {shown(a, k)} vs {shown(b, k)}' for k in keys)})")
        else:
            out.append(f"{part} ({a} vs {b})")
    return "; ".join(out)


def _interval(figure: Figure) -> str:
    return "" if figure.low is None or pd.isna(figure.low) else f" [{figure.low:.1f}, {figure.high:.1f}]"


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
    figure = contrast(store, claim.quantity.harness, full, control)
    if figure.low is not None and not pd.isna(figure.low) and figure.low > 100.0:
        return ""
    return f"pretraining too short to matter: the full table pretrained {steps:,} steps is {figure.value:.1f}%{_interval(figure)} of not pretrained"


def _unmet(claim: Claim, run: pd.Series) -> str:
    """The claim's condition on what the run's compression achieved that it misses ("" where met)."""
    if claim.min_freed is not None:
        freed = (run.freed_slots or 0) / run.vocab_size_before if run.vocab_size_before else 0.0
        if freed < claim.min_freed:
            return f"frees {freed:.1%} of the vocabulary, the claim {claim.min_freed:.0%} or more"
    return ""


def markdown(frame: pd.DataFrame) -> str:
    """The table as GitHub markdown (for the README)."""
    cells = [[str(v).replace("|", "\\|") for v in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])
