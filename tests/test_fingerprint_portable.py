"""One code fingerprint on every supported Python: the rule's text is pinned, every interpreter beside
this one writes it alike, and the entry points are read as 3.12 defines them."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from harness.results import fingerprint

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "fingerprint" / "golden.py"
GOLDEN_HASH = "9e86034707eb1882"  # sha256[:16] of serialize(golden.py), on every Python
GOLDEN_CPP, GOLDEN_CPP_HASH = GOLDEN.with_suffix(".cpp"), "8a18d9b75555eb84"     # of normalized_c(golden.cpp)
GOLDEN_YAML, GOLDEN_YAML_HASH = GOLDEN.with_suffix(".yaml"), "bf67d9ba9b7b63e8"  # of normalized_yaml(golden.yaml)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _text(source: str) -> str:
    return fingerprint.serialize(fingerprint.normalize(ast.parse(source)))


def test_the_golden_source_has_the_pinned_fingerprint():
    assert _sha(fingerprint.serialize(fingerprint.normalized_tree(GOLDEN))) == GOLDEN_HASH
    assert _sha(fingerprint.normalized_c(GOLDEN_CPP.read_text(encoding="utf-8"))) == GOLDEN_CPP_HASH
    assert _sha(fingerprint.normalized_yaml(GOLDEN_YAML.read_text(encoding="utf-8"))) == GOLDEN_YAML_HASH


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
from harness.results.fingerprint import normalized_c, normalized_tree, normalized_yaml, serialize
sha = lambda text: hashlib.sha256(text.encode()).hexdigest()[:16]
read = lambda suffix: Path(sys.argv[2]).with_suffix(suffix).read_text(encoding="utf-8")
try:
    import yaml
    written_yaml = sha(normalized_yaml(read(".yaml")))
except ImportError:  # PyYAML, a dependency of the harness, is not in a bare interpreter
    written_yaml = None
print(json.dumps([sys.version.split()[0], sha(serialize(normalized_tree(Path(sys.argv[2])))), sha(normalized_c(read(".cpp"))), written_yaml]))
"""


def test_every_python_on_this_machine_writes_the_golden_fingerprint():
    """The rules for Python and C++ are the standard library alone, so each interpreter runs them from
    this checkout bare; the YAML rule is PyYAML's parse, checked where the interpreter has PyYAML."""
    yaml_checked = 0
    for exe in _interpreters():
        out = subprocess.run([exe, "-c", GOLDEN_SCRIPT, str(REPO), str(GOLDEN)], capture_output=True, text=True, check=True)
        version, written, written_cpp, written_yaml = json.loads(out.stdout)
        assert (written, written_cpp) == (GOLDEN_HASH, GOLDEN_CPP_HASH), f"Python {version} ({exe})"
        assert written_yaml in (None, GOLDEN_YAML_HASH), f"Python {version} ({exe})"
        yaml_checked += written_yaml is not None
    assert yaml_checked  # at least this interpreter, which runs the harness


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
    ("int f() {\n  return 1;\n}", "int f() {\n        return 1;  // one\n\n}\n"),
    ("a = b /* note */ + c;", "a = b + c;"),
    ("#define N 4\nint x[N];", "// sizes\n#define N 4   /* four */\n\nint x[N];\n"),
])
def test_how_cpp_is_written_does_not_count(written, rewritten):
    assert fingerprint.normalized_c(written) == fingerprint.normalized_c(rewritten)


@pytest.mark.parametrize("code, changed", [
    ("int f() { return 1; }", "int f() { return 2; }"),
    ("int f() { return 1; }", "int f() { int unused = 0; return 1; }"),
    ('const char* s = "a  b";', 'const char* s = "a b";'),
    ('const char* s = "// x";', 'const char* s = "";'),
    ("#define N 4\nint x[N];", "#define N 4 int x[N];"),
    ("i + ++j;", "i++ + j;"),
])
def test_every_change_of_cpp_counts(code, changed):
    assert fingerprint.normalized_c(code) != fingerprint.normalized_c(changed)


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
