"""A replaced token table's clean file pages leave the resident set; written pages and kept weights stay."""

from __future__ import annotations

import ctypes
import mmap
import sys

import pytest
import torch
from transformers import AutoModel, BertConfig, BertModel

from harness import file_pages
from harness.adapter import FitContext
from harness.adapters.asg import AsgAdapter, AsgConfig

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/pagemap is Linux's")


def resident(address: int, size: int, bit: int = 63) -> int:
    """Pages of the range present in memory (bit 63), or present file pages (bit 61)."""
    first, last = address // file_pages.PAGE, (address + size - 1) // file_pages.PAGE + 1
    return sum(bool(f & (1 << 63) and f & (1 << bit)) for f in file_pages._flags(first, last - first))


def test_clean_file_pages_go_and_written_pages_keep_their_bytes(tmp_path):
    path = tmp_path / "table.bin"
    path.write_bytes(bytes(range(256)) * (8 * file_pages.PAGE // 256))
    with path.open("r+b") as f:
        view = mmap.mmap(f.fileno(), 8 * file_pages.PAGE, flags=mmap.MAP_PRIVATE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(view))
    assert sum(view[i * file_pages.PAGE] for i in range(8)) == 0  # every page read: resident
    view[2 * file_pages.PAGE] = 77  # copy-on-write: page 2 no longer holds the file's bytes

    released = file_pages.release_file_pages(address, 8 * file_pages.PAGE)

    assert released == 7 * file_pages.PAGE
    assert resident(address, 8 * file_pages.PAGE) == 1
    assert view[2 * file_pages.PAGE] == 77  # the written page was kept
    assert view[3 * file_pages.PAGE + 5] == 5  # a released page reads the file's bytes again


def test_apply_releases_the_replaced_table_only(tmp_path):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=4096, hidden_size=64, num_hidden_layers=1, num_attention_heads=2, intermediate_size=128)
    BertModel(config).save_pretrained(tmp_path)  # safetensors, which transformers maps from the file
    model = AutoModel.from_pretrained(tmp_path)
    table = model.get_input_embeddings().weight.detach()
    address, size = table.data_ptr(), table.numel() * table.element_size()
    kept = model.encoder.layer[0].output.dense.weight.detach()
    float(table.sum()), float(kept.sum())  # both read: resident
    if resident(address, size, bit=61) == 0:
        pytest.skip("transformers did not map the checkpoint from its file")
    before_kept = resident(kept.data_ptr(), kept.numel() * kept.element_size())

    AsgAdapter(AsgConfig(k=4, m=2, niter=2)).apply(model, FitContext(seed=0))

    assert size // file_pages.PAGE >= 256 and resident(address, size) <= 2  # only the edge pages, shared with neighbours, may stay
    assert resident(kept.data_ptr(), kept.numel() * kept.element_size()) == before_kept
    assert torch.equal(kept, model.encoder.layer[0].output.dense.weight)
