"""Claims compare like with like: the paper's quantity and ours (task, metric, aggregation) must be the
same for a verdict, a contrast's two runs must share suite settings, setting, model, training and data,
a claim reads the profile it names (never smoke), and a run whose budget was changed after a method's
score was seen carries that beside its verdict. The claims are validated data (``claims.yaml``).
Runs are records written through the store's API into a temporary store, with real per-item outputs."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from harness.errors import DataError
from harness.measure.compare import compare
from harness.results import claims
from harness.results.claim_schema import load
from harness.results.disclosure import disclosures, note
from harness.results.fingerprint import code_fingerprint
from harness.results.records import ItemOutputs, Provenance, RunRecord, RunSpec, Score
from harness.results.reference import read_paper_results
from harness.results.store import Store
from harness.suite import correctness, statistic_items
from tests.test_paper_placement import loaded, store  # noqa: F401  (the store holding the packaged paper rows)

TUNED = {"epochs": 2, "learning_rate": 1e-4}
GLUE_METRICS = {"cola": "mcc", "mrpc": "accuracy", "qnli": "accuracy", "rte": "accuracy", "sst2": "accuracy", "stsb": "pearson"}


def _accuracy(task: str, right: int, n: int = 400) -> tuple[Score, ItemOutputs]:
    """An accuracy of ``right`` of ``n`` items (the first ``right`` correct) with its items."""
    items = correctness(task, "en", "dev", [f"{task}-{i}" for i in range(n)], [1] * right + [0] * (n - right), [1] * n)
    return Score(task, "en", "dev", "accuracy", right / n, n=n, setting="fine-tuned"), items


def _statistic(task: str, metric: str, predicted: np.ndarray, gold: np.ndarray) -> tuple[Score, ItemOutputs]:
    from harness.measure.statistics import STATISTICS, point

    value = point(STATISTICS[metric], predicted.astype(float), gold.astype(float))
    items = statistic_items(task, "en", "dev", metric, metric, [f"{task}-{i}" for i in range(len(gold))], predicted, gold)
    return Score(task, "en", "dev", metric, value, n=len(gold), setting="fine-tuned"), items


def _save(store: Store, run_id: str, adapter: str, suite: str, parts: list[tuple[Score, ItemOutputs | None]], *, config=None,
          suite_config=None, recipe=None, profile="quick", baseline: RunRecord | None = None, finished="2026-01-01T00:01:00+00:00",
          emb: tuple[int, int] = (100, 10)) -> RunRecord:
    """A finished run of the installed code with these scores and items; against ``baseline`` it gets
    %Base and the paired comparisons the runner would store."""
    from harness.results.records import CompressionReport

    scores, items = [s for s, _ in parts], [i for _, i in parts if i is not None]
    if baseline is not None:
        by_key = {(s.task, s.language, s.metric): s for s in baseline.scores}
        scores = [dataclasses.replace(s, pct_base=100.0 * s.value / by_key[(s.task, s.language, s.metric)].value) for s in scores]
    spec = RunSpec("minilm", "rev", adapter, config or {}, suite, suite_config or {}, profile, 0, recipe=recipe or TUNED,
                   code=code_fingerprint(adapter, suite))
    record = RunRecord(
        run_id=run_id, spec=spec, status="finished", started_at="2026-01-01T00:00:00+00:00", device="cpu",
        provenance=Provenance("0" * 40, "pkg", "0.1", "host", 1, {}, {}), finished_at=finished, wall_s=1.0,
        compression=CompressionReport(*emb, 400, 40, 1000, 910, 1000, 1000, 0), scores=scores, items=items,
        baseline_run_id=baseline.run_id if baseline else None,
    )
    if baseline is not None:
        record.comparisons = compare(scores, items, baseline.scores, store.items(baseline.run_id), baseline.run_id, np.random.default_rng(0))
    store.save(record)
    return record


def _row(store: Store, paper: str, table: str) -> dict:
    frame = claims.table(store)
    (row,) = frame[frame.paper.str.endswith(paper) & frame.table.eq(table)].to_dict("records")
    return row


def _figure(cell: str) -> tuple[float, float, float]:
    """(figure, low, high) of a ``126.0% [116.9, 136.7]`` cell."""
    found = re.fullmatch(r"([\d.]+)% \[([\d.]+), ([\d.]+)\]", cell)
    assert found, cell
    return tuple(float(v) for v in found.groups())


def test_the_multi_sense_contrast_reads_sst2_accuracy_not_the_glue_average(store):
    """Paper 004 Table 11 prints SST-2 accuracy (96.21 / 59.97 = 160.4%). The two runs' GLUE average
    score, inflated by k = 1's CoLA MCC of 0, would read 153.2%; their SST-2 accuracy is
    0.8125 / 0.645 = 126.0%, paired over the SST-2 items."""
    average = {"task": "glue", "language": "avg", "split": "eval", "metric": "score", "n": 3077, "setting": "fine-tuned"}
    k15 = _save(store, "k15", "multisense", "glue", [_accuracy("sst2", 325), (Score(value=0.686, **average), None)], config={"k": 15})
    k1 = _save(store, "k1", "multisense", "glue", [_accuracy("sst2", 258), (Score(value=0.448, **average), None)], config={"k": 1})
    row = _row(store, "multisense", "Table 11")
    assert row["paper figure"] == "160.4%" and row["runs"] == f"{k15.run_id} vs {k1.run_id}"
    figure, low, high = _figure(row["harness figure [95% CI]"])
    assert figure == 126.0 and low < 126.0 < high < 160.4  # not 153.2
    assert row["verdict"] == "agrees; smaller"


def test_a_contrast_whose_sides_differ_in_suite_settings_gets_no_verdict(store):
    """Paper 002: ADE with SAT > without; two runs on other AG News splits are not the same experiment."""
    sat = _save(store, "sat", "ade", "ag_news", [_accuracy("ag_news", 300)], config={"sat": True, "K": 500}, suite_config={"split": "carve"})
    _save(store, "nosat", "ade", "ag_news", [_accuracy("ag_news", 240)], config={"sat": False, "K": 500}, suite_config={"split": "release"})
    row = _row(store, "ade", "Table 3")
    assert row["verdict"] == 'no verdict: the sides differ in suite settings (split: "carve" vs "release")'
    assert row["harness figure [95% CI]"] == "-" and row["runs"] == "sat vs nosat"
    _save(store, "nosat-recovered", "ade", "ag_news", [_accuracy("ag_news", 240)], config={"sat": False, "K": 500},
          suite_config={"split": "carve"}, recipe={**TUNED, "recovery": {"steps": 100}}, finished="2026-01-01T00:02:00+00:00")
    assert _row(store, "ade", "Table 3")["verdict"].startswith("no verdict: the sides differ in")  # other training: no partner either
    _save(store, "nosat-carve", "ade", "ag_news", [_accuracy("ag_news", 240)], config={"sat": False, "K": 500}, suite_config={"split": "carve"})
    row = _row(store, "ade", "Table 3")
    assert row["runs"] == f"{sat.run_id} vs nosat-carve" and row["harness figure [95% CI]"].startswith("125.0% [")
    assert row["verdict"] == "agrees; matches"


def test_a_claim_never_reads_a_smoke_run(store):
    """Paper 000 (zero-shot, 94.6%): a smoke run at the claim's compression level is not a result."""
    xnli = {"task": "xnli", "language": "avg", "split": "test", "metric": "accuracy", "n": 300, "setting": "zero-shot"}
    _save(store, "asg-smoke", "asg", "xnli", [(Score(value=0.55, pct_base=99.0, **xnli), None)], recipe=TUNED, profile="smoke", emb=(1000, 4))
    frame = claims.table(store)
    assert set(frame[frame.paper.eq("000 asg")].verdict) == {"no run yet"}
    _save(store, "asg-quick", "asg", "xnli", [(Score(value=0.55, pct_base=93.0, **xnli), None)], recipe=TUNED, emb=(1000, 4),
          finished="2025-01-01T00:00:00+00:00")  # older than the smoke run, and still the one read
    multilingual, zero_shot = claims.table(store).query("paper == '000 asg'").to_dict("records")
    assert multilingual["runs"] == zero_shot["runs"] == "asg-quick"
    assert multilingual["verdict"] == "setting differs: setting: multilingual vs zero-shot" and zero_shot["verdict"] == "disagrees (no interval)"


