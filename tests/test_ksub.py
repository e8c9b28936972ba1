"""k-sub-embeddings (paper 001): M and params of Algorithm 1, unique codes, clustered prefixes, equal sizes."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
import torch
from harness.adapters.asg import ConceptEmbedding, ConceptLMHead
from harness.adapters.ksub import (
    KsubAdapter,
    KsubConfig,
    clustered_codes,
    min_sub_embeddings,
    random_codes,
)

from harness.adapter import FitContext
from harness.errors import ConfigError
from harness.methods.kmeans import KmeansSettings, assign_with_capacity, balanced_kmeans, squared_distances

ALLOCATIONS = {
    "random": {},
    "clustered-naive": {"allocation": "clustered", "niter": 10},
    "clustered-equal": {"allocation": "clustered", "kmeans": "equal", "niter": 10},
}


@pytest.fixture(scope="module")
def minilm_codes(minilm_table) -> dict[str, np.ndarray]:
    """(V, 3) codes with M = ceil(V^(1/3)) = 32 for MiniLM's table, by each allocation."""
    return {name: KsubAdapter(KsubConfig(**cfg)).allocate(minilm_table, FitContext(seed=0)) for name, cfg in ALLOCATIONS.items()}


def _unique(codes: np.ndarray) -> bool:
    return len(np.unique(codes, axis=0)) == len(codes)


@pytest.mark.parametrize(
    "vocab, K, M",
    # paper 001 Tables 1-2 (RoBERTa's V=50265, XLM-R's 250002): E = 225, 37, 15, 7, 4 and 63
    [(50265, 2, 225), (50265, 3, 37), (50265, 4, 15), (50265, 6, 7), (50265, 8, 4), (250002, 3, 63), (30522, 3, 32), (1000, 3, 10)],
)
def test_algorithm_1_m_is_ceil_of_kth_root(vocab, K, M):
    assert min_sub_embeddings(vocab, K) == M
    assert (M - 1) ** K < vocab <= M**K


