"""ADE (paper 002): anchor distillation, Vocabulary Projection, GPE and the SAT classifier."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig

from harness.adapters.ade import (
    AdeConfig,
    AdeForSequenceClassification,
    AnchorDictionary,
    VocabularyProjection,
    cosine_distillation_loss,
    distill,
    flatten_anchor_groups,
    matching_pursuit,
    sinusoidal_encoding,
    vocabulary_batches,
)
from harness.errors import ConfigError

ROWS = 3000  # the first rows of MiniLM's real table keep these tests fast


@pytest.fixture(scope="module")
def fitted(minilm_table):
    """A distilled dictionary over 3000 MiniLM rows (K=64, n_max=4) and its loss curve."""
    table = minilm_table[:ROWS].float()
    config = AdeConfig(K=64, max_anchors=4)
    torch.manual_seed(0)
    dictionary = AnchorDictionary.start(table, config, niter=5, seed=0)
    losses = distill(dictionary, table, vocabulary_batches(ROWS, 1000, seed=0), steps=30, lr=1e-2)
    return table, config, dictionary, losses


@pytest.mark.parametrize("bad", [{"K": 0}, {"threshold": 0.0}, {"threshold": 1.0}, {"threshold": 1.5},
                                 {"temperature": 0.0}, {"max_anchors": 300}])
def test_config_rejects_bad_values(bad):
    with pytest.raises(ConfigError):
        AdeConfig(**bad)


def test_stage_one_fits_on_running_text_by_default():
    """Eq. 10 averages over the token positions of running text: the default declares that corpus;
    fit_on=vocab declares none (it reads the teacher's table only)."""
    from harness.adapters.ade import AdeAdapter

    assert AdeAdapter().corpora() == ("wikitext2_train",)
    assert AdeAdapter(AdeConfig(fit_on="vocab")).corpora() == ()
    assert "Eq. 10" in AdeAdapter.no_recovery  # why the recovery stage skips ADE


def test_matching_pursuit_recovers_a_sparse_non_negative_code():
    atoms = torch.eye(6)  # orthonormal: pursuit is exact
    points = torch.tensor([[0.0, 3.0, 0.0, 0.0, 1.0, 0.0], [2.0, 0.0, 0.0, 0.5, 0.0, 0.0]])
    sets, coefs = matching_pursuit(points, atoms, 2)
    assert sets.tolist() == [[1, 4], [0, 3]]
    assert torch.allclose(coefs, torch.tensor([[3.0, 1.0], [2.0, 0.5]]))


def test_cosine_loss_is_the_mean_over_non_padding_tokens():
    student, teacher = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    want = (1 - F.cosine_similarity(student[mask], teacher[mask], dim=-1)).mean()
    assert cosine_distillation_loss(student, teacher, mask) == pytest.approx(want.item())
    assert cosine_distillation_loss(3 * student, teacher, mask) == pytest.approx(want.item())  # scale-invariant
    teacher[0, 3:] = 1e6  # padded positions do not count
    assert cosine_distillation_loss(student, teacher, mask) == pytest.approx(want.item())


def test_distillation_lowers_the_loss_and_weights_are_shares(fitted):
    table, config, dictionary, losses = fitted
    assert sum(losses[-5:]) / 5 < losses[0] - 0.01
    weights = dictionary.weights(torch.arange(ROWS))
    assert weights.shape == (ROWS, 4) and (weights > 0).all()
    assert torch.allclose(weights.sum(1), torch.ones(ROWS))
    cos = F.cosine_similarity(dictionary(torch.arange(ROWS)), table, dim=-1).mean()
    assert cos > 0.5  # measured 0.6: four of 64 anchors per word


def test_vocabulary_projection_keeps_weights_above_threshold(fitted):
    table, config, dictionary, _ = fitted
    vp = VocabularyProjection.project(dictionary, config.threshold)
    count = vp.anchor_count.long()
    assert vp.anchor_index.dtype == torch.uint8 and vp.anchor_count.dtype == torch.uint8  # K=64
    assert (count >= 1).all() and (count <= 4).all() and count.float().mean() > 1.5
    slots = torch.arange(4)
    active = slots < count[:, None]
    weight = vp.anchor_weight
    assert (weight[~active] == 0).all() and (vp.anchor_index[~active] == 0).all()
    assert (weight[:, 1:][active[:, 1:]] > config.threshold).all()  # the first slot is kept regardless
    # forward = the thresholded weighted sum of the word's anchors (up to the anchors' global rescale)
    full = dictionary.weights(torch.arange(ROWS))
    kept = torch.where(full > config.threshold, full, torch.zeros(()))
    first = full.argmax(1)
    kept[torch.arange(ROWS), first] = full[torch.arange(ROWS), first]
    want = torch.einsum("vn,vnd->vd", kept, dictionary.anchors.detach()[dictionary.anchor_sets])
    got = vp(torch.arange(ROWS)[None])[0]
    assert F.cosine_similarity(got, want, dim=-1).min() > 0.999
    assert vp.anchors.norm(dim=1).mean().item() == pytest.approx(1.0, abs=1e-4)


def test_flattening_and_gpe_follow_section_3_4():
    # Section 3.4's example: three words with 3, 1 and 2 anchors -> word positions 0 0 0 1 2 2
    vectors = torch.arange(1, 13, dtype=torch.float).reshape(1, 3, 4, 1)
    valid = torch.tensor([[[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0]]], dtype=torch.bool)
    packed, mask, word_pos = flatten_anchor_groups(vectors, valid)
    assert word_pos.tolist() == [[0, 0, 0, 1, 2, 2]] and mask.all()
    assert packed[0, :, 0].tolist() == [1, 2, 3, 5, 9, 10]
    pe = sinusoidal_encoding(word_pos, 6)
    assert torch.equal(pe[0, 0], pe[0, 2]) and not torch.equal(pe[0, 2], pe[0, 3])
    assert pe[0, 3].tolist() == pytest.approx([math.sin(1), math.cos(1), math.sin(1e-4 ** (1 / 3)), math.cos(1e-4 ** (1 / 3)),
                                               math.sin(1e-4 ** (2 / 3)), math.cos(1e-4 ** (2 / 3))])


def _classifier(fitted, sat: bool) -> AdeForSequenceClassification:
    table, config, dictionary, _ = fitted
    torch.manual_seed(0)
    bert = BertConfig(vocab_size=ROWS, hidden_size=table.shape[1], num_attention_heads=12, num_labels=3)
    return AdeForSequenceClassification(VocabularyProjection.project(dictionary, config.threshold), bert, sat).eval()


def test_sat_classifier_has_the_sequence_classifier_interface(fitted):
    model = _classifier(fitted, sat=True).train()
    ids = torch.randint(0, ROWS, (4, 9))
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids), labels=torch.tensor([0, 1, 2, 0]))
    assert out.logits.shape == (4, 3) and out.loss.ndim == 0
    out.loss.backward()
    assert model.projection.anchors.grad.abs().sum() > 0  # anchors keep training (Stage 3)
    assert not model.projection.anchor_weight.requires_grad
    assert model.get_input_embeddings()(ids).shape == (4, 9, model.projection.embedding_dim)
    # Table 5's SAT budget: 4 (D^2 + D) attention weights, a LayerNorm of 2D, a D + 1 pooler
    dim = model.projection.embedding_dim
    assert sum(p.numel() for p in model.attention.parameters()) == 4 * (dim * dim + dim)
    assert sum(p.numel() for p in [*model.norm.parameters(), *model.pool_score.parameters()]) == 3 * dim + 1


