"""ASG, Aggregate Semantic Grouping (paper 000: Kavin & Goyal, "Breaking Token Into Concepts").

Product quantization of the token-embedding table E (V x D):

* Section 2.1: split each row into m segments of D/m; per segment position i, k-means over the
  V sub-vectors gives codebook C_i of k Concept Vectors.
* Section 2.2: the codebooks stack into one trainable table E' of shape (m*k, D/m); Concept
  Vector j of codebook i is row i*k + j. Each token keeps m ConceptIDs.
* Section 2.3: input embedding = concat(v_0, ..., v_{m-1}) (Eq. 1).
* Section 2.4: models with an output embedding get the same treatment there:
  logit_t = sum_i H_i . u_{t,i}.
* Section 3.3: shared-codebook variant, one k-means over all V*m segments, one codebook of k.
* Appendix B: embedding params k*m*(D/m) = k*D, so the fraction kept is k/V.
* Appendix C: the V x m ConceptID map is fixed, not a parameter; it is counted in storage.
* Section 4.1 / Table 1: k is sized to the vocabulary, k/V about 0.4-0.5% (mBERT, V = 119,547:
  k = 512; XLM-R, V = 250,002: k = 1,024). The default ``k = 0`` applies that rule to the model's
  own table (:func:`size_rule_k`): 1,024 for me5-small (XLM-R's vocabulary), 128 for MiniLM, 256
  for SmolLM2; the k used is stored in the run's details.
* Sub-vector size: D/m = 16 at D = 768 (mBERT, XLM-R: m = 48; Section 4.1, Table 1). The default
  ``m = 0`` applies that to the model's own width as the divisor of D nearest D / 16 (the larger
  of two equally near), so any width has a default: 24 for MiniLM and me5-small (D = 384), 36 for
  SmolLM2 (576), 8 for D = 128, 128 for Llama-3.2-1B (2,048), 256 for Llama-3-8B and Mistral
  (4,096); Table 2's mT5 rows use m = 32 and 64 at D = 512 (D/m = 16 and 8). The m used is stored
  in the run's details.

Choices where the paper is open, written down here:

* k-means is faiss's (the paper runs nanopq with faiss k-means): 25 iterations, faiss's
  subsampling to 256 points per centroid, seeded with the run's seed. With the same seed this
  gives the codebooks and codes of ``faiss.ProductQuantizer`` (checked in the tests). That is the
  paper profile. The quick profile trains each codebook on a subsample of 64 points per centroid
  (65,536 of me5-small's 250,037 segments at k = 1,024; every token is still assigned to its
  nearest final centroid), a quarter of the work; smoke runs 2 iterations on 16 points per
  centroid (:data:`BUDGETS`, recorded with the run under ``kmeans``).
* The ConceptID map stores s_i in [0, k) (Appendix C: "integers in [0,k)") in the smallest
  unsigned integer dtype (uint8 for k <= 256, uint16 up to 65536, else int32); the
  row offset i*k is added at lookup. Storage counts these bytes as held, not bit-packed, so it is
  a little above the paper's 15 MB figure (which assumes log2(k)-bit packing).
* Output side: when the base model ties input and output tables (SmolLM2, BERT-MLM), the output
  head shares the input side's codebooks and ConceptIDs, preserving the tie; untied tables are
  quantized separately (Section 2.4's OE'). The tie flag in the config is cleared so
  ``tie_weights()`` leaves the head alone. An output bias, if any, is kept.
* Output logits are computed from the (m x k) segment scores H_i . c_{i,j}, summed over the
  ConceptIDs by a fused kernel in inference (CPU: :mod:`harness.methods.gather_sum`; CUDA, with
  Triton: :mod:`harness.methods.gather_sum_triton`, replayed from a CUDA graph where a shape
  repeats, :mod:`harness.methods.cuda_graphs`) or one ``embedding_bag`` (training, and CUDA where
  the Triton kernels do not build): no V x D matrix is ever built. Each call counts the path it
  took (:mod:`harness.methods.kernel_paths`).
* On CUDA, token ids outside the vocabulary raise torch's CPU ``IndexError``
  (:func:`harness.methods.index_maps.check_ids`) on every path, as on the CPU.
* The ConceptID map is an index map (:mod:`harness.methods.index_maps`): held in its stored dtype
  on the CPU, widened once to int32 when the model moves to CUDA (whose indexing kernels do not
  read uint16), saved compact from any device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.methods import gather_sum, kernel_paths, triton_support
from harness.adapter import Adapter, Compressed, FitContext, ProgressFn, replace_tables
from harness.methods.tables import input_table
from harness.budgets import Budgets
from harness.config import require_positive
from harness.errors import ConfigError
from harness.methods.cuda_graphs import GraphedCalls
from harness.methods.index_maps import IndexMaps, check_ids
from harness.methods.kmeans import KmeansBudget, KmeansSettings, budget_of, fit_threads, kmeans

BUDGETS = Budgets(
    smoke=KmeansBudget(max_niter=2, max_points_per_centroid=16),
    quick=KmeansBudget(max_points_per_centroid=64),
    paper=KmeansBudget(),
)


@dataclass(frozen=True)
class AsgConfig:
    k: int = 0            # Concept Vectors per codebook (fraction of embedding params kept = k/V); 0 = size_rule_k(V)
    m: int = 0            # segments; the table's width must divide by m; 0 = the divisor of D nearest D/16 (size_rule_m)
    shared: bool = False  # one codebook for all m segment positions (Section 3.3)
    output: bool = True   # also replace the output embedding when the model has one (Section 2.4)
    niter: int = 25       # k-means iterations (faiss default)

    def __post_init__(self) -> None:
        require_positive(niter=self.niter)
        if not isinstance(self.m, int) or isinstance(self.m, bool) or self.m < 0:
            raise ConfigError(f"m={self.m} must be a positive integer, or 0 for sub-vectors of about 16 values (paper 000)")
        if not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 0:
            raise ConfigError(f"k={self.k} must be a positive integer, or 0 for the paper's size rule")
        if self.k == 1:
            raise ConfigError(f"k={self.k} must be at least 2; set --set k=1024 or another 1 < k <= V (0: the paper's size rule)")

    def k_for(self, vocab: int) -> int:
        """The k this config quantizes a V-row table with: its own, or the paper's size rule."""
        return self.k or size_rule_k(vocab)

    def m_for(self, dim: int) -> int:
        """The m this config splits a D-wide table with: its own, or the sub-vector size rule."""
        return self.m or size_rule_m(dim)

    def check_table(self, vocab: int, dim: int) -> None:
        """Validate against the table this config will quantize (V x D)."""
        if dim % self.m_for(dim):
            divisors = [d for d in range(2, min(dim, 512) + 1) if dim % d == 0]
            raise ConfigError(f"m={self.m} does not divide the table's width {dim}; pick m from {divisors[:12]} or m=0 (sub-vectors of about 16)")
        if self.k_for(vocab) > vocab:
            raise ConfigError(f"k={self.k_for(vocab)} exceeds the vocabulary size {vocab}; pick 1 < k <= {vocab}")


