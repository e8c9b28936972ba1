"""Sense dictionaries (paper 004): contextual vectors per token, clustered into senses, and the
drop-in that swaps each last-layer vector for its closest sense. Shared by the adapters
``multisense`` (the drop-in, paper 004 Sections 3.1-3.2) and ``skd`` (the sense-based student,
Section 3.3).

1. :func:`fit_windows` cuts the fit corpus into model inputs (:class:`Window`: token ids and
   segment ids), encoded as the task's model reads them; :func:`collect` runs the model over them
   and keeps, per token id, a uniform sample of at most ``cap`` last-layer vectors
   (:class:`TokenVectors`).
2. :func:`build` clusters each token's vectors into its senses (:mod:`harness.methods.kmeans`, or Markov
   clustering to pick the number per token) and returns a :class:`SenseDictionary`.
3. :meth:`SenseDictionary.attach` installs the drop-in on a model; :func:`sense_cross_entropy` is
   the SKD loss.

Choices where paper 004 is silent, following the authors' code (Qitong-Wang/SenseDict,
DeBERTa/a1_gather_sense.py, a1_mclsingle.py; Llama/a1_mclmulti.py, a1_kmeans_withmcl.py):

* The fit text is encoded as the scored model reads it (Sections 3.1-3.2: the senses are the
  model's own last-layer vectors, and the drop-in replaces the vectors of the scored inputs). A
  sentence pair of a pair task (MRPC, STS-B, RTE, QNLI, XNLI: ``task_train`` items (a, b),
  Section 4.1) is one input ``[CLS] a [SEP] b [SEP]`` with token type ids 0 / 1, truncated
  longest-first to the window, exactly as the suite encodes it
  (:func:`harness.suites.finetune.sentence_features`) and as the authors' a1_gather_sense.py
  encodes its pairs (BERT's longest-first truncation, segments with [SEP] and type ids). Joining
  the two into one segment made different vectors than those the drop-in later replaces (glue
  quick on MiniLM, k=15: QNLI fell from 0.67 to chance). QA's (question, context) pairs are read
  the same way, so only a context's first window is read (the suite also reads later, strided
  windows). A document or sentence is cut into consecutive windows.
* Every token the model emits a vector for gets senses, special tokens included ([CLS], [SEP],
  <s>): the authors' gathering script keeps all unpadded positions. A sentence head reads those
  positions (a mean over all tokens, or the first token), so they must be senses too for the
  drop-in to be a drop-in.
* A token seen at most ``k`` times keeps its sampled vectors as its senses (k-means with k >= n
  puts a centroid on every point; the authors keep raw vectors below a minimum count). One sense
  (k = 1) is the mean of all the token's vectors, k-means' exact optimum (faiss would fit it on a
  subsample of 256).
* The cap is a uniform sample without replacement of each token's occurrences (the ``cap``
  smallest of one random key per occurrence), seeded; the authors' streaming rule only
  approximates this. Sampled vectors are held in fp16, as the authors' fp16 teacher produced them.
* Markov clustering (Appendix C/H) as the authors' scripts run it (Llama/a1_mclmulti.py,
  a1_kmeans_withmcl.py, run_multithread_cluster.sh; the paper names only MCL, inflation 1.65,
  expansion 2 and the 0.1 / 0.4 fractions, so the code settles the rest): similarity
  1 / (euclidean distance + 0.01) between a token's vectors, ``markov_clustering`` (the authors'
  library) with inflation 1.65, expansion 2 and its defaults (the diagonal set to self-loop weight
  1, pruning below 1e-3 keeping each column's largest entry, at most 100 iterations), one cluster
  per distinct attractor row; tokens with fewer than 5 vectors keep them; with c clusters
  k_t = int(0.4 c) if c > 900 else int(0.1 c), at least 5, the token's vectors where it has no more
  than k_t, else k-means with k_t. ``k`` does not cap k_t (paper 004 Table 6: 20% of Llama's tokens
  have more than 15), reported in Table 6's bins (:data:`TABLE6_SENSES`) with what MCL found
  (``mcl``: tokens given one cluster). Per-token counts equal those of the authors' two scripts run
  on the same vectors (MiniLM, WikiText-2 quick fit: all 8,962 tokens, as read and 30x larger).
  The count follows the vectors' scale, not only their geometry: the self-loop weight stays 1
  while the similarities scale as 1 / distance. MiniLM's same-token vectors lie about 4 apart, so
  MCL gives almost every token one cluster and k_t is the minimum 5, whatever the inflation; the
  same vectors 30x apart split into up to one cluster per vector (docs/methods.md).
"""

