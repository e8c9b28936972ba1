"""Paper points sit beside a run only in its training regime, protocol and metric, and
each seed paper's claims get a verdict from the stored runs. The runs are records
written through the store's API into a temporary store (records, not scores); the paper rows are
the packaged CSV's, loaded as ``harness reference load`` does."""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.result_views import fetch_paper
from harness.results import claims, reference, summary
from harness.results.fingerprint import code_fingerprint
from harness.results.records import (
    CompressionReport,
    FitReport,
    ItemOutputs,
    Provenance,
    RunRecord,
    RunSpec,
    Score,
)
from harness.results.reference import read_paper_results
from harness.results.store import Store

TUNED = {"epochs": 2, "learning_rate": 1e-4}
RECOVERED = {**TUNED, "recovery": {"steps": 100}}


def _run(store: Store, run_id: str, adapter: str, suite: str, score: Score, recipe: dict, config: dict | None = None,
         model: str = "minilm", items: tuple[float, ...] = (), finished: str = "2026-01-01T00:01:00+00:00", fit: dict | None = None,
         embedding: tuple[int, int] = (100, 10)) -> None:
    """A finished run of the installed code (not stale) with one score (and its items, if given)."""
    spec = RunSpec(model, "rev", adapter, config or {}, suite, {}, "quick", 0, recipe=recipe, code=code_fingerprint(adapter, suite))
    prov = Provenance("sha", "pkg", "0.1", socket.gethostname(), 1, {}, {})
    outputs = [ItemOutputs(score.task, score.language, score.split, score.metric, tuple(f"i{j}" for j in range(len(items))), items)] if items else []
    store.save(RunRecord(
        run_id=run_id, spec=spec, status="finished", started_at="2026-01-01T00:00:00+00:00", device="cpu", provenance=prov,
        finished_at=finished, wall_s=1.0, compression=CompressionReport(*embedding, 400, 40, 1000, 910, 1000, 1000, 0),
        fit=FitReport(1.0, fit or {}), scores=[score], items=outputs,
    ))


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> Path:
    """A store holding the packaged paper rows (loaded once: 1,342 inserts take seconds)."""
    path = tmp_path_factory.mktemp("papers") / "r.duckdb"
    Store(path).replace_paper_results(read_paper_results())
    return path


@pytest.fixture
def store(loaded, tmp_path) -> Store:
    shutil.copy(loaded, tmp_path / "r.duckdb")
    return Store(tmp_path / "r.duckdb")


def _placed(store: Store):
    """Per run: the (paper, table) shown beside it, and the reasons of those listed under other setting."""
    beside, other = fetch_paper(store, None, None, None)

    def of(run_id: str) -> tuple[set[tuple[str, str]], dict[tuple[str, str], set[str]]]:
        mine = beside[beside.run_id.eq(run_id)]
        reasons: dict[tuple[str, str], set[str]] = {}
        for r in other[other.run_id.eq(run_id)].itertuples(index=False):
            reasons.setdefault((r.paper, r.table), set()).add(r.reason)
        return set(zip(mine.paper, mine.table)), reasons

    return of, beside