def size_rule_k(vocab: int, share: float = 0.0045) -> int:
    """Paper 000's size rule: k/V about 0.4-0.5% (Table 1: mBERT k = 512, XLM-R k = 1,024), as the
    power of two nearest ``share`` x V (at least 2)."""
    return max(2, 2 ** round(np.log2(share * vocab)))


def size_rule_m(dim: int, width: int = 16) -> int:
    """Paper 000's sub-vector size: the divisor m of ``dim`` nearest ``dim / width`` (D/m about
    16, as m = 48 at D = 768), the larger of two equally near."""
    target = dim / width
    return min((m for m in range(1, dim + 1) if dim % m == 0), key=lambda m: (abs(m - target), -m))


def concept_id_dtype(k: int) -> torch.dtype:
    """Smallest integer dtype holding ids in [0, k)."""
    if k <= 2**8:
        return torch.uint8
    if k <= 2**16:
        return torch.uint16
    return torch.int32


def product_quantize(
    table: np.ndarray, k: int, m: int, shared: bool, settings: KmeansSettings, seed: int, progress: ProgressFn
) -> tuple[np.ndarray, np.ndarray]:
    """PQ of ``table`` (V, D) -> (codebooks, codes).

    codebooks: (m*k, D/m) with codebook i at rows i*k..(i+1)*k-1, or (k, D/m) when shared.
    codes: (V, m) int64 centroid indices s_i in [0, k).
    """
    V, D = table.shape
    d = D // m
    segments = np.ascontiguousarray(table.reshape(V, m, d), dtype=np.float32)
    if shared:
        progress("k-means (shared codebook)", 0, 1)
        centroids, labels = kmeans(segments.reshape(V * m, d), k, settings, seed)
        progress("k-means (shared codebook)", 1, 1)
        return centroids, labels.reshape(V, m)
    codebooks = np.empty((m * k, d), dtype=np.float32)
    codes = np.empty((V, m), dtype=np.int64)
    for i in range(m):
        progress("k-means per segment", i, m)
        codebooks[i * k:(i + 1) * k], codes[:, i] = kmeans(np.ascontiguousarray(segments[:, i]), k, settings, seed)
    progress("k-means per segment", m, m)
    return codebooks, codes


