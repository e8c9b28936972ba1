"""Provenance recorded with every run: hardware, device, library versions, the lock they were
installed under, and the code it was made from (:func:`source`: the commit, and for a tree with
uncommitted changes the patch that recovers it)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.results.journal import Journal
from harness.results.records import DIRTY

ROOT = Path(__file__).resolve().parents[2]  # the checkout, for an editable install
LOCK = ROOT / "requirements.lock"
LIBRARIES = ("torch", "transformers", "accelerate", "datasets", "faiss-cpu", "numpy", "duckdb", "lm_eval", "mteb", "embedding-harness")


def hardware(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    try:
        info["memory_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name()
    return info


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            out[lib] = importlib.metadata.version(lib)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out | lock()


def lock() -> dict[str, str]:
    """Which lock the environment was installed under: the lock file's sha256 (first 12 digits) and
    whether every package it pins is installed at its pinned version ("exact"), or "drift: N" when N
    differ; "none" outside a checkout that has the lock."""
    if not LOCK.is_file():
        return {"lock": "none"}
    text = LOCK.read_text(encoding="utf-8")
    pins = dict(line.split("==", 1) for line in text.splitlines() if "==" in line and not line.startswith("#"))
    drift = 0
    for name, pinned in pins.items():
        try:
            drift += importlib.metadata.version(name) != pinned.strip()
        except importlib.metadata.PackageNotFoundError:
            drift += 1
    return {"lock": hashlib.sha256(text.encode()).hexdigest()[:12], "lock_match": "exact" if not drift else f"drift: {drift}"}


STORE_FILES = (":!results.duckdb", ":!results.records")
"""Pathspecs of the store's own files: running something writes them, so they never make a tree dirty."""


@dataclass(frozen=True)
class Source:
    """The code a run is made from: the commit checked out, and the changes on top of it."""

    commit: str         # HEAD's sha; "unknown" outside a git checkout (an installed package)
    patch: bytes = b""  # `git diff --binary HEAD` plus every untracked, not ignored file as added; empty when clean

    @property
    def git_sha(self) -> str:
        """As a run records it: the commit, with ``+dirty:<sha256 of the patch>`` when the tree has changes."""
        return self.commit + (f"{DIRTY}:{hashlib.sha256(self.patch).hexdigest()[:16]}" if self.patch else "")

    def save_patch(self, journal: Journal, run_id: str) -> Path | None:
        """Write the patch beside the run's JSON record (``<run_id>.patch``): ``git apply`` on a checkout
        of the commit recovers the tree the run was made from. None when the tree was clean."""
        return journal.write_patch(run_id, self.patch) if self.patch else None


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, timeout=60)


def source() -> Source:
    """The commit of the checkout the harness runs from and its uncommitted changes as one patch:
    tracked files as ``git diff --binary HEAD`` shows them, then each untracked file that is not
    ignored as a new file; the store's own files (:data:`STORE_FILES`) do not count, or every
    checkout that ran something would be dirty."""
    try:
        head = _git("rev-parse", "HEAD")
        if head.returncode != 0:
            return Source("unknown")
        patch = [_git("diff", "--binary", "HEAD", "--", ".", *STORE_FILES).stdout]
        untracked = _git("ls-files", "-z", "--others", "--exclude-standard", "--", ".", *STORE_FILES).stdout.split(b"\0")
        patch += [_git("diff", "--no-index", "--binary", "--", "/dev/null", name.decode()).stdout for name in untracked if name]
    except (OSError, subprocess.TimeoutExpired):
        return Source("unknown")
    return Source(head.stdout.decode().strip(), b"".join(patch))
