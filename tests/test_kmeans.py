"""harness.methods.kmeans: the profile budgets' caps, the indexed k-means for many clusters, and fit threads."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
import torch
from harness.adapters.asg import BUDGETS as ASG_BUDGETS
from harness.adapters.sg import BUDGETS as SG_BUDGETS, SgAdapter, SgConfig

from harness.adapter import FitContext
from harness.methods.kmeans import KmeansBudget, KmeansSettings, fit_threads, indexed_kmeans, kmeans


def _blobs(n: int, d: int, centers: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    means = 4 * rng.standard_normal((centers, d))
    return (means[rng.integers(0, centers, n)] + 0.3 * rng.standard_normal((n, d))).astype(np.float32)


def _sse(points: np.ndarray, centroids: np.ndarray, labels: np.ndarray) -> float:
    return float(((points - centroids[labels]) ** 2).sum())


def test_budget_caps_iterations_and_picks_the_indexed_path_only_for_many_clusters():
    budget = KmeansBudget(max_niter=2, max_points_per_centroid=16, nprobe=4, indexed_from=1_000)
    assert budget.settings(25, k=999) == KmeansSettings(niter=2, max_points_per_centroid=16, nprobe=0)
    assert budget.settings(1, k=1_000) == KmeansSettings(niter=1, max_points_per_centroid=16, nprobe=4)
    assert KmeansBudget().settings(25, k=10**6) == KmeansSettings(niter=25)  # no cap, always exact
    # smoke caps the work whatever the model; SG on me5-small (100,015 groups) is indexed from quick on
    assert ASG_BUDGETS.smoke.settings(25).niter == 2 and SG_BUDGETS.smoke.settings(10, 12_209).nprobe == 1
    assert SG_BUDGETS.quick.settings(10, 100_015).nprobe > 0 and SG_BUDGETS.quick.settings(10, 12_209).nprobe == 0


def test_indexed_kmeans_is_close_to_exact_and_labels_are_nearest_candidates():
    points = _blobs(6_000, 32, 300)
    k = 600
    centroids, labels = indexed_kmeans(points, k, KmeansSettings(niter=8, nprobe=4), seed=0)
    exact_centroids, exact_labels = kmeans(points, k, KmeansSettings(niter=8), seed=0)
    assert centroids.shape == (k, 32) and labels.shape == (6_000,) and 0 <= labels.min() and labels.max() < k
    # approximate assignment: within 10% of exact k-means' squared error on the same data
    assert _sse(points, centroids, labels) <= 1.10 * _sse(points, exact_centroids, exact_labels)
    # most points got their true nearest centroid (the IVF cells miss few)
    exact = faiss.IndexFlatL2(32)
    exact.add(centroids)
    assert np.mean(exact.search(points, 1)[1][:, 0] == labels) > 0.9


def test_sg_smoke_fit_is_indexed_capped_and_recorded():
    from harness.benchmarks.models import load_packaged

    model = load_packaged("minilm", "base")
    fit = FitContext(profile="smoke", budget=SG_BUDGETS.smoke)
    applied = SgAdapter(SgConfig(fraction=0.4)).apply(model, fit)
    assert applied.details["kmeans"] == {"niter": 1, "max_points_per_centroid": 16, "nprobe": 1}
    emb = applied.model.get_input_embeddings()
    assert emb.group_vectors.shape[0] <= round(0.4 * 30522) and emb.group_ids.shape == (30522,)


@pytest.mark.parametrize("threads", [1, 2])
def test_fit_threads_restores_torch_threads_that_faiss_shares(threads):
    """faiss binds to torch's libgomp, so a thread limit set for a fit is torch's too; it must not outlive the fit."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with fit_threads(threads):
            assert torch.get_num_threads() == threads
            faiss.omp_set_num_threads(threads)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
