"""Fitting a sense dictionary as both paper 004 adapters do (``multisense``, Sections 3.1-3.2;
``skd``, Section 3.3): the settings they share, the fit text per profile, and the pipeline from
the fit corpus to the dictionary (:mod:`~harness.methods.senses.collect`, then
:mod:`~harness.methods.senses.cluster`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from harness.config import require_positive
from harness.errors import ConfigError
from harness.methods.senses.cluster import Clustering, build
from harness.methods.senses.collect import Window, backbone_of, collect, fit_windows
from harness.methods.senses.dictionary import SenseDictionary


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
