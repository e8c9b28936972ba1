"""Plan-time content checks of release files: a file that parses but lacks part of its release.

:func:`harness.sources.data.revisions` checks that each declared file is there, and a suite's reader
checks each row; neither sees a file cut to the whole rows of some languages. XNLI's test TSV with 4
of its 15 languages reads without an error and then scores nothing in the other 11 (an ``IndexError``
after fine-tuning). A :class:`~harness.sources.data.DataSource` that can be cut so declares its
:class:`~harness.sources.data.Coverage` (the column and the values every local file holds: XNLI's
``language`` and its 15 languages); the plan checks every local file the run will read against it,
before any model loads.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Iterable

from harness.errors import DataError
from harness.sources.data import Coverage, DataSource


def check(root: Path | None, sources: Iterable[DataSource]) -> None:
    """Raise DataError naming the file, the values found and those expected when a local file the run
    reads lacks some; files read from the hub, or missing (``revisions`` reports those), pass."""
    if root is None:
        return
    for source in sources:
        paths = [root / name for name in source.files] if source.covers is not None else []
        for path in paths:
            if path.is_file():
                _check(path, source.covers)


def _check(path: Path, cover: Coverage) -> None:
    stat = path.stat()
    found = _values(path, cover.column, stat.st_size, stat.st_mtime_ns)
    missing = [v for v in cover.expected if v not in found] if found is not None else []
    # a file with other values, or malformed, gets the suite reader's message, which names the line
    if missing and found <= set(cover.expected) and _well_formed(path):
        raise DataError(
            f"{path} holds {len(cover.expected) - len(missing)} of the {len(cover.expected)} {cover.what} "
            f"(found {', '.join(sorted(found)) or 'none'}; expected {', '.join(cover.expected)}; missing "
            f"{', '.join(missing)}); restore the whole release file"
        )


@lru_cache(maxsize=16)
def _values(path: Path, column: str, size: int, mtime_ns: int) -> frozenset[str] | None:
    """The distinct values of ``column`` (cached per file version; 0.08 s for XNLI test's 75,000 rows),
    or None when the file has no such header or the values are not UTF-8 text."""
    with path.open("rb") as f:
        header = next(f, b"").rstrip(b"\r\n").split(b"\t")
        if column.encode() not in header:
            return None
        index = header.index(column.encode())
        found = {fields[index] for fields in (line.split(b"\t", index + 1) for line in f) if len(fields) > index}
    try:
        return frozenset(value.decode("utf-8") for value in found)
    except UnicodeDecodeError:
        return None


def _well_formed(path: Path) -> bool:
    """UTF-8 text whose every non-blank row has the header's number of tab-separated fields."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    header, *rows = data.split(b"\n")
    tabs = header.count(b"\t")
    return all(row.count(b"\t") == tabs for row in rows if row.strip())
