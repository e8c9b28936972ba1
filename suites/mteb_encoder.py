"""Any (compressed) transformers encoder or decoder as an MTEB model: mean pooling over the last hidden states.

MTEB needs an ``AbsEncoder`` that carries ``mteb_model_meta``; without it ``mteb.evaluate`` fails
with a misleading NotImplementedError. The meta names the run, not the base checkpoint: its
revision is the run's config hash and its parameter counts are the compressed model's (total and
token-embedding parameters, as in the compression report).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from torch import nn

from harness.adapter import footprint
from harness.measure.efficiency import model_bytes
from harness.sources.heads import mean_pool


def model_meta(name: str, revision: str, model: nn.Module, max_tokens: int) -> ModelMeta:
    """MTEB metadata of a compressed model: ``harness/<name>`` at revision ``revision``."""
    counts = footprint(model)
    return ModelMeta(
        loader=None, name=f"harness/{name}", revision=revision, release_date=None, languages=None,
        n_parameters=counts.total_params, n_embedding_parameters=counts.embedding_params,
        memory_usage_mb=round(model_bytes(model) / 2**20, 1), max_tokens=max_tokens,
        embed_dim=model.config.hidden_size, license=None, open_weights=None, public_training_code=None,
        public_training_data=None, framework=["PyTorch"], similarity_fn_name=ScoringFunction.COSINE,
        use_instructions=False, training_datasets=None,
    )


class CompressedEncoder(AbsEncoder):
    """Mean-pooled sentence embeddings from ``model`` (an ``AutoModel``), batched on ``device``.

    Batch size comes from MTEB's data loader (``encode_kwargs={"batch_size": ...}``).
    """

    def __init__(self, model: nn.Module, tokenizer: Any, meta: ModelMeta, device: str, max_length: int = 128):
        self.model, self.tokenizer, self.device, self.max_length = model, tokenizer, device, max_length
        self.mteb_model_meta = meta

    @torch.inference_mode()
    def encode(self, inputs, *, task_metadata, hf_split: str, hf_subset: str, prompt_type=None, **kwargs) -> np.ndarray:
        self.model.eval().to(self.device)
        batches = []
        for batch in inputs:
            enc = self.tokenizer(batch["text"], padding=True, padding_side="right",  # left padding would shift the positions of a GPT-2-style decoder
                                 truncation=True, max_length=self.max_length, return_tensors="pt")
            enc = {k: v.to(self.device) for k, v in enc.items()}
            hidden = self.model(**enc).last_hidden_state
            batches.append(mean_pool(hidden, enc["attention_mask"]).float().cpu().numpy())
        return np.concatenate(batches)
