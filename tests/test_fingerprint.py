"""The code fingerprint in a run's identity: a changed scoring code runs again, a changed comment or
docstring does not; stored runs of other code read as stale (and are hidden by default)."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

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
    """``fpdemo`` in this test's folder: module lookups and parses of an earlier test's ``fpdemo`` forgotten."""
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    fingerprint._lookup.cache_clear()
    fingerprint._parse.cache_clear()
    yield lambda body: _package(tmp_path, body)
    for name in [m for m in sys.modules if m.startswith("fpdemo")]:
        del sys.modules[name]
    fingerprint._lookup.cache_clear()


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


def _edited_copy(tmp_path, monkeypatch, module: str, data: str) -> Path:
    """A copy of ``module`` and the ``data`` file or folder beside it, which the fingerprint reads in
    place of the installed ones; returns the copied data."""
    source = REAL_FILE(module)
    folder = tmp_path / "copy"
    if (source.parent / data).is_dir():
        shutil.copytree(source.parent / data, folder / data)
    else:
        folder.mkdir()
        shutil.copy(source.parent / data, folder / data)
    shutil.copy(source, folder / source.name)
    monkeypatch.setattr(fingerprint, "_file", lambda name: folder / source.name if name == module else REAL_FILE(name))
    return folder / data


def test_the_fused_kernels_cpp_source_counts_its_comments_do_not(tmp_path, monkeypatch):
    """``gather_sum.cpp`` computes every ASG / k-sub logit and the low-rank head on the CPU: a new statement
    there makes those runs stale; a comment, blank lines or indentation do not; other runs stay current."""
    users = [("asg", "bpb"), ("ksub", "xnli"), ("lowrank", "bpb")]
    stored = {pair: fingerprint.code_fingerprint(*pair) for pair in [*users, ("none", "tokenizer")]}
    cpp = _edited_copy(tmp_path, monkeypatch, "harness.methods.gather_sum", "gather_sum.cpp")
    assert {pair: fingerprint.code_fingerprint(*pair) for pair in stored} == stored  # the copy is the same code
    text = cpp.read_text()
    assert "#include <atomic>\n" in text and "namespace pool {" in text
    cpp.write_text("/* a new\n   block comment */\n" + text.replace("namespace pool {", "namespace pool {  // explained\n\n")
                   .replace("#include <atomic>\n", "#include <atomic>   \n\n\n"))
    assert not any(fingerprint.is_stale(*pair, code) for pair, code in stored.items())
    cpp.write_text(text.replace("namespace pool {", "namespace pool {\nstatic int calls_seen = 0;", 1))
    assert all(fingerprint.is_stale(*pair, stored[pair]) for pair in users)
    assert not fingerprint.is_stale("none", "tokenizer", stored[("none", "tokenizer")])


def test_an_lm_eval_prompt_counts_the_yamls_comments_and_layout_do_not(tmp_path, monkeypatch):
    """The task YAMLs under ``suites/lm_eval_tasks`` hold prompts, metrics and few-shot splits: a changed
    prompt makes the lm_eval suite's runs stale; a comment, quoting or key order does not."""
    stored = {pair: fingerprint.code_fingerprint(*pair) for pair in [("vocabdiet", "lm_eval"), ("none", "lm_eval"), ("none", "glue")]}
    tasks = _edited_copy(tmp_path, monkeypatch, "harness.suites.lm_eval_client", "lm_eval_tasks")
    assert {pair: fingerprint.code_fingerprint(*pair) for pair in stored} == stored
    english = tasks / "xnli" / "xnli_en.yaml"
    text = english.read_text()
    prompt = "doc_to_choice: '{{[premise+\", right? Yes, \"+hypothesis,premise+\", right? Also, \"+hypothesis,premise+\", right? No, \"+hypothesis]}}'"
    assert prompt in text
    relaid = "doc_to_choice: \"{{[premise+\\\", right? Yes, \\\"+hypothesis,premise+\\\", right? Also, \\\"+hypothesis,premise+\\\", right? No, \\\"+hypothesis]}}\""
    english.write_text("# another comment\n" + text.replace(prompt, relaid + "  # the three choices").replace("task: harness_xnli_en\n", "") + "task: harness_xnli_en\n")
    assert not any(fingerprint.is_stale(*pair, code) for pair, code in stored.items())
    english.write_text(text.replace("right? Also,", "right? So,"))
    assert fingerprint.is_stale("vocabdiet", "lm_eval", stored[("vocabdiet", "lm_eval")])
    assert fingerprint.is_stale("none", "lm_eval", stored[("none", "lm_eval")])
    assert not fingerprint.is_stale("none", "glue", stored[("none", "glue")])


