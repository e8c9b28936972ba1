"""Registries over Python entry points (groups ``harness.adapters`` and ``harness.suites``).

A registry reads its group once, loads an entry lazily on first use, checks it against the base
class and its declared ``name``, and remembers the distribution (package and version) it came from
for the run record. The settings of an entry's config (keys and types) are remembered across processes
(``$HARNESS_CACHE_DIR/settings.json``, stamped by the code they were read from), so a bad ``--set``
key or value is refused without importing the entry and torch with it. A plugin that fails to import, is not a
subclass of the contract, or declares another name than its entry-point key is reported in one line
naming its package.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from harness import cachefile
from harness.errors import PluginError, UnknownNameError, did_you_mean

if TYPE_CHECKING:
    from harness.adapter import Adapter
    from harness.suite import Suite

T = TypeVar("T")


@dataclass(frozen=True)
class Origin:
    """Where a registered component comes from."""

    package: str
    version: str


class Registry(Generic[T]):
    """Entry points of ``group``, each a subclass of the class named by ``base`` ("module:Class")."""

    def __init__(self, group: str, base: str, noun: str):
        self.group, self.base_path, self.noun = group, base, noun
        self._loaded: dict[str, type[T]] = {}
        self._stamps: dict[str, str] = {}

    @cached_property
    def _entries(self) -> dict[str, EntryPoint]:
        found: dict[str, EntryPoint] = {}
        for ep in entry_points(group=self.group):
            if ep.name in found and found[ep.name].value != ep.value:
                raise PluginError(f"two packages register {self.noun} '{ep.name}' ({found[ep.name].value}, {ep.value}); uninstall one")
            found[ep.name] = ep
        return found

    @cached_property
    def base(self) -> type:
        module, _, attr = self.base_path.partition(":")
        return getattr(importlib.import_module(module), attr)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def check(self, name: str) -> None:
        """Refuse a name no package registers, from the entry points alone (nothing is imported)."""
        if name not in self._entries:
            raise UnknownNameError(f"unknown {self.noun} '{name}'; {did_you_mean(name, self.names())}available: {', '.join(self.names())}")

    def get(self, name: str) -> type[T]:
        if name in self._loaded:
            return self._loaded[name]
        self.check(name)
        entry, origin = self._entries[name], self.origin(name)
        where = f"{self.noun} '{name}' from package {origin.package} {origin.version} ({entry.value})"
        try:
            obj = entry.load()
        except Exception as err:  # a broken plugin must not take the harness down with a traceback
            raise PluginError(f"{where} failed to import: {err.__class__.__name__}: {str(err).splitlines()[0] if str(err) else ''}; fix or uninstall the package") from None
        if not (isinstance(obj, type) and issubclass(obj, self.base)):
            raise PluginError(f"{where} is not a {self.base.__name__} subclass; fix the plugin's entry point")
        declared = getattr(obj, "name", None)
        if declared != name:
            raise PluginError(f"{where} declares name '{declared}' but is registered as '{name}'; make the class's name and the entry-point key the same")
        self._loaded[name] = obj
        return obj

    def settings(self, name: str) -> dict[str, dict]:
        """The ``--set`` keys of ``name``'s config, in declaration order, each with its type as
        :func:`harness.config.setting_type` gives it: read from the settings cache while the code they
        were read from is unchanged, else from the loaded class (and cached)."""
        self.check(name)
        from harness.config import config_fields, setting_type
        from harness.sources.models import cache_dir

        path, key, stamp = cache_dir() / "settings.json", f"{self.group}:{name}", self.stamp(name)
        known = cachefile.read(path)
        known = known if isinstance(known, dict) else {}
        entry = known.get(key)
        if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("settings"), dict):
            return entry["settings"]
        settings = {field: setting_type(hint) for field, hint in config_fields(self.get(name).config_class).items()}
        cachefile.write(path, {**known, key: {"stamp": stamp, "settings": settings}})
        return settings

    def stamp(self, name: str) -> str:
        """The entry, its package's version, and the size and mtime of every Python file beside the
        entry's module, in its top-level package and in the harness (where a config or its base classes
        can be defined); read once per registry (a process plans many requests of one entry)."""
        if name not in self._stamps:
            self._stamps[name] = self._read_stamp(name)
        return self._stamps[name]

    def _read_stamp(self, name: str) -> str:
        entry, origin = self._entries[name], self.origin(name)
        module = entry.value.partition(":")[0]
        roots = {Path(__file__).parent}
        for spec in (importlib.util.find_spec(module), importlib.util.find_spec(module.partition(".")[0])):
            if spec is not None and spec.origin:  # a package, or a module inside one: its folder; a lone module: its file
                roots.add(Path(spec.origin).parent if spec.submodule_search_locations or spec.parent else Path(spec.origin))
        files = sorted({f for root in roots for f in ([root] if root.is_file() else root.rglob("*.py"))})
        stats = [f"{f}:{st.st_size}:{st.st_mtime_ns}" for f in files for st in [f.stat()]]
        return hashlib.sha256("|".join([entry.value, origin.version, *stats]).encode()).hexdigest()[:16]

    def origin(self, name: str) -> Origin:
        dist = self._entries[name].dist
        return Origin(dist.name, dist.version) if dist is not None else Origin("unknown", "unknown")


ADAPTERS: Registry[Adapter] = Registry("harness.adapters", "harness.adapter:Adapter", "adapter")
SUITES: Registry[Suite] = Registry("harness.suites", "harness.suite:Suite", "suite")
