"""Index maps (ASG's ConceptIDs, k-sub's codes, SG's group ids, ADE's anchor indices): compact where
they are stored, in a dtype torch indexes wherever they are used.

An adapter keeps a fixed id map in the smallest integer dtype that holds it (ASG: uint8 for k <= 256,
uint16 up to 65,536; paper 000 Appendix C counts these bytes). torch's CPU kernels read every such
dtype (``ids_map[input_ids]``); its CUDA kernels do not read uint16, uint32 or uint64 (torch 2.11:
``NotImplementedError: "index_cuda" not implemented for 'UInt16'``). A module with index maps
therefore derives from :class:`IndexMaps` and registers them with :meth:`IndexMaps.register_index_map`:

* on the CPU a map is held in its stored dtype;
* on any other device (CUDA; the meta device too, which the tests use to see the rule without a GPU)
  it is held in :func:`held_dtype`: uint16 widens to int32 (the layout the GPU kernels of
  :mod:`harness.methods.gather_sum_triton` read), uint32/uint64 to int64; uint8 stays, CUDA reads it;
* the widening happens once, when the module moves (``.to``, ``.cuda``: ``nn.Module._apply``), and
  after a ``load_state_dict``; never per call;
* ``state_dict()`` gives every map back in its stored dtype, so what is saved and what the
  compression report counts (:func:`harness.adapter.footprint`) stays compact on every device.
"""

from __future__ import annotations

import torch
from torch import nn

INDEXABLE = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
"""Integer dtypes torch's CUDA kernels index, gather and compare."""


def held_dtype(stored: torch.dtype, device: torch.device | str) -> torch.dtype:
    """The dtype an index map stored as ``stored`` is held in on ``device``: itself on the CPU and
    where CUDA reads it; otherwise int32 (uint16) or int64 (uint32, uint64)."""
    if torch.device(device).type == "cpu" or stored in INDEXABLE:
        return stored
    return torch.int32 if stored == torch.uint16 else torch.int64


def check_ids(ids: torch.Tensor, rows: int) -> None:
    """Raise the ``IndexError`` torch's CPU indexing raises (``index 600 is out of bounds for
    dimension 0 with size 512``, naming the first offending id) when an id in ``ids`` lies outside
    [-rows, rows). On CUDA torch's own indexing fails with a device-side assert instead, which ends
    the CUDA context, and a Triton kernel reads no error at all; CUDA lookups therefore check here:
    one reduction and one synchronizing read of its two numbers per call."""
    if ids.numel() == 0:
        return
    low, high = torch.stack(torch.aminmax(ids)).cpu().tolist()  # the one read from the device
    if low >= -rows and high < rows:
        return
    flat = ids.reshape(-1)
    bad = int(flat[(flat < -rows) | (flat >= rows)][0])
    raise IndexError(f"index {bad} is out of bounds for dimension 0 with size {rows}")


class IndexMaps(nn.Module):
    """A module holding index maps as buffers, each held per device by :func:`held_dtype` (see the
    module docstring). ``index_maps`` lists (buffer name, stored dtype): a plain attribute, so a
    saved model rebuilds it (:mod:`harness.rebuild`)."""

    index_maps: tuple[tuple[str, torch.dtype], ...] = ()

    def register_index_map(self, name: str, values: torch.Tensor, stored: torch.dtype, persistent: bool = True) -> None:
        """Register ``values`` (integers that fit ``stored``) as the buffer ``name``, held for its device."""
        self.index_maps = (*self.index_maps, (name, stored))
        self.register_buffer(name, values.to(held_dtype(stored, values.device)), persistent=persistent)

    def stored_dtype(self, name: str) -> torch.dtype:
        """The dtype the map ``name`` is stored (and saved) in."""
        return dict(self.index_maps)[name]

    def _hold(self) -> None:
        """Convert every map to the dtype its device holds it in (a no-op when it already is)."""
        self.__dict__.pop("_stored_copies", None)
        for name, stored in self.index_maps:
            held = self._buffers.get(name)
            if held is not None and held.dtype != (want := held_dtype(stored, held.device)):
                self._buffers[name] = held.to(want)

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        self._hold()
        return self

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        self._hold()

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if keep_vars:  # the module's own tensors, by identity (what loading with assign=True matches)
            return
        for name, stored in self.index_maps:
            if prefix + name in destination and destination[prefix + name].dtype != stored:
                destination[prefix + name] = self._stored_copy(name, stored)

    def _stored_copy(self, name: str, stored: torch.Tensor) -> torch.Tensor:
        """The map ``name`` in its stored dtype, made once per held tensor: a tied head that reaches
        the same map under a second name gets the same tensor (counted and saved once)."""
        held = self._buffers[name]
        copies = self.__dict__.setdefault("_stored_copies", {})
        hit = copies.get(name)
        if hit is None or hit[0] is not held or hit[1] != held._version:
            hit = copies[name] = (held, held._version, held.to(stored))
        return hit[2]
