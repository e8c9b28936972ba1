"""``harness bench`` (= ``python -m benchmarks``): the smoke shapes run end to end; bad options exit 2."""

from __future__ import annotations

import json
import math

from typer.testing import CliRunner

from harness.cli import app


def test_bench_smoke_writes_rows_and_markdown(tmp_path):
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(app, ["bench", "--smoke", "--only", "heads,decode", "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    rows = report["rows"]
    heads = [r for r in rows if r["section"] == "head"]
    assert len(heads) == 8  # asg, asg reference, ksub, lowrank at batch 1 and 32
    assert [r["section"] for r in rows].count("decode") == 1
    for r in rows:
        assert r["base"] > 0 and r["method"] > 0 and math.isfinite(r["ratio"]) and r["rounds"] >= 1, r
        assert r["met"] == (None if r["target"] is None else r["ratio"] >= r["target"]), r  # the target verdict follows the ratio
        verdict = "" if r["target"] is None else f"{r['target']:g}x {'met' if r['met'] else 'NOT met'}"
        assert f"| {r['ratio']:.2f}x ({r['low']:.2f}-{r['high']:.2f}) | {verdict} |" in result.stdout  # JSON and table agree
    asg = [r for r in heads if r["case"].startswith("asg k=16 m=8 @")]
    assert [r["target"] for r in asg] == [10.0, 5.0]
    assert [r["case"] for r in heads if "reference" in r["case"]] == [f"asg k=16 m=8 reference @ tiny (V=512, D=64), batch {n}" for n in (1, 32)]
    assert all(" of the copy bandwidth" in r["note"] for r in heads)  # bytes per call set against this machine's copy rate
    assert "ASG: fused C++ kernel" in [r for r in rows if r["section"] == "decode"][0]["note"]
    assert report["environment"]["torch_threads"] >= 1 and report["environment"]["cpu"]
    assert "| head | asg k=16 m=8 @ tiny (V=512, D=64), batch 1 |" in result.stdout


def test_bench_rejects_unknown_section_in_one_line():
    result = CliRunner().invoke(app, ["bench", "--only", "heads,speed"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == ["error: unknown benchmark section(s) ['speed']; pick from heads, decode, memory, fit, after-fit"]
