"""Recompute stored runs' comparisons with the current statistics, from their stored per-item outputs.

The statistics (cluster bootstrap of averages, unpaired reasons, no McNemar p on average rows) can
change without the model being run again: a run's per-item outputs are in the store. This re-scores
every stored run against its baseline as the runner would now, and rewrites the run (one
transaction per run, journal first):

* items of parallel groups stored before clusters existed get them where the rule is known from the
  ids alone (:data:`PARALLEL`: XNLI's item id is the row in every language);
* every ``avg`` score whose groups carry clusters gets its bootstrap interval again (clustered),
  so its baseline's "above chance" flag follows the clustered interval;
* every score gets its :class:`~harness.results.records.Comparison` again (the baseline first, so
  its recomputed intervals are the ones the method runs are flagged by).

Run identity and code fingerprints are left as they are (a run made by other code stays stale).
``python -m harness.runner.recompare DB`` recomputes every finished run of DB and prints each
average whose interval changed.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

from harness.measure.compare import AVERAGE, compare, items_behind
from harness.results import queries
from harness.results.records import ItemOutputs, RunRecord
from harness.results.store import Store
from harness.suite import parallel, score_items

PARALLEL = {"xnli": ("xnli",), "lm_eval": ("xnli",)}
"""suite -> tasks whose languages are translations with the row as item id (clusters = ids)."""


def with_clusters(suite: str, items: list[ItemOutputs]) -> list[ItemOutputs]:
    """``items`` with the clusters :data:`PARALLEL` knows from the ids, where they have none."""
    tasks = PARALLEL.get(suite, ())
    return [parallel([i])[0] if i.task in tasks and not i.clusters and i.language != AVERAGE else i for i in items]


def _rescored(rec: RunRecord, items: list[ItemOutputs]) -> RunRecord:
    """The run with its clustered averages' intervals recomputed from ``items`` (seeded by the run's seed)."""
    rng, scores = np.random.default_rng(rec.spec.seed), []
    for s in rec.scores:
        behind = items_behind(s, items) if s.language == AVERAGE else []
        if behind and any(i.clusters for i in behind):
            fresh = score_items(behind, rng, chance=s.chance, higher_is_better=s.higher_is_better, setting=s.setting)
            s = dataclasses.replace(s, ci_low=fresh.ci_low, ci_high=fresh.ci_high)
        scores.append(s)
    return dataclasses.replace(rec, scores=scores, items=items)


def recompare(store: Store, run_id: str, baseline: RunRecord | None = None) -> RunRecord:
    """One stored run, rescored and compared again with ``baseline`` (default: its stored baseline
    run as stored; itself for a baseline run); saved and returned with its items."""
    rec = store.load(run_id)
    rec = _rescored(rec, with_clusters(rec.spec.suite, store.items(run_id)))
    if baseline is None:
        baseline = rec if rec.baseline_run_id is None else store.load(rec.baseline_run_id)
    base_items = rec.items if baseline.run_id == rec.run_id else (baseline.items or store.items(baseline.run_id))
    rec.comparisons = compare(rec.scores, rec.items, baseline.scores, base_items, baseline.run_id, np.random.default_rng(rec.spec.seed))
    store.save(rec)
    return rec


def recompare_all(store: Store) -> list[tuple[RunRecord, RunRecord]]:
    """Every finished run, baselines first; (before, after) of each."""
    done: dict[str, RunRecord] = {}
    out = []
    for run_id, base_id in queries.finished_baselines_first(store):
        before = store.load(run_id)
        done[run_id] = recompare(store, run_id, done.get(base_id) if isinstance(base_id, str) else None)
        out.append((before, done[run_id]))
    return out


def main(argv: list[str]) -> None:
    for before, after in recompare_all(Store(argv[0])):
        old = {(s.task, s.language, s.split, s.metric): s for s in before.scores}
        for s in after.scores:
            o = old[(s.task, s.language, s.split, s.metric)]
            if s.language == AVERAGE and (o.ci_low, o.ci_high) != (s.ci_low, s.ci_high):
                print(f"{after.run_id} {after.spec.suite} {after.spec.model} {after.spec.adapter} {s.task}/{s.metric}: "
                      f"[{o.ci_low:.4f}, {o.ci_high:.4f}] -> [{s.ci_low:.4f}, {s.ci_high:.4f}]")


if __name__ == "__main__":
    main(sys.argv[1:])
