"""Clustering each token's vectors into its senses (paper 004 Section 3.1; Appendix C and H for the
number per token): k-means with at most ``k`` senses (:mod:`harness.methods.kmeans`, faiss), or
Markov clustering to pick each token's own number; :func:`build` makes the
:class:`~harness.methods.senses.dictionary.SenseDictionary` of a :class:`TokenVectors` sample.

Choices where paper 004 is silent, following the authors' code (Qitong-Wang/SenseDict,
DeBERTa/a1_mclsingle.py; Llama/a1_mclmulti.py, a1_kmeans_withmcl.py):

* A token seen at most ``k`` times keeps its sampled vectors as its senses (k-means with k >= n
  puts a centroid on every point; the authors keep raw vectors below a minimum count). One sense
  (k = 1) is the mean of all the token's vectors, k-means' exact optimum (faiss would fit it on a
  subsample of 256).
* Markov clustering (Appendix C/H) as the authors' scripts run it (Llama/a1_mclmulti.py,
  a1_kmeans_withmcl.py, run_multithread_cluster.sh; the paper names only MCL, inflation 1.65,
  expansion 2 and the 0.1 / 0.4 fractions, so the code settles the rest): similarity
  1 / (euclidean distance + 0.01) between a token's vectors, ``markov_clustering`` (the authors'
  library) with inflation 1.65, expansion 2 and its defaults (the diagonal set to self-loop weight
  1, pruning below 1e-3 keeping each column's largest entry, at most 100 iterations), one cluster
  per distinct attractor row; tokens with fewer than 5 vectors keep them; with c clusters
  k_t = int(0.4 c) if c > 900 else int(0.1 c), at least 5, the token's vectors where it has no more
  than k_t, else k-means with k_t. ``k`` does not cap k_t (paper 004 Table 6: 20% of Llama's tokens
  have more than 15), reported in Table 6's bins
  (:data:`~harness.methods.senses.dictionary.TABLE6_SENSES`) with what MCL found (``mcl``: tokens
  given one cluster). Per-token counts equal those of the authors' two scripts run on the same
  vectors (MiniLM, WikiText-2 quick fit: all 8,962 tokens, as read and 30x larger).
  The count follows the vectors' scale, not only their geometry: the self-loop weight stays 1
  while the similarities scale as 1 / distance. MiniLM's same-token vectors lie about 4 apart, so
  MCL gives almost every token one cluster and k_t is the minimum 5, whatever the inflation; the
  same vectors 30x apart split into up to one cluster per vector (docs/methods.md).
"""

from __future__ import annotations

import contextlib
import io
from typing import Literal, Sequence

import numpy as np
import torch
from scipy.spatial.distance import pdist, squareform

from harness.errors import DataError
from harness.methods.kmeans import KmeansSettings, fit_threads, kmeans
from harness.methods.senses.collect import Progress, TokenVectors
from harness.methods.senses.dictionary import SenseDictionary

Clustering = Literal["kmeans", "mcl"]

KMEANS_NITER = 25         # faiss's default; each token's problem is small (<= cap points)
MCL_INFLATION = 1.65      # paper 004 Appendix H
MCL_EXPANSION = 2
MCL_MIN_VECTORS = 5       # SenseDictionary run_multithread_cluster.sh --occurance 5
MCL_THRESHOLD = 900       # a1_kmeans_withmcl.py --k_threshold 900
MCL_FRACTIONS = (0.1, 0.4)  # --k_percent_below / --k_percent_above
MCL_MIN_K = 5


def mcl_clusters(vectors: np.ndarray) -> int:
    """Number of Markov clusters among one token's vectors, as the authors' a1_mclmulti.py counts
    them (module docstring): ``markov_clustering`` on the similarity 1 / (euclidean distance + 0.01)
    with inflation 1.65, expansion 2 and the library's defaults, one cluster per distinct attractor row."""
    with contextlib.redirect_stderr(io.StringIO()):  # the package writes a matplotlib notice on import
        import markov_clustering as mc
    similarity = 1.0 / (squareform(pdist(vectors.astype(np.float64), metric="euclidean")) + 0.01)
    flow = mc.run_mcl(similarity, inflation=MCL_INFLATION, expansion=MCL_EXPANSION)
    return len(mc.get_clusters(flow))