from __future__ import annotations

import contextlib
import io
import string
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial.distance import pdist, squareform
from torch import nn

from harness.adapter import TokenStorage
from harness.config import require_positive
from harness.errors import ConfigError, DataError
from harness.methods.kmeans import KmeansSettings, fit_threads, kmeans
from harness.sources.corpora import Text

Clustering = Literal["kmeans", "mcl"]
Progress = Callable[[str, int, int], None]

KMEANS_NITER = 25         # faiss's default; each token's problem is small (<= cap points)
MCL_INFLATION = 1.65      # paper 004 Appendix H
MCL_EXPANSION = 2
MCL_MIN_VECTORS = 5       # SenseDictionary run_multithread_cluster.sh --occurance 5
MCL_THRESHOLD = 900       # a1_kmeans_withmcl.py --k_threshold 900
MCL_FRACTIONS = (0.1, 0.4)  # --k_percent_below / --k_percent_above
MCL_MIN_K = 5
TABLE6_SENSES = 15        # paper 004 Table 6 counts tokens with <= 15 and > 15 senses
SCORE_CHUNK = 4096        # positions scored at once by the drop-in (bounds the gathered senses)


@dataclass(frozen=True)
class SenseSettings:
    """How a sense dictionary is built (the settings both adapters share)."""

    k: int = 15                          # k-means senses per token at most (paper 004 Table 5; the authors' script used 20)
    clustering: Clustering = "kmeans"    # "mcl": each token's number from Markov clustering, not capped by k (Appendix C, H)
    cap: int = 1000                      # sampled last-layer vectors per token (the authors' scripts)
    min_count: int = 1                   # tokens seen fewer times in the fit text get no entry (keep their vector)
    fp16: bool = True                    # store senses in float16, as the authors' dictionaries are 16-bit
    corpus: str = "task_train"           # the fit corpus: the suite task's training texts (paper 004 Sections 4.1-4.2), or a named corpus

    def __post_init__(self) -> None:
        require_positive(k=self.k, cap=self.cap, min_count=self.min_count)
        if self.clustering not in ("kmeans", "mcl"):
            raise ConfigError(f"clustering={self.clustering} is unknown; use kmeans or mcl")


@dataclass(frozen=True)
class SenseBudget:
    """Fit text per profile: how much of the corpus runs through the model, in what windows."""

    fit_tokens: int | None  # tokens read from the corpus (None = all of it)
    window: int = 128       # tokens per window, special tokens included (the authors' max_seq_len)
    batch_size: int = 32


@dataclass(frozen=True)
class TokenVectors:
    """Sampled last-layer vectors grouped by token: token ``ids[i]`` owns
    ``vectors[offsets[i]:offsets[i + 1]]``; ``seen[i]`` counts its occurrences before the cap."""

    ids: np.ndarray      # (U,) int64, ascending
    offsets: np.ndarray  # (U + 1,) int64
    vectors: np.ndarray  # (N, D) float16
    seen: np.ndarray     # (U,) int64
    tokens_read: int     # unpadded positions the model ran over

    def of(self, i: int) -> np.ndarray:
        return self.vectors[self.offsets[i]:self.offsets[i + 1]]

    def capped(self, cap: int) -> TokenVectors:
        """The sample a smaller ``cap`` would have drawn: each token's vectors are kept in order of
        their random keys, so the first ``cap`` of them are exactly the bottom-``cap`` sample."""
        kept = np.minimum(np.diff(self.offsets), cap)
        rows = np.concatenate([np.arange(s, s + n) for s, n in zip(self.offsets[:-1], kept)]).astype(np.int64)
        return TokenVectors(self.ids, np.append(0, np.cumsum(kept)), self.vectors[rows], self.seen, self.tokens_read)


