"""The code fingerprint of results schema v4, frozen: used only by the store's v4 -> v5 migration.

Until schema v4 a module counted as ``ast.dump`` of its tree, a text that depends on the Python that
writes it; every stored run was made on Python 3.11 (3.12 and 3.13 failed before any work). So
:func:`legacy_dump` writes what Python 3.11's ``ast.dump`` writes, on any Python: each field in
``_fields`` order as ``name=value``, an optional field that is None left out, lists and literals as
3.11 writes them, and without the fields later Pythons added (:data:`ADDED_AFTER_311`). The migration
compares a stored fingerprint with this one of the installed code, so a run current under the old rule
reads as current under the new one, on whichever Python first writes the store. One limit: a string
literal holding a character that Unicode assigned after version 14 (Python 3.11's) is written as
that Python's ``repr`` writes it, not as 3.11's (none occurs in the harness).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from harness.results.fingerprint import _file, code_fingerprint, normalized_tree

ADDED_AFTER_311 = frozenset({"type_params"})
"""Fields Python 3.12 added to nodes that 3.11 code parses into (functions and classes); nodes only
newer syntax makes (``type`` aliases, type parameters) never occur in code that 3.11 parses."""


def legacy_code_fingerprint(adapter: str, suite: str) -> str:
    """What :func:`~harness.results.fingerprint.code_fingerprint` returned under schema v4 (on Python
    3.11) for the installed code; ``""`` when the adapter or suite is not installed."""
    return code_fingerprint(adapter, suite, _legacy_text)


def _legacy_text(name: str) -> str:
    path = _file(name)
    stat = path.stat()
    return _legacy_file_text(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=None)
def _legacy_file_text(path: Path, mtime_ns: int, size: int) -> str:
    return legacy_dump(normalized_tree(path))


def legacy_dump(node: ast.AST | list | object) -> str:
    """``ast.dump(node)`` as Python 3.11 writes it (its ``_format`` without indent or attributes)."""
    if isinstance(node, ast.AST):
        cls, args = type(node), []
        for name in node._fields:
            if name in ADDED_AFTER_311:
                continue
            value = getattr(node, name)
            if value is None and getattr(cls, name, ...) is None:  # an optional field that is not set
                continue
            args.append(f"{name}={legacy_dump(value)}")
        return f"{cls.__name__}({', '.join(args)})"
    if isinstance(node, list):
        return f"[{', '.join(legacy_dump(v) for v in node)}]"
    return repr(node)