def _glue(store: Store, run_id: str, adapter: str, shift: int, baseline: RunRecord | None = None, recipe=None) -> RunRecord:
    """A GLUE run of the six tasks (accuracies, CoLA's MCC, STS-B's Pearson) with real items; ``shift``
    moves every score down a little."""
    rng = np.random.default_rng(7)
    gold = rng.integers(0, 2, 300)
    cola = np.where(np.arange(300) < 220 - shift, gold, 1 - gold)
    ratings = rng.uniform(0, 5, 300)
    parts = [_accuracy(t, right - shift) for t, right in (("sst2", 330), ("mrpc", 320), ("qnli", 300), ("rte", 250))]
    parts += [_statistic("cola", "mcc", cola, gold), _statistic("stsb", "pearson", ratings + rng.normal(0, 0.5 + shift / 20, 300), ratings)]
    config = {"k": 15} if adapter == "multisense" else {}
    return _save(store, run_id, adapter, "glue", parts, config=config, baseline=baseline, recipe=recipe)


def test_the_mean_pct_base_claim_is_the_mean_of_each_tasks_ratio_with_a_paired_interval(store):
    """Paper 004 Table 1 over the six tasks both have: the mean of the per-task %Base (paper: 98.3%),
    its interval from resampling each task's items on its own for both runs alike."""
    assert _row(store, "multisense", "Table 1")["paper figure"] == "98.3%"
    base = _glue(store, "base", "none", 0)
    run = _glue(store, "ms", "multisense", 6, baseline=base)
    expected = np.mean([s.pct_base for s in run.scores])
    row = _row(store, "multisense", "Table 1")
    figure, low, high = _figure(row["harness figure [95% CI]"])
    assert row["runs"] == "ms" and figure == round(expected, 1) and low < expected < high and high - low < 10
    assert row["verdict"].split(";")[0] in ("agrees", "inconclusive", "disagrees")


