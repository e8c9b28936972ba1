"""The house's structure, read from the code's own imports: no import cycles (lazy imports inside
functions count too), the contract modules depend on nothing above them, and the layers hold: the
runner names no suite or adapter (it goes through the registries and the contracts), methods import
neither the runner nor the private helpers of the model and data sources, and suites import no
adapter (an adapter declares what a suite needs to know)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parent.parent

# what a newcomer looks for, and where it is (the README's layout section says the same)
CONTRACTS = ("harness.adapter", "harness.suite", "harness.config", "harness.errors", "harness.budgets",
             "harness.registry", "harness.rebuild", "harness.pages", "harness.devices", "harness.sidefiles")
ABOVE_CONTRACTS = ("harness.runner", "harness.cli", "harness.sweep", "harness.integrations", "harness.leaderboard",
                   "harness.benchmarks", "harness.adapters", "harness.suites")


# the layers: modules of the group on the left import nothing of the groups on the right
FORBIDDEN = {
    "harness.runner": ("harness.suites", "harness.adapters"),
    "harness.methods": ("harness.runner",),
    "harness.suites": ("harness.adapters",),
}
PRIVATE = {"harness.methods": "harness.sources"}  # modules of the left use no underscore name of the right


def modules() -> dict[str, Path]:
    """Every module of the installed namespace, by dotted name, from pyproject's package map."""
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    out = {}
    for package, folder in package_dir.items():
        for path in (REPO / folder).glob("*.py"):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def _package(path: Path, name: str) -> str:
    return name if path.stem == "__init__" else name.rpartition(".")[0]


def _base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a ``from ... import`` reads from."""
    base = node.module or ""
    if node.level:
        base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
    return base


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules ``path`` imports anywhere in its body (``from pkg import mod`` names the module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _base(node, _package(path, name))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in found if m in known and m != name}


def within(module: str, groups: str | tuple[str, ...]) -> bool:
    """``module`` is one of ``groups`` (packages) or inside one."""
    return any(module == g or module.startswith(g + ".") for g in ((groups,) if isinstance(groups, str) else groups))


def crossings(edges: dict[str, set[str]], group: str, banned: tuple[str, ...]) -> list[str]:
    """The imports ``importer -> imported`` from modules of ``group`` into modules of ``banned``."""
    return sorted(f"{m} -> {t}" for m, targets in edges.items() if within(m, group) for t in targets if within(t, banned))


def private_names(source: str, package: str, known: set[str], owner: str) -> set[str]:
    """The underscore names (dunders aside) that ``source``, a module of ``package``, takes from modules
    of ``owner``: ``from owner.mod import _x``, and ``mod._x`` on a module it imported from there."""
    tree = ast.parse(source)
    private = lambda n: n.startswith("_") and not n.endswith("__")  # noqa: E731
    found, bound = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):  # ``import a.b as x`` binds x to a.b; ``import a.b`` binds a
            for a in node.names:
                top = a.name.split(".")[0]
                bound[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom):
            base = _base(node, package)
            for a in node.names:
                if f"{base}.{a.name}" in known:
                    bound[a.asname or a.name] = f"{base}.{a.name}"
                elif within(base, owner) and private(a.name):
                    found.add(f"{base}.{a.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                module = ".".join([bound[value.id], *chain])
                if within(module, owner):
                    found.add(f"{module}.{node.attr}")
    return found


@functools.lru_cache(maxsize=1)
def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(path, name, set(mods)) for name, path in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_reader_sees_every_module():
    mods = modules()
    assert {"harness.adapter", "harness.runner.run", "harness.measure.compare", "harness.adapters.asg",
            "harness.suites.xnli", "harness.leaderboard.app"} <= set(mods)


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("contract", CONTRACTS)
def test_contracts_depend_on_nothing_above_them(contract):
    above = sorted(m for m in graph()[contract] if m.startswith(ABOVE_CONTRACTS))
    assert above == [], f"{contract} imports {above}"


@pytest.mark.parametrize("group", FORBIDDEN)
def test_the_layers_hold(group):
    assert crossings(graph(), group, FORBIDDEN[group]) == []


def test_the_crossing_finder_finds_a_crossing():
    edges = {"harness.runner.plan": {"harness.suites.xnli", "harness.adapter"}, "harness.runners": {"harness.suites.glue"},
             "harness.runner.stages.fit": {"harness.adapters"}}
    assert crossings(edges, "harness.runner", ("harness.suites", "harness.adapters")) == [
        "harness.runner.plan -> harness.suites.xnli", "harness.runner.stages.fit -> harness.adapters"]


@pytest.mark.parametrize("group", PRIVATE)
def test_no_private_names_across_layers(group):
    mods = modules()
    found = {m: private_names(path.read_text(encoding="utf-8"), _package(path, m), set(mods), PRIVATE[group])
             for m, path in mods.items() if within(m, group)}
    assert {m: sorted(names) for m, names in found.items() if names} == {}


def test_the_private_name_finder_finds_both_forms():
    known = {"harness.sources", "harness.sources.models", "harness.sources.data", "harness.methods.kmeans"}
    source = """
