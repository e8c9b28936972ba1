"""The code fingerprint of a run: a hash of the normalized source of the files that decide its scores.

A run's identity (:class:`~harness.results.records.RunSpec`) holds the fingerprint of the code
that made it, so a stored run is reused only by the same code, and a run made by other code reads as
stale (``harness results``, ``harness show``, the leaderboard). The modules counted (and the files
they declare, below):

* the adapter's module and the suite's module (their entry points, ``harness.adapters`` /
  ``harness.suites``), and every module they import, transitively (lazy imports inside functions
  too), that belongs to the harness or to the adapter's own package (``suites/finetune.py``,
  ``lm_eval_client.py``, the lm-eval model type, ``harness.methods``, the model sources ...);
* the shared protocol every run goes through (:data:`PROTOCOL`: the pipeline, the metrics, the
  paired comparison, the model source, the adapter and suite contracts), with its imports likewise;
* but not the modules that only record or present a result (:data:`NOT_SCORING`: the store,
  records, provenance, the CLI, the registry, efficiency timing ...).

Each module counts as its parsed source with docstrings removed, written by :func:`serialize` (not
``ast.dump``, whose text differs between Python 3.11, 3.12 and 3.13), so comments, docstrings and
formatting do not change the fingerprint, any change to the code does, and every supported Python
computes the same one (``tests/test_fingerprint_portable.py`` pins it). Modules are
located with :func:`importlib.util.find_spec` and never imported (parent packages are, and theirs
are light), so the read side can tell stale from current without torch. A module's parse is kept in
``$HARNESS_CACHE_DIR/parsed/`` under its path, size, mtime and the Python version, so a process that
plans many runs (``harness list matrix``) parses only what changed since the last one.

A counted module that reads files shipped beside it which decide scores declares them next to the
reading code in a module-level :data:`DECLARATION` (``SCORING_FILES = ("gather_sum.cpp",)``: glob
patterns relative to the module's folder), and each declared file counts with the module, normalized
by its kind (:data:`NORMALIZERS`): C and C++ sources without comments and with whitespace runs
collapsed (:func:`normalized_c`), YAML as the data it parses to (:func:`normalized_yaml`: comments,
quoting and layout do not count), anything else byte for byte.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path

from harness import cachefile

PROTOCOL = (
    "harness.runner.pipeline", "harness.measure.metrics", "harness.measure.paired", "harness.measure.compare",
    "harness.sources.models", "harness.suite", "harness.adapter",
)
"""Modules every run's scores pass through, whatever the adapter and suite."""

NOT_SCORING = (
    "harness.results", "harness.errors", "harness.registry", "harness.config", "harness.cli", "harness.sweep",
    "harness.runner.run", "harness.runner.plan", "harness.runner.provenance", "harness.runner.fitcache",
    "harness.runner.saved", "harness.runner.export", "harness.measure.efficiency", "harness.file_pages", "harness.budgets",
    "harness.rebuild", "harness.leaderboard",
)
"""Modules (and packages) that record, plan or present a run but do not decide a score: a change
there leaves stored runs current. (A budget's values are part of the identity through the recipe.)"""

GROUPS = {"adapter": "harness.adapters", "suite": "harness.suites"}

DECLARATION = "SCORING_FILES"
"""The module-level name under which a module declares the files beside it that decide scores (a
tuple of glob patterns relative to the module's folder, a literal)."""


def code_fingerprint(adapter: str, suite: str) -> str:
    """The fingerprint of the code that scores ``adapter`` on ``suite`` (16 hex digits); ``""`` when
    either is not installed (a run of it can then never be current)."""
    roots = [_entry_module("adapter", adapter), _entry_module("suite", suite)]
    if None in roots:
        return ""
    return _digest(tuple(sorted(set(PROTOCOL) | set(roots))), roots[0].partition(".")[0])


def adapter_fingerprint(adapter: str) -> str:
    """The fingerprint of the adapter's own code: its module and what it imports (``harness.methods``,
    the model sources ...), without any suite or the shared protocol; ``""`` when not installed. For
    keys of what an adapter alone produces (a fitted adapter in the fit cache)."""
    root = _entry_module("adapter", adapter)
    return "" if root is None else _digest((root,), root.partition(".")[0])


def module_fingerprint(module: str) -> str:
    """The fingerprint of one harness module and what it imports (a protocol stage's own code, e.g.
    recovery training in a fit-cache key)."""
    return _digest((module,), "harness")


def is_stale(adapter: str, suite: str, code: str | None) -> bool:
    """True when a stored run's fingerprint is not the current code's (runs stored before
    fingerprints existed have none, so they are stale)."""
    return not code or code != code_fingerprint(adapter, suite)


