"""Registries over Python entry points (groups ``harness.adapters`` and ``harness.suites``).

A registry reads its group once, loads an entry lazily on first use, checks it against the base
class, and remembers the distribution (package and version) it came from for the run record.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from harness.adapter import Adapter
from harness.errors import HarnessError, UnknownNameError
from harness.suite import Suite

T = TypeVar("T")


@dataclass(frozen=True)
class Origin:
    """Where a registered component comes from."""

    package: str
    version: str


class Registry(Generic[T]):
    def __init__(self, group: str, base: type[T], noun: str):
        self.group, self.base, self.noun = group, base, noun
        self._loaded: dict[str, type[T]] = {}

    @cached_property
    def _entries(self) -> dict[str, EntryPoint]:
        found: dict[str, EntryPoint] = {}
        for ep in entry_points(group=self.group):
            if ep.name in found and found[ep.name].value != ep.value:
                raise HarnessError(f"two packages register {self.noun} '{ep.name}' ({found[ep.name].value}, {ep.value}); uninstall one")
            found[ep.name] = ep
        return found

    def names(self) -> list[str]:
        return sorted(self._entries)

    def get(self, name: str) -> type[T]:
        if name in self._loaded:
            return self._loaded[name]
        if name not in self._entries:
            near = difflib.get_close_matches(name, self.names(), n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise UnknownNameError(f"unknown {self.noun} '{name}'; {hint}available: {', '.join(self.names())}")
        obj = self._entries[name].load()
        if not (isinstance(obj, type) and issubclass(obj, self.base)):
            raise HarnessError(f"{self.noun} '{name}' ({self._entries[name].value}) is not a {self.base.__name__} subclass; fix the plugin's entry point")
        self._loaded[name] = obj
        return obj

    def origin(self, name: str) -> Origin:
        dist = self._entries[name].dist
        return Origin(dist.name, dist.version) if dist is not None else Origin("unknown", "unknown")


ADAPTERS: Registry[Adapter] = Registry("harness.adapters", Adapter, "adapter")
SUITES: Registry[Suite] = Registry("harness.suites", Suite, "suite")
