"""k-sub-embeddings (paper 001: "Reconstructing word embeddings via scattered k-sub-embedding").

* Section 3.1: every token n gets a code F(n) = (f_1(n), ..., f_K(n)), one index per sub-table;
  sub-table k holds M vectors of dimension D/K (near-equal widths when K does not divide D, below), and the token's embedding is the concatenation
  e_n = e^1_{f_1(n)} ⊕ ... ⊕ e^K_{f_K(n)} (Eq. 2). Embedding params K * M * D/K = M * D.
  Requirement 1 (uniqueness): no two tokens share all K indices. Requirement 2: tokens with
  similar meanings share more sub-embeddings than arbitrary pairs.
* Section 3.2, Algorithm 1 (``allocation=random``): M = ceil(V^(1/K)), the smallest M with
  M^K >= V, and f_k(n) = floor(n / M^(k-1)) mod M, the k-th base-M digit of the token id (the
  printed "(n/M^(k-1)) mod M^k" read as the digit, as its comment says). Unique by construction.
* Section 3.3, Algorithm 2 (``allocation=clustered``): for k = 1..K-1, within every group of
  tokens sharing the prefix (f_1, ..., f_{k-1}), k-means with M clusters over the pretrained
  embedding vectors gives f_k; at level K the tokens of a group get distinct random labels among M.
  Section 4.3: naive k-means (``kmeans=naive``) or equal cluster sizes (``kmeans=equal``).

The structure is ASG's (paper 000) with other codes: the K sub-tables stack into one (K*M, D/K)
parameter, sub-table k at rows k*M..(k+1)*M-1, and the (V, K) code map is a fixed buffer in the
smallest unsigned dtype. So the modules are ASG's :class:`ConceptEmbedding` (input) and
:class:`ConceptLMHead` (output, logit_n = sum_k h_k . e^k_{f_k(n)}, no V x D matrix), reused.

Choices where the paper is open, written down here:

* Widths: the paper uses K = 3 with d = 512, which 3 does not divide. The table's width D is split
  into K slices of near-equal width, the first D mod K one wider (512: 171, 171, 170; the default
  K = 3 then fits any width). Embedding params stay M * D. When K divides D the sub-tables stack
  into ASG's modules as below; otherwise they sit side by side in one (M, D) parameter, sub-table k
  in columns of slice k (:class:`UnevenSubEmbedding`, :class:`UnevenSubHead`: the same sums, through
  torch's ``embedding_bag`` alone).

* Initialisation. The paper initialises the sub-tables randomly and pretrains from scratch; the
  harness adapts a pretrained model, so sub-table vector m of table k starts as the mean of slice
  k (dims k*D/K..(k+1)*D/K) of the pretrained rows of the tokens whose f_k is m: the least-squares
  fit of the table for fixed codes. Indices no token uses (possible for the top digit of
  Algorithm 1) start as the mean of that slice over all tokens.
* ``M=0`` (the default) means the Algorithm 1 minimum ceil(V^(1/K)) for either allocation; a
  larger M is allowed (Table 3 uses M = 50, 100, 200 with K = 3); M^K < V is rejected (codes could
  not be unique) and so is M >= V (nothing would be saved).
* Algorithm 2 clusters whole pretrained rows (the paper's rho_n), not their slices, with faiss
  k-means (random initial centroids; the paper cites k-means++), ``niter`` iterations, seeded.
  The smoke profile caps them at 2 and trains on 16 points per centroid (:data:`BUDGETS`,
  recorded with the run under ``kmeans``); quick and paper run the configured iterations.
* Uniqueness under naive k-means: a level-k group must fit into the M^(K-k) codes left below it,
  which the paper's Algorithm 2 does not guarantee. Each cluster is therefore capped at M^(K-k)
  tokens; points of an overfull cluster go to their next-nearest cluster with room
  (:func:`harness.methods.kmeans.assign_with_capacity`). The cap binds rarely when M > ceil(V^(1/K)).
* Equal-size k-means: :func:`harness.methods.kmeans.balanced_kmeans`, faiss centroids refined by
  alternating a greedy size-constrained assignment (every cluster n//M or n//M + 1 tokens) with
  member-mean updates.
* A group with no more tokens than M (including single tokens) is split trivially: every token its
  own cluster, labels drawn at random without repetition, as at the last level.
* Output side (the paper replaces only the input embedding and ties the MLM decoder to it): models
  with an output head get the sub-embedding head; a tied base shares the input's sub-tables and
  codes (the tie is preserved; ``tie_weights()`` is told to leave the head alone), an untied head
  gets its own allocation from its own table. ``--set output=false`` keeps a dense head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from harness.adapters.asg import ConceptEmbedding, ConceptLMHead
from threadpoolctl import threadpool_limits
from torch import nn

from harness.adapter import Adapter, Compressed, FitContext, ProgressFn, replace_tables
from harness.methods.tables import input_table
from harness.budgets import Budgets
from harness.config import require_positive
from harness.errors import ConfigError
from harness.methods.kmeans import (
    KmeansBudget,
    KmeansSettings,
    assign_with_capacity,
    balanced_kmeans,
    budget_of,
    fit_threads,
    kmeans,
    squared_distances,
)

BUDGETS = Budgets(smoke=KmeansBudget(max_niter=2, max_points_per_centroid=16), quick=KmeansBudget(), paper=KmeansBudget())


def min_sub_embeddings(vocab: int, K: int) -> int:
    """ceil(V^(1/K)) in exact integer arithmetic: the smallest M with M^K >= V (Algorithm 1, line 2)."""
    M = max(1, round(vocab ** (1 / K)))
    while M**K < vocab:
        M += 1
    while M > 1 and (M - 1) ** K >= vocab:
        M -= 1
    return M


@dataclass(frozen=True)
class KsubConfig:
    K: int = 3                                          # sub-tables; the table's width is split into K near-equal slices
    M: int = 0                                          # vectors per sub-table; 0 = ceil(V^(1/K)) (Algorithm 1)
    allocation: Literal["random", "clustered"] = "random"  # Algorithm 1 (base-M digits) or 2 (recursive k-means)
    kmeans: Literal["naive", "equal"] = "naive"         # Algorithm 2's k-means: naive or equal cluster sizes
    output: bool = True                                 # also replace the output embedding when the model has one
    niter: int = 25                                     # k-means iterations (Algorithm 2)

    def __post_init__(self) -> None:
        require_positive(K=self.K, niter=self.niter)
        if self.M < 0:
            raise ConfigError(f"M={self.M} must be 0 (= ceil(V^(1/K))) or a positive integer")
        if self.kmeans == "equal" and self.allocation != "clustered":
            raise ConfigError("kmeans=equal applies to clustered allocation; add --set allocation=clustered")

    def sub_embeddings(self, vocab: int) -> int:
        """M for a vocabulary of ``vocab`` tokens."""
        return self.M or min_sub_embeddings(vocab, self.K)

    def check_table(self, vocab: int, dim: int) -> None:
        """Validate against the table this config will replace (V x D)."""
        if self.K > dim:
            raise ConfigError(f"K={self.K} sub-embeddings cannot split a table {dim} wide; pick K <= {dim}")
        M, least = self.sub_embeddings(vocab), min_sub_embeddings(vocab, self.K)
        if M < least:
            raise ConfigError(f"M={M} gives {M}^{self.K} < V={vocab} codes, so codes cannot be unique; pick M >= {least} or M=0")
        if M >= vocab:
            raise ConfigError(f"M={M} is not below V={vocab}, so nothing is compressed; pick {least} <= M < {vocab}")


def random_codes(vocab: int, K: int, M: int) -> np.ndarray:
    """Algorithm 1: (V, K) codes, f_k(n) = floor(n / M^(k-1)) mod M."""
    n = np.arange(vocab, dtype=np.int64)
    return np.stack([(n // M**k) % M for k in range(K)], axis=1)


def _split(
    points: np.ndarray, M: int, capacity: int, equal: bool, settings: KmeansSettings, seed: int, rng: np.random.Generator,
) -> np.ndarray:
    """Cluster labels in [0, M) for one group, no cluster above ``capacity`` tokens."""
    n = len(points)
    if n <= M:
        return rng.permutation(M)[:n]
    if equal:
        return balanced_kmeans(points, M, settings, seed)[1]
    centroids, labels = kmeans(points, M, settings, seed)
    if np.bincount(labels, minlength=M).max() <= capacity:
        return labels
    return assign_with_capacity(squared_distances(points, centroids), capacity)


def clustered_codes(
    table: np.ndarray, K: int, M: int, equal: bool, settings: KmeansSettings, seed: int, progress: ProgressFn
) -> np.ndarray:
    """Algorithm 2: (V, K) codes by recursive k-means within groups sharing a code prefix."""
    vocab = len(table)
    points = np.ascontiguousarray(table, dtype=np.float32)
    rng = np.random.default_rng(seed)
    codes = np.zeros((vocab, K), dtype=np.int64)
    groups = [np.arange(vocab)]
    for level in range(K):
        progress("clustered allocation, level", level, K)
        capacity = M ** (K - 1 - level)  # codes left below each label of this level
        children = []
        # below level 1 the groups are small: one thread beats OpenMP/BLAS fork-join (by 30x on a busy machine)
        with threadpool_limits(None if level == 0 else 1):
            for members in groups:
                if level == K - 1:  # last level: distinct random labels (Algorithm 2, line 12)
                    codes[members, level] = rng.permutation(M)[:len(members)]
                    continue
                labels = _split(points[members], M, capacity, equal, settings, seed, rng)
                codes[members, level] = labels
                order = np.argsort(labels, kind="stable")
                bounds = np.flatnonzero(np.diff(labels[order])) + 1
                children += np.split(members[order], bounds)
        groups = children
    progress("clustered allocation, level", K, K)
    return codes


def sub_widths(dim: int, K: int) -> tuple[int, ...]:
    """Widths of the K slices of a D-wide table: near-equal, the first D mod K one wider."""
    base, wider = divmod(dim, K)
    return (base + 1,) * wider + (base,) * (K - wider)


def sub_tables_from(table: torch.Tensor, codes: torch.Tensor, M: int) -> list[torch.Tensor]:
    """The K sub-tables, (M, d_k) each: vector m of table k = mean of slice k over the tokens with f_k = m."""
    K = codes.shape[1]
    slices = table.detach().float().split(list(sub_widths(table.shape[1], K)), dim=1)
    out = []
    for k, values in enumerate(slices):
        sums = torch.zeros(M, values.shape[1]).index_add_(0, codes[:, k], values)
        counts = torch.bincount(codes[:, k], minlength=M)
        means = sums / counts.clamp(min=1)[:, None]
        means[counts == 0] = values.mean(0)  # unused index: the slice's overall mean
        out.append(means.to(table.dtype))
    return out


class UnevenSubEmbedding(ConceptEmbedding):
    """Input side when K does not divide D: the K sub-tables side by side in one (M, D) parameter,
    sub-table k in the columns of slice k; token n -> concat_k of row f_k(n) of slice k."""

    def __init__(self, tables: torch.Tensor, codes: torch.Tensor, widths: tuple[int, ...]):
        super().__init__(tables, codes, k=tables.shape[0], shared=False)
        self.widths = tuple(widths)

    @property
    def embedding_dim(self) -> int:
        return self.codebooks.shape[1]

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        codes = self.concept_ids[input_ids].long()  # (..., K)
        parts = self.codebooks.split(list(self.widths), dim=1)
        return torch.cat([F.embedding(codes[..., k], part) for k, part in enumerate(parts)], dim=-1)


class UnevenSubHead(ConceptLMHead):
    """Output side of :class:`UnevenSubEmbedding`: logit_n = sum_k h_k . e^k_{f_k(n)}, the (K*M, N)
    scores of each slice against its sub-table summed over the codes by ``embedding_bag``."""

    def score_table(self, hidden: torch.Tensor, columns: int) -> torch.Tensor:
        c = self.concepts
        h = F.pad(hidden, (0, 0, 0, columns - hidden.shape[0]))
        books = c.codebooks.to(h.dtype).split(list(c.widths), dim=1)
        return torch.cat([b @ x.T for b, x in zip(books, h.split(list(c.widths), dim=1))])  # (K*M, columns)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        flat = hidden.reshape(-1, hidden.shape[-1])
        logits = self.reference_sum(self.score_table(flat, max(flat.shape[0], 2)), flat.shape[0])
        if self.bias is not None:
            logits = logits + self.bias
        return logits.reshape(*hidden.shape[:-1], -1)


class KsubAdapter(Adapter):
    """k-sub-embeddings on the input embedding, and on the output embedding when the model has one."""

    name = "ksub"
    kinds = ("encoder", "decoder", "encoder-decoder")  # an encoder-decoder's shared input table and its head alike
    config_class = KsubConfig
    budgets = BUDGETS
    recovers = ("codebooks",)  # the K sub-tables (Section 3.1: trained); the code map stays fixed

    def check(self, vocab_size: int, hidden_size: int) -> None:
        self.config.check_table(vocab_size, hidden_size)

    def allocate(self, table: torch.Tensor, fit: FitContext) -> np.ndarray:
        """(V, K) codes for a (V, D) table, by the configured allocation."""
        cfg = self.config
        vocab = table.shape[0]
        M = cfg.sub_embeddings(vocab)
        if cfg.allocation == "random":
            return random_codes(vocab, cfg.K, M)
        values = table.detach().float().cpu().numpy()
        with fit_threads(fit.threads):
            return clustered_codes(values, cfg.K, M, cfg.kmeans == "equal", self.settings(fit), fit.seed, fit.progress)

    def fit(self, table: torch.Tensor, fit: FitContext) -> ConceptEmbedding:
        """Replace a (V, D) table by K sub-tables and a (V, K) code map."""
        cfg = self.config
        cfg.check_table(*table.shape)
        M = cfg.sub_embeddings(table.shape[0])
        codes = torch.from_numpy(self.allocate(table, fit))
        tables = sub_tables_from(table.cpu(), codes, M)
        if table.shape[1] % cfg.K:
            return UnevenSubEmbedding(torch.cat(tables, dim=1).to(table.device), codes.to(table.device), sub_widths(table.shape[1], cfg.K))
        return ConceptEmbedding(torch.cat(tables).to(table.device), codes.to(table.device), k=M, shared=False)

    def head(self, fitted: ConceptEmbedding, bias: torch.Tensor | None) -> ConceptLMHead:
        """The output head over ``fitted``'s sub-tables."""
        return (UnevenSubHead if isinstance(fitted, UnevenSubEmbedding) else ConceptLMHead)(fitted, bias)

    def settings(self, fit: FitContext) -> KmeansSettings:
        """The k-means settings of this fit: the config's iterations under the profile's budget."""
        return budget_of(fit.budget).settings(self.config.niter)

    def compress(self, model: nn.Module, fit: FitContext) -> Compressed:
        vocab, dim = input_table(model).shape
        model = replace_tables(model, lambda table: self.fit(table, fit), self.head, self.config.output, self.name)
        details = {"kmeans": self.settings(fit).record()} if self.config.allocation == "clustered" else {}
        return Compressed(model, details={
            **details, "sub_widths": list(sub_widths(dim, self.config.K)), "M": self.config.sub_embeddings(vocab),
            "M_rule": "set" if self.config.M else "paper 001 Algorithm 1: ceil(V^(1/K)), the fewest that keep codes unique",
        })
