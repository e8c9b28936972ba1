"""KL(base || method) per token, reduced in chunks, against full logits on a tiny random decoder."""

from __future__ import annotations

import copy

import pytest
import torch

from harness.measure.divergence import rolling_kl, window_kl


@pytest.fixture
def pair(tiny_decoder):
    method = copy.deepcopy(tiny_decoder)
    with torch.no_grad():
        method.get_input_embeddings().weight.add_(0.05 * torch.randn_like(method.get_input_embeddings().weight))
    return tiny_decoder, method


@torch.inference_mode()
def _full_kl(base, method, ids: torch.Tensor) -> float:
    log_p, log_q = base(ids).logits.log_softmax(-1), method(ids).logits.log_softmax(-1)
    return float((log_p.exp() * (log_p - log_q)).sum())


def test_one_window_equals_the_kl_of_full_logits_in_any_chunking(pair):
    base, method = pair
    tokens = torch.randint(0, 512, (40,)).tolist()
    total, n = rolling_kl(base, method, tokens, prefix_token=1, max_length=64, device="cpu")
    expected = _full_kl(base, method, torch.tensor([[1, *tokens[:-1]]]))
    assert n == 40 and total == pytest.approx(expected, rel=1e-4) and total > 0
    ids = torch.tensor([[1, *tokens[:-1]]])
    assert window_kl(base, method, ids, 40, chunk=3) == pytest.approx(window_kl(base, method, ids, 40, chunk=256), rel=1e-5)


def test_rolling_windows_cover_every_token_once_and_kl_of_a_model_with_itself_is_zero(pair):
    base, method = pair
    tokens = torch.randint(0, 512, (50,)).tolist()
    total, n = rolling_kl(base, method, tokens, prefix_token=1, max_length=16, device="cpu")
    assert n == 50 and total > 0
    # the last window of lm-eval's rolling scheme: 16 tokens of input predicting the final 50 - 48 = 2 tokens
    last = window_kl(base, method, torch.tensor([tokens[50 - 17:49]]), 2)
    assert 0 < last < total
    assert rolling_kl(base, copy.deepcopy(base), tokens, 1, 16, "cpu")[0] == pytest.approx(0.0, abs=1e-6)
