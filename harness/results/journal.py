"""The run journal: one JSON record per run beside the database (``<db stem>.records/<run_id>.json``).

Every state of a run (running, finished, failed) is written here first, atomically (temporary file,
then rename), by whichever process executes the run; only a writer of the database ingests it. So
a sweep's workers, on this machine or on a Ray node, never open the database, and a record the
database could not take (busy, or the process died) waits here for the next writer.

A record counts as ingested when its ``.ingested`` marker names the exact file that was read (inode,
size and mtime): a record rewritten after it was read (running, then finished) is pending again.
A run made from a tree with uncommitted changes keeps their patch beside its record
(``<run_id>.patch``, :meth:`Journal.patch_path`), which recovers its code on a checkout of its commit.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from harness.errors import StoreError
from harness.results.records import RunRecord


@dataclass(frozen=True)
class Entry:
    """A pending record as read, with the stamp of the file it was read from."""

    record: RunRecord
    path: Path
    stamp: str


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _write_error(path: Path, err: OSError) -> StoreError:
    if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        why = "the disk is full; free space or pass --db to another disk"
    elif err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        why = f"{path.parent} is not writable; pass --db to a writable folder"
    else:
        why = "pass --db to a writable folder"
    return StoreError(f"cannot write the run record {path}: {err.strerror or err}; {why}")


class Journal:
    """The records folder of one results database."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def path(self, run_id: str) -> Path:
        return self.folder / f"{run_id}.json"

    def patch_path(self, run_id: str) -> Path:
        """The patch of the uncommitted changes a run was made from, beside its record."""
        return self.folder / f"{run_id}.patch"

    def write(self, rec: RunRecord) -> Path:
        """Write ``rec`` atomically; an unwritable folder or a full disk is a StoreError naming the file."""
        return self._write(self.path(rec.run_id), rec.to_json().encode())

    def write_patch(self, run_id: str, patch: bytes) -> Path:
        """Write the patch of a run made from a tree with uncommitted changes (:meth:`patch_path`)."""
        return self._write(self.patch_path(run_id), patch)

    def _write(self, path: Path, data: bytes) -> Path:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            raise _write_error(path, err) from None
        return path

    def pending(self) -> list[Entry]:
        """Records not ingested in their current version; unreadable ones are set aside as ``.corrupt``."""
        if not self.folder.is_dir():
            return []
        out = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                stamp = _stamp(path)  # before reading: a rewrite after this point is seen as pending again
                if self._ingested(path) == stamp:
                    continue
                raw = path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                out.append(Entry(RunRecord.from_json(raw.decode()), path, stamp))
            except (ValueError, TypeError, KeyError):
                path.rename(path.with_suffix(".corrupt"))  # e.g. hand-edited; kept for inspection, never re-read
        return out

    def mark_ingested(self, entries: list[Entry]) -> None:
        for e in entries:
            try:
                self._marker(e.path).write_text(e.stamp)
            except OSError:
                pass  # without a marker the record is only ingested again (the same rows)

    @staticmethod
    def _marker(path: Path) -> Path:
        return path.with_suffix(".ingested")

    def _ingested(self, path: Path) -> str:
        try:
            return self._marker(path).read_text()
        except OSError:
            return ""

    def read(self, run_id: str) -> RunRecord | None:
        try:
            return RunRecord.from_json(self.path(run_id).read_text())
        except (OSError, ValueError, TypeError, KeyError):
            return None
