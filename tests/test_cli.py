"""Bad input: exit code 2, one line on stderr naming problem and fix, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from harness.cli import app


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0]
    assert "Traceback" not in result.output


@pytest.fixture
def malformed_data(tmp_path):
    (tmp_path / "xnli").mkdir()
    for split in ("dev", "test"):
        (tmp_path / "xnli" / f"xnli.{split}.tsv").write_text("language\tgold_label\tsentence1\tsentence2\nxx\tentailment\ta\tb\n")
    return tmp_path


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--suite", "xnl", "--adapter", "asg"], "unknown suite 'xnl'; did you mean 'xnli'?"),
        (["--suite", "xnli", "--adapter", "pq"], "unknown adapter 'pq'"),
        (["--suite", "xnli", "--adapter", "asg", "--model", "nosuchmodel"], "unknown model 'nosuchmodel'"),
        (["--suite", "xnli", "--adapter", "asg", "--set", "k"], "is not key=value"),
        (["--suite", "xnli", "--adapter", "asg", "--set", "kk=3"], "--set kk is not a setting"),
        (["--suite", "xnli", "--adapter", "asg", "--set", "k=many"], "is not an integer"),
        (["--suite", "xnli", "--adapter", "asg", "--set", "train=fr"], "is not one of en, dev-all"),
        (["--suite", "xnli", "--adapter", "asg", "--model", "minilm", "--set", "m=7"], "m=7 does not divide the table's width 384"),
        (["--suite", "xnli", "--adapter", "asg", "--set", "k=1"], "k=1 must be at least 2"),
        (["--suite", "xnli", "--adapter", "asg", "--model", "minilm", "--set", "k=40000"], "exceeds the vocabulary size 30522"),
        (["--suite", "xnli", "--adapter", "asg", "--set", "k=-5"], "must be a positive integer"),
        (["--suite", "xnli", "--adapter", "asg", "--profile", "huge"], "unknown profile 'huge'"),
    ],
)
def test_bad_run_input(args, fragment):
    _assert_one_line_error(_invoke("run", *args), fragment)


def test_missing_data(tmp_path):
    result = _invoke("run", "--suite", "xnli", "--adapter", "asg", "--model", "minilm", "--profile", "smoke", "--data-dir", str(tmp_path))
    _assert_one_line_error(result, "dataset files missing")
    assert "xnli/xnli.dev.tsv" in result.stderr


def test_malformed_data(malformed_data):
    result = _invoke("run", "--suite", "xnli", "--adapter", "asg", "--model", "minilm", "--profile", "smoke", "--data-dir", str(malformed_data))
    _assert_one_line_error(result, "malformed row")


def test_results_on_missing_db_and_bad_format(tmp_path):
    _assert_one_line_error(_invoke("results", "--db", str(tmp_path / "none.duckdb")), "no results database")
    _assert_one_line_error(_invoke("show", "nope"), "no results database")
    _assert_one_line_error(_invoke("results", "--format", "xml"), "unknown format 'xml'")


def test_console_script_exit_code_and_stderr():
    """The installed entry point itself, in a fresh process."""
    exe = os.path.join(os.path.dirname(sys.executable), "harness")
    proc = subprocess.run([exe, "run", "--suite", "xnli", "--adapter", "nope"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("error: unknown adapter 'nope'")
