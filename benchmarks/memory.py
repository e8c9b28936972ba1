"""Resident memory of the unchanged vs the ASG-compressed encoder, each measured in a fresh process.

A child process loads the model, brings it to one of two states, runs ``gc.collect()`` and
``malloc_trim(0)`` and reports its VmRSS (and the split into anonymous and file-backed pages):

* ``base``: the unchanged model with its token table resident. transformers maps the safetensors
  file and a page becomes resident only when read, so the child reads the table once (as a copying
  loader, or a fit, would); otherwise the base would not hold the bytes whose removal is measured.
* ``asg``: the model after ``AsgAdapter.apply``, as the runner holds it: the fit read the whole
  table, and ``apply`` hands its clean file pages back (:mod:`harness.pages`).

Children alternate (base, asg, base, ...), so no side gains from the order. The tensor bytes
(parameters + buffers) fall by exactly the removed table minus what ASG adds.

    python -m harness.benchmarks.memory MODEL STATE NITER    # one child; prints one JSON line
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import statistics
import subprocess
import sys

from harness.benchmarks.report import Row
from harness.benchmarks.timing import load_average

ASG = {"k": 1024, "m": 48}
STATES = ("base", "asg")


def _status_mib() -> dict[str, float]:
    out = {}
    with open("/proc/self/status") as status:
        for line in status:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) / 1024
    return out


def child(model_name: str, state: str, niter: int) -> dict[str, float]:
    """Load ``model_name``, bring it to ``state``; resident MiB (after gc + malloc_trim) and tensor MiB."""
    from harness.adapters.asg import AsgAdapter, AsgConfig

    from harness.adapter import FitContext
    from harness.benchmarks.models import load_packaged
    from harness.measure.efficiency import model_bytes

    model = load_packaged(model_name, "base")
    table = model.get_input_embeddings().weight.detach()
    size = table.numel() * table.element_size()
    if state == "base":
        float(table.sum())  # every page of the table read once, so it is resident
    else:
        model = AsgAdapter(AsgConfig(**ASG, niter=niter)).apply(model, FitContext(seed=0)).model
    del table
    gc.collect()
    ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    return {**_status_mib(), "tensor_mib": model_bytes(model) / 2**20, "removed_mib": size / 2**20}


def _run_child(model_name: str, state: str, niter: int) -> dict[str, float]:
    cmd = [sys.executable, "-m", "harness.benchmarks.memory", model_name, state, str(niter)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row(case: str, base: list[float], method: list[float], removed: float, note: str) -> Row:
    falls = [(b - m) / removed for b, m in zip(base, method)]
    return Row(
        "memory", case, "MiB", statistics.median(base), statistics.median(method), statistics.median(falls),
        min(falls), max(falls), len(falls), target=0.9, note=note, load=load_average(),
    )


def memory_rows(model_name: str, rounds: int, niter: int) -> list[Row]:
    """Resident and tensor memory of base vs ASG, ``rounds`` alternating rounds of fresh children."""
    runs = [{state: _run_child(model_name, state, niter) for state in STATES} for _ in range(rounds)]
    removed = runs[0]["base"]["removed_mib"]
    label = f"{model_name} base vs ASG k={ASG['k']} m={ASG['m']}"
    ratio = f"ratio = fall / removed table ({removed:.0f} MiB)"

    def side(state: str, key: str) -> list[float]:
        return [run[state][key] for run in runs]

    def split(state: str) -> str:
        return f"{statistics.median(side(state, 'RssAnon')):.0f} anon + {statistics.median(side(state, 'RssFile')):.0f} file"

    return [
        _row(f"VmRSS, fresh process each: {label}", side("base", "VmRSS"), side("asg", "VmRSS"), removed,
             f"{ratio}; base {split('base')}, ASG {split('asg')} MiB"),
        _row(f"tensor bytes: {label}", side("base", "tensor_mib"), side("asg", "tensor_mib"), removed,
             f"{ratio}; exact: the table minus ASG's codebooks and ConceptID map"),
    ]


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
