"""Sense dictionaries of pair tasks (paper 004, Sections 3.1-3.2, 4.1): the fit text is encoded as
the fine-tuned model reads it, two segments with their token type ids, so the drop-in replaces
vectors by senses of the same kind. Real MiniLM, real GLUE and XNLI data, smoke budgets."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from harness.adapters.multisense import BUDGETS as SENSE_BUDGETS
from harness.suites.finetune import padding_collator, predict, sentence_features
from harness.suites.glue import BUDGETS as GLUE_BUDGETS
from harness.suites.glue import TASKS, Glue, GlueConfig
from harness.suites.xnli import XNLI, XnliConfig

from harness.adapter import FitContext
from harness.methods.senses.collect import backbone_of, fit_windows
from harness.methods.senses.fit import SenseSettings, fit_dictionary
from harness.sources import corpora, models
from harness.suite import SuiteContext, Task

PAIRS = 40


@pytest.fixture(scope="module")
def glue_data(data_dir):
    config = GlueConfig(tasks="sst2,mrpc,stsb,rte,qnli")
    return config, Glue().prepare(data_dir, config, GLUE_BUDGETS.select("smoke"))


@pytest.fixture(scope="module")
def tokenizer(minilm_ref):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_ref.location)


def _as_suite_encodes(tokenizer, first, second, max_length):
    features = sentence_features(tokenizer, first, second, np.zeros(len(first)), max_length)
    return sorted((f["input_ids"], f["token_type_ids"]) for f in features)


def test_fit_windows_of_a_task_are_the_suites_own_features(glue_data, tokenizer, data_dir):
    config, data = glue_data
    window = SENSE_BUDGETS.select("smoke").window
    assert window == GLUE_BUDGETS.select("smoke").max_length  # the dictionary sees inputs of the scored length
    suite, truncated = Glue(), 0
    for name in ("sst2", "mrpc", "stsb", "rte", "qnli"):
        texts = suite.train_texts(Task(name, TASKS[name].head), data, config)[:PAIRS]
        train = data.splits[name]["train"]
        second = train.second[:PAIRS] if train.second is not None else None
        windows = fit_windows(tokenizer, texts, window, None, seed=0)
        assert sorted((w.ids, w.types) for w in windows) == _as_suite_encodes(tokenizer, train.first[:PAIRS], second, window), name
        if second is not None:
            assert all(1 in w.types for w in windows), name  # the second segment is marked
            truncated += sum(len(w) == window for w in windows)
    assert truncated  # some pairs (RTE's) are truncated, longest segment first, as the suite truncates them
    xnli = XNLI()
    xnli_data = xnli.prepare(data_dir, XnliConfig(), xnli.budgets.select("smoke"))
    pairs = xnli.train_texts(Task("xnli", xnli.head), xnli_data, XnliConfig())[:PAIRS]
    windows = fit_windows(tokenizer, pairs, window, None, seed=0)
    assert sorted((w.ids, w.types) for w in windows) == _as_suite_encodes(tokenizer, *map(list, zip(*pairs)), window)


def test_a_dictionary_of_every_vector_leaves_the_fine_tuned_pair_model_nearly_unchanged(glue_data, minilm_ref, tmp_path):
    """k = cap: every sampled vector is its own sense. On the training pairs it was fitted on, the
    drop-in mostly picks the position's own vector (69% here), so the predictions barely move (99%
    agree). Fitted on the same pairs joined into one segment (the bug this guards against), 4% of
    the positions found their own vector."""
    torch.manual_seed(0)
    config, data = glue_data
    suite, task = Glue(), Task("rte", TASKS["rte"].head)
    budget = GLUE_BUDGETS.select("smoke")
    ctx = SuiteContext("smoke", 0, "cpu", config, budget, tmp_path)
    model, tokenizer = models.load(minilm_ref, task.head)
    model = suite.train(task, model, tokenizer, data, ctx)

    texts = suite.train_texts(task, data, config)[:100]
    corpus = corpora.Corpus(corpora.TASK_TRAIN, tuple(texts), {})
    every_pair = dataclasses.replace(SENSE_BUDGETS.select("smoke"), fit_tokens=None)
    fit = FitContext(tokenizer=tokenizer, corpora={corpora.TASK_TRAIN: corpus}, budget=every_pair)
    cap = 10_000  # above any token's count in 100 pairs: nothing is sampled away
    dictionary, windows, _ = fit_dictionary(model, fit, SenseSettings(k=cap, cap=cap, fp16=False))
    assert len(windows) == len(texts)  # one input per pair

    first, second = (list(side) for side in zip(*texts))
    features = sentence_features(tokenizer, first, second, np.zeros(len(texts), dtype=np.int64), budget.max_length)
    batch = padding_collator(tokenizer)([{k: v for k, v in f.items() if k != "labels"} for f in features])
    with torch.no_grad():
        hidden = backbone_of(model)(**batch).last_hidden_state
        chosen = dictionary.choose(batch["input_ids"], hidden)
    real = batch["attention_mask"].bool()
    own = torch.nn.functional.cosine_similarity(chosen[real], hidden[real], dim=-1) > 0.999
    assert own.float().mean() > 0.5

    plain = np.stack(predict(model, features, padding_collator(tokenizer), budget, ctx)["logits"])
    dictionary.attach(model)
    dropped = np.stack(predict(model, features, padding_collator(tokenizer), budget, ctx)["logits"])
    assert (dropped.argmax(-1) == plain.argmax(-1)).mean() >= 0.95
    margin = lambda logits: logits[:, 1] - logits[:, 0]  # noqa: E731
    assert np.corrcoef(margin(dropped), margin(plain))[0, 1] > 0.98
