"""The models the benchmarks time: packaged ones (real weights) and random ones at real shapes."""

from __future__ import annotations

import torch
from torch import nn

from harness.sources import models
from harness.sources.heads import Head, HeadKind

SMOLLM2_LAYOUT = {  # SmolLM2-135M's config (the packaged model's), for random weights where it is absent
    "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
    "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64, "rope_theta": 100000.0,
    "max_position_embeddings": 8192, "tie_word_embeddings": True,
}
LLAMA3_LAYOUT = {  # Llama-3-8B's layer and vocabulary shapes; the benchmark keeps a few layers
    "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "rope_theta": 500000.0, "max_position_embeddings": 8192,
    # tied here (Llama-3 is not): one V x D table instead of two halves the memory; a decode step
    # reads only one row of the input table, so timing does not change
    "tie_word_embeddings": True,
}
TINY_LAYOUT = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": True,
}


def load_packaged(name: str, head: HeadKind) -> nn.Module:
    """A packaged model (``smollm2``, ``me5-small``, ...) with its real weights, fp32, eval mode."""
    model, _ = models.load(models.resolve(name), Head(head))
    return model.float().eval()


def random_decoder(layout: dict, layers: int | None = None, device: str = "cpu", seed: int = 0) -> nn.Module:
    """A Llama decoder with random weights in ``layout``'s shapes (``layers`` overrides the depth)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = dict(layout) if layers is None else {**layout, "num_hidden_layers": layers}
    torch.manual_seed(seed)
    with torch.device(device):
        return LlamaForCausalLM(LlamaConfig(**config)).eval()
