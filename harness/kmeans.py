"""k-means for the clustering adapters (asg, sg, ksub): faiss k-means and size-constrained assignment.

* :func:`kmeans` is faiss's Lloyd k-means (random initial centroids, subsampling to 256 points per
  centroid) followed by a nearest-centroid search, seeded.
* :func:`assign_with_capacity` assigns points to fixed centroids when every cluster may hold only so
  many points (k-sub-embedding codes must stay unique, paper 001 Section 3.1).
* :func:`balanced_kmeans` is k-means whose clusters all have n//k or n//k + 1 points (paper 001
  Section 4.3, "equally assigned k-means"), built from the two above.
"""

from __future__ import annotations

import faiss
import numpy as np
from scipy import sparse


def kmeans(points: np.ndarray, k: int, niter: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """faiss k-means; returns (centroids (k, d), nearest-centroid labels (n,)).

    ``min_points_per_centroid=1`` only silences faiss's "please provide at least 39*k points"
    warning (few points per centroid is intended here, e.g. SG at 40% of V); results are unchanged.
    """
    points = np.ascontiguousarray(points, dtype=np.float32)
    km = faiss.Kmeans(points.shape[1], k, niter=niter, seed=seed, min_points_per_centroid=1)
    km.train(points)
    _, labels = km.index.search(points, 1)
    return km.centroids, labels[:, 0]


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


def balanced_kmeans(points: np.ndarray, k: int, niter: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """k-means with equal cluster sizes: every cluster gets n//k or n//k + 1 points.

    Start from faiss k-means centroids, then alternate a size-constrained assignment
    (:func:`assign_with_capacity` with capacity n//k and n%k extra slots, which forces exactly
    equal sizes up to one) and a centroid update (member means), for up to ``niter`` rounds or
    until the labels stop changing. The constrained assignment is greedy, not an optimal
    transport solution: the exact one (Hungarian on an n x n replicated-centroid cost) is
    O(n^3) and out of reach for a 30k-token vocabulary.
    """
    points = np.ascontiguousarray(points, dtype=np.float32)
    n = len(points)
    centroids, _ = kmeans(points, k, niter, seed)
    labels = np.full(n, -1, dtype=np.int64)
    for _ in range(max(niter, 1)):
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
