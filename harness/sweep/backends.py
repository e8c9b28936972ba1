"""Where a sweep's points execute: in this process, in N local processes, or as Ray tasks.

Each backend takes a point (with its baseline's record) and later reports its final record or its
error. Workers in other processes write their records to the journal only; the sweep's driver is
the single writer of the database.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import multiprocessing
import os
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


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


class LocalProcesses:
    """``jobs`` worker processes (spawned), each with cores / jobs torch threads."""

    name = "local"

    def __init__(self, jobs: int, records_dir: Path):
        self.slots, self.records_dir = jobs, records_dir
        threads = max(1, (os.cpu_count() or 1) // jobs)
        self.pool = concurrent.futures.ProcessPoolExecutor(
            jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker, initargs=(threads,),
        )

    def submit(self, point: Point, baseline: RunRecord | None) -> concurrent.futures.Future:
        return self.pool.submit(execute_point, point, baseline, self.records_dir)

    def wait(self, handles: list, timeout: float) -> list[tuple[Any, Outcome]]:
        done, _ = concurrent.futures.wait(handles, timeout, return_when=concurrent.futures.FIRST_COMPLETED)
        return [(f, f.exception() or f.result()) for f in done]

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


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
