"""Provenance recorded with every run: hardware, device, library versions, the lock they were
installed under, git sha."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import hashlib
import subprocess
from pathlib import Path
from typing import Any

import torch

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


def git_sha() -> str:
    """HEAD, with "+dirty" when tracked source differs from it; the store's own files
    (results.duckdb, results.records) do not count, or every checkout that ran something is dirty."""
    root = ROOT
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!results.duckdb", ":!results.records"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
