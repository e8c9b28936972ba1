"""lm-eval's HFLM on real SmolLM2: the unchanged model, ASG's compressed head, and our BPB."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from harness.adapters.asg import AsgAdapter, AsgConfig, ConceptLMHead
from harness.adapters.none import NoneAdapter
from harness.suites.bpb import BitsPerByte, BpbConfig
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM

from harness.adapter import FitContext
from harness.sources import models
from harness.sources.heads import Head
from harness.suite import SuiteContext

PAIRS = [("The capital of France is", " Paris."), ("Cats and dogs", " are pets that many people keep at home."), ("1, 2, 3,", " 4")]


@pytest.fixture(scope="module")
def smollm2():
    model, tokenizer = models.load(models.resolve("smollm2"), Head("causal_lm"))
    return model.eval(), tokenizer


def _requests(pairs) -> list[Instance]:
    return [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]


@torch.inference_mode()
def _direct(logits_fn, lm: HFLM, context: str, continuation: str) -> float:
    """Sum of log p(continuation tokens | prefix) from a full forward pass, tokenized as lm-eval does."""
    whole, ctx = lm.tok_encode(context + continuation), lm.tok_encode(context)
    ids = torch.tensor([whole])
    logp = logits_fn(ids)[0, :-1].log_softmax(-1)
    targets = ids[0, 1:]
    picked = logp.gather(-1, targets[:, None])[:, 0]
    return float(picked[len(ctx) - 1:].sum())


def test_none_adapter_hflm_loglikelihoods_equal_the_plain_model(smollm2):
    model, tokenizer = smollm2
    plain = copy.deepcopy(model)
    wrapped = NoneAdapter().apply(model, FitContext()).model
    lm = HFLM(pretrained=wrapped, tokenizer=tokenizer, batch_size=2)  # batch 2: padding is exercised
    got = [ll for ll, _ in lm.loglikelihood(_requests(PAIRS), disable_tqdm=True)]
    want = [_direct(lambda ids: plain(ids).logits, lm, c, x) for c, x in PAIRS]
    assert got == pytest.approx(want, abs=2e-3)


def test_asg_head_survives_tie_weights_and_matches_dense_head(smollm2):
    model, tokenizer = smollm2
    asg = AsgAdapter(AsgConfig(k=64, m=8, niter=5)).apply(copy.deepcopy(model), FitContext(seed=0)).model
    lm = HFLM(pretrained=asg, tokenizer=tokenizer, batch_size=2)  # calls asg.tie_weights()
    assert isinstance(lm.model.get_output_embeddings(), ConceptLMHead)
    dense = asg.get_input_embeddings().dense().detach()  # (V, D) reconstructed concept table (tied head)

    def dense_logits(ids):
        return asg.model(ids).last_hidden_state @ dense.T

    ids = torch.tensor([lm.tok_encode("Product quantization of the output embedding.")])
    with torch.inference_mode():
        through_lm_eval = lm._model_call(ids)
        torch.testing.assert_close(through_lm_eval, dense_logits(ids), atol=2e-3, rtol=1e-4)
    got = [ll for ll, _ in lm.loglikelihood(_requests(PAIRS), disable_tqdm=True)]
    assert got == pytest.approx([_direct(dense_logits, lm, c, x) for c, x in PAIRS], abs=2e-3)


@torch.inference_mode()
def test_bpb_equals_direct_nll_over_bytes_of_the_same_file(smollm2, data_dir, tmp_path):
    model, tokenizer = smollm2
    suite = BitsPerByte()
    ctx = SuiteContext("smoke", 0, "cpu", BpbConfig(), suite.budgets.smoke, tmp_path)
    result = suite.score(suite.tasks(BpbConfig())[0], model, tokenizer, suite.prepare(data_dir, BpbConfig()), ctx)
    texts = [json.loads(line)["text"] for line in Path(tmp_path / "wikitext2" / "texts.jsonl").read_text().splitlines()]
    nll, n_bytes = 0.0, 0
    for text in texts:  # each smoke document fits one window: BOS (lm-eval's prefix token) + tokens
        ids = torch.tensor([[tokenizer.bos_token_id, *tokenizer(text, add_special_tokens=False)["input_ids"]]])
        logp = model(ids).logits[0, :-1].log_softmax(-1)
        nll -= float(logp.gather(-1, ids[0, 1:, None]).sum())
        n_bytes += len(text.encode("utf-8"))
    score = next(s for s in result.scores if s.task == "wikitext2")
    assert [s.task for s in result.scores] == ["wikitext2", "c4"]  # both packaged corpora
    assert score.value == pytest.approx(nll / math.log(2) / n_bytes, rel=1e-4)
    assert score.metric == "bits_per_byte" and not score.higher_is_better
    assert score.ci_low < score.value < score.ci_high and score.n == len(texts) == 3
    assert result.details["wikitext2"]["bytes"] == n_bytes