def test_each_seed_paper_has_a_run_it_sits_beside_and_one_it_does_not_with_the_reason(store):
    accuracy = {"split": "test", "metric": "accuracy", "value": 0.8, "ci_low": 0.7, "ci_high": 0.9, "n": 100, "pct_base": 97.0}
    _run(store, "asg-zs", "asg", "xnli", Score("xnli", "avg", setting="zero-shot", **accuracy), TUNED, {"k": 0}, model="me5-small")
    _run(store, "asg-rec", "asg", "xnli", Score("xnli", "avg", setting="zero-shot", **accuracy), RECOVERED, {"k": 0}, model="me5-small")
    _run(store, "ksub-glue", "ksub", "glue", Score("sst2", "en", setting="fine-tuned", **accuracy), TUNED, {"allocation": "clustered"})
    _run(store, "ade", "ade", "ag_news", Score("ag_news", "en", setting="fine-tuned", **accuracy), TUNED, {"sat": True})
    _run(store, "asg-news-rec", "asg", "ag_news", Score("ag_news", "en", setting="fine-tuned", **accuracy), RECOVERED)
    prompted = {"split": "test", "metric": "acc", "value": 0.6, "n": 30, "pct_base": 98.0}
    _run(store, "vd-5", "vocabdiet", "lm_eval", Score("boolq", "en", shots=5, setting="5-shot", **prompted), {}, {"distill": "stage2"}, model="smollm2")
    _run(store, "vd-0", "vocabdiet", "lm_eval", Score("boolq", "en", shots=0, setting="0-shot", **prompted), {}, {"distill": "stage2"}, model="smollm2")
    _run(store, "ms", "multisense", "glue", Score("sst2", "en", setting="fine-tuned", **accuracy), TUNED, {"k": 15})
    _run(store, "ms-rec", "multisense", "glue", Score("sst2", "en", setting="fine-tuned", **accuracy), RECOVERED, {"k": 15})

    placed, beside = _placed(store)

    # 000 ASG (post hoc + fine-tuned): its zero-shot XNLI points beside a fine-tuned zero-shot run;
    # beside a run that also had recovery training they are listed with the regime that differs
    shown, reasons = placed("asg-zs")
    assert ("asg", "Table 1") in shown
    assert "setting: multilingual vs zero-shot" in reasons[("asg", "Table 1")]  # the same table's other protocol
    shown, reasons = placed("asg-rec")
    assert ("asg", "Table 1") not in shown
    assert "regime: post hoc + fine-tuned vs post hoc + recovery + fine-tuned" in reasons[("asg", "Table 1")]

    # 001 k-sub (pretrained from scratch with the method): beside no harness run, which never pretrains;
    # a post-hoc k-sub run on GLUE lists them with the regime
    shown, reasons = placed("ksub-glue")
    assert not any(p == "ksub" for p, _ in shown)
    assert reasons[("ksub", "Table 2")] == reasons[("ksub", "Table 3")] == {"regime: pretrained with the method vs post hoc + fine-tuned"}
    possible = {reference.run_regime(r, a, c) for r in ({}, TUNED, RECOVERED, {"recovery": {"steps": 5}})
                for a, c in (("asg", {}), ("vocabdiet", {"distill": "stage2"}))}
    assert reference.PRETRAINED not in possible and {r.regime for r in read_paper_results() if r.paper == "ksub"} == {reference.PRETRAINED}

    # 002 ADE (post hoc + fine-tuned): beside a fine-tuned AG News run, not beside one with recovery
    assert ("ade", "Table 1") in placed("ade")[0] and ("ade", "Table 3") in placed("ade")[0]
    shown, reasons = placed("asg-news-rec")
    assert not any(p == "ade" for p, _ in shown)
    assert "regime: post hoc + fine-tuned vs post hoc + recovery + fine-tuned" in reasons[("ade", "Table 3")]
    assert "regime: post hoc + fine-tuned vs post hoc + recovery + fine-tuned; metric: f1 vs accuracy" in reasons[("ade", "Table 3")]

    # 003 Vocab Diet (post-hoc training = recovery, 5-shot): beside a 5-shot run after distillation, not a 0-shot one
    assert ("vocabdiet", "Table 3") in placed("vd-5")[0]
    shown, reasons = placed("vd-0")
    assert ("vocabdiet", "Table 3") not in shown and reasons[("vocabdiet", "Table 3")] == {"setting: 5-shot vs 0-shot"}

    # 004 multi-sense (drop-in on the fine-tuned model): beside a fine-tuned GLUE run, with both families shown
    ms = beside[beside.run_id.eq("ms") & beside.paper.eq("multisense")]
    assert set(ms.table) == {"Table 1", "Table 3", "Table 11"}
    assert set(ms["paper family"]) >= {"DeBERTa-v3-large encoder (24L x 1024)"} and set(ms.family) == {reference.model_family("minilm")}
    shown, reasons = placed("ms-rec")
    assert not any(p == "multisense" for p, _ in shown)
    assert reasons[("multisense", "Table 1")] == {"regime: post hoc + fine-tuned vs post hoc + recovery + fine-tuned"}


