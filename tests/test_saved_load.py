"""Loading a saved compressed model: the skeleton's parameters stay on the meta device, so
the V x D table the adapter replaced is never allocated; the loaded tensors are the file's own
mapping, not copies; a tied head stays tied. And the memory benchmark's fresh-process measurement
reads what it says (page cache emptied, bytes read counted) on the real MiniLM."""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoConfig

from harness.adapter import FitContext
from harness.adapters.asg import BUDGETS, AsgAdapter, AsgConfig
from harness.measure.efficiency import model_bytes
from harness.rebuild import skeleton
from harness.runner import saved
from harness.sources import models
from harness.sources.heads import Head

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/maps and the page cache calls are Linux's")


class LargestTensor(TorchDispatchMode):
    """The element count of the largest tensor any torch op makes off the meta device."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                self.largest = max(self.largest, t.numel())
        return out


def mapped_from(path) -> list[tuple[int, int]]:
    """Address ranges of this process's mappings of ``path``."""
    with open("/proc/self/maps") as maps:
        return [tuple(int(x, 16) for x in line.split()[0].split("-")) for line in maps if line.rstrip().endswith(str(path))]


@pytest.fixture(scope="module")
def asg_minilm(tmp_path_factory, minilm_ref):
    """MiniLM (V = 30,522, D = 384) with ASG (k = 64, m = 8, smoke budget), saved as `harness export` saves it."""
    model, tokenizer = models.load(minilm_ref, Head("base"))
    config = AsgConfig(k=64, m=8)
    applied = AsgAdapter(config).apply(model.eval(), FitContext(budget=BUDGETS.smoke))
    folder = tmp_path_factory.mktemp("asg-minilm")
    saved.save(folder, applied.model, tokenizer, "asg", dataclasses.asdict(config))
    return folder, applied.model, tokenizer


def test_load_never_allocates_the_replaced_table(asg_minilm):
    folder, fitted, tokenizer = asg_minilm
    vocab, dim = fitted.config.vocab_size, fitted.config.hidden_size
    with LargestTensor() as control:  # the bare architecture, built as before: its table is allocated
        skeleton(saved.read(folder).architecture, AutoConfig.from_pretrained(folder))
    assert control.largest >= vocab * dim

    with LargestTensor() as load:
        loaded, _, _ = saved.load(folder)

    assert load.largest < vocab * dim
    assert model_bytes(loaded) == model_bytes(fitted)
    assert model_bytes(loaded.get_input_embeddings()) < 0.01 * vocab * dim * 4  # codebooks + uint8 ConceptIDs only
    ranges = mapped_from(folder / saved.WEIGHTS)
    assert all(any(a <= p.data_ptr() < b for a, b in ranges) for p in loaded.parameters())  # the file's bytes, no copies
    batch = tokenizer(["the cat sat on the mat", "a dog ran"], padding=True, return_tensors="pt")
    with torch.inference_mode():
        assert torch.equal(loaded(**batch).last_hidden_state, fitted(**batch).last_hidden_state)


def test_tied_head_stays_tied_and_mapped(tiny_decoder, smollm2_tokenizer, tmp_path):
    saved.save(tmp_path, tiny_decoder, smollm2_tokenizer, "none", {})
    loaded, _, _ = saved.load(tmp_path)
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    assert torch.equal(loaded.lm_head.weight, tiny_decoder.lm_head.weight)
    ids = torch.arange(12).view(2, 6)
    with torch.inference_mode():
        assert torch.equal(loaded(input_ids=ids).logits, tiny_decoder(input_ids=ids).logits)


def test_memory_benchmark_children_read_from_disk(tmp_path):
    """One round of the memory benchmark on MiniLM: each child starts with both folders out of the page
    cache, reads the compressed folder whole and less of the base table than the base, and the rows'
    verdicts follow their ratios; the tensor row is exact."""
    from harness.benchmarks import memory

    pair = memory.save_pair("minilm", tmp_path, "smoke", 2)
    runs, stayed = memory.measure(pair, "batch", 1)
    run = runs[0]
    assert stayed == 0  # posix_fadvise(DONTNEED) after fsync emptied the page cache of both folders
    rest = pair.folder_bytes("base") - pair.table_bytes
    assert run["asg"]["folder_read"] == pair.folder_bytes("asg")  # every file of the export read once
    assert rest <= run["base"]["folder_read"] < pair.folder_bytes("base")  # a short batch reads part of the mapped table
    for side in memory.SIDES:
        assert run[side]["read_bytes"] >= run[side]["folder_read"] * 0.99  # /proc/self/io counts those reads
    rows = {r.case.split(":")[0]: r for r in memory.rows_of(pair, "batch", runs, stayed)}
    k, m = memory.ASG["k"], memory.ASG["m"]
    vocab = pair.table_bytes // (384 * 4)
    exact = (pair.table_bytes - k * 384 * 4 - vocab * m * 2 - m * 8) / pair.table_bytes  # codebooks, uint16 ids, int64 offsets
    assert rows["tensor bytes (parameters + buffers)"].ratio == pytest.approx(exact)
    assert all(r.met == (None if r.target is None else r.ratio >= r.target) for r in rows.values())