class ConceptEmbedding(IndexMaps):
    """Input side of ASG (Section 2.3): token -> concat of its m Concept Vectors.

    Inference on CUDA with Triton looks the rows up in one kernel
    (:mod:`harness.methods.concept_lookup_triton`); otherwise, and in training, with torch. On CUDA
    the ids are checked against the vocabulary first (:func:`check_ids`: the CPU's ``IndexError``)."""

    def __init__(self, codebooks: torch.Tensor, concept_ids: torch.Tensor, k: int, shared: bool):
        super().__init__()
        vocab, m = concept_ids.shape
        self.k, self.m, self.shared = k, m, shared
        self.codebooks = nn.Parameter(codebooks)  # E': (m*k, D/m), or (k, D/m) when shared
        # (V, m) ConceptID map s_i in [0, k); a fixed buffer, not a parameter (Appendix C)
        self.register_index_map("concept_ids", concept_ids, concept_id_dtype(k))
        # row of codebook i inside E' (all zero when shared); derived, so not stored
        self.register_buffer("segment_offsets", torch.arange(m) * (0 if shared else k), persistent=False)

    @property
    def num_embeddings(self) -> int:
        return self.concept_ids.shape[0]

    @property
    def embedding_dim(self) -> int:
        return self.m * self.codebooks.shape[1]

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        training = torch.is_grad_enabled() and self.codebooks.requires_grad
        if input_ids.is_cuda:
            check_ids(input_ids, self.num_embeddings)
        path = "torch"
        if not training and triton_support.runs(input_ids, self.codebooks):
            from harness.methods import concept_lookup_triton

            out = triton_support.attempt("concept_lookup", lambda: concept_lookup_triton.lookup(
                input_ids, self.codebooks, self.concept_ids, self.k, self.shared))
            if out is not None:
                kernel_paths.record(self, "Triton kernel")
                return out
            path = "torch (the Triton kernel failed to build)"
        kernel_paths.record(self, path)
        rows = self.concept_ids[input_ids].long() + self.segment_offsets  # (..., m) rows of E'
        return F.embedding(rows, self.codebooks).flatten(-2)  # (..., m, D/m) -> (..., D)

    def dense(self) -> torch.Tensor:
        """The reconstructed (V, D) table; for checks and export, never on the forward path."""
        return self(torch.arange(self.num_embeddings, device=self.codebooks.device))


