"""The code fingerprint in a run's identity: a changed scoring code runs again, a changed comment or
docstring does not; stored runs of other code read as stale (and are hidden by default)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results import fingerprint
from harness.results.store import Store
from harness.runner.run import RunRequest, execute

SUITE = "harness.suites.tokenizer"
REAL_FILE = fingerprint._file
SUITE_FILE = REAL_FILE(SUITE)


def _package(tmp_path, body: str):
    """A two-module package ``fpdemo`` (``scoring`` imports ``helper``) on sys.path."""
    root = tmp_path / "pkg" / "fpdemo"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "helper.py").write_text("def twice(x):\n    return 2 * x\n")
    (root / "scoring.py").write_text(textwrap.dedent(body))
    return root


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    yield lambda body: _package(tmp_path, body)
    for name in [m for m in sys.modules if m.startswith("fpdemo")]:
        del sys.modules[name]


def _digest() -> str:
    return fingerprint._digest(("fpdemo.scoring",), "fpdemo")


def test_comments_docstrings_and_layout_do_not_count_code_does(demo):
    root = demo('''
        """Module docstring."""
        from fpdemo.helper import twice

        def score(values):
            """Mean, doubled."""
            return twice(sum(values) / len(values))  # the mean
    ''')
    first = _digest()
    assert fingerprint.modules(("fpdemo.scoring",), "fpdemo") == ["fpdemo.helper", "fpdemo.scoring"]  # imports followed
    (root / "scoring.py").write_text(textwrap.dedent('''
        """Another docstring, other comments, other layout."""
        from fpdemo.helper import (
            twice,
        )
        def score(values):
            # explained differently
            return twice(sum(values) / len(values))
    '''))
    assert _digest() == first
    (root / "scoring.py").write_text("from fpdemo.helper import twice\ndef score(values):\n    return twice(max(values))\n")
    changed = _digest()
    assert changed != first
    (root / "helper.py").write_text("def twice(x):\n    return x + x\n")  # an imported module changed: the fingerprint too
    assert _digest() != changed


def test_fingerprint_covers_the_suite_its_helpers_and_the_protocol():
    names = fingerprint.modules(tuple(sorted({*fingerprint.PROTOCOL, "harness.adapters.none", "harness.suites.lm_eval"})))
    for expected in ("harness.suites.lm_eval_client", "harness.integrations.lm_eval", "harness.measure.compare",
                     "harness.runner.pipeline", "harness.sources.models"):
        assert expected in names
    assert not [n for n in names if n.startswith(("harness.results", "harness.cli", "harness.runner.run"))]
    assert fingerprint.code_fingerprint("asg", "xnli") != fingerprint.code_fingerprint("none", "xnli")
    assert fingerprint.code_fingerprint("none", "no_such_suite") == ""
    assert "harness.methods.kmeans" in fingerprint.modules(("harness.adapters.asg",))
    assert fingerprint.adapter_fingerprint("asg") not in ("", fingerprint.adapter_fingerprint("sg"))
    assert fingerprint.is_stale("none", "xnli", "") and not fingerprint.is_stale("none", "xnli", fingerprint.code_fingerprint("none", "xnli"))


def _edited_suite(tmp_path, monkeypatch, edit) -> None:
    """The fingerprint reads the tokenizer suite from an edited copy (the code that runs is unchanged)."""
    copy = tmp_path / "tokenizer_copy.py"
    copy.write_text(edit(SUITE_FILE.read_text()))
    monkeypatch.setattr(fingerprint, "_file", lambda name: copy if name == SUITE else REAL_FILE(name))


def _run(db):
    (outcome,) = execute(RunRequest("tokenizer", "none", model="minilm", profile="smoke"), Store(db))
    return outcome


def test_changed_scoring_code_runs_again_a_changed_comment_does_not(tmp_path, monkeypatch):
    db = tmp_path / "r.duckdb"
    first = _run(db)
    assert not first.reused and first.record.spec.code == fingerprint.code_fingerprint("none", "tokenizer")
    assert _run(db).reused
    _edited_suite(tmp_path, monkeypatch, lambda src: src.replace('"""', '"""An edited docstring. ', 1) + "\n# a comment\n")
    assert _run(db).reused
    _edited_suite(tmp_path, monkeypatch, lambda src: src + "\nEXTRA = 1\n")
    again = _run(db)
    assert not again.reused and again.record.spec.code != first.record.spec.code
    store = Store(db)
    assert store.stale_run_ids() == [first.record.run_id]  # the old run stays, marked stale
    shown = CliRunner().invoke(app, ["results", "--db", str(db), "--format", "json"])
    assert {r["run_id"] for r in json.loads(shown.stdout)} == {again.record.run_id}
    everything = CliRunner().invoke(app, ["results", "--db", str(db), "--format", "json", "--include-stale"])
    rows = json.loads(everything.stdout)
    assert {r["run_id"]: r["stale"] for r in rows} == {first.record.run_id: True, again.record.run_id: False}
    show = CliRunner().invoke(app, ["show", first.record.run_id, "--db", str(db)])
    assert show.exit_code == 0 and "stale: made by other code" in show.output