@dataclass(frozen=True)
class Window:
    """One model input of the fit text: token ids with special tokens, and the segment ids
    (``token_type_ids``) where the tokenizer gives them (BERT's; XLM-R's and Llama's give none)."""

    ids: list[int]
    types: list[int] | None = None

    def __len__(self) -> int:
        return len(self.ids)


def encode(tokenizer: Any, text: Text, window: int) -> list[Window]:
    """``text`` as the model reads it (module docstring): a document in consecutive windows of at
    most ``window`` tokens; a pair (a, b) as one two-segment input truncated longest-first."""
    if isinstance(text, str):
        enc = tokenizer(text, truncation=True, max_length=window, return_overflowing_tokens=True)
        rows, types = enc["input_ids"], enc.get("token_type_ids")
    else:
        enc = tokenizer(*text, truncation=True, max_length=window)
        rows, types = [enc["input_ids"]], [enc["token_type_ids"]] if "token_type_ids" in enc else None
    return [Window(list(ids), list(types[i]) if types is not None else None) for i, ids in enumerate(rows)]


def fit_windows(tokenizer: Any, texts: Sequence[Text], window: int, max_tokens: int | None, seed: int) -> list[Window]:
    """Model inputs of at most ``window`` tokens (:func:`encode`), from the texts in a seeded
    random order, until ``max_tokens`` are taken."""
    windows: list[Window] = []
    total = 0
    for i in np.random.default_rng(seed).permutation(len(texts)):
        for w in encode(tokenizer, texts[i], window):
            if max_tokens is not None and total >= max_tokens:
                return windows
            windows.append(w)
            total += len(w)
    return windows


@dataclass(frozen=True)
class Batch:
    """Padded windows: (B, T) ids, attention mask and segment ids (None where the windows have none)."""

    ids: torch.Tensor
    mask: torch.Tensor
    types: torch.Tensor | None


def last_hidden(backbone: nn.Module, batch: Batch) -> torch.Tensor:
    """A batch -> (B, T, D) last-layer vectors of a transformers base model."""
    segments = {} if batch.types is None else {"token_type_ids": batch.types}
    return backbone(input_ids=batch.ids, attention_mask=batch.mask, **segments).last_hidden_state


def batches(windows: Sequence[Window], batch_size: int, pad_id: int, device: str):
    """:class:`Batch` es of ``batch_size`` windows each (segment ids padded with 0, as the suites' collator pads them)."""
    for start in range(0, len(windows), batch_size):
        chunk = windows[start:start + batch_size]
        width = max(len(w) for w in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        types = torch.zeros((len(chunk), width), dtype=torch.long) if chunk[0].types is not None else None
        for row, w in enumerate(chunk):
            ids[row, :len(w)] = torch.tensor(w.ids)
            mask[row, :len(w)] = 1
            if types is not None:
                types[row, :len(w)] = torch.tensor(w.types)
        yield Batch(ids.to(device), mask.to(device), types.to(device) if types is not None else None)


class _Sample:
    """Per-token uniform sample of at most ``cap`` vectors: every occurrence draws a random key and
    each token keeps its ``cap`` smallest keys (bottom-k sampling), compacted in bulk."""

    def __init__(self, cap: int, vocab_size: int, seed: int):
        self.cap, self.rng = cap, np.random.default_rng(seed)
        self.seen = np.zeros(vocab_size, dtype=np.int64)
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.pending = self.kept = 0

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self.seen += np.bincount(ids, minlength=len(self.seen))
        self.parts.append((ids, self.rng.random(len(ids)), vectors.astype(np.float16)))
        self.pending += len(ids)
        if self.pending > max(self.kept, 65536):
            self._compact()

    def _compact(self) -> None:
        ids, keys, vecs = (np.concatenate(column) for column in zip(*self.parts))
        order = np.lexsort((keys, ids))  # by token, smallest key first
        grouped = ids[order]
        rank = np.arange(len(order)) - np.searchsorted(grouped, grouped, side="left")
        keep = order[rank < self.cap]  # exact at any compaction time, so the result is too
        self.parts = [(ids[keep], keys[keep], vecs[keep])]
        self.kept, self.pending = len(keep), 0

    def result(self, tokens_read: int) -> TokenVectors:
        if self.parts:
            self._compact()
            ids, _, vecs = self.parts[0]
        else:
            ids, vecs = np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float16)
        uniq, starts = np.unique(ids, return_index=True)
        offsets = np.append(starts, len(ids)).astype(np.int64)
        return TokenVectors(uniq.astype(np.int64), offsets, vecs, self.seen[uniq], tokens_read)