def test_results_paper_prints_both_tables_and_the_resolved_config(store):
    _run(store, "asg-zs", "asg", "xnli", Score("xnli", "avg", "test", "accuracy", 0.8, n=100, pct_base=97.0, setting="zero-shot"),
         TUNED, {"k": 0, "m": 48}, model="me5-small", fit={"k": 1024, "k_rule": "paper 000: power of two nearest 0.45% of V"})
    out = CliRunner().invoke(app, ["results", "--db", str(store.path), "--paper"], env={"COLUMNS": "160"})
    assert out.exit_code == 0, out.output
    beside, other = out.output.split("paper, other setting")
    assert "asg-zs" in beside and "setting: multilingual vs zero-shot" in other
    assert max(len(line) for line in out.output.splitlines()) <= 160 and "nan" not in out.output.lower()
    rows = [line for line in beside.splitlines() if "000 asg T1" in line]
    assert len(rows) == len(set(rows)) > 1 and beside.count("asg-zs") == 1  # a row per paper point under the run's line
    table = pd.read_csv(io.StringIO(CliRunner().invoke(app, ["results", "--db", str(store.path), "--paper", "-f", "csv"]).stdout))
    configs = set(table.config[table.run_id.eq("asg-zs")].dropna())  # the rows beside it (the other setting's have no run config)
    assert configs == {"k=1024 m=48"}  # the k the fit chose, not the written 0
    listed = CliRunner().invoke(app, ["results", "--db", str(store.path)])
    assert "k=1024 m=48" in listed.output and "k=0" not in listed.output
    bad = CliRunner().invoke(app, ["results", "--db", str(store.path), "--paper", "--aggregate"])
    assert bad.exit_code != 0 and "one view at a time" in bad.output


def _claim(store: Store, paper: str, table: str) -> dict:
    frame = claims.table(store)
    (row,) = frame[frame.paper.str.endswith(paper) & frame.table.eq(table)].to_dict("records")
    return row


def test_a_level_claims_verdict_follows_the_stored_figure(store):
    """Paper 004 Table 1: the drop-in within 3% of the base on GLUE, the mean of the per-task %Base over
    the six tasks both have (paper: 98.3%); runs without per-item outputs have no interval."""
    assert _claim(store, "multisense", "Table 1")["verdict"] == "no run yet"
    metrics = {"cola": "mcc", "mrpc": "accuracy", "qnli": "accuracy", "rte": "accuracy", "sst2": "accuracy", "stsb": "pearson"}

    def glue(run_id: str, adapter: str, value: float, baseline: str | None = None, finished: str = "2026-01-01T00:01:00+00:00") -> None:
        spec = RunSpec("minilm", "rev", adapter, {"k": 15} if baseline else {}, "glue", {}, "quick", 0, recipe=TUNED, code=code_fingerprint(adapter, "glue"))
        scores = [Score(t, "en", "dev", m, value, n=400, setting="fine-tuned", pct_base=100.0 * value / 0.8 if baseline else None) for t, m in metrics.items()]
        store.save(RunRecord(run_id, spec, "finished", "2026-01-01T00:00:00+00:00", "cpu", Provenance("sha", "pkg", "0.1", "host", 1, {}, {}),
                             finished_at=finished, wall_s=1.0, scores=scores, baseline_run_id=baseline))

    glue("base", "none", 0.8)
    glue("ms-good", "multisense", 0.79, "base")
    row = _claim(store, "multisense", "Table 1")
    assert row["verdict"] == "agrees (no interval)" and row["runs"] == "ms-good" and row["paper figure"] == "98.3%"
    assert row["harness figure [95% CI]"] == "98.8%"
    glue("ms-bad", "multisense", 0.72, "base", finished="2026-01-01T00:02:00+00:00")
    assert _claim(store, "multisense", "Table 1")["verdict"] == "disagrees (no interval)"  # the newest run counts


