"""Frequency-trimmed table: the tokens seen most often in a fit corpus keep their own vectors, the
others share ``buckets`` vectors (a token's bucket is its id modulo ``buckets``).

An example of a plugin that reads a fit corpus and uses the teacher: token counts come from the
declared corpus (tokenized with the base tokenizer, ``fit.tokenizer``); a bucket's vector is the
count-weighted mean of the teacher's rows of the tokens that share it (each counted at least once),
the least-squares fit of those rows by one vector under the corpus's token distribution.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from harness.adapter import Adapter, FitContext, replace_tables
from harness.budgets import Budgets
from harness.config import require_positive
from harness.errors import ConfigError


@dataclass(frozen=True)
class FrequentConfig:
    keep: int = 4096                  # tokens that keep their own vector
    buckets: int = 2048               # vectors the other tokens share
    corpus: str = "wikitext2_train"   # fit corpus the counts come from

    def __post_init__(self) -> None:
        require_positive(keep=self.keep, buckets=self.buckets)


@dataclass(frozen=True)
class FrequentBudget:
    fit_texts: int  # corpus documents counted


class TrimmedEmbedding(nn.Module):
    """Token -> its own row when kept, else its bucket's row (after the kept ones)."""

    def __init__(self, rows: torch.Tensor, row_of: torch.Tensor):
        super().__init__()
        self.rows = nn.Parameter(rows)               # (keep + buckets, D)
        self.register_buffer("row_of", row_of)       # (V,) int32 id map, stored

    @property
    def num_embeddings(self) -> int:
        return self.row_of.shape[0]

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(self.row_of[input_ids].long(), self.rows)


class FrequentAdapter(Adapter):
    name = "frequent"
    config_class = FrequentConfig
    budgets = Budgets(smoke=FrequentBudget(50), quick=FrequentBudget(5000), paper=FrequentBudget(100_000))
    needs_teacher = True
    recovers = ("rows",)  # what --recover trains: the kept rows and the buckets'; the id map stays fixed

    @classmethod
    def small_settings(cls, vocab_size: int, hidden_size: int) -> dict[str, str]:
        """The conformance cases' model has 1,000 tokens: keep 100 of them, share 20 buckets."""
        return {"keep": str(vocab_size // 10), "buckets": str(vocab_size // 50)}

    def corpora(self) -> tuple[str, ...]:
        return (self.config.corpus,)

    def check(self, vocab_size: int, hidden_size: int) -> None:
        rows = self.config.keep + self.config.buckets
        if rows >= vocab_size:
            raise ConfigError(f"keep={self.config.keep} + buckets={self.config.buckets} rows are no fewer than the "
                              f"vocabulary's {vocab_size} tokens; pick keep + buckets < {vocab_size}")

    def compress(self, model: nn.Module, fit: FitContext) -> nn.Module:
        texts = fit.corpus(self.config.corpus).plain()[: fit.budget.fit_texts]  # counts only: a pair task's pairs joined
        counts = Counter(i for ids in fit.tokenizer(list(texts), add_special_tokens=False)["input_ids"] for i in ids)
        teacher = fit.teacher.get_input_embeddings().weight.detach()   # (V, D), the unchanged table
        kept = torch.tensor([i for i, _ in counts.most_common(self.config.keep)], dtype=torch.long)
        bucket = torch.arange(len(teacher)) % self.config.buckets      # (V,) the bucket of each token
        row_of = (len(kept) + bucket).to(torch.int32)
        row_of[kept] = torch.arange(len(kept), dtype=torch.int32)
        weight = torch.tensor([counts.get(i, 0) + 1.0 for i in range(len(teacher))])
        weight[kept] = 0.0
        sums = torch.zeros(self.config.buckets, teacher.shape[1]).index_add_(0, bucket, weight[:, None] * teacher.float())
        totals = torch.zeros(self.config.buckets).index_add_(0, bucket, weight)
        shared = sums / totals.clamp_min(1e-12)[:, None]               # a bucket whose tokens are all kept stays 0
        rows = torch.cat([teacher[kept].float(), shared]).clone()
        return replace_tables(model, lambda table: TrimmedEmbedding(rows.to(table.dtype), row_of), None, output=False)
