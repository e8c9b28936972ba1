"""docs/performance.md's measured tables are what ``python -m benchmarks.tables`` renders from the
stored bench JSON (benchmarks/results/): a hand edit inside a block fails here. No models, no timing."""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.benchmarks.report import BenchReport, Row
from harness.benchmarks.tables import BLOCK, headline, render_doc, render_table, tables
from harness.errors import ConfigError, DataError

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
RESULTS = ROOT / "benchmarks" / "results"


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command()(tables)
    return app


def test_the_docs_tables_are_the_rendered_json():
    text = DOC.read_text()
    assert render_doc(text, ROOT) == text, "run `python -m benchmarks.tables` and commit docs/performance.md"
    shown = {m.group("path") for m in BLOCK.finditer(text)}
    stored = {str(p.relative_to(ROOT)) for p in RESULTS.glob("*.json")}
    assert shown == stored  # every stored measurement has its table, and every table its file


def test_every_stored_result_says_when_how_and_on_what():
    for path in sorted(RESULTS.glob("*.json")):
        env = json.loads(path.read_text())["environment"]
        datetime.fromisoformat(env["date"].removesuffix("Z"))
        assert re.match(r"(harness bench|python -m benchmarks(\.\w+)?) ", env["command"]), path
        assert env["commit"] and env["python"] and env["torch"] and env["cpu"] and env["cpu_cores"] >= 1, path
        assert path.name.startswith(env["date"][:10]), path  # named by date, then machine


def test_a_hand_edit_inside_a_block_is_put_back_and_fails_the_check(tmp_path):
    text = DOC.read_text()
    figure = re.search(r"\| (\d+\.\d\d)x \(", text)
    edited = text[:figure.start(1)] + "99.99" + text[figure.end(1):]
    assert render_doc(edited, ROOT) == text
    doc = tmp_path / "performance.md"
    doc.write_text(edited)
    result = CliRunner().invoke(_cli(), [str(doc), "--check", "--root", str(ROOT)])
    assert result.exit_code == 1 and doc.read_text() == edited
    result = CliRunner().invoke(_cli(), [str(doc), "--root", str(ROOT)])
    assert result.exit_code == 0 and doc.read_text() == text
    assert CliRunner().invoke(_cli(), [str(doc), "--check", "--root", str(ROOT)]).exit_code == 0


def test_rendered_rows_are_the_headline_rows_with_the_jsons_figures():
    path = RESULTS / "2026-11-28-h100-heads-decode.json"
    report = BenchReport.from_json(json.loads(path.read_text()))
    table = render_table(path)
    shown = [r for r in report.rows if headline(r)]
    assert 0 < len(shown) < len(report.rows)
    assert f"{len(shown)} of its {len(report.rows)} rows" in table
    assert sum(line.startswith("| head ") or line.startswith("| decode ") for line in table.splitlines()) == len(shown)
    for r in shown:
        assert f"| {r.section} | {r.case} | {r.base:.4g} {r.unit} | {r.method:.4g} {r.unit} | {r.ratio:.2f}x" in table
    assert not any(" eager @" in r.case or " reference @" in r.case or "lut=" in r.case for r in shown)


def test_json_round_trip_keeps_every_row(tmp_path):
    rows = [Row("head", "asg @ tiny, batch 1, hot", "ms", 2.0, 0.5, 4.0, 3.5, 4.5, 3, target=2.0, note="n"),
            Row("fit", "sg", "s", 300.0, 100.0, 3.0, 3.0, 3.0, 1)]
    report = BenchReport({"device": "cpu", "cpu": "x", "cpu_cores": 2, "torch_threads": 2, "torch": "t"}, rows)
    report.write_json(tmp_path / "r.json")
    back = BenchReport.from_json(json.loads((tmp_path / "r.json").read_text()))
    assert back.markdown() == report.markdown() and [r.met for r in back.rows] == [True, None]
    assert "| 2 ms | 0.5 ms | 4.00x (3.50-4.50) | 2x met | nan | n |" in report.markdown()
    assert "| 2 ms | 0.5 ms | 4.00x (3.50-4.50) | 2x met | nan |\n" in report.markdown(notes=False) + "\n"


def test_bad_blocks_and_missing_files_raise_with_the_fix(tmp_path):
    with pytest.raises(ConfigError, match="no `<!-- end table -->`"):
        render_doc("<!-- table: benchmarks/results/x.json -->\nno end\n", ROOT)
    with pytest.raises(DataError, match="harness bench --json"):
        render_doc("<!-- table: nothing.json -->\n<!-- end table -->\n", tmp_path)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DataError, match="is not JSON"):
        render_table(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"rows": [{"case": "x"}]}')
    with pytest.raises(DataError, match="is not a bench JSON"):
        render_table(tmp_path / "other.json")
    result = CliRunner().invoke(_cli(), [str(tmp_path / "absent.md")])
    assert result.exit_code == 2 and result.output.startswith("error: ") and "Traceback" not in result.output


def test_a_new_bench_json_records_date_command_commit_and_versions(monkeypatch):
    from harness.benchmarks.timing import provenance

    monkeypatch.setattr(sys, "argv", ["/venv/bin/harness", "bench", "--only", "heads", "--json", "a b.json"])
    env = provenance()
    assert env["command"] == "harness bench --only heads --json 'a b.json'"
    assert datetime.fromisoformat(env["date"].removesuffix("Z")).year >= 2026 and env["date"].endswith("Z")
    assert re.fullmatch(r"([0-9a-f]{40}(\+dirty:[0-9a-f]{16})?|unknown)", env["commit"])
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    monkeypatch.setattr(sys, "argv", ["/x/benchmarks/__main__.py", "--smoke"])
    assert provenance()["command"] == "python -m benchmarks --smoke"
