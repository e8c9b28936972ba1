"""k-means for the clustering adapters (asg, sg, ksub): faiss k-means, an indexed k-means for many
clusters, size-constrained assignment, and the thread limit fitting runs under.

* :func:`kmeans` is faiss's Lloyd k-means (random initial centroids, training points subsampled to
  ``max_points_per_centroid`` per centroid) followed by a nearest-centroid search, seeded.
* :func:`indexed_kmeans` is Lloyd k-means for tens of thousands of clusters (SG's 40% of a 250k
  vocabulary): a point is compared only with the centroids in its nearest cells of a coarse
  partition, as torch matrix products on the run's device.
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
import torch
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
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd k-means whose assignment step compares a point only with the centroids filed in its
    ``nprobe`` nearest cells of a coarse partition (approximate k-means, Philbin et al., CVPR 2007,
    with an inverted file instead of k-d trees), for tens of thousands of clusters.

    The exact step costs n*k*d multiply-adds per iteration (9.6e12 for 100,015 clusters of the
    250,037 x 384 me5-small table: minutes per iteration on 2 cores). Here the space is cut once
    into ``nlist`` = sqrt(n * nprobe) cells (faiss k-means, 10 iterations on 64 points per cell;
    cells trained on less come out uneven, and the work below grows with their squared sizes: 10x
    on me5-small with 1 iteration on 16 points per cell), and every point keeps its ``nprobe``
    nearest cells. Each iteration files the centroids into their nearest cell and compares every
    point with the centroids of its cells: about (n * nlist + k * nlist + nprobe * n * k / nlist) * d
    multiply-adds, the last term times the cells' imbalance (about 3 on me5-small). A point whose
    cells hold no centroid is compared with all of them. The distances are torch matrix products
    on ``device``, one cell at a time (a GPU does the heavy part; faiss trains the cells on the
    CPU). Initial centroids are k distinct random points (faiss's initialisation); an empty
    cluster keeps its centroid. ``settings.niter`` update steps, then a final assignment;
    ``progress`` is told when the cells are trained and after each assignment.
    Returns (centroids, labels) as numpy arrays.
    """
    points = np.ascontiguousarray(points, dtype=np.float32)
    n, d = points.shape
    nprobe = max(settings.nprobe, 1)
    nlist = max(1, min(k, math.isqrt(n * nprobe)))
    progress("k-means cells", 0, 1)
    cells = faiss.Kmeans(d, nlist, niter=10, seed=seed, min_points_per_centroid=1, max_points_per_centroid=64)
    cells.train(points)
    progress("k-means cells", 1, 1)
    x = torch.from_numpy(points).to(device)
    cell_vectors = torch.from_numpy(cells.centroids).to(device)
    probes = _Probes(_nearest(x, cell_vectors, min(nprobe, nlist)), nlist)  # fixed for all iterations
    centroids = x[torch.from_numpy(np.random.default_rng(seed).choice(n, k, replace=False)).to(device)]
    for step in range(settings.niter + 1):
        progress("k-means iterations", step, settings.niter + 1)
        labels = probes.assign(x, centroids, _nearest(centroids, cell_vectors, 1)[:, 0])
        if step == settings.niter:
            break
        sums = torch.zeros_like(centroids).index_add_(0, labels, x)
        counts = torch.bincount(labels, minlength=k)[:, None]
        centroids = torch.where(counts > 0, sums / counts.clamp(min=1), centroids)
    progress("k-means iterations", settings.niter + 1, settings.niter + 1)
    return centroids.cpu().numpy(), labels.cpu().numpy()


CHUNK, BLOCK = 8192, 1 << 26
"""Rows and distances per block in :func:`_nearest`: at most CHUNK rows and 256 MiB of float32."""


def _nearest(x: torch.Tensor, centroids: torch.Tensor, count: int) -> torch.Tensor:
    """(n, count) indices of each row's ``count`` nearest centroids (squared L2), in blocks of rows."""
    norms = (centroids * centroids).sum(1)
    rows = max(1, min(CHUNK, BLOCK // len(centroids)))
    return torch.cat([
        torch.addmm(norms, x[s:s + rows], centroids.T, alpha=-2).topk(count, dim=1, largest=False).indices
        for s in range(0, len(x), rows)
    ])


class _Probes:
    """The (point, cell) pairs of :func:`indexed_kmeans`, grouped by cell once: which points each
    cell is searched for."""

    def __init__(self, near_cells: torch.Tensor, nlist: int):
        n, nprobe = near_cells.shape
        self.n, self.nprobe, self.nlist = n, nprobe, nlist
        cells = near_cells.reshape(-1)
        self.order = torch.argsort(cells, stable=True)  # pair positions (point * nprobe + probe), grouped by cell
        self.point = self.order // nprobe  # the point of each grouped pair
        self.cell = cells[self.order]  # the cell of each grouped pair
        self.bounds = _bounds(cells, nlist)

    def assign(self, x: torch.Tensor, centroids: torch.Tensor, centroid_cells: torch.Tensor) -> torch.Tensor:
        """(n,) label of each point: its nearest centroid among those filed in its cells."""
        by_cell = torch.argsort(centroid_cells, stable=True)
        filed = _bounds(centroid_cells, self.nlist)
        grouped = centroids[by_cell]
        norms = (grouped * grouped).sum(1)
        best = torch.full((len(self.order),), math.inf, device=x.device)
        arg = torch.zeros(len(self.order), dtype=torch.long, device=x.device)  # within the cell's centroids
        for cell in range(self.nlist):
            a, b, c0, c1 = self.bounds[cell], self.bounds[cell + 1], filed[cell], filed[cell + 1]
            if a < b and c0 < c1:
                dist = torch.addmm(norms[c0:c1], x[self.point[a:b]], grouped[c0:c1].T, alpha=-2)
                torch.min(dist, 1, out=(best[a:b], arg[a:b]))
        start = torch.tensor(filed[:-1], device=x.device)
        label = torch.empty_like(arg)
        label[self.order] = by_cell[(arg + start[self.cell]).clamp(max=len(by_cell) - 1)]
        distance = torch.empty_like(best)
        distance[self.order] = best
        distance = distance.view(self.n, self.nprobe)
        pick = distance.argmin(1, keepdim=True)  # the point's nearest over its cells
        labels = label.view(self.n, self.nprobe).gather(1, pick)[:, 0]
        lost = torch.nonzero(torch.isinf(distance.gather(1, pick)[:, 0]))[:, 0]
        if len(lost):  # no centroid in any of the point's cells
            labels[lost] = _nearest(x[lost], centroids, 1)[:, 0]
        return labels


def _bounds(groups: torch.Tensor, count: int) -> list[int]:
    """Offsets [0, ..., len] of groups 0..count-1 in ``groups`` sorted (as python ints)."""
    return [0, *torch.bincount(groups, minlength=count).cumsum(0).tolist()]


def any_kmeans(
    points: np.ndarray, k: int, settings: KmeansSettings, seed: int, progress: ProgressFn = no_progress,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`indexed_kmeans` (on ``device``) when ``settings.nprobe`` asks for it, else :func:`kmeans`."""
    if settings.nprobe:
        return indexed_kmeans(points, k, settings, seed, progress, device)
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