@torch.inference_mode()
def collect(backbone: nn.Module, windows: Sequence[Window], cap: int, vocab_size: int, *, pad_id: int,
            batch_size: int, seed: int, device: str = "cpu", progress: Progress | None = None) -> TokenVectors:
    """Run ``backbone`` over ``windows`` and sample at most ``cap`` last-layer vectors per token id."""
    backbone.eval().to(device)
    sample = _Sample(cap, vocab_size, seed)
    steps, read = (len(windows) + batch_size - 1) // batch_size, 0
    for step, batch in enumerate(batches(windows, batch_size, pad_id, device)):
        real = batch.mask.bool()
        sample.add(batch.ids[real].cpu().numpy(), last_hidden(backbone, batch)[real].float().cpu().numpy())
        read += int(real.sum())
        if progress:
            progress("sense vectors", step + 1, steps)
    return sample.result(read)


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


class SenseDictionary(nn.Module, TokenStorage):
    """The senses of every token with an entry, stored ragged: token ``t`` owns rows
    ``senses[offsets[t]:offsets[t + 1]]`` (none when the two are equal). Both are persistent
    buffers, so the dictionary's bytes count in the model's storage.

    Marked :class:`~harness.adapter.TokenStorage`, so the compression report counts it with the
    token-embedding storage. ``align`` is SKD's W_align (paper 004 Section 3.3): a linear map from a narrower student's
    vectors into the dictionary's width, applied before the senses are scored; None when the widths
    match (a student cut from the teacher's own layers). ``mcl``: what Markov clustering found
    while building it (:func:`mcl_summary`; None for k-means), reported by :meth:`statistics` and
    kept as plain numbers, so a saved and reloaded dictionary still reports it.
    """

    def __init__(self, offsets: torch.Tensor, senses: torch.Tensor, align: nn.Module | None = None,
                 mcl: dict[str, float] | None = None):
        super().__init__()
        self.register_buffer("offsets", offsets.to(torch.int64))
        self.register_buffer("senses", senses)
        self.mcl = tuple(mcl.items()) if mcl is not None else None  # (name, number) pairs: data the saved model keeps
        self.align = align
        self.active = True  # False while suspended(): the hook passes the model's own vectors through

    @contextlib.contextmanager
    def suspended(self):
        """The attached model without the drop-in: its own last-layer vectors, for what paper 004
        builds from them (the word-level dictionary, Appendix E)."""
        self.active = False
        try:
            yield
        finally:
            self.active = True

    @property
    def dim(self) -> int:
        return self.senses.shape[1]

    def counts(self) -> torch.Tensor:
        """(V,) number of senses per token id (0 = no entry)."""
        return self.offsets[1:] - self.offsets[:-1]

    def gather(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N,) token ids -> their senses (N, kmax, D) float32, zero-padded, and the (N, kmax) mask
        of real senses."""
        start, count = self.offsets[ids], self.counts()[ids]
        slots = torch.arange(int(count.max()) if len(ids) else 0, device=ids.device)
        valid = slots[None, :] < count[:, None]
        rows = torch.where(valid, start[:, None] + slots[None, :], torch.zeros_like(valid, dtype=torch.int64))
        return self.senses[rows].float() * valid[..., None], valid

    def scores(self, ids: torch.Tensor, vectors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Dot products <m_t, s_t^(i)> (N, kmax), -inf on padding slots, and the gathered senses."""
        senses, valid = self.gather(ids)
        logits = torch.einsum("nkd,nd->nk", senses, vectors.float())
        return logits.masked_fill(~valid, float("-inf")), senses

    def choose(self, ids: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        """Paper 004 Section 3.2: (B, T) ids, (B, T, D) last-layer vectors -> each vector replaced by
        its token's sense of largest dot product; tokens without an entry keep their vector."""
        vectors = self.align(vectors) if self.align is not None else vectors
        out = vectors.clone()
        flat_ids, flat_out = ids.reshape(-1), out.view(-1, out.shape[-1])
        positions = torch.nonzero(self.counts()[flat_ids] > 0).flatten()
        for chunk in positions.split(SCORE_CHUNK) if len(positions) else ():  # split of an empty tensor gives one empty chunk
            logits, senses = self.scores(flat_ids[chunk], flat_out[chunk])
            best = logits.argmax(-1)
            flat_out[chunk] = senses[torch.arange(len(chunk)), best].to(out.dtype)
        return out

    def attach(self, model: nn.Module) -> None:
        """Install the drop-in: the dictionary becomes ``model.sense_dictionary`` and a forward hook
        on the model's backbone swaps its last hidden state for senses, recomputing a first-token
        pooler (BERT's) from the swapped states, so every head downstream reads senses."""
        model.sense_dictionary = self
        self.reattach(model)

    def reattach(self, model: nn.Module) -> None:
        """The forward hook alone: what :mod:`harness.runner.saved` reinstalls after rebuilding a saved model."""
        backbone_of(model).register_forward_hook(self._swap, with_kwargs=True)

    def _swap(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
        if not self.active:
            return output
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            raise ValueError("the sense drop-in needs input_ids (it looks senses up by token id), not inputs_embeds")
        hidden = self.choose(ids, output[0])
        pooler = getattr(module, "pooler", None)
        if isinstance(output, tuple):
            rest = output[1:]
            if pooler is not None and len(rest):
                rest = (pooler(hidden), *rest[1:])
            return (hidden, *rest)
        output["last_hidden_state"] = hidden
        if pooler is not None and output.get("pooler_output") is not None:
            output["pooler_output"] = pooler(hidden)
        return output

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.state_dict().values())

    def statistics(self, k: int) -> dict[str, Any]:
        """What paper 004 Tables 5-6 report: tokens with an entry ("valid tokens"), senses per token
        (the whole histogram, Table 5's share below ``k`` and Table 6's bins), bytes; with Markov
        clustering also what it found (``mcl``: :func:`mcl_summary`)."""
        counts = self.counts()
        have = counts[counts > 0]
        hist = torch.bincount(have).tolist() if len(have) else []
        return {
            "tokens_with_senses": int(len(have)),
            "senses": int(have.sum()),
            "senses_per_token_histogram": {n: c for n, c in enumerate(hist) if c},
            "tokens_below_k": int((have < k).sum()),
            "share_below_k": float((have < k).float().mean()) if len(have) else 0.0,
            "table6": table6_bins(have),
            "dictionary_bytes": self.nbytes(),
            "dtype": str(self.senses.dtype).removeprefix("torch."),
            **({"mcl": dict(self.mcl)} if self.mcl is not None else {}),
        }


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


def table6_bins(counts: torch.Tensor) -> dict[str, float]:
    """Senses per token in paper 004 Table 6's bins (its row names, as in paper_results.csv): tokens
    with at most / more than 15 senses, counts and percentages of the tokens with senses."""
    valid = len(counts)
    low = int((counts <= TABLE6_SENSES).sum())
    return {"n_valid_tokens": valid,
            f"n_tokens_le{TABLE6_SENSES}_senses": low, f"pct_tokens_le{TABLE6_SENSES}_senses": 100 * low / valid if valid else 0.0,
            f"n_tokens_gt{TABLE6_SENSES}_senses": valid - low,
            f"pct_tokens_gt{TABLE6_SENSES}_senses": 100 * (valid - low) / valid if valid else 0.0}


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


def fit_dictionary(model: nn.Module, fit: Any, settings: SenseSettings) -> tuple[SenseDictionary, list[Window], dict[str, Any]]:
    """The sense dictionary of ``model``'s last layer over the fit corpus, under ``fit.budget``
    (a :class:`SenseBudget`); returns it, the fit windows, and the facts to store with the run."""
    budget: SenseBudget = fit.budget
    tokenizer = fit.tokenizer
    windows = fit_windows(tokenizer, fit.corpus(settings.corpus).texts, budget.window, budget.fit_tokens, fit.seed)
    vocab = model.get_input_embeddings().num_embeddings
    sampled = collect(
        backbone_of(model), windows, settings.cap, vocab, pad_id=tokenizer.pad_token_id or 0,
        batch_size=budget.batch_size, seed=fit.seed, device=fit.device, progress=fit.progress,
    )
    dictionary = build(sampled, vocab, settings.k, settings.clustering, min_count=settings.min_count,
                       fp16=settings.fp16, seed=fit.seed, progress=fit.progress)
    facts = {"fit_tokens": sampled.tokens_read, "fit_windows": len(windows), "vectors_sampled": len(sampled.vectors),
             **dictionary.statistics(settings.k)}
    return dictionary, windows, facts


def backbone_of(model: nn.Module) -> nn.Module:
    """The transformers base model inside a task model (``model.bert``, ``model.model``, a
    MeanPooledClassifier's ``encoder``), or the model itself when it is one."""
    inner = getattr(model, getattr(model, "base_model_prefix", ""), None)
    return inner if isinstance(inner, nn.Module) else model


def teacher_senses(dictionary: SenseDictionary, ids: torch.Tensor, mask: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """SKD labels, paper 004 Section 3.3: per position the index of the teacher vector's sense of
    largest dot product, or -1 where there is nothing to choose (padding, no entry, one sense)."""
    flat_ids = ids.reshape(-1)
    labels = torch.full_like(flat_ids, -1)
    keep = torch.nonzero((mask.reshape(-1) > 0) & (dictionary.counts()[flat_ids] > 1)).flatten()
    for chunk in keep.split(SCORE_CHUNK):
        logits, _ = dictionary.scores(flat_ids[chunk], teacher.reshape(-1, teacher.shape[-1])[chunk])
        labels[chunk] = logits.argmax(-1)
    return labels.view(ids.shape)


def sense_cross_entropy(dictionary: SenseDictionary, ids: torch.Tensor, labels: torch.Tensor,
                        student: torch.Tensor) -> tuple[torch.Tensor, float]:
    """SKD loss, paper 004 Section 3.3: mean over labelled positions of the cross-entropy of the
    softmax over the token's senses of their dot products with the (W_align-mapped) student vector,
    against the teacher's sense (:func:`teacher_senses`). Padding senses get -inf (the authors'
    script sets them to 0, which lets a padding slot win the softmax). Returns (loss, share of
    positions where the student's arg-max sense already is the teacher's)."""
    keep = torch.nonzero(labels.reshape(-1) >= 0).flatten()
    if not len(keep):
        return student.sum() * 0.0, 1.0
    s = student.reshape(-1, student.shape[-1])[keep]
    s = dictionary.align(s) if dictionary.align is not None else s
    logits, _ = dictionary.scores(ids.reshape(-1)[keep], s)
    target = labels.reshape(-1)[keep]
    return F.cross_entropy(logits, target), float((logits.argmax(-1) == target).float().mean())


def word_vectors(model: nn.Module, tokenizer: Any, texts: Sequence[str], words: Sequence[str], *, cap: int,
                 seed: int, window: int = 128, batch_size: int = 32, device: str = "cpu") -> TokenVectors:
    """Contextual vectors of whole words (paper 004 Appendix E): each occurrence of a target word in
    ``texts`` (whitespace words, matched lower-cased without surrounding punctuation) as the mean of
    its tokens' last-layer vectors, a uniform sample of at most ``cap`` occurrences per word; ids
    index ``words``. Texts are cut into chunks of ``window / 2`` words, each encoded as plain text
    (a token belongs to the word its last character falls in), so byte-level BPE tokenizers work
    too, and run in order of their token counts (batches of similar length: little padding), padded
    on the right (a decoder's positions start at its first token whatever its tokenizer's padding
    side). Chunks without a target word are not run."""
    index = {w.lower(): i for i, w in enumerate(words)}
    chunks = [chunk for text in texts for ws in [text.split()] for s in range(0, len(ws), window // 2)
              for chunk in [ws[s:s + window // 2]] if any(w.strip(string.punctuation).lower() in index for w in chunk)]
    tokens = [len(ids) for ids in tokenizer([" ".join(c) for c in chunks], truncation=True, max_length=window)["input_ids"]] if chunks else []
    chunks = [chunks[i] for i in np.argsort(tokens, kind="stable")]
    backbone = backbone_of(model).eval().to(device)
    sample = _Sample(cap, len(words), seed)
    with torch.inference_mode():
        for start in range(0, len(chunks), batch_size):
            batch = chunks[start:start + batch_size]
            enc = tokenizer([" ".join(c) for c in batch], truncation=True, max_length=window, padding=True,
                            padding_side="right", return_offsets_mapping=True, return_tensors="pt")
            hidden = last_hidden(backbone, Batch(enc["input_ids"].to(device), enc["attention_mask"].to(device), None)).float().cpu()
            for row, chunk in enumerate(batch):
                starts = np.cumsum([0] + [len(w) + 1 for w in chunk[:-1]])
                positions: dict[int, list[int]] = {}
                for pos, (first, last) in enumerate(enc["offset_mapping"][row].tolist()):
                    w = int(np.searchsorted(starts, last - 1, side="right")) - 1 if last > first else -1
                    if w >= 0 and chunk[w].strip(string.punctuation).lower() in index:
                        positions.setdefault(w, []).append(pos)
                if positions:
                    ids = np.array([index[chunk[w].strip(string.punctuation).lower()] for w in positions])
                    sample.add(ids, torch.stack([hidden[row, p].mean(0) for p in positions.values()]).numpy())
    return sample.result(0)


def word_occurrences(found: TokenVectors, alone: np.ndarray) -> list[np.ndarray]:
    """Each word's context occurrences (paper 004 Appendix E): its sampled vectors of
    :func:`word_vectors` as one (n_w, D) float32 matrix per word, or, for a word without occurrences,
    its vector encoded alone (``alone``, (W, D) from :func:`alone_vectors`, same model and layer) as
    its one occurrence, so every word has one."""
    out = [alone[w][None].astype(np.float32) for w in range(len(alone))]
    for i, word in enumerate(found.ids):
        out[word] = found.of(i).astype(np.float32)
    return out


def word_senses(model: nn.Module, tokenizer: Any, texts: Sequence[str], words: Sequence[str], *, k: int, cap: int,
                seed: int, **encoding: Any) -> list[np.ndarray]:
    """Senses of whole words (paper 004 Appendix E): each word's :func:`word_occurrences` in
    ``texts`` clustered into at most ``k`` senses by k-means (:func:`token_senses`: the occurrences
    themselves when there are at most ``k``, their mean when k = 1)."""
    found = word_vectors(model, tokenizer, texts, words, cap=cap, seed=seed, **encoding)
    occurrences = word_occurrences(found, alone_vectors(model, tokenizer, words))
    with fit_threads(1):  # tiny problems per word: two spinning OpenMP threads made each 100x slower on 2 busy cores
        return [token_senses(o, senses_wanted(o, k, "kmeans")[0], seed) for o in occurrences]


@torch.inference_mode()
def alone_vectors(model: nn.Module, tokenizer: Any, words: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """(W, D) mean of each word's sub-token vectors in the last hidden layer, the word encoded alone
    (with the model's special tokens, which are left out of the mean; padded on the right, as
    :func:`word_vectors`)."""
    backbone, out = backbone_of(model), []
    for start in range(0, len(words), batch_size):
        enc = tokenizer(list(words[start:start + batch_size]), padding=True, padding_side="right",
                        return_special_tokens_mask=True, return_tensors="pt")
        keep = (enc["attention_mask"] * (1 - enc["special_tokens_mask"])).unsqueeze(-1).float()
        hidden = last_hidden(backbone, Batch(enc["input_ids"].to(backbone.device), enc["attention_mask"].to(backbone.device), None))
        out.append(((hidden.float().cpu() * keep).sum(1) / keep.sum(1).clamp(min=1.0)).numpy())
    return np.concatenate(out)


def max_similarity(sets: Sequence[np.ndarray], first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Paper 004 Appendix E's pair score: for each index pair (``first[p]``, ``second[p]``) into
    ``sets`` (one (n_w, D) matrix per word: its senses, or its unclustered occurrences), the largest
    dot product over the two words' rows (NaN when a word has none)."""
    return np.array([float((sets[a] @ sets[b].T).max()) if len(sets[a]) and len(sets[b]) else float("nan")
                     for a, b in zip(first, second)])
