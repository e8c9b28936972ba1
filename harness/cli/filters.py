"""The name filters of ``harness results`` (``--suite``, ``--adapter``, ``--model``) checked against the store.

A value that names no stored run and nothing installed is a typo: one line with the closest name
(:func:`harness.errors.did_you_mean`), exit 2, instead of "0 result rows". An adapter or suite whose
runs are stored but whose code is no longer installed has only stale runs (its code fingerprint is
empty, :func:`harness.results.fingerprint.code_fingerprint`), hidden by default: the query says so.
"""

from __future__ import annotations

from harness.errors import ConfigError, did_you_mean
from harness.registry import ADAPTERS, SUITES
from harness.results import queries
from harness.results.store import Store
from harness.sources.models import PACKAGED


def check(store: Store, suite: str | None, adapter: str | None, model: str | None) -> list[str]:
    """Raise ConfigError for a value that matches neither a stored finished run nor an installed name;
    return one note per adapter or suite given whose stored runs are stale because it is not installed."""
    notes = []
    for column, value, installed in (("suite", suite, SUITES.names()), ("adapter", adapter, ADAPTERS.names()), ("model", model, list(PACKAGED))):
        if value is None:
            continue
        stored = queries.names(store, column)
        names = [n for n in stored.name if n is not None]
        if value not in names and value not in installed:
            raise ConfigError(
                f"no {column} '{value}' among the runs in {store.path} or {'packaged' if column == 'model' else 'installed'}; "
                f"{did_you_mean(value, [*names, *installed])}"
                f"{column}s with runs: {', '.join(sorted(names)) or 'none'}"
            )
        if value in names and column != "model" and value not in installed:
            row = stored[stored.name == value].iloc[0]
            origin = f" (package {row.package})" if isinstance(row.package, str) else ""
            runs, them = (f"the {row.runs} finished runs", "them") if row.runs != 1 else ("the finished run", "it")
            notes.append(
                f"note: {runs} of {column} '{value}' in {store.path} {'are' if row.runs != 1 else 'is'} stale: its code is no "
                f"longer installed{origin}; install the same code again to read {them} as current, or add --include-stale to see {them}"
            )
    return notes
