"""The README's main job, ``harness run --suite xnli --adapter asg``: the leaderboard opens on its
chart (the suite on the model ``harness run`` picks for it) and its model's overview rows."""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from harness.sources import models


@dataclass(frozen=True)
class MainJob:
    suite: str
    adapter: str

    @property
    def model(self) -> str | None:
        """The model ``harness run --suite SUITE`` picks (:func:`declared_default_model`)."""
        return declared_default_model(self.suite)


MAIN_JOB = MainJob("xnli", "asg")


@functools.cache
def declared_default_model(suite: str) -> str | None:
    """The suite's default model as ``harness run`` resolves it (:func:`harness.sources.models.preferred`
    of the suite class's ``default_model``), read from the class's source: importing a suite brings
    torch (about 10 s of a cold page; the read side never imports it). None where the class does not
    assign it a literal itself (an inherited default, an unknown suite)."""
    entry = next((e for e in entry_points(group="harness.suites") if e.name == suite), None)
    if entry is None:
        return None
    module, _, name = entry.value.partition(":")
    spec = importlib.util.find_spec(module)
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    body = next((n.body for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), [])
    for node in body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "default_model" and node.value is not None:
            return models.preferred(ast.literal_eval(node.value))
    return None
