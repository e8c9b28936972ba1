"""Reference points beyond the papers: low-rank table (ALBERT-style E = A B) and per-row int8/int4 tables."""

from __future__ import annotations

import pytest
import torch
from harness.adapters.lowrank import FactorizedEmbedding, FactorizedLMHead, LowrankAdapter, LowrankConfig
from harness.adapters.quant import (
    QuantAdapter,
    QuantConfig,
    QuantizedEmbedding,
    QuantizedLMHead,
)
from threadpoolctl import threadpool_limits

from harness.adapter import FitContext, footprint
from harness.errors import ConfigError
from harness.methods import low_rank_head
from harness.sources.heads import Head

# Relative squared reconstruction error ||E - E_q||^2 / ||E||^2 on MiniLM's table (measured 5.3e-5 and 1.7e-2)
INT8_BOUND = 1e-4
INT4_BOUND = 3e-2


def _relative_error(approx: torch.Tensor, table: torch.Tensor) -> float:
    return float(((approx - table) ** 2).sum() / (table**2).sum())


# --- lowrank -------------------------------------------------------------------------------------

def test_lowrank_error_falls_as_r_grows_and_matches_svd(minilm_table):
    errors = []
    table64 = minilm_table.double()
    with threadpool_limits(1):
        squared = torch.linalg.eigvalsh(table64.T @ table64).flip(0)  # singular values squared, descending
    for r in (8, 32, 128):
        factors = LowrankAdapter(LowrankConfig(r=r)).fit(minilm_table, FitContext())
        errors.append(_relative_error(factors.dense().detach(), minilm_table))
        optimum = float(squared[r:].sum() / squared.sum())  # Eckart-Young: the discarded energy
        assert errors[-1] == pytest.approx(optimum, rel=1e-3, abs=1e-5)
    assert errors[0] > errors[1] > errors[2]


def test_lowrank_params_and_lookup(minilm_table):
    V, D = minilm_table.shape
    factors = LowrankAdapter(LowrankConfig(r=16)).fit(minilm_table, FitContext())
    assert sum(p.numel() for p in factors.parameters()) == 16 * (V + D)
    ids = torch.tensor([[101, 2023, 102]])
    torch.testing.assert_close(factors(ids)[0], factors.dense()[ids[0]])


def test_lowrank_decoder_input_and_output_side(tiny_decoder):
    model = tiny_decoder
    applied = LowrankAdapter(LowrankConfig(r=8)).apply(model, FitContext())
    model, report = applied.model, applied.report
    model.tie_weights()
    head = model.get_output_embeddings()
    assert isinstance(head, FactorizedLMHead) and head.factors is model.get_input_embeddings()  # tie kept
    with torch.no_grad():
        out = model(torch.randint(0, 512, (2, 6)), output_hidden_states=True)
        dense = out.hidden_states[-1] @ model.get_input_embeddings().dense().T
    torch.testing.assert_close(out.logits, dense, rtol=1e-4, atol=1e-4)
    assert report.embedding_params_after == 8 * (512 + 64)
    assert report.storage_bytes_after == 8 * (512 + 64) * 4


@pytest.mark.parametrize("n", [1, 3, 13, 20, 64, 65])
@pytest.mark.parametrize("bias", [False, True])
def test_lowrank_head_kernel_equals_the_two_matrix_products(n, bias):
    """Up to 64 states the head scores on the fused heads' pool (harness.methods.low_rank_head), above
    that with torch; both give (h B^T) A^T + bias to float32 rounding, for a vocabulary, rank and
    batch that are not multiples of the kernel's 4-row groups, 16-state passes and 512-row blocks.
    Training keeps torch's products (gradients flow)."""
    gen = torch.Generator().manual_seed(n)
    vocab, dim, r = 2011, 40, 13
    factors = FactorizedEmbedding(torch.randn(vocab, r, generator=gen), torch.randn(r, dim, generator=gen))
    head = FactorizedLMHead(factors, torch.randn(vocab, generator=gen) if bias else None)
    hidden = torch.randn(n, dim, generator=gen)
    assert low_rank_head.applies(hidden) == (n <= low_rank_head.MAX_STATES), "the CPU kernel did not build"
    with torch.no_grad():
        fast = head(hidden)
        reference = hidden @ factors.projection.T @ factors.lookup.T + (head.bias if bias else 0)
    torch.testing.assert_close(fast, reference, rtol=1e-5, atol=1e-4)
    leaf = hidden[:2].clone().requires_grad_(True)
    head(leaf).sum().backward()
    assert leaf.grad is not None and factors.lookup.grad is not None


