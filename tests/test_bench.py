"""``harness bench`` (= ``python -m benchmarks``): the smoke shapes run end to end; bad options exit 2."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from harness.cli import app


def test_bench_smoke_writes_rows_and_markdown(tmp_path):
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(app, ["bench", "--smoke", "--only", "heads,decode", "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    rows = report["rows"]
    heads = [r for r in rows if r["section"] == "head"]
    assert len(heads) == 16  # asg, asg reference, ksub, lowrank at batch 1 and 32, each cold and hot
    assert [r["section"] for r in rows].count("decode") == 1
    for r in rows:
        assert r["base"] > 0 and r["method"] > 0 and math.isfinite(r["ratio"]) and r["rounds"] >= 1, r
        assert r["met"] == (None if r["target"] is None else r["ratio"] >= r["target"]), r  # the target verdict follows the ratio
        verdict = "" if r["target"] is None else f"{r['target']:g}x {'met' if r['met'] else 'NOT met'}"
        assert f"| {r['ratio']:.2f}x ({r['low']:.2f}-{r['high']:.2f}) | {verdict} |" in result.stdout  # JSON and table agree
    asg = {r["case"].rpartition(", batch ")[2]: r for r in heads if r["case"].startswith("asg k=16 m=8 @")}
    assert {case: r["target"] for case, r in asg.items()} == {"1, cold": None, "1, hot": 10.0, "32, cold": None, "32, hot": 5.0}
    assert [r["case"] for r in heads if "reference" in r["case"]] == [
        f"asg k=16 m=8 reference @ tiny (V=512, D=64), batch {n}, {regime}" for n in (1, 32) for regime in ("cold", "hot")]
    assert all(" of the copy bandwidth" in r["note"] for r in heads)  # bytes per call set against this machine's copy rate
    decode = [r for r in rows if r["section"] == "decode"][0]
    assert "ASG paths taken: head fused C++ kernel x" in decode["note"] and "; lookup torch x" in decode["note"]
    assert "bound 1/((1-p_h-p_e)+p_h/s_h+p_e/s_e) = " in decode["note"]
    env = report["environment"]
    assert env["torch_threads"] >= 1 and env["cpu"] and env["last_level_cache_mib"] > 0
    assert result.stdout.splitlines()[0].startswith(f"device cpu, CPU {env['cpu']}, last-level cache ")
    assert "| head | asg k=16 m=8 @ tiny (V=512, D=64), batch 1, cold |" in result.stdout


def test_decode_bound_and_row_verdicts():
    """The Amdahl bound of swapping two parts of a step, and a target that also needs every round above a floor."""
    from harness.benchmarks.decode import amdahl_bound
    from harness.benchmarks.report import Row

    assert amdahl_bound(10.0, [(2.0, 1.0), (1.0, 0.5)]) == pytest.approx(10.0 / 8.5)
    assert amdahl_bound(10.0, []) == 1.0
    row = Row("decode", "c", "tokens/s", 1.0, 1.1, 1.1, 0.9, 1.3, 5, target=1.05, floor=1.0)
    assert row.met is False and Row("decode", "c", "x", 1, 1, 1.1, 1.01, 1.3, 5, target=1.05, floor=1.0).met is True
    assert Row("decode", "c", "x", 1, 1, 1.0, 1.01, 1.3, 5, target=1.05, floor=1.0).met is False


def test_bench_rejects_unknown_section_in_one_line():
    result = CliRunner().invoke(app, ["bench", "--only", "heads,speed"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == ["error: unknown benchmark section(s) ['speed']; pick from heads, decode, memory, fit, after-fit"]


def test_cold_calls_run_after_twice_the_last_level_cache_is_read():
    from harness.benchmarks.timing import Evictor, last_level_cache_bytes, time_ms

    evict = Evictor("cpu")
    assert evict.bytes == 2 * last_level_cache_bytes("cpu") == evict.buffer.numel() * 4 and evict.bytes >= 2 * 2**20
    calls = []
    assert time_ms(lambda: calls.append(len(calls)), "cpu", 3, evict) >= 0 and calls == [0, 1, 2]
