"""Multi-sense drop-in (paper 004, Sections 3.1-3.2): the fine-tuned model's last-layer vectors
replaced by senses from a dictionary built over a fit corpus.

1. Sense dictionary: the model (as the suite fine-tuned it: stage ``after_finetune``) runs over
   the fit corpus; each token's last-layer vectors (a uniform sample of at most ``cap``) are
   clustered into senses: at most ``k`` by k-means (faiss), or, with ``clustering=mcl``, as many
   as Markov clustering gives the token (Appendix C: k_t from the MCL cluster count, as the
   authors' a1_kmeans_withmcl.py; ``k`` does not cap it, so a token can have more than k senses, as
   20% of Llama's have more than 15 in Table 6); see :mod:`harness.methods.senses.cluster`.
2. Drop-in: at inference each token's last-layer vector m_t is replaced by its sense of largest
   dot product <m_t, s_t^(i)>, then the model's own head runs (a mean-pooled classifier, BERT's
   first-token pooler, an LM head, MTEB's mean pooling). Tokens without an entry keep m_t.

Reported with the run (``details``): dictionary bytes (also in the compression report's stored
bytes: the dictionary is part of the model's state), tokens with senses, the senses-per-token
histogram, the share of tokens with fewer than k senses (paper 004 Table 5's "< 15 senses") and
Table 6's bins (``table6``: tokens with at most / more than 15 senses); with ``clustering=mcl`` also
what Markov clustering found (``mcl``: the tokens it gave a single cluster, hence the minimum 5
senses, as it does almost every MiniLM token because their vectors lie close: see
:mod:`harness.methods.senses.cluster`, whose counts equal the authors' scripts').

Choices where the paper is silent:

* Fit text: the suite task's training texts by default (``corpus=task_train``), as paper 004 built
  its GLUE dictionary from the GLUE training sets and its MTEB one from the MTEB training sets
  (Sections 4.1-4.2, Appendix C); never the scored texts. A pair task's training pairs run
  through the model as it reads them, two segments with their token type ids (the authors'
  a1_gather_sense.py; :mod:`harness.methods.senses.collect`), so the senses are the vectors the drop-in replaces.
  Suites that train on nothing (bpb, lm_eval) need a named corpus: ``--set corpus=wikitext2_train``
  (WikiText, Appendix B) or ``c4_sample``.
* Decoders (SmolLM2): the causal last hidden state (after the final norm) is clustered as it is;
  the paper first made Llama bidirectional with LLM2Vec, which is not available offline (paper
  004 Limitation 2 names the causal states as the alternative).
* Word similarity (paper 004 Appendix E) needs senses of whole words, not tokens:
  :meth:`MultisenseAdapter.word_senses` gives each word at most ``k`` (k-means; Appendix E uses
  k = 5) for a word-similarity suite to score by the maximum dot product over sense pairs,
  clustered from the word occurrences the suite reads from the model's own vectors (the token
  drop-in suspended), as the paper builds its word-level dictionary from the encoder's last layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from torch import nn

from harness.adapter import Adapter, Compressed, FitContext
from harness.budgets import Budgets
from harness.methods.senses.cluster import kmeans_senses
from harness.methods.senses.fit import SenseBudget, SenseSettings, fit_dictionary

BUDGETS = Budgets(
    smoke=SenseBudget(fit_tokens=2_000, window=64, batch_size=16),
    quick=SenseBudget(fit_tokens=100_000),
    paper=SenseBudget(fit_tokens=None),
    large={"quick": SenseBudget(fit_tokens=50_000)},
)


@dataclass(frozen=True)
class MultisenseConfig(SenseSettings):
    """The sense dictionary's settings (:class:`harness.methods.senses.fit.SenseSettings`)."""


class MultisenseAdapter(Adapter):
    name = "multisense"
    config_class = MultisenseConfig
    budgets = BUDGETS
    stage = "after_finetune"

    def corpora(self) -> tuple[str, ...]:
        return (self.config.corpus,)

    def compress(self, model: nn.Module, fit: FitContext) -> Compressed:
        dictionary, _, facts = fit_dictionary(model, fit, self.config)
        dictionary.attach(model)
        return Compressed(model.eval(), details={"clustering": self.config.clustering, **facts})

    def word_senses(self, model: nn.Module, occurrences: Callable[[nn.Module], list[np.ndarray]],
                    seed: int) -> list[np.ndarray]:
        """Paper 004 Appendix E: senses of whole words, one (k_w, D) matrix per word, k_w <= the
        adapter's ``k``: k-means over each word's contextual occurrences
        (:func:`harness.methods.senses.cluster.kmeans_senses`; one sense is the mean of the
        occurrences). The occurrences are read from the model's own vectors, with the token drop-in
        suspended: the paper builds the word-level dictionary from the encoder's last hidden layer,
        not from token senses."""
        with model.sense_dictionary.suspended():
            found = occurrences(model)
        return kmeans_senses(found, self.config.k, seed)
