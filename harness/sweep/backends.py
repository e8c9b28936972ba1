"""Where a sweep's points execute: in this process, in N local processes, or as Ray tasks.

Each backend takes a point (with its baseline's record) and later reports its final record or its
error. Workers in other processes write their records to the journal only; the sweep's driver is
the single writer of the database.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.errors import ConfigError
from harness.results.records import RunRecord
from harness.results.store import Store
from harness.sweep.points import Point, execute_point

if TYPE_CHECKING:
    from harness.adapter import ProgressFn

Outcome = RunRecord | BaseException

# Passed to Ray workers, which may run on machines without the driver's environment.
FORWARDED_ENV = ("HARNESS_DATA_DIR", "HARNESS_CACHE_DIR", "HARNESS_FIT_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HOME", "TOKENIZERS_PARALLELISM")


class Backend(Protocol):
    slots: int   # points that may execute at once
    name: str

    def submit(self, point: Point, baseline: RunRecord | None) -> Any: ...

    def wait(self, handles: list, timeout: float) -> list[tuple[Any, Outcome]]: ...

    def close(self) -> None: ...


class Sequential:
    """One point at a time in this process; records go through the store (journal, then the database),
    and each point's stages report to ``progress`` (fits, recovery training, scoring)."""

    slots, name = 1, "local"

    def __init__(self, store: Store, progress: ProgressFn | None = None):
        self.store, self.progress = store, progress
        self.queue: dict[int, tuple[Point, RunRecord | None]] = {}
        self.ids = itertools.count()

    def submit(self, point: Point, baseline: RunRecord | None) -> int:
        handle = next(self.ids)
        self.queue[handle] = (point, baseline)
        return handle

    def wait(self, handles: list, timeout: float) -> list[tuple[Any, Outcome]]:
        handle = handles[0]
        point, baseline = self.queue.pop(handle)
        try:
            return [(handle, execute_point(point, baseline, self.store.records_dir, sink=self.store, progress=self.progress))]
        except Exception as err:  # the run is recorded as failed; the sweep goes on with the other points
            return [(handle, err)]

    def close(self) -> None:
        pass


class WorkerDied(RuntimeError):
    """A local worker process ended without an answer for its point (killed, or crashed in C code)."""


def _serve(conn: Connection) -> None:
    """A worker process: run the points sent on ``conn`` one at a time, answering each with its record or error."""
    while True:
        try:
            job = conn.recv()
        except EOFError:  # the driver closed its end: the sweep is over
            return
        try:
            outcome: Outcome = execute_point(*job)
        except Exception as err:
            outcome = err
        try:
            conn.send(outcome)
        except Exception:  # an error that does not pickle goes back as its text
            conn.send(RuntimeError(f"{outcome.__class__.__name__}: {outcome}"))


@dataclass(eq=False)
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection


def _ended(process: multiprocessing.process.BaseProcess) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
        return how + (" (the kernel's out-of-memory killer sends it, as does kill -9)" if code == -signal.SIGKILL else "")
    return f"exited with status {code}"


class LocalProcesses:
    """``jobs`` worker processes (spawned), each with cores / jobs torch threads and one point at a time.

    Each worker has its own pipe: a worker that dies fails its own point only, with how it ended
    (a signal, an exit status); its slot gets a fresh worker for the next point. Workers serve
    points one after another, so a sweep's imports happen once per worker.
    """

    name = "local"

    def __init__(self, jobs: int, records_dir: Path):
        self.slots, self.records_dir = jobs, str(records_dir)
        self.threads = max(1, (os.cpu_count() or 1) // jobs)
        self.context = multiprocessing.get_context("spawn")
        self.workers: list[_Worker] = []
        self.idle: list[_Worker] = []

    def _start(self) -> _Worker:
        ours, theirs = self.context.Pipe()
        process = self.context.Process(target=_serve, args=(theirs,), daemon=True)
        process.start()
        theirs.close()
        worker = _Worker(process, ours)
        self.workers.append(worker)
        return worker

    def submit(self, point: Point, baseline: RunRecord | None) -> _Worker:
        worker = self.idle.pop() if self.idle else self._start()
        worker.conn.send((point, baseline, self.records_dir, self.threads))
        return worker

    def wait(self, handles: list, timeout: float) -> list[tuple[Any, Outcome]]:
        ready = set(wait([x for w in handles for x in (w.conn, w.process.sentinel)], timeout))
        return [(w, self._outcome(w)) for w in handles if w.conn in ready or w.process.sentinel in ready]

    def _outcome(self, worker: _Worker) -> Outcome:
        try:
            if worker.conn.poll():
                outcome = worker.conn.recv()
                self.idle.append(worker)
                return outcome
        except (EOFError, ConnectionError):  # the worker's end closed before a whole answer (reset: a job left unread)
            pass
        worker.process.join()
        worker.conn.close()
        self.workers.remove(worker)
        return WorkerDied(f"its worker process (pid {worker.process.pid}) {_ended(worker.process)} before the point ended")

    def close(self) -> None:
        for worker in self.workers:
            worker.conn.close()  # an idle worker reads the end of its pipe and returns
            if worker not in self.idle:
                worker.process.kill()
        for worker in self.workers:
            worker.process.join(timeout=30)
            if worker.process.exitcode is None:
                worker.process.kill()


class RayTasks:
    """One Ray task per point with its resources: ``cpus``, and one GPU per point when the points run
    on CUDA (``--device cuda``, or ``auto`` on a cluster with GPUs)."""

    name = "ray"

    def __init__(self, address: str | None, cpus: int, device: str, records_dir: Path):
        try:
            import ray
        except ImportError:
            raise ConfigError("--backend ray needs Ray; install it with: pip install 'embedding-harness[ray]'") from None
        self.ray, self.records_dir, self.cpus = ray, records_dir, cpus
        env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        try:
            ray.init(
                address=address, num_cpus=None if address else os.cpu_count(), include_dashboard=False,
                log_to_driver=False, runtime_env={"env_vars": env}, configure_logging=False,
            )
        except ConnectionError as err:
            raise ConfigError(f"cannot connect to a Ray cluster at '{address}' ({str(err).splitlines()[0]}); start one with `ray start --head` or drop --address") from None
        total = ray.cluster_resources()
        gpus = 1.0 if device.startswith("cuda") or (device == "auto" and total.get("GPU", 0) > 0) else 0.0
        by_cpu = int(total.get("CPU", 1) // max(cpus, 1))
        self.slots = max(1, min(by_cpu, int(total.get("GPU", 0) // gpus)) if gpus else by_cpu)
        self.task = ray.remote(execute_point).options(num_cpus=cpus, num_gpus=gpus, max_retries=0)

    def submit(self, point: Point, baseline: RunRecord | None) -> Any:
        return self.task.remote(point, baseline, str(self.records_dir), self.cpus)

    def wait(self, handles: list, timeout: float) -> list[tuple[Any, Outcome]]:
        ready, _ = self.ray.wait(handles, num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            try:
                out.append((ref, self.ray.get(ref)))
            except self.ray.exceptions.RayTaskError as err:
                out.append((ref, err.cause if isinstance(err.cause, BaseException) else err))
            except self.ray.exceptions.RayError as err:  # the worker died (killed, out of memory)
                out.append((ref, err))
        return out

    def close(self) -> None:
        self.ray.shutdown()