def test_lowrank_config_errors():
    with pytest.raises(ConfigError, match="positive"):
        LowrankConfig(r=0)
    with pytest.raises(ConfigError, match="nothing is saved; pick r <= 379"):
        LowrankConfig(r=380).check_table(30522, 384)
    LowrankConfig(r=379).check_table(30522, 384)


# --- quant ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits, bound, row_bytes", [(8, INT8_BOUND, 384), (4, INT4_BOUND, 192)])
def test_quant_reconstruction_error_and_storage(minilm_table, bits, bound, row_bytes):
    V, D = minilm_table.shape
    table = QuantAdapter(QuantConfig(bits=bits)).fit(minilm_table, FitContext())
    dense = table.dense()
    step = table.scales[:, None]  # s_n = max|e_n| / q_max; rounding error is at most s_n / 2
    assert bool(((dense - minilm_table).abs() <= step / 2 * (1 + 1e-5) + 1e-7).all())
    assert _relative_error(dense, minilm_table) < bound
    state = table.state_dict()
    assert sum(t.numel() * t.element_size() for t in state.values()) == V * row_bytes + V * 4  # values + fp32 scales
    assert table.stored_values() == V * D and not list(table.parameters())
    ids = torch.tensor([[101, 2023, 102]])
    torch.testing.assert_close(table(ids)[0], dense[ids[0]])


def test_int4_packs_two_values_per_byte_odd_width():
    table = torch.randn(10, 7, generator=torch.Generator().manual_seed(0))
    quantized = QuantAdapter(QuantConfig(bits=4)).fit(table, FitContext())
    assert quantized.codes.dtype == torch.uint8 and tuple(quantized.codes.shape) == (10, 4)
    values = quantized.values(quantized.codes)
    assert values.shape == (10, 7) and values.abs().max() == 7  # the row maximum maps to +-7
    assert bool(((quantized.dense() - table).abs() <= quantized.scales[:, None] / 2 + 1e-6).all())


def test_quant_counts_stored_values_in_the_report(minilm_ref):
    from harness.sources import models

    model, _ = models.load(minilm_ref, Head("sequence_classification", ("entailment", "neutral", "contradiction")))
    before = footprint(model)
    applied = QuantAdapter(QuantConfig(bits=8)).apply(model, FitContext())
    model, report = applied.model, applied.report
    assert report.embedding_params_after == report.embedding_params_before == 30522 * 384
    assert report.total_params_after == before.total_params  # values counted, not dropped
    assert report.storage_bytes_after == 30522 * 384 + 30522 * 4


def test_quant_decoder_input_and_output_side(tiny_decoder):
    model = tiny_decoder
    applied = QuantAdapter(QuantConfig(bits=8)).apply(model, FitContext())
    model, report = applied.model, applied.report
    model.tie_weights()
    head = model.get_output_embeddings()
    assert isinstance(head, QuantizedLMHead) and head.table is model.get_input_embeddings()  # stored once
    with torch.no_grad():
        out = model(torch.randint(0, 512, (2, 6)), output_hidden_states=True)
        dense = out.hidden_states[-1] @ model.get_input_embeddings().dense().T
    torch.testing.assert_close(out.logits, dense, rtol=1e-4, atol=1e-4)
    assert isinstance(model.get_input_embeddings(), QuantizedEmbedding)
    assert report.embedding_params_after == 512 * 64
    assert report.storage_bytes_after == 512 * 64 + 512 * 4


def test_quant_head_chunks_match_one_matmul(monkeypatch):
    from harness.adapters import quant

    monkeypatch.setattr(quant, "LOGIT_CHUNK", 3)
    table = QuantAdapter(QuantConfig(bits=4)).fit(torch.randn(10, 8), FitContext())
    hidden = torch.randn(2, 5, 8)
    torch.testing.assert_close(QuantizedLMHead(table)(hidden), hidden @ table.dense().T)


def test_quant_config_errors():
    with pytest.raises(ConfigError, match="bits=3 is not supported"):
        QuantConfig(bits=3)
