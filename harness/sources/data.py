"""Dataset sources: release files under the data directory, with the Hugging Face hub as fallback.

The data directory is ``--data-dir``, else ``HARNESS_DATA_DIR``. A suite (or an adapter's fit corpus)
declares each dataset as a :class:`DataSource`: the files it expects under ``<data dir>/`` and the hub
id to load instead when they are absent and the hub is reachable. The same declaration serves two
steps: :func:`revisions` checks the files cheaply before anything runs (presence, size, sha256 cached
by size and mtime) and gives the data's identity for the run's config hash; :func:`local_or_hub`
reads them.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

from harness.errors import DataError

T = TypeVar("T")


@dataclass(frozen=True)
class Coverage:
    """A column of a tab-separated release file in which every expected value occurs: a file cut to
    the whole rows of some of them (XNLI's languages) parses, and only its coverage tells it apart."""

    column: str                 # the header of the column
    expected: tuple[str, ...]   # what the release holds, in its order
    what: str                   # what the values are, for the message ("XNLI languages")


@dataclass(frozen=True)
class DataSource:
    """A dataset as release files (relative to the data directory, or absolute) with a hub fallback."""

    files: tuple[str, ...]
    hub_id: str | None = None  # "owner/name" (":config" appended where the dataset needs one); None = local only
    where_from: str = ""       # where to get the files, named in the error when they are missing
    covers: Coverage | None = None  # what each local file must cover, checked when a run is planned (harness.runner.datacheck)


def data_root(explicit: str | Path | None = None) -> Path | None:
    value = explicit or os.environ.get("HARNESS_DATA_DIR")
    return Path(value).expanduser().resolve() if value else None


def _digest_cache() -> Path:
    from harness.sources.models import cache_dir

    return cache_dir() / "digests.json"


def file_digest(path: Path) -> str:
    """sha256 prefix of a data file, recorded as the dataset revision.

    Cached by (path, size, mtime) in ``$HARNESS_CACHE_DIR/digests.json``, so checking a data directory
    before every run costs a ``stat`` per file; a file changed in place gets a new size or mtime.
    """
    path = path.resolve()
    st = path.stat()
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    cache = _digest_cache()
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    known[key] = h.hexdigest()[:16]
    try:  # atomic replace; a lost race only costs a re-hash later
        cache.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=cache.parent, delete=False, suffix=".tmp") as tmp:
            json.dump(known, tmp)
        os.replace(tmp.name, cache)
    except OSError:
        pass
    return known[key]


def hub_offline() -> bool:
    return any(os.environ.get(v, "0").lower() in {"1", "true", "yes"} for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _local_paths(root: Path | None, source: DataSource) -> list[Path] | None:
    """The source's files when all exist (absolute names need no data directory), else None."""
    if root is None and not all(Path(f).is_absolute() for f in source.files):
        return None
    paths = [(root / f) if root is not None else Path(f) for f in source.files]
    return paths if all(p.is_file() for p in paths) else None


def _missing(root: Path | None, source: DataSource, cause: str = "") -> DataError:
    expected = ", ".join(source.files)
    where = f"under {root}" if root else "(no data directory set)"
    origin = f" ({source.where_from})" if source.where_from else ""
    hub = f", or go online for the hub's {source.hub_id}" if source.hub_id and hub_offline() else ""
    return DataError(
        f"dataset files missing {where}: expected {expected}{origin}{cause}; set HARNESS_DATA_DIR or --data-dir to a folder holding them{hub}"
    )


def revisions(root: Path | None, sources: Iterable[DataSource]) -> dict[str, str]:
    """Identity of the data a run will read: file (as declared) -> sha256 prefix, or hub id -> "hub".

    Raises DataError when files are missing and the hub is offline (or no hub id is known), before
    any model is loaded and before a finished run is reused.
    """
    out: dict[str, str] = {}
    for source in sources:
        if not source.files and source.hub_id is None:  # nothing to read (a suite's own training texts)
            continue
        paths = _local_paths(root, source)
        if paths is not None:
            out.update({f: file_digest(p) for f, p in zip(source.files, paths)})
        elif source.hub_id is None or hub_offline():
            raise _missing(root, source)
        else:
            out[source.hub_id] = "hub"
    return out


def local_or_hub(
    root: Path | None, source: DataSource, read_local: Callable[[list[Path]], T], read_hub: Callable[[], T] | None = None,
) -> tuple[T, dict[str, str]]:
    """Read the local release files if all exist, else the hub dataset (sources without ``hub_id``
    need no ``read_hub``).

    Returns (data, provenance) where provenance maps each file (or the hub id) to its revision.
    """
    paths = _local_paths(root, source)
    if paths is not None:
        return read_local(paths), {str(p): file_digest(p) for p in paths}
    if source.hub_id is None or read_hub is None or hub_offline():
        raise _missing(root, source)
    try:
        return read_hub(), {source.hub_id: "hub"}
    except Exception as err:  # the hub path is a fallback: any failure there means "not available"
        raise _missing(root, source, f" and hub {source.hub_id} failed ({err.__class__.__name__})") from None


def json_lines(path: Path, field: str | None = None, fix: str = "restore the original file") -> Iterator[Any]:
    """Each non-blank line of a JSON-lines file parsed (or its ``field`` only); a bad line is one
    DataError naming the file, the line and ``fix``."""
    expected = f"a JSON object with a '{field}' field" if field else "a JSON object"
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                yield obj[field] if field else obj
            except (ValueError, KeyError, TypeError):
                raise DataError(f"{path}:{line_no}: not {expected}; {fix}") from None
