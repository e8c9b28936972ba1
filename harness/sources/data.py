"""Dataset sources: release files under the data directory, with the Hugging Face hub as fallback.

The data directory is ``--data-dir``, else ``HARNESS_DATA_DIR``. A suite names the files it expects
under ``<data dir>/<dataset>/``; when they are absent and the hub is reachable it loads the hub id
instead; when neither works the error names the expected files.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, TypeVar

from harness.errors import DataError

T = TypeVar("T")


def data_root(explicit: str | Path | None = None) -> Path | None:
    value = explicit or os.environ.get("HARNESS_DATA_DIR")
    return Path(value).expanduser().resolve() if value else None


def file_digest(path: Path) -> str:
    """sha256 prefix of a data file, recorded as the dataset revision."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def _hub_offline() -> bool:
    return any(os.environ.get(v, "0").lower() in {"1", "true", "yes"} for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def local_or_hub(
    root: Path | None,
    files: list[str],
    read_local: Callable[[list[Path]], T],
    hub_id: str,
    read_hub: Callable[[], T],
) -> tuple[T, dict[str, str]]:
    """Read the local release files if all exist, else the hub dataset.

    Returns (data, provenance) where provenance maps each file (or the hub id) to its revision.
    """
    if root is not None:
        paths = [root / f for f in files]
        if all(p.is_file() for p in paths):
            return read_local(paths), {str(p): file_digest(p) for p in paths}
    expected = ", ".join(files)
    where = f"under {root}" if root else "(no data directory set)"
    fix = f"set HARNESS_DATA_DIR or --data-dir to a folder holding {expected}"
    if _hub_offline():
        raise DataError(f"dataset files missing {where}: expected {expected}; {fix}")
    try:
        return read_hub(), {hub_id: "hub"}
    except Exception as err:  # the hub path is a fallback: any failure there means "not available"
        raise DataError(f"dataset files missing {where} and hub {hub_id} failed ({err.__class__.__name__}); {fix}") from None
