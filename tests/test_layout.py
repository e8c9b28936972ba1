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
             "harness.registry", "harness.rebuild", "harness.pages", "harness.devices", "harness.sidefiles")
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
