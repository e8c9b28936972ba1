"""The fit cache: an adapter fitted once is saved (:mod:`harness.runner.saved`) and reused by every suite
and rerun that asks for the same fit.

The key is what determines the fitted modules: the model and its revision, the head the adapter
acts on, the adapter with its config and budget, the fit corpora's sha256, the seed, the adapter's
code fingerprint (:func:`harness.results.fingerprint.adapter_fingerprint`: its modules and the
harness modules they import, docstrings and comments left out, so a docstring edit keeps fits) and
the saved format; with recovery training, its recipe and the recovery module's fingerprint (the
fit before recovery is kept under the post-hoc key as well, so a sweep over steps fits once); with
pretraining (``--pretrain``), its recipe, which holds the pretraining module's fingerprint.
An ``after_finetune`` adapter, or one fitted on the suite's training texts, fits on what the suite
made, so its key also holds the suite, its config, recipe and data, and the task.

Entries live in ``$HARNESS_FIT_CACHE`` (default ``$HARNESS_CACHE_DIR/fits``; ``off`` disables the
cache), one folder per key digest, written under a temporary name and renamed when complete. Its
``manifest.json`` holds the key, the original fit's seconds and every file's sha256; an entry whose
files do not match (a partial copy, a flipped byte) is deleted and fitted again, never loaded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.methods import recover
from harness.runner import saved
from harness.adapter import Adapter, Applied
from harness.errors import ConfigError
from harness.results.fingerprint import adapter_fingerprint, module_fingerprint
from harness.results.records import CompressionReport, RunSpec
from harness.sources import corpora
from harness.sources.models import cache_dir
from harness.suite import Head

MANIFEST = "manifest.json"
DIGEST = re.compile(r"[0-9a-f]{20}")
"""An entry's folder name: the first 20 hex digits of its key's sha256 (:func:`digest`)."""
PARTIAL = re.compile(r"\.([0-9a-f]{20})\.\d+\.tmp")
"""A folder :meth:`FitCache.put` writes before renaming it to its digest (left by a killed process)."""


@dataclass(frozen=True)
class FitInfo:
    """How a run got its fitted adapter: reused from the cache or fitted now, and the fit's seconds
    (the original fit's when reused) and the seconds spent loading the entry."""

    reused: bool
    fit_seconds: float
    load_seconds: float = 0.0
    key: str | None = None  # the cache entry's digest; None when the fit was not cached
    note: str | None = None  # why the fit was not cached (the cache off, an adapter that declares its fit not cacheable)

    def details(self) -> dict[str, Any]:
        return {"fit_cache": dataclasses.asdict(self)}


def key(spec: RunSpec, adapter: Adapter, head: Head, task: str, recovery: bool = True) -> dict[str, Any]:
    """The cache key of ``adapter``'s fit in the run ``spec`` on the task ``task`` with ``head``; with
    ``recovery`` False, of the fit before the run's recovery training (the post-hoc run's fit)."""
    out = {
        "model": spec.model, "model_revision": spec.model_revision, "head": dataclasses.asdict(head),
        "adapter": spec.adapter, "adapter_config": spec.adapter_config, "adapter_budget": spec.adapter_budget,
        "fit_data": spec.fit_data, "seed": spec.seed, "code": adapter_fingerprint(adapter.name), "format": saved.FORMAT,
        "dtype": spec.recipe.get("dtype", "float32"),
    }
    if recovery and "recovery" in spec.recipe:
        out["recovery"] = {**spec.recipe["recovery"], "code": module_fingerprint(recover.__name__)}
    if "pretraining" in spec.recipe:
        out["pretraining"] = spec.recipe["pretraining"]
    if adapter.stage == "after_finetune" or corpora.TASK_TRAIN in adapter.corpora():
        out["suite"] = {"name": spec.suite, "config": spec.suite_config, "recipe": spec.recipe, "data": spec.data, "task": task}
    return out


def digest(k: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(k, sort_keys=True, default=str).encode()).hexdigest()[:20]


def root() -> Path | None:
    """The cache folder, or None when ``HARNESS_FIT_CACHE=off``."""
    value = os.environ.get("HARNESS_FIT_CACHE", "")
    if value.lower() in ("off", "0", "false", "no"):
        return None
    return Path(value) if value else cache_dir() / "fits"


@dataclass(frozen=True)
class Entry:
    digest: str
    path: Path
    key: dict[str, Any]
    fit_seconds: float
    created: str
    size_bytes: int


class FitCache:
    """Fitted adapters on disk, one verified folder per key."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def get(self, k: dict[str, Any]) -> tuple[Applied, float] | None:
        """The cached fit of ``k`` and its original fit seconds; None when absent or corrupt (deleted)."""
        entry = self.folder / digest(k)
        manifest = entry / MANIFEST
        if not manifest.is_file():
            return None
        files = saved.checksums(entry)
        files.pop(MANIFEST)
        try:
            info = json.loads(manifest.read_text(encoding="utf-8"))
            intact = info["key"] == json.loads(json.dumps(k, default=str)) and info["files"] == files
        except (ValueError, KeyError):
            intact = False
        if not intact:
            shutil.rmtree(entry, ignore_errors=True)
            return None
        model, tokenizer, s = saved.load(entry)
        return Applied(model, tokenizer, CompressionReport(**s.report), s.details), info["fit_seconds"]

    def put(self, k: dict[str, Any], applied: Applied, fit_seconds: float) -> Path:
        """Save ``applied`` under ``k`` (written aside, then renamed: readers never see a partial entry)."""
        final = self.folder / digest(k)
        temp = self.folder / f".{digest(k)}.{os.getpid()}.tmp"
        shutil.rmtree(temp, ignore_errors=True)
        try:
            saved.save(temp, applied.model, applied.tokenizer, k["adapter"], k["adapter_config"],
                       dataclasses.asdict(applied.report), applied.details, {"key": k})
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        manifest = {"key": k, "fit_seconds": fit_seconds, "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "files": saved.checksums(temp)}
        (temp / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str), encoding="utf-8")
        if (final / MANIFEST).is_file():  # another process finished the same fit first
            shutil.rmtree(temp)
            return final
        shutil.rmtree(final, ignore_errors=True)  # a partial entry left by a killed process
        try:
            temp.rename(final)
        except OSError:  # another process renamed the same fit in between
            if not (final / MANIFEST).is_file():
                raise
            shutil.rmtree(temp)
        return final

    def entries(self) -> list[Entry]:
        out = []
        for manifest in sorted(self.folder.glob(f"*/{MANIFEST}")):
            info = json.loads(manifest.read_text(encoding="utf-8"))
            size = sum(f.stat().st_size for f in manifest.parent.iterdir() if f.is_file())
            out.append(Entry(manifest.parent.name, manifest.parent, info["key"], info["fit_seconds"], info["created"], size))
        return out

    def written(self) -> list[Path]:
        """The folders this cache wrote: entries (a digest's name holding a manifest) and partial
        entries a killed process left; nothing else in the folder is ever counted as the cache's."""
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.iterdir() if p.is_dir() and not p.is_symlink() and (
            (DIGEST.fullmatch(p.name) and (p / MANIFEST).is_file()) or PARTIAL.fullmatch(p.name)))

    def resolve(self, names: list[str]) -> list[Path]:
        """The entries ``names`` (digests, or unique prefixes of them) denote; a name that is no
        entry's raises ConfigError naming it, before anything is deleted."""
        entries = {p.name: p for p in self.written() if DIGEST.fullmatch(p.name)}
        out = []
        for name in names:
            matches = [p for d, p in entries.items() if d.startswith(name)] if re.fullmatch(r"[0-9a-f]{4,20}", name) else []
            if len(matches) != 1:
                shown = ascii(name)[1:-1]
                why = "matches " + ", ".join(sorted(p.name for p in matches)) if matches else "is not a cached fit's digest in " + str(self.folder)
                raise ConfigError(f"'{shown}' {why}; give a digest from `harness cache list`; nothing was removed")
            out.append(matches[0])
        return out

    def clear(self, names: list[str] | None = None) -> list[str]:
        """Delete the entries ``names`` denote (:meth:`resolve`), or every folder this cache wrote
        (:meth:`written`) when None; returns the names of the folders removed. Only folders inside
        the cache that the cache wrote are ever deleted."""
        targets = self.resolve(names) if names else self.written()
        for path in targets:
            shutil.rmtree(path)
        return [p.name for p in targets]


def _fit_now(fit: Callable[[], Applied]) -> tuple[Applied, float]:
    start = time.perf_counter()
    applied = fit()
    return applied, time.perf_counter() - start


def fitted(k: dict[str, Any], fit: Callable[[], Applied], cacheable: bool = True) -> tuple[Applied, FitInfo]:
    """``fit()``'s result, taken from the cache when an intact entry of ``k`` exists, else fitted
    now and saved there. Fitted every time, with a note saying why, when the cache is off, when the
    adapter declares ``cacheable = False``, or when its fitted model cannot be saved (a plugin whose
    modules :mod:`harness.rebuild` cannot describe): a fit that cannot be cached never fails a run."""
    folder = root()
    if folder is None or not cacheable:
        applied, seconds = _fit_now(fit)
        why = "the fit cache is off (HARNESS_FIT_CACHE=off)" if folder is None else f"adapter '{k['adapter']}' declares cacheable = False"
        return applied, FitInfo(False, seconds, note=why)
    cache = FitCache(folder)
    start = time.perf_counter()
    hit = cache.get(k)
    if hit is not None:
        return hit[0], FitInfo(True, hit[1], time.perf_counter() - start, digest(k))
    applied, seconds = _fit_now(fit)
    try:
        cache.put(k, applied, seconds)
    except ConfigError as err:  # the fitted model cannot be saved
        warnings.warn(f"adapter '{k['adapter']}': fit not cached: {err}", stacklevel=2)
        return applied, FitInfo(False, seconds, note=f"not cached: {err}")
    return applied, FitInfo(False, seconds, 0.0, digest(k))
