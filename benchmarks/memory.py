"""Memory a user gets: the unchanged model and its ASG-compressed export, each loaded from
local files in a fresh process and run.

Setup, once per benchmark run, in a temporary folder on disk: the packaged model (fp32, with the head
:data:`MODELS` names) is written with ``save_pretrained`` (the unchanged model as a user keeps it), and
ASG (:data:`ASG`, the profile's k-means budget) is fitted by the real adapter and written with
:func:`harness.runner.saved.save`, as ``harness export`` writes it. Before each child the parent
flushes both folders' files and evicts them from the page cache (``fsync``, then
``posix_fadvise(POSIX_FADV_DONTNEED)``) and checks with ``mincore`` that none of their pages stayed,
so both sides read their files from disk. A child imports the same modules for either side, loads (the
transformers class its ``config.json`` names, ``from_pretrained``; or :func:`harness.load_compressed`)
and runs one of two workloads:

* ``batch``: one forward on a short batch (two sentences);
* ``vocabulary`` (models without an output head; a head reads every row each forward): the same
  forward, then the input embedding of every token id, as a service that has met its whole vocabulary.

It reports, in bytes: ``VmHWM`` (peak resident memory of the process); ``RssAnon`` / ``RssFile``
(anonymous and file-backed resident memory *after* the run: the kernel does not record the split at
the peak; VmHWM - VmRSS is what was resident only for a while); ``read_bytes`` of ``/proc/self/io``
from before the load to after the run (bytes read from disk); the part of its folder's files then in
the page cache (``mincore``: what it read of them); and its parameter and buffer bytes.

Children alternate (base, asg, base, ...), so no side gains from the order. The goal: the compressed
side reads, and holds at its peak, at least 0.9 x the base table's bytes less than the base side
(ratio = (base - asg) / table, target 0.9).

    python -m harness.benchmarks.memory SIDE FOLDER WORKLOAD    # one child; prints one JSON line
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import json
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.benchmarks.report import Row
from harness.benchmarks.timing import load_average

ASG = {"k": 1024, "m": 48}
MODELS = {"me5-small": "base", "smollm2": "causal_lm", "minilm": "base"}  # packaged model -> the head it runs with
SIDES = ("base", "asg")
TEXTS = ["The cat sat on the mat.", "Memory is measured in a fresh process, once per side."]
MIB = 2**20


def _status() -> dict[str, int]:
    """VmHWM, VmRSS, RssAnon and RssFile of this process, in bytes."""
    with open("/proc/self/status") as status:
        rows = (line.split() for line in status)
        return {row[0][:-1]: int(row[1]) * 1024 for row in rows if row[0][:-1] in ("VmHWM", "VmRSS", "RssAnon", "RssFile")}


def _read_bytes() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("read_bytes:"))


def _files(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.rglob("*")) if p.is_file()]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def cached_bytes(path: Path) -> int:
    """Bytes of ``path`` in the page cache now (``mincore`` over a mapping that is never read)."""
    size = path.stat().st_size
    if size == 0:
        return 0
    libc = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    finally:
        os.close(fd)
    if address in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
    try:
        vector = (ctypes.c_ubyte * -(-size // mmap.PAGESIZE))()
        if libc.mincore(address, size, vector) != 0:
            raise OSError(ctypes.get_errno(), f"mincore of {path} failed")
        return min(size, sum(b & 1 for b in vector) * mmap.PAGESIZE)
    finally:
        libc.munmap(address, size)


def evict(folders: list[Path]) -> int:
    """Flush every file under ``folders`` and drop it from the page cache; the bytes that stayed cached."""
    files = [p for folder in folders for p in _files(folder)]
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages are not dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return sum(cached_bytes(p) for p in files)


def child(side: str, folder: Path, workload: str) -> dict[str, int]:
    """Load the model saved in ``folder`` as a user does on ``side`` and run ``workload``; bytes of memory and reads."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    from harness import load_compressed
    from harness.measure.efficiency import model_bytes
    from harness.registry import ADAPTERS

    ADAPTERS.get("asg")  # either side has imported the same modules before the measurement starts
    start = _read_bytes()
    if side == "base":
        config = AutoConfig.from_pretrained(folder)
        model = getattr(transformers, config.architectures[0]).from_pretrained(folder).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
    else:
        model, tokenizer = load_compressed(folder)
    with torch.inference_mode():
        model(**tokenizer(TEXTS, padding=True, return_tensors="pt"))
        if workload == "vocabulary":
            embeddings = model.get_input_embeddings()
            for ids in torch.arange(model.config.vocab_size).split(1024):  # small steps: no large transient
                embeddings(ids)
    return {**_status(), "read_bytes": _read_bytes() - start, "folder_read": sum(cached_bytes(p) for p in _files(folder)),
            "embedding_resident": _embedding_resident(model), "tensor_bytes": model_bytes(model)}


