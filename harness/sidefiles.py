"""Side files: the small text files a user hands a command (a reference matrix, a paper-results CSV,
a sweep YAML), read in one declared encoding, UTF-8; and the paths a command writes its output to
(``export --out``, ``bench --json``), checked before the work.

Every way such a file can fail to read is one :class:`~harness.errors.HarnessError` naming the file,
and the line where the text is at fault: missing, a folder, unreadable, bytes that are not UTF-8
(a Latin-1 or UTF-16 file, a binary one), a NUL byte, and for a CSV a row with more or fewer fields
than its header. The caller's parser then sees text and rows only.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from harness.errors import ConfigError, DataError, HarnessError


def read_text(path: str | Path, what: str, error: type[HarnessError] = DataError) -> str:
    """The text of ``path``, a ``what`` ("matrix file", "sweep file"); every failure is ``error``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise error(f"cannot read {what} {path}: {err.strerror or err}; check the path and its permissions") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{path} is not UTF-8 text (line {_line_at(data, err.start)}, byte {err.start}); save the {what} as UTF-8") from None
    if "\0" in text:
        raise error(f"{path} is not a text file (a NUL byte on line {_line_at(data, data.index(0))}); save the {what} as UTF-8 text")
    return text


def _line_at(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def read_csv(path: str | Path, what: str, columns: tuple[str, ...], error: type[HarnessError] = DataError) -> list[tuple[int, dict[str, str]]]:
    """``(line, row)`` for each row of a CSV whose header names at least ``columns`` (blank lines
    skipped); a row with more or fewer fields than the header, or one the csv module cannot read, is
    ``error`` naming its line."""
    text = read_text(path, what, error)
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = []
    try:
        header = next(reader, [])
        missing = [c for c in columns if c not in header]
        if missing:
            raise error(f"{path}:1: the header lacks column(s) {', '.join(missing)}; expected {', '.join(columns)}")
        for fields in reader:
            if not fields:
                continue
            if len(fields) != len(header):
                raise error(f"{path}:{reader.line_num}: {len(fields)} fields where the header has {len(header)}; restore the row")
            rows.append((reader.line_num, dict(zip(header, fields))))
    except csv.Error as err:
        raise error(f"{path}:{reader.line_num}: not a readable CSV row ({err}); restore the file") from None
    return rows


def check_output(path: str | Path, option: str, folder: bool) -> None:
    """Refuse, before any work, an output path the command could not write at the end: a name the
    file system refuses (too long), a path under a file, a folder where a file goes or the reverse,
    or a place that is not writable. ``folder``: the command makes a folder there, else a file."""
    path = Path(path)
    for at in (path, *path.parents):
        try:
            at.stat()
        except (FileNotFoundError, NotADirectoryError):  # made by the command; under a file: refused below
            continue
        except OSError as err:
            raise ConfigError(f"{option} {path}: {err.strerror}; pass a shorter or another path") from None
        if at == path and at.is_dir() != folder:
            want = "a folder to write into (made if missing)" if folder else "a file name to write"
            raise ConfigError(f"{option} {path} is an existing {'file' if folder else 'folder'}; pass {want}, e.g. {option} {_example(path, folder)}")
        if at != path and not at.is_dir():
            raise ConfigError(f"{option} {path} lies under {at}, which is a file; pass a path in a folder, e.g. {option} {_example(at, folder)}")
        if not os.access(at, os.W_OK):
            raise ConfigError(f"{option} {path}: {at} is not writable; pass a path in a folder you can write")
        return


def _example(path: Path, folder: bool) -> Path:
    return path.parent / (path.stem + ("-model" if folder else "-out.json"))
