"""ASG (paper 000): PQ fidelity, parameter arithmetic, ConceptID map, shared codebook, output head."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
import torch
from harness.adapters.asg import (
    size_rule_k,
    AsgAdapter,
    AsgConfig,
    ConceptEmbedding,
    ConceptLMHead,
    concept_id_dtype,
)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from harness.adapter import FitContext, footprint
from harness.errors import ConfigError
from harness.sources.heads import Head


def _fit(table: torch.Tensor, **cfg) -> ConceptEmbedding:
    return AsgAdapter(AsgConfig(**cfg)).fit(table, FitContext(seed=1234))


def test_reconstruction_error_equals_faiss_product_quantizer(minilm_table):
    """Same k, m and seed: our per-segment k-means gives faiss PQ's codebooks, hence its MSE."""
    table = minilm_table.numpy()
    pq = faiss.ProductQuantizer(table.shape[1], 48, 8)  # m=48, k=2^8
    pq.train(table)
    faiss_mse = float(((pq.decode(pq.compute_codes(table)) - table) ** 2).mean())
    ours = _fit(minilm_table, k=256, m=48).dense().detach().numpy()
    our_mse = float(((ours - table) ** 2).mean())
    assert our_mse == pytest.approx(faiss_mse, rel=1e-3)
    assert our_mse < 0.5 * float(table.var(axis=0).mean())  # PQ keeps most of the variance


def test_parameter_fraction_is_k_over_v(minilm_table):
    concepts = _fit(minilm_table, k=64, m=24)
    params = sum(p.numel() for p in concepts.parameters())
    V, D = minilm_table.shape
    assert params == 64 * D  # k * m * (D/m), Appendix B
    assert params / (V * D) == pytest.approx(64 / V)


