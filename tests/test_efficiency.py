"""Efficiency timing: models are timed in alternating rounds and each phase pools its samples."""

from __future__ import annotations

import time

import torch
from transformers import BertConfig, BertModel

from harness.measure.efficiency import ROUNDS, measure


def _tiny_encoder(name: str, calls: list[str], delay_s: float = 0.0) -> BertModel:
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64))

    def hook(module, args, kwargs):
        calls.append(name)
        time.sleep(delay_s)

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return model


def test_models_alternate_round_by_round_and_samples_pool():
    calls: list[str] = []
    fast, slow = _tiny_encoder("fast", calls), _tiny_encoder("slow", calls, delay_s=0.02)
    fast_stats, slow_stats = measure([fast, slow], "encoder", "cpu", smoke=True)
    per_round = 1 + 2  # smoke: one warm-up pass and two timed passes
    runs = [calls[i] for i in range(0, len(calls), per_round)]
    assert runs == ["fast", "slow"] * ROUNDS and len(calls) == 2 * ROUNDS * per_round
    (fast_fwd,), (slow_fwd,) = fast_stats, slow_stats
    assert fast_fwd.phase == slow_fwd.phase == "forward"
    assert len(fast_fwd.samples_ms) == len(slow_fwd.samples_ms) == 2 * ROUNDS
    assert slow_fwd.p50_ms - fast_fwd.p50_ms > 15  # the 20 ms delay shows in the pooled median
    assert fast_fwd.throughput > slow_fwd.throughput and fast_fwd.p95_ms >= fast_fwd.p50_ms
