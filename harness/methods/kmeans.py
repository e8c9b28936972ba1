"""k-means for the clustering adapters (asg, sg, ksub): faiss k-means, an indexed k-means for many
clusters, size-constrained assignment, and the thread limit fitting runs under.

* :func:`kmeans` is faiss's Lloyd k-means (random initial centroids, training points subsampled to
  ``max_points_per_centroid`` per centroid) followed by a nearest-centroid search, seeded.
* :func:`indexed_kmeans` is Lloyd k-means for tens of thousands of clusters (SG's 40% of a 250k
  vocabulary): the assignment step searches an IVF index over the centroids instead of all of them.
* :func:`assign_with_capacity` assigns points to fixed centroids when every cluster may hold only so
  many points (k-sub-embedding codes must stay unique, paper 001 Section 3.1).
* :func:`balanced_kmeans` is k-means whose clusters all have n//k or n//k + 1 points (paper 001
  Section 4.3, "equally assigned k-means"), built from the two above.
* :func:`fit_threads` bounds the OpenMP threads of a fit and restores them afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import faiss
import numpy as np
from scipy import sparse
from threadpoolctl import threadpool_limits

from harness.adapter import ProgressFn, no_progress


@dataclass(frozen=True)
class KmeansSettings:
    """How much work one k-means does; adapters record these with the fit.

    ``max_points_per_centroid`` is faiss's subsampling: Lloyd iterations run on at most
    k * max_points_per_centroid points drawn at random (seeded), and every point is then assigned
    to its nearest final centroid. ``nprobe`` (> 0) selects :func:`indexed_kmeans`' approximate
    assignment: the IVF cells searched per point; 0 is the exact search over all centroids.
    """

    niter: int
    max_points_per_centroid: int = 256
    nprobe: int = 0

    def record(self) -> dict:
        """The settings as stored with a run."""
        return asdict(self)


@dataclass(frozen=True)
class KmeansBudget:
    """A profile's cap on the k-means work of a fit: the clustering adapters' budget (part of the
    run's identity, so a changed cap is a new configuration).

    ``max_niter`` caps the adapter's configured iterations (None: no cap);
    ``max_points_per_centroid`` is faiss's training subsample; ``nprobe`` > 0 lets a k-means with
    at least ``indexed_from`` clusters assign through :func:`indexed_kmeans` with that many cells
    per point (0: always the exact search).
    """

    max_niter: int | None = None
    max_points_per_centroid: int = 256
    nprobe: int = 0
    indexed_from: int = 20_000

    def settings(self, niter: int, k: int = 0) -> KmeansSettings:
        """The settings for ``niter`` configured iterations and ``k`` clusters under this cap."""
        return KmeansSettings(
            niter=min(niter, self.max_niter or niter), max_points_per_centroid=self.max_points_per_centroid,
            nprobe=self.nprobe if self.nprobe and k >= self.indexed_from else 0,
        )


def budget_of(fit_budget: KmeansBudget | None) -> KmeansBudget:
    """The budget a fit runs under: the profile's, or no cap when the caller gave none (library use)."""
    return fit_budget if fit_budget is not None else KmeansBudget()


@contextmanager
def fit_threads(threads: int) -> Iterator[None]:
    """Run a fit with at most ``threads`` OpenMP/BLAS threads (0: leave them as they are), then
    restore the previous counts.

    faiss and torch share one OpenMP runtime when torch is imported first (faiss's GOMP calls bind
    to torch's already loaded libgomp), so ``faiss.omp_set_num_threads`` would also change
    torch's thread count for the rest of the process; threadpoolctl restores both on exit.
    """
    with threadpool_limits(limits=threads or None):
        yield


def kmeans(points: np.ndarray, k: int, settings: KmeansSettings, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """faiss k-means; returns (centroids (k, d), nearest-centroid labels (n,)).

    ``min_points_per_centroid=1`` only silences faiss's "please provide at least 39*k points"
    warning (few points per centroid is intended here, e.g. k-sub groups); results are unchanged.
    """
    points = np.ascontiguousarray(points, dtype=np.float32)
    km = faiss.Kmeans(
        points.shape[1], k, niter=settings.niter, seed=seed, min_points_per_centroid=1,
        max_points_per_centroid=settings.max_points_per_centroid,
    )
    km.train(points)
    _, labels = km.index.search(points, 1)
    return km.centroids, labels[:, 0]


def indexed_kmeans(
    points: np.ndarray, k: int, settings: KmeansSettings, seed: int, progress: ProgressFn = no_progress,
) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd k-means whose assignment step searches an IVF index over the centroids
    (approximate k-means, Philbin et al., CVPR 2007, with an inverted file instead of k-d trees).

    The exact step costs n*k*d multiply-adds per iteration (1.9e13 for 100,015 clusters of
    250,037 me5-small rows: minutes per iteration on 2 cores). Here the space is cut once into
    ``nlist`` = sqrt(n * nprobe) cells (faiss k-means on the points, 10 iterations, 64 points per
    cell), every point keeps its ``nprobe`` nearest cells, and each iteration files the centroids
    into the cells and compares a point only with the centroids of its cells: about
    (nlist * k + n * nprobe * k / nlist) * d multiply-adds. A point whose cells hold no centroid is
    compared with all of them. Initial centroids are k distinct random points (faiss's
    initialisation); an empty cluster keeps its centroid. ``settings.niter`` update steps, then
    a final assignment; ``progress`` is told after each assignment. Returns (centroids, labels).
    """
    points = np.ascontiguousarray(points, dtype=np.float32)
    n, d = points.shape
    nprobe = max(settings.nprobe, 1)
    nlist = max(1, min(k, math.isqrt(n * nprobe)))
    cells = faiss.Kmeans(d, nlist, niter=10, seed=seed, min_points_per_centroid=1, max_points_per_centroid=64)
    cells.train(points)
    _, near_cells = cells.index.search(points, min(nprobe, nlist))  # (n, nprobe), fixed for all iterations
    centroids = points[np.random.default_rng(seed).choice(n, k, replace=False)]
    for step in range(settings.niter + 1):
        progress("k-means iterations", step, settings.niter + 1)
        labels = _assign_in_cells(points, centroids, cells.index, near_cells)
        if step == settings.niter:
            break
        means, counts = cluster_means(points, labels, k)
        centroids = np.where(counts[:, None] > 0, means, centroids).astype(np.float32)
    progress("k-means iterations", settings.niter + 1, settings.niter + 1)
    return centroids, labels


def _assign_in_cells(points: np.ndarray, centroids: np.ndarray, cells: faiss.Index, near_cells: np.ndarray) -> np.ndarray:
    """Nearest centroid among those filed in each point's cells; exact search where none is."""
    index = faiss.IndexIVFFlat(cells, points.shape[1], cells.ntotal)
    index.add(centroids)
    index.nprobe = near_cells.shape[1]
    _, labels = index.search_preassigned(points, 1, near_cells, np.zeros(near_cells.shape, dtype=np.float32))
    labels = labels[:, 0]
    lost = np.flatnonzero(labels < 0)
    if lost.size:
        exact = faiss.IndexFlatL2(points.shape[1])
        exact.add(centroids)
        labels[lost] = exact.search(points[lost], 1)[1][:, 0]
    return labels


def any_kmeans(
    points: np.ndarray, k: int, settings: KmeansSettings, seed: int, progress: ProgressFn = no_progress,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`indexed_kmeans` when ``settings.nprobe`` asks for it, else :func:`kmeans`."""
    if settings.nprobe:
        return indexed_kmeans(points, k, settings, seed, progress)
    progress("k-means", 0, 1)
    out = kmeans(points, k, settings, seed)
    progress("k-means", 1, 1)
    return out


def squared_distances(points: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """(n, d), (k, d) -> (n, k) squared L2 distances."""
    cross = points @ centroids.T
    return (points * points).sum(1)[:, None] - 2 * cross + (centroids * centroids).sum(1)[None, :]


def assign_with_capacity(dist: np.ndarray, capacity: int, extra: int = 0) -> np.ndarray:
    """Labels (n,) for distances (n, k) when each cluster holds at most ``capacity`` points and at
    most ``extra`` clusters may hold one more.

    Greedy rounds: every unassigned point proposes to its nearest cluster that still has room;
    each cluster keeps its closest proposers up to its room; extra slots go to the clusters whose
    next proposer is closest. Every round fills a cluster or assigns everyone, so at most k + 1
    rounds. Where no cluster overflows this is plain nearest-centroid assignment.
    """
    n, k = dist.shape
    if k * capacity + extra < n:
        raise ValueError(f"{k} clusters of {capacity} (+{extra}) cannot hold {n} points")
    labels = np.full(n, -1, dtype=np.int64)
    size = np.zeros(k, dtype=np.int64)
    extra_left = extra
    pending = np.arange(n)
    while pending.size:
        open_ = np.flatnonzero((size < capacity) | ((size == capacity) & (extra_left > 0)))
        choice = open_[np.argmin(dist[np.ix_(pending, open_)], axis=1)]
        d = dist[pending, choice]
        order = np.lexsort((d, choice))  # by cluster, closest first
        pending, choice, d = pending[order], choice[order], d[order]
        first = np.searchsorted(choice, choice, side="left")
        rank = np.arange(len(choice)) - first  # position among this cluster's proposers
        room = np.maximum(capacity - size[choice], 0)
        accept = rank < room
        # one extra slot per cluster, for its next proposer, closest proposers first
        candidates = np.flatnonzero(rank == room)
        if extra_left and candidates.size:
            granted = candidates[np.argsort(d[candidates], kind="stable")[:extra_left]]
            accept[granted] = True
            extra_left -= len(granted)
        labels[pending[accept]] = choice[accept]
        size += np.bincount(choice[accept], minlength=k)
        pending = np.sort(pending[~accept])
    return labels


def balanced_kmeans(points: np.ndarray, k: int, settings: KmeansSettings, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """k-means with equal cluster sizes: every cluster gets n//k or n//k + 1 points.

    Start from faiss k-means centroids, then alternate a size-constrained assignment
    (:func:`assign_with_capacity` with capacity n//k and n%k extra slots, which forces exactly
    equal sizes up to one) and a centroid update (member means), for up to ``niter`` rounds or
    until the labels stop changing (``settings.niter`` serves both). The constrained assignment is greedy, not an optimal
    transport solution: the exact one (Hungarian on an n x n replicated-centroid cost) is
    O(n^3) and out of reach for a 30k-token vocabulary.
    """
    points = np.ascontiguousarray(points, dtype=np.float32)
    n = len(points)
    centroids, _ = kmeans(points, k, settings, seed)
    labels = np.full(n, -1, dtype=np.int64)
    for _ in range(max(settings.niter, 1)):
        new = assign_with_capacity(squared_distances(points, centroids), n // k, n % k)
        if np.array_equal(new, labels):
            break
        labels = new
        centroids, _ = cluster_means(points, labels, k)
    return centroids, labels


def cluster_means(points: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean of the points of every cluster (zeros where empty) and the cluster sizes (k,)."""
    n = len(points)
    members = sparse.csr_matrix((np.ones(n, dtype=points.dtype), (labels, np.arange(n))), shape=(k, n))
    counts = np.bincount(labels, minlength=k)
    return np.asarray(members @ points) / np.maximum(counts, 1)[:, None], counts