def mcl_senses(clusters: int, n: int) -> int:
    """k_t of a token with ``n`` vectors and ``clusters`` Markov clusters (paper 004 Appendix C,
    a1_kmeans_withmcl.py): 40% of the clusters above 900, else 10%, at least 5, at most ``n``."""
    k_t = int(clusters * (MCL_FRACTIONS[1] if clusters > MCL_THRESHOLD else MCL_FRACTIONS[0]))
    return min(n, max(k_t, MCL_MIN_K))


def senses_wanted(vectors: np.ndarray, k: int, clustering: Clustering) -> tuple[int, int]:
    """How many senses a token with these vectors gets, and the Markov cluster count it came from
    (0 where MCL did not run): k-means at most ``k``; Markov clustering :func:`mcl_senses` of
    :func:`mcl_clusters` (``k`` does not cap it), tokens with fewer than 5 vectors keeping them."""
    n = len(vectors)
    if clustering == "kmeans":
        return min(k, n), 0
    if n < MCL_MIN_VECTORS:
        return n, 0
    c = mcl_clusters(vectors)
    return mcl_senses(c, n), c


def token_senses(vectors: np.ndarray, k_t: int, seed: int) -> np.ndarray:
    """(n, D) vectors of one token -> (k_t, D) float32 senses: the vectors themselves when k_t = n,
    their mean when k_t = 1, else k-means centroids."""
    points = vectors.astype(np.float32)
    if k_t == len(points):
        return points
    if k_t == 1:
        return points.mean(0, keepdims=True)
    centroids, _ = kmeans(points, k_t, KmeansSettings(KMEANS_NITER), seed)
    return centroids


def kmeans_senses(vector_sets: Sequence[np.ndarray], k: int, seed: int) -> list[np.ndarray]:
    """Each (n, D) set of vectors as at most ``k`` senses by k-means (:func:`token_senses`: the
    vectors themselves when n <= k, their mean when k = 1): paper 004 Appendix E's senses of whole
    words, one set of context occurrences per word."""
    with fit_threads(1):  # tiny problems per word: two spinning OpenMP threads made each 100x slower on 2 busy cores
        return [token_senses(v, senses_wanted(v, k, "kmeans")[0], seed) for v in vector_sets]


def mcl_summary(clusters: np.ndarray) -> dict[str, float]:
    """Markov cluster counts over the tokens MCL ran on (``clusters`` per token id, 0 where it did not):
    how many it ran on, how many it gave a single cluster, and the median, 90th percentile and
    largest count. A single cluster gives the minimum 5 senses (:func:`mcl_senses`)."""
    found = clusters[clusters > 0]
    if not len(found):
        return {"tokens_clustered": 0, "tokens_one_cluster": 0}
    return {"tokens_clustered": len(found), "tokens_one_cluster": int((found == 1).sum()),
            "clusters_median": float(np.median(found)), "clusters_p90": float(np.percentile(found, 90)),
            "clusters_max": int(found.max())}


def build(vectors: TokenVectors, vocab_size: int, k: int, clustering: Clustering, *, min_count: int = 1,
          fp16: bool = True, seed: int = 0, progress: Progress | None = None) -> SenseDictionary:
    """Cluster every token seen at least ``min_count`` times into its senses (:func:`senses_wanted`
    of them, :func:`token_senses`).

    Raises DataError when no token qualifies (the fit text is too small for ``min_count``).
    """
    chosen = np.flatnonzero(vectors.seen >= min_count)
    if not len(chosen):
        raise DataError(
            f"the fit text ({vectors.tokens_read} tokens) gives no token a sense: none occurs {min_count} times; "
            "use a larger corpus or budget, or a smaller min_count"
        )
    counts, clusters = np.zeros(vocab_size, dtype=np.int64), np.zeros(vocab_size, dtype=np.int64)
    parts = []
    with fit_threads(1):  # tiny problems per token: two spinning OpenMP threads made each 100x slower on 2 busy cores
        for step, i in enumerate(chosen):
            points = vectors.of(i).astype(np.float32)
            k_t, clusters[vectors.ids[i]] = senses_wanted(points, k, clustering)
            senses = token_senses(points, k_t, seed)
            counts[vectors.ids[i]] = len(senses)
            parts.append(senses)
            if progress and (step + 1 == len(chosen) or step % 256 == 0):
                progress("senses", step + 1, len(chosen))
    # parts follow ascending token ids, the order the ragged offsets address
    offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(counts)]))
    senses = torch.from_numpy(np.concatenate(parts)).to(torch.float16 if fp16 else torch.float32)
    return SenseDictionary(offsets, senses, mcl=mcl_summary(clusters) if clustering == "mcl" else None)