def modules(roots: tuple[str, ...], own_package: str = "harness") -> list[str]:
    """The modules ``roots`` reach through their imports (see the module docstring), sorted."""
    seen: set[str] = set()
    todo = [r for r in roots if _counted(r, own_package)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [m for m in _imports(name, own_package) if m not in seen and _counted(m, own_package)]
    return sorted(seen)


def scoring_files(name: str) -> list[tuple[str, Path]]:
    """The files module ``name`` declares (:data:`DECLARATION`) as (path relative to its folder, in
    POSIX form; path), sorted; a pattern that matches no file is an error, as a typo would drop it."""
    folder = _file(name).parent
    found: dict[str, Path] = {}
    for pattern in _parsed(name).declared:
        matched = [p for p in folder.glob(pattern) if p.is_file()]
        if not matched:
            raise ValueError(f"{name}: {DECLARATION} pattern {pattern!r} matches no file in {folder}")
        found.update((p.relative_to(folder).as_posix(), p) for p in matched)
    return sorted(found.items())


def _digest(roots: tuple[str, ...], own_package: str) -> str:
    h = hashlib.sha256()
    for name in modules(roots, own_package):
        h.update(name.encode() + b"\0" + _parsed(name).text.encode() + b"\0")
        for relative, path in scoring_files(name):
            h.update(f"{name}:{relative}".encode() + b"\0" + _data_text(path).encode() + b"\0")
    return h.hexdigest()[:16]


def _entry_module(kind: str, name: str) -> str | None:
    return _entry_modules(kind).get(name)


@lru_cache(maxsize=None)
def _entry_modules(kind: str) -> dict[str, str]:
    """Name -> module of a group's entry points, read once per process as the registry reads them, in
    order, the last of a name kept (each read scans every installed distribution: 25 ms, most of a
    fingerprint's cost). Only iterated: from Python 3.12 on, ``EntryPoints`` is a tuple indexed by
    name, so ``reversed`` or an integer index fails there."""
    return {ep.name: ep.module for ep in entry_points(group=GROUPS[kind])}


def _counted(name: str, own_package: str) -> bool:
    top = name.partition(".")[0]
    if top not in ("harness", own_package) or _file(name) is None:
        return False
    return not any(name == n or name.startswith(n + ".") for n in NOT_SCORING)


@lru_cache(maxsize=None)
def _lookup(name: str) -> tuple[Path | None, bool] | None:
    """Where module ``name`` lies (its ``.py`` file; None for a module that is not Python source) and
    whether it is a package; None when it cannot be found."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    return (Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None), spec.submodule_search_locations is not None


def _file(name: str) -> Path | None:
    found = _lookup(name)
    return found[0] if found else None


def _is_package(name: str) -> bool:
    found = _lookup(name)
    return found is not None and found[1]


def _imports(name: str, own_package: str) -> list[str]:
    """The harness (or ``own_package``) modules ``name`` imports anywhere in its body (``from pkg import
    mod`` names the module); other packages are never looked up, since finding ``a.b.c`` imports ``a.b``."""
    found = set()
    for base, names in _parsed(name).imports:
        if base.partition(".")[0] not in ("harness", own_package):
            continue
        if names and _is_package(base):
            found |= {f"{base}.{n}" if _lookup(f"{base}.{n}") else base for n in names}
        else:
            found.add(base)
    return sorted(found)


@dataclass(frozen=True)
class _Parsed:
    text: str                                          # the normalized tree, as :func:`serialize` writes it
    imports: tuple[tuple[str, tuple[str, ...]], ...]   # (absolute module, names imported from it; () for ``import m``)
    declared: tuple[str, ...] = ()                     # the module's :data:`DECLARATION` patterns


def _parsed(name: str) -> _Parsed:
    path = _file(name)
    stat = path.stat()
    return _parse(name, path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=None)
def _parse(name: str, path: Path, mtime_ns: int, size: int) -> _Parsed:
    """A module's serialized tree and its imports (cached per file version: a long-running reader
    sees an edited module), from the parse cache when this version of the file is in it."""
    from harness.sources.models import cache_dir

    key = json.dumps([name, str(path), mtime_ns, size, sys.version_info[:2]])
    cached = cache_dir() / "parsed" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
    found = cachefile.read(cached)
    try:
        if found["key"] == key:
            return _Parsed(found["text"], tuple((b, tuple(n)) for b, n in found["imports"]), tuple(found["declared"]))
    except (KeyError, TypeError):  # none, or not what this writes
        pass
    parsed = _parse_file(name, path)
    cachefile.write(cached, {"key": key, "text": parsed.text, "imports": parsed.imports, "declared": parsed.declared})
    return parsed


def _parse_file(name: str, path: Path) -> _Parsed:
    tree = normalized_tree(path)
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    imports = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports += [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            imports.append((base, tuple(a.name for a in node.names)))
    return _Parsed(serialize(tree), tuple(imports), _declared(name, tree))


def _declared(name: str, tree: ast.Module) -> tuple[str, ...]:
    """The patterns of the module's top-level ``SCORING_FILES = (...)`` (:data:`DECLARATION`), () without one."""
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(node, "target", None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(target, ast.Name) and target.id == DECLARATION:
            try:
                patterns = ast.literal_eval(node.value)
            except ValueError:
                patterns = None
            if not isinstance(patterns, tuple) or not all(isinstance(p, str) for p in patterns):
                raise ValueError(f"{name}: {DECLARATION} must be a literal tuple of glob patterns")
            return patterns
    return ()


def normalized_tree(path: Path) -> ast.Module:
    """The module's syntax tree, normalized (:func:`normalize`)."""
    return normalize(ast.parse(path.read_text(encoding="utf-8")))


def normalize(tree: ast.Module) -> ast.Module:
    """``tree`` without docstrings, its f-strings' literal parts joined (Python 3.12 writes an empty
    part after a nested replacement field in a format spec, 3.11 and 3.13 do not); changed in place."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
        elif isinstance(node, ast.JoinedStr):
            node.values = _joined(node.values)
    return tree


def _joined(values: list[ast.expr]) -> list[ast.expr]:
    out: list[ast.expr] = []
    for v in values:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            if not v.value:
                continue
            if out and isinstance(out[-1], ast.Constant) and isinstance(out[-1].value, str):
                out[-1] = ast.Constant(out[-1].value + v.value)
                continue
        out.append(v)
    return out


LEXICAL = frozenset({"kind", "type_comment"})
"""Fields that record how code was written, not what it does: a string's ``u`` prefix, a ``# type:``
comment (never parsed here)."""


def serialize(node: ast.AST | list | object) -> str:
    """A syntax tree as text that every supported Python writes alike: node type, then its fields in
    name order, each a node, a list or a literal's ``ascii`` (``repr`` leaves a character unescaped
    when the Python's Unicode database calls it printable, and that database grows); fields that are
    None or empty lists are left out (3.13's ``ast.dump`` drops them, 3.12 adds an empty
    ``type_params``), and so are :data:`LEXICAL` ones. Positions are never written."""
    if isinstance(node, ast.AST):
        fields = []
        for name in sorted(node._fields):
            value = getattr(node, name, None)
            if name not in LEXICAL and value is not None and value != []:
                fields.append(f"{name}={serialize(value)}")
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return f"[{','.join(serialize(v) for v in node)}]"
    return ascii(node)


def _data_text(path: Path) -> str:
    stat = path.stat()
    return _normalized_data(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=None)
def _normalized_data(path: Path, mtime_ns: int, size: int) -> str:
    """A declared file as it counts (cached per file version), by its suffix (:data:`NORMALIZERS`)."""
    normalize_kind = NORMALIZERS.get(path.suffix.lower())
    if normalize_kind is None:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    return normalize_kind(path.read_text(encoding="utf-8"))


_C_LEXEMES = re.compile(
    r"(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<literal>\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')|(?P<space>\s+)", re.DOTALL
)


def normalized_c(text: str) -> str:
    """C or C++ source without its comments (each reads as one space, as the compiler reads it) and
    with every run of whitespace outside string and character literals made one space, or one line
    break where it holds one (a preprocessor directive ends at its line); none at either end. A
    comment edit, re-indentation or blank lines leave it unchanged; a new statement does not."""
    pieces: list[str] = []
    gap = ""
    position = 0

    def emit(code: str) -> None:
        nonlocal gap
        pieces.extend([gap, code] if pieces and gap else [code])
        gap = ""

    for match in _C_LEXEMES.finditer(text):
        if match.start() > position:
            emit(text[position:match.start()])
        if match.lastgroup == "literal":
            emit(match.group())
        elif match.lastgroup == "space" and "\n" in match.group() or gap == "\n":
            gap = "\n"
        else:
            gap = " "
        position = match.end()
    if position < len(text):
        emit(text[position:])
    return "".join(pieces)


def normalized_yaml(text: str) -> str:
    """YAML as the data it parses to, written as canonical JSON (keys sorted, ASCII): comments, quoting,
    flow or block style and key order do not count. A tag the safe loader does not know (lm-eval's
    ``!function module.name``) is kept as ``{"!tag": value}``."""
    import yaml  # a dependency of the harness; imported here so the rule above stays the standard library

    class Loader(yaml.SafeLoader):
        pass

    def tagged(loader: yaml.SafeLoader, tag: str, node: yaml.Node) -> dict:
        value = loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else (
            loader.construct_sequence(node) if isinstance(node, yaml.SequenceNode) else loader.construct_mapping(node))
        return {f"!{tag}": value}

    Loader.add_multi_constructor("!", tagged)
    return json.dumps(yaml.load(text, Loader=Loader), sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)


NORMALIZERS = {".c": normalized_c, ".cc": normalized_c, ".cpp": normalized_c, ".h": normalized_c, ".hpp": normalized_c,
               ".yaml": normalized_yaml, ".yml": normalized_yaml}
"""Declared file suffix -> how it counts; other suffixes count byte for byte (their sha256)."""
