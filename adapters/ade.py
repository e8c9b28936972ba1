"""ADE, Adaptive Dictionary Embeddings (paper 002): words as weighted sets of shared anchors, read
in context by a one-layer Segment-Aware Transformer (SAT).

* Section 3.3 / Eq. 9: word w has an anchor set S_w (1 <= n_w <= n_max) from a shared anchor
  matrix A (K x D) and weights T[w, a]; its embedding is sum_{a in S_w} T[w, a] A[a].
* Stage 1 (Section 4.2, Eq. 10): A and T are distilled from the frozen teacher's input embedding
  E with the cosine loss, the mean over non-padding token positions of 1 - cos(student, E_w).
* Stage 2, Vocabulary Projection (Section 3.2, Eq. 1-2, 11): anchors whose weight is above a
  threshold stay active; each word stores indices, weights and its count n_w in one flat table
  padded to n_max, so a batch of words needs one gather into A.
* GPE (Section 3.4, Eq. 3-4): the words' anchors are flattened into one sequence of length
  sum n_w, and every anchor of word i gets word i's position encoding.
* SAT (Sections 3.5-3.6, Eq. 5-8, 12): one self-attention layer over the flattened anchor
  sequence with a padding mask (-inf on pads), pooled, a linear classifier, cross-entropy; the
  anchors keep training (Section 4.2, Stage 3). Without SAT (Appendix A's ablation) the pooled
  anchors go straight to the classifier.

Choices where the paper is open (the extraction also lost most inline symbols), written down here:

* Anchor sets (Section 3.3 defines S_w but not how it is found): anchors start as the centroids
  of faiss k-means over the unit-normalized teacher rows (the cosine loss ignores length), scaled
  to unit length; S_w is then chosen by non-negative matching pursuit over those unit anchors
  (n_max rounds: take the anchor most aligned with the residual, subtract its projection). The
  sets stay fixed while stage 1 trains A and T. (Measured on MiniLM, K=500, n_max=8: the mean
  cosine after VP is 0.64 this way, 0.61 with the n_max nearest centroids.)
* Weights: T[w] = softmax(logits[w] / temperature) over the word's n_max candidates, so weights
  are positive and sum to 1 and the VP threshold in (0, 1) is a share of the word's weight.
  Logits start at temperature * log of the matching-pursuit coefficients' shares.
  temperature 0.1, threshold 0.05, n_max 8 (Section 3.2 gives none of them; with n_max = 8,
  Table 2's storage, about 67 bytes per DeBERTa word, fits eight index + weight pairs).
  K = 500 (Tables 3-4 test 100-700; 500 is DBpedia-14's best and AG News' second best).
* The word's largest weight is always kept, so n_w >= 1 even when none passes the threshold.
  The kept weights are stored as they are, not renormalised (Eq. 2 extracts them).
* Stage 1 runs on running text by default, as Eq. 10 averages over the non-padding token
  positions of a text batch (``fit_on=wikitext2_train``, or ``c4_sample``): frequent tokens count
  more, and rows that never occur keep their matching-pursuit start. ``fit_on=vocab`` runs on
  minibatches of vocabulary rows instead (every row counts once). Adam, lr 1e-2, steps per profile in
  ``BUDGETS``. The teacher is the input table of ``fit.teacher``, the runner's frozen copy of the
  unchanged model (``needs_teacher``).
* After stage 1 the anchors are rescaled to unit mean length (the cosine loss leaves their scale
  free); a flattened element is w * A[a] * sqrt(D), Vaswani et al.'s embedding scale, so that a
  dominant anchor is about as long as its sinusoidal position encoding (norm sqrt(D / 2)).
* A flattened element is the weighted anchor T[w, a] A[a] (the summands of Eq. 9), so the sum of
  a word's group is its distilled embedding; VP's weights are fixed buffers, A trains.
* GPE uses the fixed sinusoidal encoding (Table 5: 0 positional parameters) of the word's token
  position.
* SAT = multi-head self-attention (the base model's head count, dropout 0.1) with a residual and
  one LayerNorm, no feed-forward block: Table 5 counts 2,362,368 = 4 (D^2 + D) SAT parameters and
  one LayerNorm of 2D at D = 768. Pooling is attention pooling, a learned score per anchor
  (Table 5's pooler: D + 1 = 769 parameters) softmaxed over valid anchors; classifier D x C.
* Without SAT the attention sublayer and GPE are dropped (position encodings would only add
  noise to an order-free pool); LayerNorm, pooling and classifier stay.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from harness.adapters.asg import concept_id_dtype
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from harness.adapter import Adapter, Compressed, FitContext
from harness.budgets import Budgets
from harness.config import require_positive
from harness.errors import ConfigError
from harness.methods.index_maps import IndexMaps
from harness.methods.kmeans import KmeansSettings, kmeans


@dataclass(frozen=True)
class AdeConfig:
    K: int = 500                 # anchors in the shared matrix A (paper: 100-700)
    max_anchors: int = 8         # n_max, anchors per word at most
    threshold: float = 0.05      # VP: an anchor stays active when its weight share is above this
    temperature: float = 0.1     # T[w] = softmax(logits[w] / temperature)
    sat: bool = True             # false: Appendix A's ablation, pooled anchors straight to the classifier
    fit_on: Literal["vocab", "wikitext2_train", "c4_sample"] = "wikitext2_train"  # stage-1 data: running text (Eq. 10) or vocab rows

    def __post_init__(self) -> None:
        require_positive(K=self.K, max_anchors=self.max_anchors)
        if not 0 < self.threshold < 1:
            raise ConfigError(f"threshold={self.threshold} must be in (0, 1) (a share of the word's anchor weight); set e.g. --set threshold=0.05")
        if not self.temperature > 0:
            raise ConfigError(f"temperature={self.temperature} must be positive; set e.g. --set temperature=0.1")
        if self.max_anchors > 255:
            raise ConfigError(f"max_anchors={self.max_anchors} must be at most 255 (counts are stored as uint8); set e.g. --set max_anchors=8")

    @property
    def n_max(self) -> int:
        """Anchors per word at most: ``max_anchors``, or K when there are fewer anchors."""
        return min(self.max_anchors, self.K)


@dataclass(frozen=True)
class AdeBudget:
    """Stage-1 distillation per profile."""

    steps: int                   # Adam steps
    rows: int = 4096             # vocabulary rows per step (fit_on=vocab)
    texts: int = 32              # fit-corpus texts per step (fit_on=a corpus), up to 128 tokens each
    learning_rate: float = 1e-2
    kmeans_niter: int = 10       # faiss k-means iterations for the initial anchors
    # Stage 3 (the suite's training of the new model): the model's own rate and warm-up
    train_learning_rate: float = 1e-3
    train_warmup: float = 0.1    # steps, or a fraction of all steps when below 1


BUDGETS = Budgets(
    smoke=AdeBudget(steps=5, rows=512, texts=8, kmeans_niter=2),
    # MiniLM, K=500: the loss stops falling after about 100 steps of 4,096 rows (13 epochs of the vocabulary)
    quick=AdeBudget(steps=200),
    paper=AdeBudget(steps=2000, kmeans_niter=25, train_warmup=1000),  # Section 4.2: 500-1000 warm-up steps
)


# ---- Stage 1: anchor distillation -------------------------------------------------------------

def matching_pursuit(points: torch.Tensor, atoms: torch.Tensor, n: int, chunk: int = 16384) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-negative matching pursuit: per row of ``points`` (V, D), ``n`` distinct rows of unit
    ``atoms`` (K, D) and their coefficients (> 0). Returns (sets (V, n) int64, coefs (V, n))."""
    sets = torch.empty(len(points), n, dtype=torch.long)
    coefs = torch.empty(len(points), n)
    for start in range(0, len(points), chunk):  # bounds the (chunk, K) correlation matrix
        residual = points[start:start + chunk].clone()
        rows = slice(start, start + len(residual))
        for j in range(n):
            corr = residual @ atoms.T
            if j:
                corr.scatter_(1, sets[rows, :j], -math.inf)
            best, idx = corr.max(1)
            best = best.clamp_min(1e-6)
            sets[rows, j], coefs[rows, j] = idx, best
            residual -= best[:, None] * atoms[idx]
    return sets, coefs