@pytest.mark.parametrize("sat", [True, False])
def test_padding_does_not_change_logits(fitted, sat):
    model = _classifier(fitted, sat)
    ids = torch.randint(0, ROWS, (1, 7))
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(1, 7), torch.zeros(1, 5)], dim=1).long()
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, model(padded, mask).logits, atol=1e-5)


def test_word_order_matters_only_with_sat(fitted):
    ids = torch.randint(0, ROWS, (1, 8))
    flipped = ids.flip(1)
    with torch.no_grad():
        with_sat, without = _classifier(fitted, True), _classifier(fitted, False)
        assert not torch.allclose(with_sat(ids).logits, with_sat(flipped).logits, atol=1e-4)  # GPE + attention
        assert torch.allclose(without(ids).logits, without(flipped).logits, atol=1e-5)  # an order-free pool


@pytest.mark.parametrize("args, fragment", [
    (["--suite", "ag_news", "--set", "K=0"], "K=0 must be a positive integer"),
    (["--suite", "ag_news", "--set", "threshold=0"], "threshold=0.0 must be in (0, 1)"),
    (["--suite", "ag_news", "--set", "threshold=1.5"], "threshold=1.5 must be in (0, 1)"),
    (["--suite", "ag_news", "--model", "minilm", "--set", "K=40000"], "exceed the vocabulary size 30522"),
    (["--suite", "tokenizer", "--model", "minilm"], "adapter 'ade' builds sequence_classification models"),
    (["--suite", "ag_news", "--model", "smollm2"], "'smollm2' is a decoder"),
    (["--suite", "dbpedia14", "--data-dir", "{empty}"], "expected dbpedia14/test.csv"),
])
def test_cli_bad_input_exits_2_with_one_line(args, fragment, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from harness.cli import app

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # dbpedia14: no release file and no hub
    args = [a.format(empty=tmp_path) for a in args]
    result = CliRunner().invoke(app, ["run", "--adapter", "ade", "--profile", "smoke", *args, "--db", str(tmp_path / "r.duckdb")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_ag_news_smoke_run_stores_anchors_indices_and_weights(baselines_store, tmp_path, monkeypatch):
    """The runner's path: teacher from the fit context, the SAT model trained by the suite, storage
    = anchors (K x D fp32) + index (V x n_max, uint16 for K=500) + weight (V x n_max fp32) + count (V uint8).
    With the fit cache on (a folder of this test's own), a rerun loads the fit and scores the
    same, and `harness export` of the run loads back (harness.load_compressed) to the cached model.
    Beside the session's ag_news baseline (the suite contract's)."""
    import dataclasses

    from typer.testing import CliRunner

    from harness import load_compressed
    from harness.cli import app
    from harness.runner.run import RunRequest, execute

    monkeypatch.setenv("HARNESS_FIT_CACHE", str(tmp_path / "fits"))
    store, request = baselines_store, RunRequest("ag_news", "ade", model="minilm", profile="smoke")
    base, ade = execute(request, store)
    rec = ade.record
    assert rec.status == "finished", rec.error
    vocab, dim, n_max = 30522, 384, AdeConfig().n_max
    report = rec.compression
    assert report.storage_bytes_before == vocab * dim * 4
    assert report.storage_bytes_after == 500 * dim * 4 + vocab * n_max * (2 + 4) + vocab
    assert report.embedding_params_after == 500 * dim  # anchors train; indices and weights are fixed buffers
    facts = rec.fit.details
    assert 1 <= facts["anchors_per_word_mean"] <= n_max and 0 < facts["distill_loss_last"] < 2  # 1 - cos; 5 smoke steps
    assert {s.metric for s in rec.scores} >= {"accuracy", "f1", "precision", "recall"}
    # chance = the majority-class predictor's score on 32 balanced items of 4 classes (by hand: one class
    # predicted everywhere has precision 1/4, recall 1, F1 2/5; the other three score 0; macro averages)
    hand = {"accuracy": 0.25, "recall": 0.25, "precision": 0.0625, "f1": 0.1}
    assert {s.metric: s.chance for s in rec.scores if s.metric in hand} == pytest.approx(hand)
    assert rec.items and len(rec.items[0].ids) == 32
    assert rec.efficiency and any(e.phase.startswith("base:") for e in rec.efficiency)
    again = execute(dataclasses.replace(request, force=True), store)[-1].record
    cache = rec.fit.details["fit_cache"], again.fit.details["fit_cache"]
    assert not cache[0]["reused"] and cache[1]["reused"] and cache[1]["key"] == cache[0]["key"]
    assert [(s.metric, s.value) for s in again.scores] == [(s.metric, s.value) for s in rec.scores]
    assert store.items(again.run_id) == store.items(rec.run_id)
    out = tmp_path / "export"
    result = CliRunner().invoke(app, ["export", rec.run_id, "--out", str(out), "--db", str(store.path)])
    assert result.exit_code == 0, result.output
    exported, _ = load_compressed(out)
    cached, _ = load_compressed(tmp_path / "fits" / cache[0]["key"])
    assert isinstance(exported, AdeForSequenceClassification) and exported.training_recipe == cached.training_recipe
    ids = torch.randint(0, vocab, (3, 11))
    with torch.no_grad():
        assert torch.equal(exported(ids).logits, cached(ids).logits)
