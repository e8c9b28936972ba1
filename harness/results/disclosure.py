"""Budget changes made after a method's score was seen, as a run discloses them.

A budget is chosen on the baseline's learning curve alone; one changed after a method's score was
seen is kept only with a sentence that says what changed and what had been seen (``Budgets.disclosed``,
:mod:`harness.budgets`), which goes into every run's recipe (``recipe["disclosed"]``, likewise an
adapter's budget). Every verdict and table cell that rests on such a run shows it
(:func:`disclosures`, :func:`note`): the claims table beside its verdict, the leaderboard beside its cell.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

LABEL = "budget changed after scores were seen"


def disclosures(*budgets: Mapping[str, Any] | str | None) -> tuple[str, ...]:
    """The disclosures a run's budgets carry, in order and each once: its recipe's, then its adapter
    budget's (as stored, a mapping or its JSON text; None or NaN for a run without one)."""
    found: list[str] = []
    for budget in budgets:
        read = json.loads(budget) if isinstance(budget, str) else budget
        sentence = read.get("disclosed") if isinstance(read, Mapping) else None
        if sentence and sentence not in found:
            found.append(sentence)
    return tuple(found)


def note(sentences: Iterable[str]) -> str:
    """The disclosures as one note, ``budget changed after scores were seen: <what>``; "" for none."""
    unique = list(dict.fromkeys(sentences))
    return f"{LABEL}: {'; '.join(unique)}" if unique else ""
