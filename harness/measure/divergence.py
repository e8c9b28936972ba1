"""KL divergence between two language models' next-token distributions, reduced on the fly.

KL(base || method) per token says how far a compressed model's predictions moved from the
unchanged model's on the same text, independently of whether the text's own tokens got likelier or
not (BPB). Logits are never held for a whole window: each model's last hidden states are computed
once per window, and the output head is applied to ``chunk`` positions at a time, so memory is two
``chunk x V`` blocks (256 x 49,152 fp32: 50 MB each) instead of two ``T x V`` (2,048 positions:
400 MB each).

Logits are taken as ``model.get_output_embeddings()(model.base_model(ids).last_hidden_state)``: right
for models whose head is that linear map (Llama, SmolLM2, Qwen, GPT-2, and every head the adapters
install), not for heads that scale or cap logits afterwards (Gemma 2's soft-capping).
"""

from __future__ import annotations

import torch
from torch import nn


@torch.inference_mode()
def window_kl(base: nn.Module, method: nn.Module, input_ids: torch.Tensor, predicted: int, chunk: int = 256) -> float:
    """Sum of KL(p_base || p_method) in nats over the last ``predicted`` positions of ``input_ids`` (1, T)."""
    start = input_ids.shape[1] - predicted
    hidden = [m.base_model(input_ids=input_ids).last_hidden_state[:, start:] for m in (base, method)]
    heads = [m.get_output_embeddings() for m in (base, method)]
    total = 0.0
    for s in range(0, predicted, chunk):
        log_p, log_q = (torch.log_softmax(head(h[:, s:s + chunk]).float(), dim=-1) for head, h in zip(heads, hidden))
        total += float(torch.sum(log_p.exp() * (log_p - log_q)))
    return total


def rolling_kl(base: nn.Module, method: nn.Module, tokens: list[int], prefix_token: int, max_length: int, device: str) -> tuple[float, int]:
    """Summed KL(base || method) over every token of a document and the number of tokens, on
    lm-eval's rolling windows (``loglikelihood_rolling``: the first window starts from
    ``prefix_token``; each later one predicts up to ``max_length`` new tokens after the ones before)."""
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

    windows = map(make_disjoint_window, get_rolling_token_windows(tokens, prefix_token, max_length, context_len=1))
    total = 0.0
    for context, continuation in windows:
        ids = torch.tensor([(context + continuation)[:-1]], device=device)
        total += window_kl(base, method, ids, len(continuation))
    return total, len(tokens)
