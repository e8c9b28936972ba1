"""ASG keeps MiniLM's sentence representations before any fine-tuning (real model, real XNLI text)."""

from __future__ import annotations

import copy

import numpy as np
import torch
from harness.adapters.asg import AsgAdapter, AsgConfig
from harness.suites import xnli

from harness.adapter import FitContext
from harness.sources import models
from harness.sources.heads import Head


def _embed(model, tokenizer, texts: list[str]) -> torch.Tensor:
    enc = tokenizer(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1)


def test_asg_sentence_embeddings_stay_close_and_retrievable(minilm_ref, data_dir):
    dev, _ = xnli.load("dev", data_dir)
    english = [p for p, lang in zip(dev.premise, dev.language) if lang == "en"]
    texts = list(dict.fromkeys(english))[:64]  # each premise comes with three hypotheses
    base, tokenizer = models.load(minilm_ref, Head("base"))
    asg = AsgAdapter(AsgConfig(k=512, m=48)).apply(copy.deepcopy(base), FitContext(seed=0)).model
    scrambled = copy.deepcopy(asg)
    ids = scrambled.get_input_embeddings().concept_ids
    ids.copy_(ids[torch.randperm(ids.shape[0], generator=torch.Generator().manual_seed(0))])  # control: wrong tokens' concepts

    e_base, e_asg, e_scr = (_embed(m, tokenizer, texts) for m in (base, asg, scrambled))
    cos_asg = (e_base * e_asg).sum(-1).numpy()
    cos_scr = (e_base * e_scr).sum(-1).numpy()
    assert np.median(cos_asg) > 0.9
    assert np.median(cos_asg) > np.median(cos_scr) + 0.3
    # each ASG sentence vector finds its own base vector among 64 (chance: 1/64)
    hits = (e_asg @ e_base.T).argmax(-1) == torch.arange(len(texts))
    assert hits.float().mean() > 0.9
