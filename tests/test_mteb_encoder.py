"""The MTEB wrapper around a compressed encoder: protocol, metadata, mean pooling."""

from __future__ import annotations

import numpy as np
import torch
from harness.adapters.asg import AsgAdapter, AsgConfig
from harness.suites.mteb_tasks import Banking77Local
from harness.suites.mteb_encoder import CompressedEncoder, model_meta
from mteb.models import EncoderProtocol
from mteb.models.model_meta import ModelMeta

from harness.adapter import FitContext
from harness.sources import models
from harness.sources.heads import Head, mean_pool


def test_wrapper_is_an_encoder_with_the_compressed_counts():
    model, tokenizer = models.load(models.resolve("minilm"), Head("base"))
    applied = AsgAdapter(AsgConfig(k=64, m=8, niter=5)).apply(model, FitContext(seed=0))
    asg, report = applied.model, applied.report
    meta = model_meta("minilm", "0123456789abcdef", asg, max_tokens=128)
    encoder = CompressedEncoder(asg, tokenizer, meta, "cpu")
    assert isinstance(encoder, EncoderProtocol)
    assert isinstance(encoder.mteb_model_meta, ModelMeta)
    assert meta.name == "harness/minilm" and meta.revision == "0123456789abcdef" and meta.embed_dim == 384
    assert meta.n_embedding_parameters == report.embedding_params_after == 64 * 384
    assert meta.n_parameters == report.total_params_after < report.total_params_before

    texts = ["card still not here", "how do I top up?", "exchange rate seems wrong for my payment"]
    batches = [{"text": texts[:2]}, {"text": texts[2:]}]
    out = encoder.encode(batches, task_metadata=Banking77Local.metadata, hf_split="test", hf_subset="default")
    assert out.shape == (3, 384)
    enc = tokenizer(texts[2:], return_tensors="pt")
    with torch.inference_mode():
        want = asg(**enc).last_hidden_state.mean(1)  # one unpadded text: mean over all tokens
    np.testing.assert_allclose(out[2], want[0].numpy(), atol=1e-5)


def test_mean_pool_ignores_padding():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    assert mean_pool(hidden, torch.tensor([[1, 1, 0]])).tolist() == [[2.0, 3.0]]


def test_a_decoder_embeds_a_text_the_same_alone_or_padded_in_a_batch():
    """mteb_clf takes decoders (paper 004's MTEB side): SmolLM2's causal states, mean-pooled over the
    real tokens, do not depend on the padding its batch adds."""
    model, tokenizer = models.load(models.resolve("smollm2"), Head("base"))
    encoder = CompressedEncoder(model, tokenizer, model_meta("smollm2", "r", model, max_tokens=64), "cpu", max_length=64)
    texts = ["card still not here", "the exchange rate I was charged for my last card payment seems wrong"]
    together = encoder.encode([{"text": texts}], task_metadata=Banking77Local.metadata, hf_split="test", hf_subset="default")
    alone = encoder.encode([{"text": texts[:1]}], task_metadata=Banking77Local.metadata, hf_split="test", hf_subset="default")
    assert together.shape == (2, 576)
    assert len(tokenizer(texts[0])["input_ids"]) < len(tokenizer(texts[1])["input_ids"])  # the first text is padded
    np.testing.assert_allclose(together[0], alone[0], atol=1e-4)
    assert not np.allclose(together[0], together[1], atol=1e-2)
