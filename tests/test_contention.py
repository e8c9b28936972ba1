"""The contention case of the head benchmark: a real busy child switched on and
off, and rows that give each head's kept share of its quiet speed-up. No timing assertions."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from harness.benchmarks.contention import KEPT_TARGET, BusyProcess, contention_rows
from harness.benchmarks.heads import Shape, compressed_heads, random_concepts
from harness.benchmarks.timing import from_samples

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/stat")


def _state(pid: int) -> str:
    """The scheduler state letter of a process: R running, S sleeping, T stopped, Z zombie."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_busy_child_spins_only_while_switched_on():
    with BusyProcess() as busy:
        pid = busy.child.pid
        assert _state(pid) == "T"
        busy.switch(True)
        before, deadline = _cpu_ticks(pid), time.monotonic() + 5
        while _cpu_ticks(pid) == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _cpu_ticks(pid) > before  # it burns CPU time
        busy.switch(False)
        stopped = _cpu_ticks(pid)
        time.sleep(0.05)
        assert _state(pid) == "T" and _cpu_ticks(pid) == stopped
    assert busy.child.returncode is not None  # killed and reaped on exit


def test_busy_child_dies_with_a_killed_benchmark():
    """SIGKILL skips every exit handler: the child must still not outlive its parent."""
    script = "from harness.benchmarks.contention import BusyProcess\nimport time\n" \
             "with BusyProcess() as busy:\n    busy.switch(True)\n    print(busy.child.pid, flush=True)\n    time.sleep(60)\n"
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert _state(child) in "RS"
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and _state(child) != "Z" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not Path(f"/proc/{child}").exists() or _state(child) == "Z"


def test_kept_share_is_contended_over_quiet_speedup_per_round():
    kept = from_samples([10.0, 8.0, 12.0], [7.0, 8.0, 6.0], higher_is_better=True)
    assert (kept.base, kept.method) == (10.0, 7.0)
    assert kept.speedup == pytest.approx(statistics.median([0.7, 1.0, 0.5])) and (kept.low, kept.high) == (0.5, 1.0)
    assert from_samples([2.0], [4.0]).speedup == 0.5  # times: base / method


def test_contention_rows_cover_every_fast_head_and_batch():
    shape = Shape("tiny", 512, 64, k=16, m=8, K=2, r=8)
    table = torch.randn(shape.vocab, shape.dim)
    heads = compressed_heads(shape, table, random_concepts(shape.vocab, shape.dim, shape.k, shape.m))
    rows = contention_rows(shape, table, heads, rounds=2, batches=(1, 3))
    assert [r.case for r in rows] == [f"{name} @ tiny (V=512, D=64), batch {n}: quiet vs one busy process"
                                      for n in (1, 3) for name in heads]
    for r in rows:
        assert r.section == "contention" and r.unit == "x" and r.target == KEPT_TARGET and r.rounds == 2
        assert r.base > 0 and r.method > 0 and r.low <= r.ratio <= r.high
        assert r.met == (r.ratio >= KEPT_TARGET)
        assert "ms quiet -> busy: dense" in r.note
        assert math.isfinite(r.load)  # the load average it was measured at
