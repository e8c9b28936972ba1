"""A claim's two figures, the paper's and ours, and whether they are the same quantity.

* :func:`proxy`: "" where the paper's quantity and ours are the same (suite, aggregation, language,
  and each task with its metric, in the papers' vocabulary: :data:`SAME_METRIC`, task names folded as
  :func:`harness.results.reference.task_key` with its aliases), else what each is.
* :func:`paper_figure`: from the paper's printed rows (``paper_results.csv``), one per task and side:
  a level claim's %Base (``score``: the row's; ``mean of %Base``: their mean; ``mean of scores``: the
  mean value over the mean of the baseline's values, value / %Base), a contrast's first side as a %
  of its second (per task, then combined the same way).
* :func:`level` and :func:`contrast`: ours, from the stored runs with the paired 95% interval. A
  ``score`` (or a suite's stored average, ``mean of scores``) reads the stored %Base and its interval
  (a level claim) or compares the two runs item by item (:func:`harness.measure.compare.compare`, the
  second as the reference); a ``mean of %Base`` is the mean of each task's ratio, its interval from a
  paired bootstrap that resamples each task's items on its own (the same draw for both runs), as the
  GLUE suite's average does (:func:`mean_pct_base`).

The paired statistics import scipy: they are imported when a figure needs them.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from harness.results.claim_schema import Claim, PaperRows, Quantity
from harness.results.records import ItemOutputs, RunRecord, Score
from harness.results.reference import LOWER_IS_BETTER, TASK_ALIASES, PaperResult, task_key
from harness.results.store import Store

SAME_METRIC = {"acc": "accuracy", "bits_per_byte": "bpb", "pearson": "correlation"}
"""A harness metric -> the papers' name of the same quantity: lm-eval's ``acc`` is accuracy, BPB is BPB;
a correlation the paper leaves unnamed (STS-B, "Pearson or Spearman"; GLUE's own leaderboard leads
with Pearson) is read as Pearson."""


class Figure(NamedTuple):
    value: float
    low: float | None   # the paired 95% interval; None where the items do not pair
    high: float | None


def _parts(q: Quantity) -> set[tuple[str, str]]:
    """(folded task, metric in the papers' words) of each task of a quantity."""
    return {(TASK_ALIASES.get((q.suite, task_key(t)), task_key(t)), SAME_METRIC.get(q.metric_of(t), q.metric_of(t))) for t in q.tasks}


def describe(q: Quantity) -> str:
    """A quantity in words: ``sst2 accuracy (en)``, ``mean of %Base of cola mcc, ... (en)``."""
    tasks = ", ".join(f"{t} {q.metric_of(t)}" for t in q.tasks)
    return f"{'' if q.aggregation == 'score' else q.aggregation + ' of '}{tasks} ({q.language})"


def proxy(paper: Quantity, ours: Quantity) -> str:
    """"" where ours is the paper's quantity; else "ours is ..., the paper's ..."."""
    same = (paper.suite, paper.aggregation, paper.language, _parts(paper)) == (ours.suite, ours.aggregation, ours.language, _parts(ours))
    return "" if same else f"ours is {describe(ours)}, the paper's {describe(paper)}"


def _ratio(a, b, higher_is_better: bool = True):
    """``a`` as a % of ``b``, inverted for a lower-is-better metric as %Base is (numbers or arrays)."""
    return 100.0 * (a / b if higher_is_better else b / a)


def _pct(a: float, b: float, metric: str) -> float:
    """A paper's ``a`` as a % of its ``b`` (:func:`_ratio`; lower is better for BPB)."""
    return float(_ratio(a, b, metric not in LOWER_IS_BETTER))


def paper_rows(claim: Claim, side: PaperRows, rows: list[PaperResult]) -> dict[str, PaperResult]:
    """Task -> the paper's one row of the side's configuration; a claim that selects none or several
    rows for a task is a defect of ``claims.yaml`` (the claims test loads every claim)."""
    q = claim.quantity.paper
    picked = {}
    for task in q.tasks:
        found = [r for r in rows if (r.paper, r.table, r.suite, r.method) == (claim.paper, claim.table, q.suite, side.method)
                 and task_key(r.task) == task_key(task) and (r.language or "avg") == q.language and r.metric == q.metric_of(task)
                 and all(want is None or want == got for want, got in
                         ((side.base_model, r.base_model), (side.config, r.config), (side.setting, r.paper_setting)))]
        if len(found) != 1:
            raise ValueError(f"claim {claim.text!r}: {len(found)} paper rows for {task} of {side.model_dump(exclude_none=True)}")
        picked[task] = found[0]
    return picked


def paper_figure(claim: Claim, rows: list[PaperResult]) -> float:
    """The paper's figure (see the module docstring)."""
    q = claim.quantity.paper
    first = paper_rows(claim, claim.first.paper, rows)
    if claim.second is None:
        if any(r.pct_base is None for r in first.values()):
            raise ValueError(f"claim {claim.text!r}: a paper row without a baseline has no %Base")
        if q.aggregation == "mean of scores":  # the baseline's value of each row: value / %Base (value x %Base for BPB)
            base = [r.value * (r.pct_base / 100.0 if r.metric in LOWER_IS_BETTER else 100.0 / r.pct_base) for r in first.values()]
            return _pct(np.mean([r.value for r in first.values()]), np.mean(base), q.metric_of(q.tasks[0]))
        return float(np.mean([r.pct_base for r in first.values()]))
    second = paper_rows(claim, claim.second.paper, rows)
    if q.aggregation == "mean of scores":
        return _pct(np.mean([r.value for r in first.values()]), np.mean([r.value for r in second.values()]), q.metric_of(q.tasks[0]))
    return float(np.mean([_pct(first[t].value, second[t].value, q.metric_of(t)) for t in q.tasks]))


def score_keys(q: Quantity) -> list[tuple[str, str, str]]:
    """The (task, language, metric) of each stored score a figure of ``q`` reads."""
    stored = getattr(q, "stored", None)
    if stored is not None:
        return [(stored.task, stored.language, q.metric_of(q.tasks[0]))]
    return [(t, q.language, q.metric_of(t)) for t in q.tasks]


def level(store: Store, q: Quantity, run: RunRecord) -> Figure:
    """A run's figure against its baseline (its stored %Base and paired interval, or :func:`mean_pct_base`)."""
    if q.aggregation == "mean of %Base":
        return mean_pct_base(store, q, run.run_id, run.baseline_run_id)
    (key,) = score_keys(q)
    compared = [c for c in run.comparisons if (c.task, c.language, c.metric) == key]
    low, high = (compared[0].pct_base_ci_low, compared[0].pct_base_ci_high) if compared else (None, None)
    return Figure(_score(run, key).pct_base, low, high)


def contrast(store: Store, q: Quantity, first: RunRecord, second: RunRecord) -> Figure:
    """The first run as a % of the second, paired over the items both scored."""
    if q.aggregation == "mean of %Base":
        return mean_pct_base(store, q, first.run_id, second.run_id)
    from harness.measure.compare import compare

    (key,) = score_keys(q)
    a, b = _score(first, key), _score(second, key)
    (c,) = compare([a], store.items(first.run_id), [b], store.items(second.run_id), second.run_id, np.random.default_rng(0))
    return Figure(_ratio(a.value, b.value, a.higher_is_better), c.pct_base_ci_low, c.pct_base_ci_high)


def mean_pct_base(store: Store, q: Quantity, run_id: str, reference_id: str) -> Figure:
    """The mean over ``q``'s tasks of the run's score as a % of the reference run's, with the paired
    95% interval: each replicate draws each task's items with replacement on its own (both runs on
    the same draw) and averages the tasks' ratios. No interval unless every task's items pair."""
    from harness.measure.metrics import percentile_interval

    runs = [store.load(run_id), store.load(reference_id)]
    items = [store.items(run_id), store.items(reference_id)]
    rng = np.random.default_rng(0)
    ratios, replicates = [], []
    for key in score_keys(q):
        a, b = _score(runs[0], key), _score(runs[1], key)
        ratios.append(_ratio(a.value, b.value, a.higher_is_better))
        replicates.append(_task_replicates(a, items[0], b, items[1], rng))
    if any(r is None for r in replicates):
        return Figure(float(np.mean(ratios)), None, None)
    return Figure(float(np.mean(ratios)), *percentile_interval(np.mean(replicates, axis=0)))


def _task_replicates(a: Score, mine: list[ItemOutputs], b: Score, theirs: list[ItemOutputs], rng: np.random.Generator) -> np.ndarray | None:
    """Bootstrap replicates of one task's ratio ``a`` / ``b`` on the items both runs scored, drawn alike
    for both; None when their items do not pair."""
    from harness.measure.compare import items_behind, parts_of
    from harness.measure.metrics import Part, resampled_parts

    pair = _aligned(items_behind(a, mine), items_behind(b, theirs))
    if pair is None:
        return None
    (pa,), (pb,) = parts_of([pair[0]]), parts_of([pair[1]])
    stats = resampled_parts([Part([*pa.arrays, *pb.arrays], pa.statistic, None, pb.clusters)], rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _ratio(stats[:, 0], stats[:, 1], a.higher_is_better)


def _score(run: RunRecord, key: tuple[str, str, str]) -> Score:
    return next(s for s in run.scores if (s.task, s.language, s.metric) == key)


def _aligned(mine: list[ItemOutputs], theirs: list[ItemOutputs]) -> tuple[ItemOutputs, ItemOutputs] | None:
    """One group each, cut to the items both scored, in the reference's order; None when they do not pair."""
    if len(mine) != 1 or len(theirs) != 1 or mine[0].metric != theirs[0].metric:
        return None
    where = {item: i for i, item in enumerate(mine[0].ids)}
    common = [(where[item], j) for j, item in enumerate(theirs[0].ids) if item in where]
    if not common:
        return None

    def take(out: ItemOutputs, idx: list[int]) -> ItemOutputs:
        fields = ("ids", "values", "predictions", "gold", "weights", "clusters")
        return dataclasses.replace(out, **{f: tuple(getattr(out, f)[k] for k in idx) for f in fields if getattr(out, f)})

    return take(mine[0], [i for i, _ in common]), take(theirs[0], [j for _, j in common])


def has_scores(run: RunRecord, q: Quantity) -> bool:
    """True when the run stored every score a figure of ``q`` reads."""
    stored = {(s.task, s.language, s.metric) for s in run.scores}
    return all(key in stored for key in score_keys(q))