def test_xlmr_example_from_appendix_b():
    """XLM-R: V=250002, D=768, k=1024, m=48 -> E' is (49152, 16) and 0.41% of the table."""
    V, D, k, m = 250002, 768, 1024, 48
    ids = torch.randint(0, k, (V, m))
    concepts = ConceptEmbedding(torch.zeros(m * k, D // m), ids, k, shared=False)
    assert tuple(concepts.codebooks.shape) == (49152, 16)
    fraction = sum(p.numel() for p in concepts.parameters()) / (V * D)
    assert round(100 * fraction, 2) == 0.41
    assert concepts.concept_ids.dtype == torch.uint16  # ids in [0, 1024)


def test_concept_id_map_shape_dtype_and_buffer(minilm_table):
    concepts = _fit(minilm_table, k=256, m=48)
    assert tuple(concepts.concept_ids.shape) == (minilm_table.shape[0], 48)
    assert concepts.concept_ids.dtype == torch.uint8
    assert "concept_ids" in dict(concepts.named_buffers())
    assert all(p is not concepts.concept_ids for p in concepts.parameters())  # not trainable
    assert concepts.concept_ids.long().max() < 256
    assert [concept_id_dtype(k) for k in (2, 256, 257, 65536, 65537)] == [
        torch.uint8, torch.uint8, torch.uint16, torch.uint16, torch.int32,
    ]


def test_input_embedding_is_concatenation_of_concept_vectors(minilm_table):
    concepts = _fit(minilm_table, k=32, m=12)
    ids = torch.tensor([[101, 2023, 102]])
    out = concepts(ids)
    assert out.shape == (1, 3, 384)
    token = 2023
    rows = concepts.concept_ids[token].long() + torch.arange(12) * 32  # row i*k + s_i (Section 2.2)
    assert torch.equal(out[0, 1], concepts.codebooks[rows].reshape(-1))


def test_shared_codebook_variant(minilm_table):
    concepts = _fit(minilm_table, k=128, m=48, shared=True)
    assert tuple(concepts.codebooks.shape) == (128, 8)  # one codebook of k vectors
    ids = concepts.concept_ids.long()
    assert ids.max() < 128
    dense = concepts.dense()
    token = 1000
    assert torch.equal(dense[token], concepts.codebooks[ids[token]].reshape(-1))  # every segment reads the same codebook
    separate = _fit(minilm_table, k=128, m=48).dense()
    table = minilm_table
    assert ((dense - table) ** 2).mean() > ((separate - table) ** 2).mean()  # fewer concept vectors, more error


class _ShapeRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.shapes += [tuple(t.shape) for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        return out


@pytest.mark.parametrize("shared", [False, True])
def test_output_logits_equal_dense_head_without_building_table(minilm_table, shared):
    concepts = _fit(minilm_table, k=64, m=24, shared=shared)
    head = ConceptLMHead(concepts)
    hidden = torch.randn(2, 3, 384)
    V, D = minilm_table.shape
    with torch.no_grad(), _ShapeRecorder() as rec:
        logits = head(hidden)
    assert logits.shape == (2, 3, V)
    assert all(int(np.prod(s)) < V * D for s in rec.shapes)  # no V x D tensor anywhere
    with torch.no_grad():
        dense = hidden @ concepts.dense().T
    torch.testing.assert_close(logits, dense, rtol=1e-4, atol=1e-4)


def test_decoder_input_and_output_side(tiny_decoder):
    model = tiny_decoder
    ids = torch.randint(0, 512, (2, 7))
    applied = AsgAdapter(AsgConfig(k=16, m=8)).apply(model, FitContext(seed=0))
    model, report = applied.model, applied.report
    model.tie_weights()  # HFLM calls this; it must not restore a dense head
    head = model.get_output_embeddings()
    assert isinstance(head, ConceptLMHead)
    assert head.concepts is model.get_input_embeddings()  # tied base -> shared codebooks
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
        dense = out.hidden_states[-1] @ model.get_input_embeddings().dense().T
    torch.testing.assert_close(out.logits, dense, rtol=1e-4, atol=1e-4)
    assert report.embedding_params_before == 512 * 64
    assert report.embedding_params_after == 16 * 64
    assert report.storage_bytes_after == 16 * 64 * 4 + 512 * 8  # codebooks + uint8 ConceptID map


def test_compression_report_on_encoder(minilm_ref):
    from harness.sources import models

    model, _ = models.load(minilm_ref, Head("sequence_classification", ("entailment", "neutral", "contradiction")))
    before = footprint(model)
    applied = AsgAdapter(AsgConfig(k=512, m=48)).apply(model, FitContext(seed=0))
    model, report = applied.model, applied.report
    assert report.embedding_params_before == before.embedding_params == 30522 * 384
    assert report.emb_param_fraction == pytest.approx(512 / 30522)
    assert report.storage_bytes_after == 512 * 384 * 4 + 30522 * 48 * 2  # uint16 map for k=512
    assert report.total_params_before - report.total_params_after == 30522 * 384 - 512 * 384


@pytest.mark.parametrize(
    "cfg, fragment",
    [({"k": 1}, "at least 2"), ({"k": -1}, "positive"), ({"m": -4}, "positive"), ({"niter": 0}, "positive")],
)
def test_invalid_config_rejected(cfg, fragment):
    with pytest.raises(ConfigError, match=fragment):
        AsgConfig(**cfg)


def test_config_checked_against_table():
    with pytest.raises(ConfigError, match="does not divide"):
        AsgConfig(m=7).check_table(30522, 384)
    with pytest.raises(ConfigError, match="exceeds the vocabulary"):
        AsgConfig(k=40000).check_table(30522, 384)



@pytest.mark.parametrize("vocab, k", [(119_547, 512), (250_002, 1024), (250_037, 1024), (30_522, 128), (49_152, 256), (300, 2)])
def test_default_k_follows_the_papers_size_rule(vocab, k):
    """Paper 000 Table 1: k/V about 0.4-0.5% (mBERT 512, XLM-R 1,024); the default k = 0 applies it."""
    assert size_rule_k(vocab) == k
    assert AsgConfig().k_for(vocab) == k and AsgConfig(k=64).k_for(vocab) == 64


def test_default_k_is_the_one_fitted_and_recorded(tiny_decoder):
    """The rule's k reaches the codebooks and the run's details (V = 512: 0.45% is 2.3, so k = 2)."""
    applied = AsgAdapter(AsgConfig(m=8)).apply(tiny_decoder, FitContext(seed=0))
    concepts = applied.model.get_input_embeddings()
    assert concepts.k == 2 and concepts.codebooks.shape == (8 * 2, 8)
    assert applied.details["k"] == 2 and applied.details["k_rule"].startswith("paper 000")
    assert applied.report.emb_param_fraction == pytest.approx(2 / 512)


def test_concept_ids_widen_once_when_moved_off_the_cpu_and_save_compact(tiny_decoder):
    """CUDA cannot index a uint16 ConceptID map. held_dtype decides per device type (int32
    off the CPU); moving the model applies it once to the map and to the head's (m, V) codes; the
    state dict keeps uint16 and gives the tied head's name the same tensor (saved and counted once);
    moving back to the CPU narrows again."""
    from harness.methods.index_maps import held_dtype

    assert held_dtype(torch.uint16, torch.device("cuda")) == torch.int32
    assert held_dtype(torch.uint16, "cpu") == torch.uint16 and held_dtype(torch.uint8, "cuda") == torch.uint8
    assert held_dtype(torch.int32, "cuda") == torch.int32
    model = AsgAdapter(AsgConfig(k=300, m=8)).apply(tiny_decoder, FitContext(seed=0)).model
    concepts, head = model.get_input_embeddings(), model.get_output_embeddings()
    assert concepts.concept_ids.dtype == head.codes.dtype == torch.uint16
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.to("meta")  # any device but the CPU: what .to("cuda") does, without a GPU
    assert concepts.concept_ids.dtype == head.codes.dtype == torch.int32
    state = model.state_dict()
    assert state["model.embed_tokens.concept_ids"].dtype == torch.uint16
    assert state["model.embed_tokens.concept_ids"] is state["lm_head.concepts.concept_ids"]
    model.to_empty(device="cpu").load_state_dict(before)
    assert concepts.concept_ids.dtype == head.codes.dtype == torch.uint16
    assert torch.equal(concepts.concept_ids, before["model.embed_tokens.concept_ids"])


def test_reference_rows_are_made_once_per_device(tiny_decoder):
    """The embedding_bag index (V, m) of i*k + s_i is cached, not rebuilt on every call."""
    model = AsgAdapter(AsgConfig(k=16, m=8)).apply(tiny_decoder, FitContext(seed=0)).model
    head = model.get_output_embeddings()
    rows = head.table_rows()
    assert rows is head.table_rows() and rows.dtype == torch.int32
    assert torch.equal(rows.long(), head.concepts.concept_ids.long() + 16 * torch.arange(8))
    hidden = torch.randn(3, 64, requires_grad=True)
    head(hidden).sum().backward()  # the training path reads the cache
    assert head.table_rows() is rows
    model.to("meta")
    assert head.table_rows() is not rows and head.table_rows().device.type == "meta"