def _embedding_resident(model) -> int:
    """Resident bytes of the input and output embeddings' tensors (the base table, or ASG's codebooks and maps)."""
    from harness import pages

    modules = [m for m in (model.get_input_embeddings(), model.get_output_embeddings()) if m is not None]
    tensors = {t.untyped_storage().data_ptr(): t for m in modules for t in [*m.parameters(), *m.buffers()]}
    return sum(pages.resident_bytes(t.data_ptr(), t.numel() * t.element_size()) for t in tensors.values())


def added_tensors(pair: Pair) -> dict[str, int]:
    """Bytes of each tensor in ASG's safetensors files whose name the base file lacks (read from the headers)."""
    def tensors(path: Path) -> dict[str, int]:
        with path.open("rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        return {k: v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items() if k != "__metadata__"}

    base = tensors(pair.base / "model.safetensors")
    return {k: b for path in sorted(pair.asg.glob("*.safetensors")) for k, b in tensors(path).items() if k not in base}


@dataclass(frozen=True)
class Pair:
    """The two saved folders of one model and the sizes the goal is stated in."""

    name: str
    base: Path
    asg: Path
    table_bytes: int            # the base's token table (tied to the head where the model ties it)
    has_head: bool              # an output head, which reads every row of its table each forward

    def folder_bytes(self, side: str) -> int:
        return sum(p.stat().st_size for p in _files(self.base if side == "base" else self.asg))

    def workloads(self) -> tuple[str, ...]:
        return ("batch",) if self.has_head else ("batch", "vocabulary")


def save_pair(name: str, out: Path, profile: str, niter: int) -> Pair:
    """Write ``name`` unchanged (``save_pretrained``) and ASG-compressed (``saved.save``) under ``out``."""
    import torch
    from harness.adapters.asg import BUDGETS, AsgAdapter, AsgConfig

    from harness.adapter import FitContext
    from harness.runner import saved
    from harness.sources import models
    from harness.sources.heads import Head

    model, tokenizer = models.load(models.resolve(name), Head(MODELS[name]))
    model = model.float().eval()
    table = model.get_input_embeddings().weight
    pair = Pair(name, out / f"{name}-base", out / f"{name}-asg", table.numel() * table.element_size(),
                model.get_output_embeddings() is not None)
    model.save_pretrained(pair.base)
    tokenizer.save_pretrained(pair.base)
    config = AsgConfig(**ASG, niter=niter)
    applied = AsgAdapter(config).apply(model, FitContext(profile=profile, budget=BUDGETS.select(profile), tokenizer=tokenizer))
    with torch.inference_mode():  # the compressed model runs (and the fused head's kernel is built) before any child
        applied.model(**tokenizer(TEXTS, padding=True, return_tensors="pt"))
    saved.save(pair.asg, applied.model, applied.tokenizer, "asg", dataclasses.asdict(config), dataclasses.asdict(applied.report))
    return pair


def _run_child(side: str, folder: Path, workload: str) -> dict[str, int]:
    cmd = [sys.executable, "-m", "harness.benchmarks.memory", side, str(folder), workload]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(pair: Pair, workload: str, rounds: int) -> tuple[list[dict[str, dict[str, int]]], int]:
    """``rounds`` alternating (base, asg) children, each after evicting both folders; and the most
    bytes of the folders that an eviction left cached (0 when eviction works)."""
    runs, stayed = [], 0
    for _ in range(rounds):
        run = {}
        for side in SIDES:
            stayed = max(stayed, evict([pair.base, pair.asg]))
            run[side] = _run_child(side, pair.base if side == "base" else pair.asg, workload)
        runs.append(run)
    return runs, stayed


def rows_of(pair: Pair, workload: str, runs: list[dict[str, dict[str, int]]], stayed: int) -> list[Row]:
    """The memory rows of one model and workload (MiB; ratio = (base - asg) / table)."""
    table = pair.table_bytes

    def med(side: str, key: str) -> float:
        return statistics.median(run[side][key] for run in runs)

    def row(what: str, key: str, note: str, target: float | None) -> Row:
        falls = [(run["base"][key] - run["asg"][key]) / table for run in runs]
        return Row("memory", f"{what}: {label}", "MiB", med("base", key) / MIB, med("asg", key) / MIB, statistics.median(falls),
                   min(falls), max(falls), len(runs), target=target, note=note, load=load_average())

    label = (f"{pair.name} {workload} ({'one forward, 2 sentences' if workload == 'batch' else 'forward + every id embedded'}), "
             f"fresh process, base vs ASG k={ASG['k']} m={ASG['m']} export")
    mib = lambda b: f"{b / MIB:.0f}"
    rest = pair.folder_bytes("base") - table  # the base folder less its table: both loaders read all of the rest
    added = added_tensors(pair)
    files = ", ".join(f"{k} {b / MIB:.1f}" for k, b in added.items() if b >= MIB / 10)

    def bound(kept: float, what: str, asg: float, asg_what: str) -> str:
        return (f"the base {what} {mib(kept)} of its {mib(table)} MiB table (a mapped file: the pages of rows used), "
                f"ASG {asg_what} {asg / MIB:.1f} MiB in its place: at most {(kept - asg) / table:.3f} of the table can fall")

    goal = f"goal: ASG <= base - 0.9 x table ({mib(table)} MiB)"
    eviction = "page cache emptied before each child (mincore)" if stayed == 0 else \
        f"eviction left {mib(stayed)} MiB cached: bytes read undercount"
    split = (f"after the run: base {mib(med('base', 'RssAnon'))} anon + {mib(med('base', 'RssFile'))} file, "
             f"ASG {mib(med('asg', 'RssAnon'))} + {mib(med('asg', 'RssFile'))} MiB; resident only for a while "
             f"(VmHWM - VmRSS): base {mib(med('base', 'VmHWM') - med('base', 'VmRSS'))}, ASG {mib(med('asg', 'VmHWM') - med('asg', 'VmRSS'))} MiB")
    rows = [
        row("peak resident (VmHWM)", "VmHWM", f"{goal}; {split}; "
            f"{bound(med('base', 'embedding_resident'), 'holds', med('asg', 'embedding_resident'), 'holds')}", 0.9),
        row("bytes read from disk (read_bytes, load + run)", "read_bytes",
            f"{goal}; of the folders: base {mib(med('base', 'folder_read'))} of {mib(pair.folder_bytes('base'))} MiB, "
            f"ASG {mib(med('asg', 'folder_read'))} of {mib(pair.folder_bytes('asg'))} MiB; "
            f"{bound(max(0.0, med('base', 'folder_read') - rest), 'read', sum(added.values()), 'reads')} ({files}); {eviction}", 0.9),
        row("anonymous resident after the run (RssAnon)", "RssAnon", "ratio = fall / table; both loaders keep the weights in the file mapping", None),
        row("file-backed resident after the run (RssFile)", "RssFile", "ratio = fall / table; the mapped weights, as far as they were read", None),
    ]
    if workload == "batch":
        rows.append(row("tensor bytes (parameters + buffers)", "tensor_bytes", f"exact: the table less ASG's tensors, in MiB: {files}", 0.9))
    return rows


def memory_rows(names: tuple[str, ...], rounds: int, profile: str, niter: int, say: Callable[[str], None] = lambda line: None) -> list[Row]:
    """For each packaged model in ``names``: fit and save both sides once, then ``rounds`` alternating
    rounds of fresh children per workload."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="harness-memory-") as out:
        for name in names:
            say(f"{name}: saving the unchanged model and fitting ASG ({profile} budget)")
            pair = save_pair(name, Path(out), profile, niter)
            for workload in pair.workloads():
                say(f"{name}: {workload}, {rounds} round(s) of fresh base and ASG processes")
                rows += rows_of(pair, workload, *measure(pair, workload, rounds))
    return rows


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], Path(sys.argv[2]), sys.argv[3])))
