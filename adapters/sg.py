"""SG, Semantic Grouping: the baseline of paper 000 (Kavin & Goyal), after Zhang et al. (2024).

Paper 000 compares ASG with "40% SG: Semantic Grouping as mentioned in Zhang et al. (2024)"
(Table 1 caption, Sections 1 and 3.3): k-means over whole token-embedding vectors, and every
token of a cluster (a semantic group) shares one trainable vector. "40%" is the number of groups
as a share of the vocabulary, and so the share of embedding parameters kept (Table 1, column 2).

* Groups: faiss k-means over the V rows of the input table E (V x D), C = round(fraction * V)
  clusters, seeded with the run's seed.
* Token -> its group's vector: a (V,) group-id map, a fixed persistent buffer in the smallest
  unsigned dtype, counted in storage like ASG's ConceptID map; the (C, D) group vectors are the
  only embedding parameters (fraction C/V).

Choices where the papers are open, written down here:

* The group vector starts as the mean of its members' rows under the final nearest-centroid
  assignment (one k-means centroid update; the least-squares choice for a fixed grouping). With
  C = V every token is its own group and the base table comes back exactly (tested). Clusters
  that end up empty are dropped, so no stored vector is unused; the report counts what is kept.
* k-means runs 10 iterations by default, not faiss's 25: at C = 0.4 V one iteration costs
  0.4 V^2 D multiply-adds (about 1.4e11 for MiniLM, seconds on a 2-core CPU), so ten keep the
  fit within the quick profile's budget. ``--set niter=25`` restores faiss's default.
* Large vocabularies: Zhang et al.'s recipe, plain (exact) k-means, compares every token with every group
  in each iteration, V * C * D multiply-adds: 9.6e12 for me5-small (V = 250,037, C = 100,015),
  about 250 CPU seconds per iteration here (at the 30-45e9 multiply-adds per CPU second torch
  reaches on this machine) and under a second on one GPU (estimated). With 20,000 groups or more
  (smoke: always), a token is compared only with the groups filed in its ``nprobe`` nearest cells of a
  coarse faiss partition (:func:`harness.methods.kmeans.indexed_kmeans`; smoke 1 cell and one
  iteration, quick 4, paper 16), as torch matrix products on the run's device. Its cost against
  the exact recipe on a 25,000-row random sample of me5-small's table (10,000 groups, 10
  iterations, seed 0), as the mean squared distance of a row to its group vector: quick 1.053,
  smoke 1.103, exact faiss k-means 1.076 (so quick's grouping is no worse); on the whole table
  quick 0.859, smoke 0.907. That fit takes about 75 CPU seconds (quick) and 12 (smoke) on the
  shared 2-core machine, with the same groups as the faiss IVF scan it replaced (450 s / 59 s).
  On a GPU only the cells' faiss k-means stays on the CPU (about a third of quick's CPU time here);
  quick's assignments, about 1.6e12 multiply-adds in some 11,000 products, are a fraction of a
  second of GPU arithmetic (estimated, not measured). The settings are recorded with the run
  under ``kmeans`` (:data:`BUDGETS`).
* Decoders: only the input side is grouped. Tokens of one group would get identical logits from a
  grouped output head, so generation could not tell them apart (paper 000 Section 1: SG "is
  limited to encoder-only models"); the output head stays the dense V x D matrix. When the base
  ties input and output, the tie is cleared so ``tie_weights()`` leaves that dense head alone;
  the head keeps the pretrained table and is counted in storage and parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from harness.adapters.asg import concept_id_dtype
from torch import nn

from harness.adapter import Adapter, Compressed, FitContext, ProgressFn, no_progress, replace_tables
from harness.budgets import Budgets
from harness.config import require_positive
from harness.errors import ConfigError
from harness.methods.index_maps import IndexMaps
from harness.methods.kmeans import KmeansBudget, KmeansSettings, any_kmeans, budget_of, cluster_means, fit_threads

BUDGETS = Budgets(
    smoke=KmeansBudget(max_niter=1, max_points_per_centroid=16, nprobe=1, indexed_from=0),
    quick=KmeansBudget(nprobe=4),
    paper=KmeansBudget(nprobe=16),
)


@dataclass(frozen=True)
class SgConfig:
    fraction: float = 0.4  # semantic groups as a share of V; embedding params kept = groups / V ("40% SG")
    niter: int = 10        # k-means iterations

    def __post_init__(self) -> None:
        require_positive(niter=self.niter)
        if not 0 < self.fraction <= 1:
            raise ConfigError(f"fraction={self.fraction} must be in (0, 1]; set e.g. --set fraction=0.4 (the paper's 40% SG)")

    def groups(self, vocab: int) -> int:
        """Number of semantic groups for a vocabulary of ``vocab`` tokens."""
        return round(self.fraction * vocab)

    def check_table(self, vocab: int, dim: int) -> None:
        if self.groups(vocab) < 1:
            raise ConfigError(f"fraction={self.fraction} gives no group for V={vocab}; pick fraction >= {1 / vocab:.2g}")


def semantic_groups(
    table: np.ndarray, groups: int, settings: KmeansSettings, seed: int, progress: ProgressFn = no_progress,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """k-means over whole rows of ``table`` (V, D) -> (group vectors (C', D), group ids (V,)); an
    indexed k-means computes its distances on ``device``.

    Group vectors are member means; empty clusters are dropped and ids renumbered, so C' <= groups.
    """
    _, labels = any_kmeans(table, groups, settings, seed, progress, device)
    means, counts = cluster_means(table, labels, groups)
    kept = np.flatnonzero(counts)
    renumber = np.full(groups, -1)
    renumber[kept] = np.arange(len(kept))
    return means[kept], renumber[labels]


class SemanticGroupEmbedding(IndexMaps):
    """Input side of SG: token -> the shared vector of its semantic group."""

    def __init__(self, group_vectors: torch.Tensor, group_ids: torch.Tensor):
        super().__init__()
        self.group_vectors = nn.Parameter(group_vectors)  # (C, D), trainable
        # (V,) group id per token in [0, C); a fixed index map (harness.methods.index_maps), not a parameter
        self.register_index_map("group_ids", group_ids, concept_id_dtype(len(group_vectors)))

    @property
    def num_embeddings(self) -> int:
        return self.group_ids.shape[0]

    @property
    def embedding_dim(self) -> int:
        return self.group_vectors.shape[1]

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(self.group_ids[input_ids].long(), self.group_vectors)

    def dense(self) -> torch.Tensor:
        """The reconstructed (V, D) table; for checks and export, never on the forward path."""
        return self(torch.arange(self.num_embeddings, device=self.group_vectors.device))


class SgAdapter(Adapter):
    """Semantic Grouping on the input embedding; an output head, if any, stays dense."""

    name = "sg"
    kinds = ("encoder", "decoder", "encoder-decoder")  # an encoder-decoder's shared input table and its head alike
    config_class = SgConfig
    budgets = BUDGETS
    recovers = ("group_vectors",)  # the group ids stay fixed; a dense head is the pretrained table, not trained

    def check(self, vocab_size: int, hidden_size: int) -> None:
        self.config.check_table(vocab_size, hidden_size)

    def fit(self, table: torch.Tensor, fit: FitContext) -> SemanticGroupEmbedding:
        """Group the rows of a (V, D) table into a :class:`SemanticGroupEmbedding`."""
        cfg = self.config
        cfg.check_table(*table.shape)
        values = np.ascontiguousarray(table.detach().float().cpu().numpy())
        with fit_threads(fit.threads):
            vectors, ids = semantic_groups(
                values, cfg.groups(len(values)), self.settings(fit, len(values)), fit.seed, fit.progress, fit.device,
            )
        return SemanticGroupEmbedding(
            torch.from_numpy(vectors).to(device=table.device, dtype=table.dtype), torch.from_numpy(ids).to(table.device)
        )

    def settings(self, fit: FitContext, vocab: int) -> KmeansSettings:
        """The k-means settings for a ``vocab``-row table: the config's iterations under the profile's budget."""
        return budget_of(fit.budget).settings(self.config.niter, self.config.groups(vocab))

    def compress(self, model: nn.Module, fit: FitContext) -> Compressed:
        # no grouped head: the dense head keeps the pretrained table, untied
        vocab = model.get_input_embeddings().weight.shape[0]
        model = replace_tables(model, lambda table: self.fit(table, fit), None, output=False)
        return Compressed(model, details={"kmeans": self.settings(fit, vocab).record()})