class ConceptLMHead(IndexMaps):
    """Output side of ASG (Section 2.4): logit_t = sum_i H_i . u_{t,i}.

    Segment scores S[i*k + j, n] = H_i . C_i[j] (one row per Concept Vector, one column per hidden
    state), then for every token t the sum of the m scores its ConceptIDs select. Three ways to the
    same sum, none forming a (V, D) table:

    * :meth:`reference_sum`: one ``embedding_bag`` (mode "sum") over the score rows; differentiable,
      any device and dtype. Used for training (gradients enabled), and where no kernel applies.
    * :mod:`harness.methods.gather_sum`: a fused CPU kernel reading the (m, V) map in its stored dtype
      (float32 inference on CPU; one call for the whole head, scores included).
    * :mod:`harness.methods.gather_sum_triton`: on CUDA with Triton (float32 inference), one batched
      matmul for the scores and one gather-sum kernel over vocabulary tiles; the whole call replayed
      from a CUDA graph from the second call of a shape on (:mod:`harness.methods.cuda_graphs`).

    The kernels give the reference's logits up to the order of the float additions. Every call
    counts its path (:func:`harness.methods.kernel_paths.taken`).
    """

    def __init__(self, concepts: ConceptEmbedding, bias: torch.Tensor | None = None):
        super().__init__()
        self.concepts = concepts
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone())
        # (m, V) ConceptIDs, segment-major, held like the map: the order the gather-sums read them;
        # derived from the stored (V, m) map, so not stored
        self.register_index_map("codes", concepts.concept_ids.T.contiguous(), concepts.stored_dtype("concept_ids"), persistent=False)

    @property
    def out_features(self) -> int:
        return self.concepts.num_embeddings

    def score_table(self, hidden: torch.Tensor, columns: int) -> torch.Tensor:
        """(N, D) hidden states -> (m*k, columns) segment scores H_i . C_i[j], concept-major (row
        i*k + j, one column per hidden state; columns beyond N are zero padding)."""
        c = self.concepts
        h = F.pad(hidden, (0, 0, 0, columns - hidden.shape[0])).view(columns, c.m, -1)  # (columns, m, D/m)
        books = c.codebooks.to(h.dtype)
        if c.shared:
            return torch.einsum("jd,nid->ijn", books, h).reshape(c.m * c.k, columns)
        return torch.bmm(books.view(c.m, c.k, -1), h.permute(1, 2, 0)).view(c.m * c.k, columns)

    def table_rows(self) -> torch.Tensor:
        """(V, m) int32 rows of the score table that every token's ConceptIDs select (i*k + s_i):
        ``embedding_bag``'s index, made on the first call on a device and kept until the head moves
        (a cache, not a buffer: neither saved nor held where only the kernels run)."""
        rows = self.__dict__.get("_table_rows")
        if rows is None or rows.device != self.codes.device:
            offsets = torch.arange(self.concepts.m, device=self.codes.device, dtype=torch.int32)[:, None] * self.concepts.k
            rows = self.__dict__["_table_rows"] = (self.codes.int() + offsets).T.contiguous()
        return rows

    def _apply(self, fn, recurse=True):
        self.__dict__.pop("_table_rows", None)
        self.__dict__.pop("_graphs", None)
        return super()._apply(fn, recurse)

    def reference_sum(self, table: torch.Tensor, n: int) -> torch.Tensor:
        """(m*k, >= n) score table -> (n, V) logits with one ``embedding_bag`` over the ConceptIDs."""
        return F.embedding_bag(self.table_rows(), table, mode="sum")[:, :n].T  # (n, V)

    def reference(self, flat: torch.Tensor) -> torch.Tensor:
        """(N, D) hidden states -> (N, V) logits by the torch path, without the bias. A lone hidden
        state gets a second (zero) column: embedding_bag's CPU kernel is ~50x slower on one."""
        n = flat.shape[0]
        return self.reference_sum(self.score_table(flat, max(n, 2)), n)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        lead = hidden.shape[:-1]
        flat = hidden.reshape(-1, hidden.shape[-1])
        if torch.is_grad_enabled() and (flat.requires_grad or self.concepts.codebooks.requires_grad):
            logits, path = self._biased(self.reference(flat)), "torch reference, with gradients"
        elif flat.is_cuda:
            graphs = self.__dict__.setdefault("_graphs", GraphedCalls())
            bias = 0 if self.bias is None else self.bias.data_ptr()
            logits, path = graphs(self.cuda_logits, flat, self.concepts.codebooks.data_ptr(), self.codes.data_ptr(), bias)
        elif gather_sum.applies(flat):
            logits, path = self._biased(gather_sum.logits(flat, self.concepts.codebooks, self.codes, self.concepts.shared)), "fused C++ kernel"
        else:
            logits, path = self._biased(self.reference(flat)), "torch reference"
        kernel_paths.record(self, path)
        return logits.reshape(*lead, -1)

    def cuda_logits(self, flat: torch.Tensor) -> tuple[torch.Tensor, str]:
        """One eager inference call on CUDA: (N, V) logits with the bias, and the path taken (the
        Triton kernels for float32 states where they build, else the torch reference)."""
        logits = None
        if flat.dtype != torch.float32:
            path = f"torch reference ({str(flat.dtype).removeprefix('torch.')} states: the Triton kernels take float32)"
        elif not triton_support.runs(flat, self.codes):
            path = "torch reference (no Triton kernels)"
        else:
            from harness.methods import gather_sum_triton

            logits = triton_support.attempt("gather_sum", lambda: gather_sum_triton.logits(
                flat, self.concepts.codebooks, self.codes, self.concepts.shared))
            path = "torch reference (a Triton kernel failed to build)" if logits is None else "Triton kernels"
        return self._biased(self.reference(flat) if logits is None else logits), path

    def _biased(self, logits: torch.Tensor) -> torch.Tensor:
        return logits if self.bias is None else logits + self.bias