def test_a_claim_about_a_compression_level_reads_only_runs_at_that_level(store):
    """Paper 000: ASG at 0.4-0.5% of the embedding parameters (zero-shot: 94.6% for XLM-R)."""
    xnli = {"split": "test", "metric": "accuracy", "n": 300, "setting": "zero-shot"}
    _run(store, "asg-3pct", "asg", "xnli", Score("xnli", "avg", value=0.6, pct_base=99.0, **xnli), TUNED, {"k": 8192}, embedding=(1000, 33))
    assert set(claims.table(store).query("paper == '000 asg'").verdict) == {"no run yet"}  # 3.3% is another configuration
    _run(store, "asg-04pct", "asg", "xnli", Score("xnli", "avg", value=0.55, pct_base=93.0, **xnli), TUNED, {"k": 1024}, embedding=(1000, 4),
         finished="2026-01-01T00:00:30+00:00")
    frame = claims.table(store)
    (multilingual, zero_shot) = frame[frame.paper.eq("000 asg")].to_dict("records")
    assert zero_shot["runs"] == "asg-04pct" and zero_shot["verdict"] == "disagrees (no interval)" and zero_shot["paper figure"] == "94.6%"
    assert multilingual["verdict"] == "setting differs: setting: multilingual vs zero-shot"


def test_a_contrast_claims_verdict_follows_the_paired_items(store):
    """Paper 002 Table 3: ADE with SAT > without (paper: 90.18 / 72.20 = 124.9%), paired over the items."""
    score = {"split": "test", "metric": "accuracy", "n": 40, "setting": "fine-tuned"}
    better, worse = (1.0,) * 30 + (0.0,) * 10, (1.0,) * 20 + (0.0,) * 20
    _run(store, "sat", "ade", "ag_news", Score("ag_news", "en", value=0.75, **score), TUNED, {"sat": True}, items=better)
    _run(store, "nosat", "ade", "ag_news", Score("ag_news", "en", value=0.5, **score), TUNED, {"sat": False}, items=worse)
    row = _claim(store, "ade", "Table 3")
    assert row["verdict"] == "agrees; matches" and row["harness figure [95% CI]"].startswith("150.0%") and row["runs"] == "sat vs nosat"
    _run(store, "sat2", "ade", "ag_news", Score("ag_news", "en", value=0.5, **score), TUNED, {"sat": True}, items=worse,
         finished="2026-01-01T00:02:00+00:00")
    _run(store, "nosat2", "ade", "ag_news", Score("ag_news", "en", value=0.75, **score), TUNED, {"sat": False}, items=better,
         finished="2026-01-01T00:02:00+00:00")
    row = _claim(store, "ade", "Table 3")
    assert row["verdict"] == "disagrees; smaller" and row["harness figure [95% CI]"].startswith("66.7%")
    recovered = {**TUNED, "recovery": {"steps": 100}}
    _run(store, "nosat3", "ade", "ag_news", Score("ag_news", "en", value=0.75, **score), recovered, {"sat": False}, items=better,
         finished="2026-01-01T00:03:00+00:00")
    row = _claim(store, "ade", "Table 3")  # the newest run without SAT was trained otherwise: not sat2's partner
    assert row["runs"] == "sat2 vs nosat2"
    _run(store, "sat4", "ade", "ag_news", Score("ag_news", "en", value=0.75, **score), TUNED, {"sat": True, "K": 250}, items=better,
         finished="2026-01-01T00:04:00+00:00")
    row = _claim(store, "ade", "Table 3")  # the newest run with SAT has another K: no partner without SAT at that K
    assert row["runs"] == "sat2 vs nosat2"