def test_algorithm_1_params_are_m_times_d(minilm_table):
    V, D = minilm_table.shape
    sub = KsubAdapter(KsubConfig(K=3)).fit(minilm_table, FitContext(seed=0))
    M = 32  # ceil(30522^(1/3)): 31^3 = 29791 < 30522 <= 32^3
    assert tuple(sub.codebooks.shape) == (3 * M, D // 3)  # K sub-tables of M vectors of D/K
    assert sum(p.numel() for p in sub.parameters()) == M * D
    assert tuple(sub.concept_ids.shape) == (V, 3) and sub.concept_ids.dtype == torch.uint8
    assert "concept_ids" in dict(sub.named_buffers())  # the code map is stored, not trained


def test_algorithm_1_codes_are_base_m_digits():
    codes = random_codes(30522, 3, 32)
    assert codes[1000].tolist() == [8, 31, 0]  # 1000 = 8 + 31*32 + 0*32^2
    n = np.arange(30522)
    assert np.array_equal(codes[:, 0] + 32 * codes[:, 1] + 32**2 * codes[:, 2], n)


@pytest.mark.parametrize("allocation", ALLOCATIONS)
def test_codes_unique_for_every_allocation(minilm_codes, allocation):
    codes = minilm_codes[allocation]
    assert codes.shape == (30522, 3) and codes.min() >= 0 and codes.max() < 32
    assert _unique(codes)


@pytest.mark.parametrize("equal", [False, True])
@pytest.mark.parametrize("vocab, K", [(500, 2), (257, 4), (64, 3)])
def test_clustered_codes_unique_when_capacity_is_tight(vocab, K, equal):
    """M = ceil(V^(1/K)) leaves (almost) no spare codes: uniqueness must come from the capacity cap."""
    table = np.random.default_rng(vocab).standard_normal((vocab, 12)).astype(np.float32)
    M = min_sub_embeddings(vocab, K)
    codes = clustered_codes(table, K, M, equal, KmeansSettings(5), 0, lambda *a: None)
    assert codes.max() < M and _unique(codes)


def test_clustered_codes_share_prefixes_with_nearest_neighbours(minilm_table, minilm_codes):
    """Requirement 2 (Section 3.1): similar tokens share more sub-embeddings than arbitrary pairs."""
    table = minilm_table.numpy()
    index = faiss.IndexFlatL2(table.shape[1])
    index.add(table)
    queries = np.random.default_rng(0).choice(len(table), 1000, replace=False)
    _, found = index.search(table[queries], 2)
    neighbour = found[:, 1]
    share = {name: float(np.mean(c[queries, 0] == c[neighbour, 0])) for name, c in minilm_codes.items()}
    assert share["random"] < 0.06  # ~1/M
    assert share["clustered-naive"] > 5 * share["random"]
    assert share["clustered-equal"] > 5 * share["random"]


def test_equal_size_kmeans_gives_equal_groups(minilm_codes):
    codes = minilm_codes["clustered-equal"]
    sizes = np.bincount(codes[:, 0], minlength=32)
    assert sizes.max() - sizes.min() <= 1  # 30522 / 32: 953 or 954
    for first in range(32):  # level 2 inside every level-1 group
        inner = np.bincount(codes[codes[:, 0] == first, 1], minlength=32)
        assert inner.max() - inner.min() <= 1
    naive = np.bincount(minilm_codes["clustered-naive"][:, 0], minlength=32)
    assert naive.max() - naive.min() > 100  # the naive variant is not balanced


@pytest.mark.parametrize("n, k", [(1000, 7), (999, 10), (64, 64), (300, 1)])
def test_balanced_kmeans_sizes_differ_by_at_most_one(n, k):
    points = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
    points[: n // 2] += 5  # lopsided data: plain k-means would not be balanced
    _, labels = balanced_kmeans(points, k, KmeansSettings(10), 0)
    sizes = np.bincount(labels, minlength=k)
    assert sizes.sum() == n and sizes.max() - sizes.min() <= 1


def test_capacity_assignment_is_nearest_when_not_binding_and_respects_caps():
    points = np.random.default_rng(1).standard_normal((200, 4)).astype(np.float32)
    centroids = points[:5].copy()
    dist = squared_distances(points, centroids)
    assert np.array_equal(assign_with_capacity(dist, 200), dist.argmin(1))
    capped = assign_with_capacity(dist, 40)
    assert np.bincount(capped, minlength=5).max() <= 40 and (capped >= 0).all()


def test_input_is_concatenation_and_sub_tables_start_at_slice_means(minilm_table):
    sub = KsubAdapter(KsubConfig(K=3, M=40)).fit(minilm_table, FitContext(seed=0))
    codes = sub.concept_ids.long()
    token = 2023
    expected = torch.cat([sub.codebooks[k * 40 + codes[token, k]] for k in range(3)])
    torch.testing.assert_close(sub(torch.tensor([[token]]))[0, 0], expected)  # Eq. 2
    same = codes[:, 1] == codes[token, 1]
    torch.testing.assert_close(sub.codebooks[40 + codes[token, 1]], minilm_table[same, 128:256].mean(0), rtol=1e-4, atol=1e-5)


def test_decoder_input_and_output_side(tiny_decoder):
    model = tiny_decoder
    ids = torch.randint(0, 512, (2, 7))
    applied = KsubAdapter(KsubConfig(K=4, allocation="clustered", kmeans="equal", niter=5)).apply(model, FitContext(seed=0))
    model, report = applied.model, applied.report
    model.tie_weights()  # HFLM calls this; it must not restore a dense head
    head = model.get_output_embeddings()
    assert isinstance(model.get_input_embeddings(), ConceptEmbedding) and isinstance(head, ConceptLMHead)
    assert head.concepts is model.get_input_embeddings()  # tied base -> shared sub-tables
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
        dense = out.hidden_states[-1] @ model.get_input_embeddings().dense().T
    torch.testing.assert_close(out.logits, dense, rtol=1e-4, atol=1e-4)
    M = 5  # ceil(512^(1/4)): 4^4 = 256 < 512 <= 625
    assert report.embedding_params_after == M * 64
    assert applied.details["M"] == M and applied.details["M_rule"].startswith("paper 001 Algorithm 1")  # shown as resolved
    assert report.storage_bytes_after == M * 64 * 4 + 512 * 4  # sub-tables + uint8 (V, K) code map


@pytest.mark.parametrize(
    "cfg, fragment",
    [({"K": 0}, "positive"), ({"M": -1}, "must be 0"), ({"kmeans": "equal"}, "allocation=clustered"), ({"niter": 0}, "positive")],
)
def test_invalid_config_rejected(cfg, fragment):
    with pytest.raises(ConfigError, match=fragment):
        KsubConfig(**cfg)


@pytest.mark.parametrize(
    "cfg, fragment",
    [({"K": 385}, "cannot split a table 384 wide"), ({"M": 20}, "cannot be unique; pick M >= 32"), ({"M": 30522}, "nothing is compressed")],
)
def test_config_checked_against_table(cfg, fragment):
    with pytest.raises(ConfigError, match=fragment):
        KsubConfig(**cfg).check_table(30522, 384)
