"""JSON files under ``$HARNESS_CACHE_DIR`` that save work (the registry's settings, the fingerprint's
module parses): read as absent when missing or unreadable, written atomically and best-effort, so a
read-only or full disk only costs recomputing them."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def read(path: Path) -> Any | None:
    """The file's JSON value, or None when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write(path: Path, value: Any) -> None:
    """Replace the file with ``value`` as JSON in one step (a reader never sees half a file); an OSError is dropped."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
