"""Resident memory of replaced token tables: their clean file pages handed back to the kernel.

transformers maps a safetensors checkpoint into memory (a file mapping) and a page becomes
resident when it is first read. A fit reads the whole token table (k-means over its rows), and
the mapping stays alive for the other weights, so after an adapter has replaced the table its
pages still count in the process's resident set although nothing reads them again: for
me5-small's 250,037 x 384 fp32 table that is 366 MiB that would not fall.

:func:`release_file_pages` drops exactly the pages of a range that still hold the file's bytes
(``/proc/self/pagemap``: bit 63 present, bit 61 file page). Reading such a page again faults in
the same bytes from the file, so dropping it is safe whoever still holds the tensor; a page
written since it was mapped (copy-on-write, now anonymous) is kept. Linux only; elsewhere, or
when the pagemap cannot be read, nothing is released.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from typing import Iterable

import torch
from torch import nn

PAGE = os.sysconf("SC_PAGE_SIZE")  # the system's page size (4 KiB on x86-64, 16 or 64 KiB on some ARM kernels)
_PRESENT, _FILE = 1 << 63, 1 << 61
_MADV_DONTNEED = 4


def _flags(first_page: int, count: int) -> tuple[int, ...]:
    with open("/proc/self/pagemap", "rb") as pagemap:
        pagemap.seek(first_page * 8)
        return struct.unpack(f"{count}Q", pagemap.read(count * 8))


def resident_bytes(address: int, size: int) -> int:
    """Bytes of the pages overlapping [address, address + size) that are in this process's memory
    (0 where the pagemap cannot be read)."""
    first, last = address // PAGE, -(-(address + size) // PAGE)
    try:
        flags = _flags(first, last - first)
    except OSError:
        return 0
    return PAGE * sum(bool(f & _PRESENT) for f in flags)


def _runs(pages: Iterable[bool]) -> list[tuple[int, int]]:
    """(start, length) of each run of True, in page offsets."""
    runs: list[tuple[int, int]] = []
    for i, keep in enumerate(pages):
        if keep and runs and sum(runs[-1]) == i:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        elif keep:
            runs.append((i, 1))
    return runs


def release_file_pages(address: int, size: int) -> int:
    """Drop the resident, unmodified file pages lying wholly inside [address, address + size);
    returns the bytes released (0 where the platform cannot tell which pages those are)."""
    first, last = -(-address // PAGE), (address + size) // PAGE
    if last <= first:
        return 0
    try:
        flags = _flags(first, last - first)
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    except OSError:
        return 0
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    released = 0
    for start, length in _runs(f & _PRESENT and f & _FILE for f in flags):
        if libc.madvise((first + start) * PAGE, length * PAGE, _MADV_DONTNEED) == 0:
            released += length * PAGE
    return released


def _storages(model: nn.Module) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}


def release_replaced(tables: Iterable[torch.Tensor], model: nn.Module) -> int:
    """Release the file pages of each of ``tables`` that ``model`` no longer holds (an adapter
    replaced it); returns the bytes released."""
    kept = _storages(model)
    released = 0
    for table in {t.untyped_storage().data_ptr(): t for t in tables if t.device.type == "cpu"}.values():
        if table.untyped_storage().data_ptr() not in kept:
            released += release_file_pages(table.data_ptr(), table.numel() * table.element_size())
    return released