from harness.sources import models
from harness.sources.data import _local_paths, revisions
import harness.sources.data
import harness.sources.models as m
from . import kmeans

models._convert_once("x", print)
harness.sources.data._missing(None, None)
m._offline(), m.cache_dir(), models.__name__, kmeans._private()
"""
    assert private_names(source, "harness.methods", known, "harness.sources") == {
        "harness.sources.data._local_paths", "harness.sources.models._convert_once", "harness.sources.data._missing",
        "harness.sources.models._offline"}


PROBES = ("isinstance", "issubclass", "type", "hasattr", "getattr")


def adapter_references(path: Path) -> list[str]:
    """Where a module refers to an adapter class: an import of ``harness.adapters``, a class of
    ``harness.adapter`` imported (by name, or as an attribute of the imported module), or a probe of
    a run's adapter (``isinstance``, ``type``, ``hasattr`` ... on an expression naming ``adapter``).
    What a suite needs to know from an adapter the adapter declares through the contract."""
    contract = ast.parse((REPO / "harness" / "adapter.py").read_text(encoding="utf-8"))
    classes = {node.name for node in contract.body if isinstance(node, ast.ClassDef)}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for a in node.names if a.name == "harness.adapter"}
    aliases |= {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "harness"
                for a in node.names if a.name == "adapter"}
    found = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where} imports {a.name}" for a in node.names if a.name.startswith("harness.adapters")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness.adapters"):
            found.append(f"{where} imports from {node.module}")
        elif isinstance(node, ast.ImportFrom) and node.module == "harness" and any(a.name == "adapters" for a in node.names):
            found.append(f"{where} imports harness.adapters")
        elif isinstance(node, ast.ImportFrom) and node.module == "harness.adapter":
            found += [f"{where} imports the class {a.name}" for a in node.names if a.name in classes]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases and node.attr in classes:
            found.append(f"{where} names the class {node.value.id}.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES and node.args:
            named = {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
            named |= {n.attr for n in ast.walk(node.args[0]) if isinstance(n, ast.Attribute)}
            if "adapter" in named:
                found.append(f"{where} probes the adapter with {node.func.id}")
    return found


def test_suites_never_inspect_adapter_classes():
    suites = {name: path for name, path in modules().items() if name.startswith("harness.suites")}
    assert len(suites) > 10
    assert [ref for path in suites.values() for ref in adapter_references(path)] == []


@pytest.mark.parametrize("probe", [
    "from harness.adapter import WordSenses\nif isinstance(ctx.adapter, WordSenses):\n    pass\n",
    "from harness import adapter as contract\nok = contract.Adapter\n",
    "from harness.adapters.multisense import MultisenseAdapter\n",
    "if hasattr(ctx.adapter, 'word_senses'):\n    pass\n",
    "name = type(ctx.adapter).__name__\n",
])
def test_adapter_reference_finder_finds_a_probe(tmp_path, probe):
    path = tmp_path / "planted.py"
    path.write_text("from harness.adapter import no_progress\n" + probe, encoding="utf-8")
    assert adapter_references(path) != []
    path.write_text("from harness.adapter import no_progress\nsenses = ctx.adapter.word_senses(model, read, 0)\n", encoding="utf-8")
    assert adapter_references(path) == []