def test_a_proxy_gets_no_verdict_and_says_how_it_differs(store):
    """Paper 003 Table 6 prints BPB on its held-out FineWeb text; ours is WikiText-2's: a proxy."""
    bpb = {"task": "wikitext2", "language": "en", "split": "test", "metric": "bits_per_byte", "n": 16, "higher_is_better": False}
    _save(store, "vd", "vocabdiet", "bpb", [(Score(value=1.0, pct_base=99.5, **bpb), None)], config={"distill": "stage2"}, recipe={})
    verdict = _row(store, "vocabdiet", "Table 6")["verdict"]
    assert verdict.startswith("proxy: ours is wikitext2 bits_per_byte (en), the paper's held-out bpb (en)")
    assert not any(word in verdict for word in ("agrees", "matches", "smaller", "larger", "inconclusive"))


def test_a_disclosed_budget_change_is_shown_beside_the_verdict(store):
    recipe = {**TUNED, "disclosed": "QNLI trains on all its pairs (was 1,000), changed after a method was seen at chance"}
    _save(store, "k15", "multisense", "glue", [_accuracy("sst2", 325)], config={"k": 15}, recipe=recipe)
    _save(store, "k1", "multisense", "glue", [_accuracy("sst2", 258)], config={"k": 1}, recipe=recipe)
    assert _row(store, "multisense", "Table 11")["verdict"] == f"agrees; smaller; budget changed after scores were seen: {recipe['disclosed']}"
    assert disclosures(recipe, '{"steps": 10}', None, float("nan")) == (recipe["disclosed"],)
    assert note([]) == "" and note(["a", "b", "a"]) == "budget changed after scores were seen: a; b"


def test_every_packaged_claim_selects_one_paper_row_per_task_and_side():
    rows = read_paper_results()
    for claim in load():
        for side in (claim.first, claim.second):
            if side is not None:
                assert len(claims.paper_rows(claim, side.paper, rows)) == len(claim.quantity.paper.tasks), claim.text
        assert claims.paper_figure(claim, rows) > 0


@pytest.mark.parametrize("edit, message", [
    (lambda text: text.replace("  threshold: 95\n", "  threshold: 95\n  verdict: agrees\n", 1), "0.verdict: Extra inputs are not permitted"),
    (lambda text: text.replace("profile: quick}", "profile: smoke}", 1), "0.quantity.harness.profile"),
    (lambda text: text.replace("tasks: [XNLI]", "tasks: [XNLI, PAWS-X]", 1), "aggregation 'score' reads one task"),
    (lambda text: text.replace("- paper: asg", "- paper: bert", 1), "unknown paper 'bert'"),
])
def test_a_claims_file_outside_the_schema_is_refused_with_the_field(tmp_path, edit, message):
    from harness.results.claim_schema import packaged_claims

    path = tmp_path / "claims.yaml"
    path.write_text(edit(packaged_claims().read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(message)):
        load(path)
