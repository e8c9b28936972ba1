"""The house's structure, read from the code's own imports: no import cycles (lazy imports inside
functions count too), and the contract modules depend on nothing above them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parent.parent

# what a newcomer looks for, and where it is (the README's layout section says the same)
CONTRACTS = ("harness.adapter", "harness.suite", "harness.config", "harness.errors", "harness.budgets",
             "harness.registry", "harness.rebuild", "harness.pages")
ABOVE_CONTRACTS = ("harness.runner", "harness.cli", "harness.sweep", "harness.integrations", "harness.leaderboard",
                   "harness.benchmarks", "harness.adapters", "harness.suites")


def modules() -> dict[str, Path]:
    """Every module of the installed namespace, by dotted name, from pyproject's package map."""
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    out = {}
    for package, folder in package_dir.items():
        for path in (REPO / folder).glob("*.py"):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules ``path`` imports anywhere in its body (``from pkg import mod`` names the module)."""
    found = set()
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in found if m in known and m != name}


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
