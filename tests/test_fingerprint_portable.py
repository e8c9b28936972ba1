"""One code fingerprint on every supported Python: the rule's text is pinned, every interpreter beside
this one writes it alike, the entry points are read as 3.12 defines them, and a store written under
the old rule (``ast.dump`` on Python 3.11, schema v4) keeps its current runs current."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import socket
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import duckdb
import pytest

from harness.results import fingerprint
from harness.results.legacy_fingerprint import legacy_code_fingerprint, legacy_dump
from harness.results.records import Provenance, RunRecord, RunSpec, Score
from harness.results.store import Store

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "fingerprint" / "golden.py"
GOLDEN_HASH = "9e86034707eb1882"  # sha256[:16] of serialize(golden.py): the new rule, every Python
GOLDEN_LEGACY_HASH = "e32ae26d9b3ff899"  # of legacy_dump(golden.py): Python 3.11's ast.dump text


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _text(source: str) -> str:
    return fingerprint.serialize(fingerprint.normalize(ast.parse(source)))


def test_the_golden_source_has_the_pinned_fingerprint_under_both_rules():
    tree = fingerprint.normalized_tree(GOLDEN)
    assert _sha(fingerprint.serialize(tree)) == GOLDEN_HASH
    assert _sha(legacy_dump(tree)) == GOLDEN_LEGACY_HASH


def _interpreters() -> list[str]:
    """This Python and every CPython >= 3.11 installed beside it (pyenv's versions/*/bin), that runs."""
    found = {sys.executable}
    for exe in sorted(Path(sys.base_prefix).parent.glob("*/bin/python3.1[1-9]")):
        probe = subprocess.run([str(exe), "-c", "import sys; print(sys.version_info >= (3, 11))"], capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            found.add(str(exe))
    return sorted(found)


GOLDEN_SCRIPT = """
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from harness.results.fingerprint import normalized_tree, serialize
from harness.results.legacy_fingerprint import legacy_dump
tree = normalized_tree(Path(sys.argv[2]))
sha = lambda s: hashlib.sha256(s.encode()).hexdigest()[:16]
print(json.dumps([sys.version.split()[0], sha(serialize(tree)), sha(legacy_dump(tree))]))
"""


def test_every_python_on_this_machine_writes_the_golden_fingerprint():
    """The rule is the standard library alone, so each interpreter runs it from this checkout bare."""
    for exe in _interpreters():
        out = subprocess.run([exe, "-c", GOLDEN_SCRIPT, str(REPO), str(GOLDEN)], capture_output=True, text=True, check=True)
        version, new, legacy = json.loads(out.stdout)
        assert (new, legacy) == (GOLDEN_HASH, GOLDEN_LEGACY_HASH), f"Python {version} ({exe})"


def test_ast_dump_itself_differs_so_the_rule_cannot_be_it():
    """What the golden test guards against: 3.12 writes ``type_params=[]`` and an empty f-string part, 3.13
    leaves out empty fields; the serialization writes none of them and joins f-string parts."""
    source = 'def f(x, w):\n    return f"{x:>{w}}"\n'
    assert _text(source) == (
        "Module(body=[FunctionDef(args=arguments(args=[arg(arg='x'),arg(arg='w')]),body=[Return(value=JoinedStr("
        "values=[FormattedValue(conversion=-1,format_spec=JoinedStr(values=[Constant(value='>'),FormattedValue("
        "conversion=-1,value=Name(ctx=Load(),id='w'))]),value=Name(ctx=Load(),id='x'))]))],name='f')])"
    )
    new_in_unicode_15 = "x = '\U0001fa75'"  # repr escapes it on 3.11, not on 3.12: the rule writes ascii
    assert _text(new_in_unicode_15) == "Module(body=[Assign(targets=[Name(ctx=Store(),id='x')],value=Constant(value='\\U0001fa75'))])"


@pytest.mark.parametrize("written, rewritten", [
    ('x = u"a"', 'x = "a"'),
    ('x = "a" "b"', 'x = "ab"'),
    ('x = f"{y}" f"z"', 'x = f"{y}z"'),
    ("x = (a)  # note", "x = a"),
    ("f(a, b,)", "f(\n    a,\n    b\n)"),
    ("def f():\n    'doc'\n    return 1", "def f():\n    return 1"),
])
def test_how_code_is_written_does_not_count(written, rewritten):
    assert _text(written) == _text(rewritten)


@pytest.mark.parametrize("code, changed", [
    ('f"{x!r}"', 'f"{x!s}"'),
    ('f"{x:>{w}}"', 'f"{x:<{w}}"'),
    ('f"{x=}"', 'f"{x}"'),
    ("def f(a, /, b): pass", "def f(a, b, /): pass"),
    ("def f(*, a): pass", "def f(a): pass"),
    ("def f(): return", "def f(): return None"),
    ("x = {**a}", "x = {}"),
    ("x = 1", "x = 1.0"),
    ("x = 1", "x = True"),
    ("x = 'é'", "x = 'e'"),
    ("lambda: 0", "lambda *a: 0"),
    ("def f(): pass", "async def f(): pass"),
    ("x: int", "x: int = 0"),
    ("from . import a", "from .. import a"),
])
def test_every_change_of_code_counts(code, changed):
    assert _text(code) != _text(changed)


def test_entry_points_are_read_as_python_312_defines_them(monkeypatch):
    """From 3.12 on ``entry_points()`` returns a tuple indexed by name: ``reversed`` (the old read)
    asks it for index 9 and gets ``KeyError: 9``, so every ``harness run`` failed there."""

    class EntryPoints312(tuple):
        def __getitem__(self, name):  # importlib.metadata.EntryPoints.__getitem__, Python 3.12
            try:
                return next(ep for ep in self if ep.name == name)
            except StopIteration:
                raise KeyError(name) from None

    installed = fingerprint._entry_modules("adapter")
    group = fingerprint.GROUPS["adapter"]
    eps = EntryPoints312(EntryPoint(name, f"{module}:Cls", group) for name, module in installed.items())
    monkeypatch.setattr(fingerprint, "entry_points", lambda group: eps)
    fingerprint._entry_modules.cache_clear()
    try:
        assert fingerprint._entry_modules("adapter") == installed
    finally:
        fingerprint._entry_modules.cache_clear()


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the old rule is ast.dump as Python 3.11 writes it")
def test_the_frozen_old_rule_is_python_311s_ast_dump_for_the_whole_installed_tree():
    names = {name for a in fingerprint._entry_modules("adapter") for s in fingerprint._entry_modules("suite")
             for name in fingerprint.modules((*fingerprint.PROTOCOL, fingerprint._entry_modules("adapter")[a],
                                              fingerprint._entry_modules("suite")[s]))}
    assert len(names) > 50
    for name in sorted(names):
        tree = fingerprint.normalized_tree(fingerprint._file(name))
        assert legacy_dump(tree) == ast.dump(tree), name


def _record(run_id: str, adapter: str, code: str) -> RunRecord:
    spec = RunSpec("minilm", "rev", adapter, {}, "xnli", {"train": "en"}, "smoke", 0, code=code)
    prov = Provenance("sha", "pkg", "0.1", socket.gethostname(), 1, {}, {}, {})
    return RunRecord(
        run_id=run_id, spec=spec, status="finished", started_at="2026-01-01T00:00:00+00:00", device="cpu",
        provenance=prov, finished_at="2026-01-01T00:01:00+00:00", wall_s=1.0,
        scores=[Score("xnli", "en", "test", "accuracy", 0.5, 0.4, 0.6, 30, True, 100.0)],
    )


def test_a_schema_v4_store_keeps_its_current_runs_current_and_its_stale_runs_stale(tmp_path):
    path = tmp_path / "v4.duckdb"
    store = Store(path)
    old_asg, old_none = legacy_code_fingerprint("asg", "xnli"), legacy_code_fingerprint("none", "xnli")
    runs = [_record("current", "asg", old_asg), _record("base", "none", old_none), _record("stale", "asg", "0123456789abcdef")]
    for rec in runs:
        store.save(rec)
    with duckdb.connect(str(path)) as con:  # as a v4 harness left it
        con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    with duckdb.connect(str(path), read_only=True) as con:
        stored = con.execute("SELECT run_id, adapter, suite, code FROM runs").fetchall()
    assert all(fingerprint.is_stale(a, s, c) for _, a, s, c in stored)  # the new rule alone reads every run as stale

    store.upgrade()  # a writer's first step: v4 -> v5
    new_asg = fingerprint.code_fingerprint("asg", "xnli")
    assert store.stale_run_ids() == ["stale"]
    for rec in runs[:2]:
        spec = dataclasses.replace(rec.spec, code=fingerprint.code_fingerprint(rec.spec.adapter, "xnli"))
        assert store.find_finished(spec).run_id == rec.run_id  # reused by the installed code, never re-run
    migrated = store.query("SELECT code, config_hash, variant FROM runs WHERE run_id = 'current'").iloc[0]
    spec = dataclasses.replace(runs[0].spec, code=new_asg)
    assert (migrated.code, migrated.config_hash, migrated.variant) == (new_asg, spec.config_hash, spec.variant)
    assert store.load("stale").spec.code == "0123456789abcdef"
    store.upgrade()  # v5 already: nothing rewritten again
    assert store.stale_run_ids() == ["stale"]
