"""Output heads on a shared machine: each compressed head's speed-up over the
dense head with the machine to itself and with one busy process beside it.

The busy process is one spinning Python interpreter (a stand-in for a sweep's second job or a
browser), started once and switched on and off with SIGCONT / SIGSTOP, so that every round times
all heads quiet and then contended within a second and both halves share whatever else the machine
runs. A row's ratio is the share of its quiet speed-up a head keeps, the median over rounds of
(contended speed-up / quiet speed-up); the goal is at least 0.7. Linux only (job-control signals, prctl).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from contextlib import AbstractContextManager

import torch
from torch import nn

from harness.benchmarks.heads import Shape, dense_head, head_calls, inner_calls
from harness.benchmarks.report import Row
from harness.benchmarks.timing import from_samples, load_average, one_round

KEPT_TARGET = 0.7  # share of the quiet speed-up each head keeps with one busy process beside it


# A spinning interpreter that the kernel kills with its parent (prctl PR_SET_PDEATHSIG = 1), so that
# a benchmark killed outright leaves no process spinning, or stopped, on a shared machine; it says
# when that is armed (a parent gone before then is seen by getppid).
_SPIN = """import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, signal.SIGKILL)
if os.getppid() != int(sys.argv[1]):
    sys.exit()
print("armed", flush=True)
while True:
    pass
"""


class BusyProcess(AbstractContextManager):
    """One CPU-bound child process, stopped until :meth:`switch` turns it on; killed on exit or
    with its parent. Linux only."""

    SETTLE_S = 0.02  # the scheduler has placed (or parked) the child by then

    def __enter__(self) -> BusyProcess:
        self.child = subprocess.Popen([sys.executable, "-c", _SPIN, str(os.getpid())], stdout=subprocess.PIPE, text=True)
        self.child.stdout.readline()
        self.switch(False)
        return self

    def switch(self, busy: bool) -> None:
        os.kill(self.child.pid, signal.SIGCONT if busy else signal.SIGSTOP)
        time.sleep(self.SETTLE_S)

    def __exit__(self, *exc: object) -> None:
        self.child.kill()
        self.child.communicate()


def _speedups(times: list[dict[str, float]], name: str) -> list[float]:
    return [t["dense"] / t[name] for t in times]


def _row(label: str, name: str, quiet: list[dict[str, float]], busy: list[dict[str, float]], load: float) -> Row:
    kept = from_samples(_speedups(quiet, name), _speedups(busy, name), higher_is_better=True)
    ms = {side: (statistics.median(t["dense"] for t in times), statistics.median(t[name] for t in times))
          for side, times in (("quiet", quiet), ("busy", busy))}
    note = (f"speed-up {kept.base:.1f}x -> {kept.method:.1f}x; ms quiet -> busy: dense {ms['quiet'][0]:.3g} -> "
            f"{ms['busy'][0]:.3g}, head {ms['quiet'][1]:.3g} -> {ms['busy'][1]:.3g}")
    return Row.timed("contention", f"{name} @ {label}: quiet vs one busy process", "x", kept, target=KEPT_TARGET,
                     note=note, load=load)


def contention_rows(shape: Shape, table: torch.Tensor, heads: dict[str, nn.Module], rounds: int,
                    batches: tuple[int, ...] = (1, 32)) -> list[Row]:
    """For each head in ``heads`` and batch size, the share of its quiet speed-up over the dense head
    of ``table`` that it keeps with one busy process beside it; quiet and contended halves alternate
    within every round. CPU tensors and modules only."""
    dense = dense_head(table)
    rows = []
    with BusyProcess() as busy, torch.inference_mode():
        for n in batches:
            calls = head_calls(dense, heads, torch.randn(n, shape.dim))
            for call in calls.values():  # warm-up: kernel build and allocator stay out
                call()
            load, inner = load_average(), inner_calls(shape, n)
            times: dict[bool, list[dict[str, float]]] = {False: [], True: []}
            for _ in range(rounds):
                for contended in (False, True):
                    busy.switch(contended)
                    times[contended].append(one_round(calls, "cpu", inner))
            busy.switch(False)
            rows += [_row(f"{shape.label()}, batch {n}", name, times[False], times[True], load) for name in heads]
    return rows