@pytest.mark.parametrize("figure, low, high, expected", [
    (101.5, 97.2, 106.0, "inconclusive; smaller"),  # paper 002's SAT contrast: spans 100, excludes the paper's 124.9
    (126.0, 110.0, 140.0, "agrees; matches"),
    (104.0, 101.0, 107.0, "agrees; smaller"),
    (140.0, 130.0, 150.0, "agrees; larger"),
    (90.0, 85.0, 95.0, "disagrees; smaller"),
    (100.0, 100.0, 130.0, "agrees; matches"),       # an interval that starts at the threshold reaches it
])
def test_a_verdict_gives_the_direction_against_the_threshold_and_the_size_against_the_paper(figure, low, high, expected):
    assert claims.verdict(figure, low, high, threshold=100.0, paper=124.9) == expected


def test_a_verdict_without_an_interval_or_in_another_setting_says_so():
    assert claims.verdict(101.0, None, None, 100.0, 124.9) == "agrees (no interval)"
    assert claims.verdict(99.0, float("nan"), float("nan"), 100.0, 124.9) == "disagrees (no interval)"
    assert claims.verdict(101.5, 97.2, 106.0, 100.0, 124.9, "regime: a vs b") == "setting differs: regime: a vs b"


def test_a_claim_in_another_setting_says_why_and_markdown_has_every_claim(store):
    _run(store, "vd-0", "vocabdiet", "lm_eval", Score("paper003_avg6", "avg", "test", "acc", 0.5, n=300, pct_base=99.0, shots=0, setting="0-shot"),
         {}, {"distill": "stage2"}, model="smollm2")
    assert _claim(store, "vocabdiet", "Table 3")["verdict"] == "setting differs: setting: 5-shot vs 0-shot"
    _run(store, "vd-5", "vocabdiet", "lm_eval", Score("paper003_avg6", "avg", "test", "acc", 0.5, n=300, pct_base=96.0, shots=5, setting="5-shot"),
         {}, {"distill": "stage2"}, model="smollm2", finished="2026-01-01T00:00:30+00:00")
    row = _claim(store, "vocabdiet", "Table 3")  # an older run in the paper's setting is the closer one
    assert row["runs"] == "vd-5" and row["verdict"] == "disagrees (no interval)"
    out = CliRunner().invoke(app, ["results", "--db", str(store.path), "--claims", "-f", "markdown"])
    assert out.exit_code == 0, out.output
    lines = [line for line in out.output.splitlines() if line.startswith("| 00")]
    assert len(lines) == len(claims.load()) and all(line.count(" | ") == len(claims.COLUMNS) - 1 for line in lines)
    assert json.loads(CliRunner().invoke(app, ["results", "--db", str(store.path), "--claims", "-f", "json"]).output)[0]["paper"] == "000 asg"


def test_paper_and_claims_views_import_neither_torch_nor_transformers(store):
    score = {"split": "test", "metric": "accuracy", "n": 4, "setting": "fine-tuned"}
    _run(store, "sat", "ade", "ag_news", Score("ag_news", "en", value=0.75, **score), TUNED, {"sat": True}, items=(1.0, 1.0, 1.0, 0.0))
    _run(store, "nosat", "ade", "ag_news", Score("ag_news", "en", value=0.5, **score), TUNED, {"sat": False}, items=(1.0, 0.0, 1.0, 0.0))
    script = (
        "import sys\nfrom typer.testing import CliRunner\nfrom harness.cli import app\n"
        "for view in ('--paper', '--claims'):\n"
        f"    r = CliRunner().invoke(app, ['results', '--db', {str(store.path)!r}, view])\n"
        "    assert r.exit_code == 0 and 'sat' in r.output, r.output\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_recovered_run_reads_as_its_own_configuration():
    """Post hoc and recovered runs of one method differ only in the recipe: the label says which."""
    config, fit = '{"k": 0, "m": 48}', '{"k": 1024, "k_rule": "0.45% of V"}'
    assert json.loads(summary.resolved_config(config, fit)) == {"k": 1024, "m": 48}
    recovered = summary.resolved_config(config, fit, json.dumps({"recovery": {"steps": 100, "lora": True}}))
    assert json.loads(recovered) == {"k": 1024, "m": 48, "recover": 100, "recover_lora": True}
    assert summary.resolved_config(config, fit, json.dumps({"recovery": {"steps": 0}})) == summary.resolved_config(config, fit)
