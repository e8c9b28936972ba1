"""Typed errors. Library code raises these; only the CLI turns them into exit code 2."""

import difflib


class HarnessError(Exception):
    """A problem with the user's input or environment; the message names the problem and the fix."""


class UnknownNameError(HarnessError):
    """An adapter, suite or model name that no registry knows."""


class PluginError(HarnessError):
    """A registered adapter or suite that cannot be used: it fails to import or breaks the contract."""


class ConfigError(HarnessError):
    """A --set value or config field that fails validation."""


class DataError(HarnessError):
    """Dataset files missing or malformed."""


class ModelSourceError(HarnessError):
    """A model that cannot be resolved or loaded."""


class TrainingError(HarnessError):
    """Fine-tuning that cannot give a meaningful score (e.g. a NaN loss)."""


class StoreError(HarnessError):
    """The results store cannot be read or written."""


class EmptyStoreError(StoreError):
    """A results database that holds no runs yet (a new or empty DuckDB file): reading it finds nothing."""


class StoreBusyError(StoreError):
    """Another process holds the results database (DuckDB allows one writer); retry shortly."""


def did_you_mean(name: str, choices) -> str:
    """``"did you mean 'X'? "`` for the choice ``name`` most likely meant (the same name in another
    case first, else the closest by :func:`difflib.get_close_matches`), or ``""``: the one hint every
    unknown-name message shares (adapters, suites, models, ``--set`` keys, results filters)."""
    folded = {str(c).lower(): str(c) for c in choices}
    near = difflib.get_close_matches(name.lower(), list(folded), n=1)
    best = folded.get(name.lower()) or (folded[near[0]] if near else None)
    return f"did you mean '{best}'? " if best is not None and best != name else ""


def printable(text: str) -> str:
    """``text`` with every character a terminal acts on or hides instead of showing (a newline, an
    escape sequence, a NUL, a zero-width or direction mark, the surrogate standing for a byte of a
    command line that was not UTF-8) written as its Python escape: the one rule for echoing a name the
    user typed, so ``--suite $'xn\\nli'`` reads ``unknown suite 'xn\\nli'`` on one line. Printable
    text, accents and scripts included, passes unchanged."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