class AsgAdapter(Adapter):
    """ASG on the input embedding, and on the output embedding when the model has one."""

    name = "asg"
    kinds = ("encoder", "decoder", "encoder-decoder")  # an encoder-decoder's shared input table and its head alike
    config_class = AsgConfig
    budgets = BUDGETS
    recovers = ("codebooks",)  # E' (Section 2.2: trainable); the ConceptID map stays fixed

    def check(self, vocab_size: int, hidden_size: int) -> None:
        self.config.check_table(vocab_size, hidden_size)

    def fit(self, table: torch.Tensor, fit: FitContext) -> ConceptEmbedding:
        """Quantize a (V, D) table into a :class:`ConceptEmbedding`."""
        cfg = self.config
        cfg.check_table(*table.shape)
        k, m = cfg.k_for(table.shape[0]), cfg.m_for(table.shape[1])
        values = table.detach().float().cpu().numpy()
        with fit_threads(fit.threads):
            codebooks, codes = product_quantize(values, k, m, cfg.shared, self.settings(fit), fit.seed, fit.progress)
        books = torch.from_numpy(codebooks).to(device=table.device, dtype=table.dtype)
        return ConceptEmbedding(books, torch.from_numpy(codes).to(table.device), k, cfg.shared)

    def settings(self, fit: FitContext) -> KmeansSettings:
        """The k-means settings of this fit: the config's iterations under the profile's budget."""
        return budget_of(fit.budget).settings(self.config.niter)

    def compress(self, model: nn.Module, fit: FitContext) -> Compressed:
        vocab, dim = input_table(model).shape
        model = replace_tables(model, lambda table: self.fit(table, fit), ConceptLMHead, self.config.output, self.name)
        cfg = self.config
        return Compressed(model, details={
            "kmeans": self.settings(fit).record(), "k": cfg.k_for(vocab), "m": cfg.m_for(dim),
            "k_rule": "set" if cfg.k else "paper 000: power of two nearest 0.45% of V",
            "m_rule": "set" if cfg.m else "paper 000: the divisor of D nearest D/16, sub-vectors of about 16 values",
        })