class AnchorDictionary(nn.Module):
    """Stage-1 student (Eq. 9): word w = sum_j T[w, j] A[S_w[j]], T[w] = softmax(logits[w] / tau)."""

    def __init__(self, anchors: torch.Tensor, anchor_sets: torch.Tensor, logits: torch.Tensor, temperature: float):
        super().__init__()
        self.anchors = nn.Parameter(anchors)              # (K, D) shared anchor matrix A
        self.register_buffer("anchor_sets", anchor_sets)  # (V, n_max) int64 candidate anchors S_w, fixed
        self.logits = nn.Parameter(logits)                # (V, n_max)
        self.temperature = temperature

    @classmethod
    def start(cls, table: torch.Tensor, config: AdeConfig, niter: int, seed: int) -> AnchorDictionary:
        """k-means anchors and matching-pursuit sets for the rows of ``table`` (V, D)."""
        unit = F.normalize(table.detach().float().cpu(), dim=1)
        centroids, _ = kmeans(unit.numpy(), config.K, KmeansSettings(niter), seed)
        anchors = F.normalize(torch.from_numpy(centroids), dim=1)
        sets, coefs = matching_pursuit(unit, anchors, config.n_max)
        logits = config.temperature * torch.log(coefs / coefs.sum(1, keepdim=True))
        return cls(anchors, sets, logits, config.temperature)

    def weights(self, ids: torch.Tensor) -> torch.Tensor:
        """(...) ids -> (..., n_max) anchor weights T[w]."""
        return torch.softmax(self.logits[ids] / self.temperature, dim=-1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(...) ids -> (..., D) student embeddings."""
        n = self.anchor_sets.shape[1]
        flat = F.embedding_bag(self.anchor_sets[ids].reshape(-1, n), self.anchors,
                               per_sample_weights=self.weights(ids).reshape(-1, n), mode="sum")
        return flat.reshape(*ids.shape, -1)


def cosine_distillation_loss(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Eq. 10: mean over positions where ``mask`` is true of 1 - cos(student, teacher)."""
    per_token = 1 - F.cosine_similarity(student, teacher, dim=-1)
    return (per_token * mask).sum() / mask.sum()


Batches = Iterator[tuple[torch.Tensor, torch.Tensor]]
"""An endless stream of (token ids, non-padding mask) of the same shape."""


def vocabulary_batches(vocab_size: int, batch: int, seed: int) -> Batches:
    """Every vocabulary row once per epoch in shuffled minibatches (no padding)."""
    gen = torch.Generator().manual_seed(seed)
    while True:
        for ids in torch.randperm(vocab_size, generator=gen).split(batch):
            yield ids, torch.ones_like(ids, dtype=torch.bool)


def corpus_batches(tokenizer, texts: tuple[str, ...], batch: int, seed: int, max_length: int = 128) -> Batches:
    """Token positions of a fit corpus: shuffled texts, ``batch`` per step, padded, with their mask."""
    gen = torch.Generator().manual_seed(seed)
    while True:
        for idx in torch.randperm(len(texts), generator=gen).split(batch):
            enc = tokenizer([texts[i] for i in idx], truncation=True, max_length=max_length, padding=True, return_tensors="pt")
            yield enc["input_ids"], enc["attention_mask"].bool()


def distill(dictionary: AnchorDictionary, teacher: torch.Tensor, batches: Batches, steps: int, lr: float,
            progress=lambda label, done, total: None) -> list[float]:
    """Stage 1: Adam on A and the weight logits against the frozen ``teacher`` table (V, D);
    returns the loss of every step."""
    device = teacher.device
    opt = torch.optim.Adam(dictionary.parameters(), lr=lr)
    losses = []
    for step, (ids, mask) in zip(range(steps), batches):
        ids, mask = ids.to(device), mask.to(device)
        loss = cosine_distillation_loss(dictionary(ids), F.embedding(ids, teacher), mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        progress("anchor distillation", step + 1, steps)
    return losses


# ---- Stage 2: Vocabulary Projection -----------------------------------------------------------

class VocabularyProjection(IndexMaps):
    """The flat padded lookup table (Eq. 11): per word n_max (anchor index, weight) slots, the
    first n_w active, plus the shared anchors. ``forward`` gives the composed word embedding
    (the input-embedding contract); :meth:`anchor_groups` gives the anchors SAT reads."""

    def __init__(self, anchors: torch.Tensor, index: torch.Tensor, weight: torch.Tensor, count: torch.Tensor):
        super().__init__()
        self.anchors = nn.Parameter(anchors)  # (K, D), keeps training (Section 4.2, Stage 3)
        # (V, n_max) active anchor ids, 0 on pad slots; fixed buffers, counted in storage (the ids an
        # index map: harness.methods.index_maps)
        self.register_index_map("anchor_index", index, concept_id_dtype(len(anchors)))
        self.register_buffer("anchor_weight", weight.float())       # (V, n_max), 0 on pad slots
        self.register_buffer("anchor_count", count.to(torch.uint8))  # (V,) n_w in [1, n_max]

    @classmethod
    def empty(cls, words: int, anchors: int, slots: int, dim: int) -> VocabularyProjection:
        """A table of the given shape with unset values, for saved ones to be loaded into."""
        return cls(torch.empty(anchors, dim), torch.empty(words, slots, dtype=torch.long), torch.empty(words, slots),
                   torch.empty(words, dtype=torch.uint8))

    @classmethod
    def project(cls, dictionary: AnchorDictionary, threshold: float) -> VocabularyProjection:
        """Eq. 1-2: keep the anchors whose weight is above ``threshold`` (the largest always)."""
        with torch.no_grad():
            weight, order = dictionary.weights(torch.arange(len(dictionary.logits))).sort(dim=1, descending=True)
            index = dictionary.anchor_sets.gather(1, order)
            active = weight > threshold
            active[:, 0] = True
            anchors = dictionary.anchors.detach().float()
            anchors = anchors / anchors.norm(dim=1).mean()
            return cls(anchors.clone(), index * active, weight * active, active.sum(1))

    @property
    def num_embeddings(self) -> int:
        return self.anchor_index.shape[0]

    @property
    def embedding_dim(self) -> int:
        return self.anchors.shape[1]

    def anchor_groups(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) ids -> weighted anchors w * A[a] (B, L, n_max, D) and their validity (B, L, n_max)."""
        vectors = self.anchors[self.anchor_index[input_ids].long()] * self.anchor_weight[input_ids].unsqueeze(-1)
        slots = torch.arange(self.anchor_index.shape[1], device=input_ids.device)
        return vectors, slots < self.anchor_count[input_ids].unsqueeze(-1)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, L) ids -> (B, L, D) word embeddings sum_a w * A[a] (pad slots weigh 0)."""
        return self.anchor_groups(input_ids)[0].sum(-2)


# ---- GPE and SAT -------------------------------------------------------------------------------

def sinusoidal_encoding(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """(...) positions -> (..., dim) PE(p, 2i) = sin(p / 10000^(2i/dim)), PE(p, 2i+1) = cos(...)."""
    freq = torch.exp(torch.arange(0, dim, 2, device=positions.device) * (-math.log(10000.0) / dim))
    angles = positions.unsqueeze(-1).float() * freq
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)[..., :dim]


def flatten_anchor_groups(vectors: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pack each sequence's valid anchors, word by word, into (B, S, D) with S = max sum n_w.

    Returns the packed anchors, their mask (B, S) and the word position of each anchor (B, S),
    which GPE encodes (Eq. 4: position i repeated n_i times)."""
    batch, length, slots, dim = vectors.shape
    valid = valid.reshape(batch, length * slots)
    lengths = valid.sum(1)
    size = int(lengths.max())
    rows, cols = valid.nonzero(as_tuple=True)  # row-major: word by word, slot by slot
    dest = valid.cumsum(1)[rows, cols] - 1
    packed = vectors.new_zeros(batch, size, dim)
    packed[rows, dest] = vectors.reshape(batch, length * slots, dim)[rows, cols]
    word_pos = torch.zeros(batch, size, dtype=torch.long, device=vectors.device)
    word_pos[rows, dest] = cols // slots
    mask = torch.arange(size, device=vectors.device) < lengths.unsqueeze(1)
    return packed, mask, word_pos


class SegmentAwareAttention(nn.Module):
    """Multi-head self-attention over the flattened anchors (Eq. 6-8); pads get -inf scores."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.heads = heads

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, S, D) anchors, (B, S) mask -> (B, S, D)."""
        batch, size, dim = x.shape
        q, k, v = self.qkv(x).view(batch, size, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        return self.out(attended.transpose(1, 2).reshape(batch, size, dim))


class AdeForSequenceClassification(nn.Module):
    """VP lookup -> GPE -> SAT (one self-attention layer) -> attention pooling -> classifier, with
    a transformers sequence classifier's interface: ``forward(input_ids, attention_mask, labels)``
    returns ``.loss`` and ``.logits``. ``config`` is a copy of the base model's (vocabulary, labels,
    heads) whose entry ``ade`` holds the shapes and settings of this model, so :meth:`from_config`
    rebuilds it from a saved ``config.json`` (the fit cache, ``harness export``).
    ``training_recipe`` (learning rate, warm-up) replaces the suite's fine-tuning rate: this model
    is trained from its distilled anchors and random SAT weights, not fine-tuned."""

    def __init__(self, projection: VocabularyProjection, config, sat: bool, dropout: float = 0.1, training_recipe: dict | None = None):
        super().__init__()
        self.training_recipe = dict(training_recipe or {})
        dim = projection.embedding_dim
        self.config = copy.deepcopy(config)
        self.config.ade = {
            "words": projection.num_embeddings, "anchors": len(projection.anchors), "slots": projection.anchor_index.shape[1],
            "dim": dim, "sat": sat, "dropout": dropout, "training_recipe": self.training_recipe,
        }
        self.projection = projection
        self.attention = SegmentAwareAttention(dim, config.num_attention_heads) if sat else None
        self.norm = nn.LayerNorm(dim)
        self.pool_score = nn.Linear(dim, 1)  # attention pooling: one score per anchor
        self.classifier = nn.Linear(dim, config.num_labels)
        self.dropout = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, config) -> AdeForSequenceClassification:
        """The model ``config.ade`` describes, its tensors unset (:mod:`harness.runner.saved` loads them)."""
        ade = config.ade
        projection = VocabularyProjection.empty(ade["words"], ade["anchors"], ade["slots"], ade["dim"])
        return cls(projection, config, ade["sat"], ade["dropout"], ade["training_recipe"])

    def get_input_embeddings(self) -> VocabularyProjection:
        return self.projection

    def get_output_embeddings(self) -> None:
        return None

    def tie_weights(self) -> None:
        """Nothing is tied: there is no output embedding."""

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """SAT output per flattened anchor (B, S, D) and the anchor mask (B, S)."""
        vectors, valid = self.projection.anchor_groups(input_ids)
        if attention_mask is not None:
            valid = valid & attention_mask.bool().unsqueeze(-1)
        x, mask, word_pos = flatten_anchor_groups(vectors * math.sqrt(vectors.shape[-1]), valid)
        if self.attention is not None:
            x = x + sinusoidal_encoding(word_pos, x.shape[-1])  # GPE, Eq. 3-5
            x = x + self.dropout(self.attention(x, mask))
        return self.norm(x), mask

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> SequenceClassifierOutput:
        """``token_type_ids`` is accepted (BERT tokenizers send it) and unused."""
        hidden, mask = self.encode(input_ids, attention_mask)
        scores = self.pool_score(hidden).squeeze(-1).masked_fill(~mask, -math.inf)
        pooled = (torch.softmax(scores, dim=1).unsqueeze(-1) * hidden).sum(1)
        logits = self.classifier(self.dropout(pooled))
        loss = F.cross_entropy(logits, labels) if labels is not None else None  # Eq. 12
        return SequenceClassifierOutput(loss=loss, logits=logits)


class AdeAdapter(Adapter):
    """ADE: anchor distillation from the teacher's table, Vocabulary Projection, and a new model
    (VP lookup, GPE, SAT, pooling, classifier) in place of the whole encoder."""

    name = "ade"
    config_class = AdeConfig
    budgets = BUDGETS
    needs_teacher = True
    kinds = ("encoder",)
    heads = ("sequence_classification",)  # the SAT classifier replaces the encoder and its head
    no_recovery: str = (
        "ADE replaces the whole embedding module (and the encoder) with its own model, and its stage 1 "
        "already distills the anchors from the unchanged model's table (paper 002 Eq. 10); the suite then "
        "trains the new model end to end (stage 3), so there is no kept model to recover"
    )

    def corpora(self) -> tuple[str, ...]:
        return () if self.config.fit_on == "vocab" else (self.config.fit_on,)

    def check(self, vocab_size: int, hidden_size: int) -> None:
        if self.config.K > vocab_size:
            raise ConfigError(f"K={self.config.K} anchors exceed the vocabulary size {vocab_size}; pick K <= {vocab_size} (paper: 100-700)")

    def compress(self, model: nn.Module, fit: FitContext) -> Compressed:
        cfg, budget = self.config, fit.budget
        teacher = fit.teacher.get_input_embeddings().weight.detach().float().to(fit.device)  # (V, D), frozen
        fit.progress("anchors: k-means + matching pursuit", 0, 1)
        dictionary = AnchorDictionary.start(teacher, cfg, budget.kmeans_niter, fit.seed).to(fit.device)
        if cfg.fit_on == "vocab":
            batches = vocabulary_batches(len(teacher), budget.rows, fit.seed)
        else:
            batches = corpus_batches(fit.tokenizer, fit.corpus(cfg.fit_on).texts, budget.texts, fit.seed)
        losses = distill(dictionary, teacher, batches, budget.steps, budget.learning_rate, fit.progress)
        projection = VocabularyProjection.project(dictionary, cfg.threshold)
        with torch.no_grad():
            words = torch.arange(len(teacher), device=teacher.device)[None]
            cos = F.cosine_similarity(projection(words)[0], teacher, dim=-1)
        recipe = {"learning_rate": budget.train_learning_rate, "warmup": budget.train_warmup}
        classifier = AdeForSequenceClassification(projection, model.config, cfg.sat, training_recipe=recipe).to(fit.device)
        counts = projection.anchor_count.long()
        details = {
            "distill_loss_first": losses[0] if losses else None,
            "distill_loss_last": losses[-1] if losses else None,
            "cosine_to_teacher_after_vp": float(cos.mean()),
            "anchors_per_word_mean": float(counts.float().mean()),
            "anchors_per_word_histogram": torch.bincount(counts, minlength=cfg.n_max + 1).tolist(),
            "anchors_used": int(projection.anchor_index[counts[:, None] > torch.arange(cfg.n_max, device=counts.device)].long().unique().numel()),
            "params_besides_anchors": sum(p.numel() for n, p in classifier.named_parameters() if not n.startswith("projection.")),
        }
        return Compressed(classifier, details=details)
