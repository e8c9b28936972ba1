"""Is the process executing a "running" run still alive? Leases beside the run's journal record, and
the lock that makes a run needed by concurrent processes once (:class:`RunLock`).

The process executing a run holds a lease, ``<records>/<run_id>.lease``: its host, the kernel's boot
id, its pid and the pid's start time (``/proc/<pid>/stat`` field 22), and it touches the file every
``HEARTBEAT_S`` seconds from a daemon thread. A writer of the database judges a running run:

- same host and boot: alive iff the pid exists and started at the recorded time (a pid reused by
  another process after a crash is not taken for alive);
- same host, another boot: dead (the machine restarted);
- another host (a Ray node writing to a shared folder): alive while the heartbeat is fresher than
  ``STALE_S``;
- no lease (the process finished or never got one): the host-local pid check.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Callable

HEARTBEAT_S = 20.0
STALE_S = 120.0


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def start_time(pid: int) -> str:
    """The pid's start time in clock ticks since boot ("" where /proc is not available)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the command name in (...) may hold spaces


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Lease:
    """Held while this process executes ``run_id``: written on enter, touched by a heartbeat, removed on exit."""

    def __init__(self, folder: Path, run_id: str):
        self.path = Path(folder) / f"{run_id}.lease"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"lease-{run_id}")

    def __enter__(self) -> Lease:
        pid = os.getpid()
        body = {"host": socket.gethostname(), "boot_id": boot_id(), "pid": pid, "start": start_time(pid)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(body))
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:
                return

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.path.unlink(missing_ok=True)


def alive(folder: Path, run_id: str, host: str | None, pid: int | None) -> bool | None:
    """True / False where it can be told (see the module docstring), None for another host without a lease."""
    lease = Path(folder) / f"{run_id}.lease"
    try:
        body = json.loads(lease.read_text())
        age = time.time() - lease.stat().st_mtime
    except (OSError, ValueError):
        body = None
    here = socket.gethostname()
    if body is None:
        if host != here:
            return None
        return pid is not None and pid_alive(pid)
    if body.get("host") != here:
        return age < STALE_S
    if body.get("boot_id") != boot_id():
        return False
    return pid_alive(body["pid"]) and start_time(body["pid"]) == body.get("start")


class RunLock:
    """Held while this process makes (or reuses) the run of one configuration, so that concurrent runs
    that need it (two methods sharing a new baseline) make it once.

    An exclusive ``fcntl`` lock on ``<records>/<config_hash>.lock`` (one machine, as the DuckDB file's own
    lock). A process that finds the lock taken waits, reporting the holder written in the file, then
    takes it and reuses the run the holder finished; when the holder dies (SIGKILL included) the
    kernel drops its lock and a waiter takes over. The holder removes the file on release; a waiter
    that locked a removed file tries again. Where the folder cannot take the file (read-only, full
    disk) the run goes on unlocked, and the journal's own write then names the problem.
    """

    def __init__(self, folder: Path, config_hash: str, poll_s: float = 0.5):
        self.path = Path(folder) / f"{config_hash}.lock"
        self.poll_s = poll_s
        self._fd: int | None = None

    def acquire(self, holder: dict, waiting: Callable[[dict], None]) -> RunLock:
        """Take the lock, writing ``holder`` (who holds it, for waiters' messages) into the file; while
        another process holds it, call ``waiting`` with what that process wrote, every ``poll_s``."""
        while True:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                return self  # nothing to lock with: unlocked, as before locks existed
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                waiting(self._holder())
                time.sleep(self.poll_s)
                continue
            if self._same_file(fd):
                self._fd = fd
                try:  # who holds it, for the waiters' message; a full disk only leaves it unsaid
                    os.ftruncate(fd, 0)
                    os.write(fd, json.dumps({**holder, "pid": os.getpid(), "host": socket.gethostname()}).encode())
                except OSError:
                    pass
                return self
            os.close(fd)  # the previous holder removed the file we locked: lock the current one

    def _same_file(self, fd: int) -> bool:
        try:
            return os.fstat(fd).st_ino == self.path.stat().st_ino
        except OSError:
            return False

    def _holder(self) -> dict:
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