def test_every_file_shipped_beside_scoring_code_is_declared_by_its_reader():
    """Each non-Python file in a folder of a module that decides scores (and in the data folders below
    it) is named by a ``SCORING_FILES`` declaration of a counted module, or is read only by code that
    records or plans runs (listed here with its reader)."""
    planning = {"harness/runner/matrix.txt": "harness.runner.matrix: the reference matrix `make reference` works through"}
    roots = tuple(sorted({*fingerprint.PROTOCOL, *fingerprint._entry_modules("adapter").values(), *fingerprint._entry_modules("suite").values()}))
    counted = fingerprint.modules(roots)
    declared = {path.resolve() for name in counted for _, path in fingerprint.scoring_files(name)}
    assert any(p.name == "gather_sum.cpp" for p in declared) and sum(p.suffix == ".yaml" for p in declared) == 25
    repo = Path(__file__).resolve().parents[1]
    shipped = set()
    for folder in {REAL_FILE(name).parent for name in counted}:
        for path in folder.rglob("*"):
            below = path.relative_to(folder).parts[:-1]
            in_package = any((folder.joinpath(*below[:i + 1]) / "__init__.py").exists() for i in range(len(below)))
            if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts and not in_package:
                shipped.add(path.resolve())
    undeclared = {p.relative_to(repo).as_posix() for p in shipped - declared}
    assert undeclared == set(planning), f"declare these in their reader's SCORING_FILES: {sorted(undeclared - set(planning))}"


def test_a_declaration_must_be_a_literal_that_matches_files(tmp_path, monkeypatch):
    folder = tmp_path / "mod"
    folder.mkdir()
    module = folder / "reader.py"
    monkeypatch.setattr(fingerprint, "_file", lambda name: module if name == "fpdemo_reader" else REAL_FILE(name))
    module.write_text("SCORING_FILES = ('kernel.cpp',)\n")
    with pytest.raises(ValueError, match="matches no file"):
        fingerprint.scoring_files("fpdemo_reader")
    (folder / "kernel.cpp").write_text("int f() { return 1; }\n")
    assert [r for r, _ in fingerprint.scoring_files("fpdemo_reader")] == ["kernel.cpp"]
    module.write_text("import os\nSCORING_FILES = tuple(os.listdir('.'))\n")
    with pytest.raises(ValueError, match="literal tuple"):
        fingerprint.scoring_files("fpdemo_reader")


def test_a_module_s_parse_is_read_from_the_cache_while_its_file_is_unchanged(demo, tmp_path, monkeypatch):
    """The parse cache (``$HARNESS_CACHE_DIR/parsed``) answers for a file of the same path, size and
    mtime; an edited file is parsed again."""
    import os

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    root = demo("from fpdemo.helper import twice\ndef score(values):\n    return twice(max(values))\n")
    first = _digest()
    entries = list((tmp_path / "cache" / "parsed").glob("*.json"))
    assert len(entries) == 2  # helper and scoring
    for entry in entries:  # as if another process had parsed other code for these very file versions
        saved = json.loads(entry.read_text())
        entry.write_text(json.dumps({**saved, "text": saved["text"] + "#cached"}))
    fingerprint._parse.cache_clear()
    assert _digest() != first
    st = (root / "scoring.py").stat()
    os.utime(root / "scoring.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    (root / "helper.py").write_text("def twice(x):\n    return 2 * x\n")  # the same text, a new mtime
    fingerprint._parse.cache_clear()
    assert _digest() == first
