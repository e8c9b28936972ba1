"""Pretraining with the method as a run option (paper 001's regime at small scale):
``--pretrain STEPS`` is planned with one budget for every arm, refused where it cannot apply, part of
the run's identity and kept by its baseline (the full table pretrained alike), and run end to end on
GLUE SST-2 (smoke): the full table, k-sub random and clustered, and the no-pretraining control; the
pretrained model is cached apart from any task head and reused; the claims table pairs the arms.

The model source is a local one-layer BERT (D = 48, random weights) with MiniLM's real tokenizer (V =
30,522), a source users have (``--model DIR``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

from harness.adapter import FitContext
from harness.adapters.ksub import BUDGETS as KSUB_BUDGETS
from harness.cli.result_views import runs_frame
from harness.errors import ConfigError
from harness.methods import pretrain
from harness.registry import ADAPTERS
from harness.results import claims, reference
from harness.results.store import Store
from harness.runner import fitcache, saved
from harness.runner.export import export
from harness.runner.plan import RunRequest, plan
from harness.runner.run import execute
from harness.runner.stages import pretrain as stage
from harness.sources import models

STEPS = 2


def _at_smoke(claim):
    """Paper 001's claims read at the smoke profile: this test drives the pairing with two-step arms (the
    claims table itself reads the profile a claim names, never smoke)."""
    harness = claim.quantity.harness.model_copy(update={"profile": "smoke"})
    return claim.model_copy(update={"quantity": claim.quantity.model_copy(update={"harness": harness})})


CONTRAST, LEVEL = (_at_smoke(c) for c in claims.load() if c.paper == "ksub" and c.table == "Table 3")
ARMS = {"full": ("none", ()), "random": ("ksub", ("allocation=random",)), "clustered": ("ksub", ("allocation=clustered",))}


@pytest.fixture(scope="module")
def encoder(tmp_path_factory, minilm_ref) -> Path:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("pretrain-encoder")
    BertModel(BertConfig(vocab_size=30522, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_ref.location).save_pretrained(folder)
    return folder


def _request(encoder: Path, arm: str, steps: int | None = STEPS, **kw) -> RunRequest:
    adapter, settings = ARMS[arm]
    return RunRequest("glue", adapter, str(encoder), "smoke", settings=("tasks=sst2", *settings), device="cpu", pretrain=steps, **kw)


def test_one_budget_for_every_arm_in_the_identity_and_kept_by_the_baseline(encoder):
    plans = {arm: plan(_request(encoder, arm)) for arm in ARMS}
    recipes = [p.spec.recipe["pretraining"] for p in plans.values()]
    assert recipes[0] == recipes[1] == recipes[2]  # identical budgets across arms
    assert recipes[0]["steps"] == STEPS and recipes[0]["architecture"] == {"layers": 1, "hidden": 48, "heads": 4, "intermediate": 64}
    assert set(recipes[0]["data"]) == {"wikitext2/train.txt", "c4_sample/c4_sample.jsonl"}
    assert plans["random"].spec.baseline() == plans["clustered"].spec.baseline() == plans["full"].spec  # the full table is the baseline
    post_hoc, control = plan(_request(encoder, "random", None)), plan(_request(encoder, "full", 0))
    assert "pretraining" not in post_hoc.spec.recipe and control.spec.recipe["pretraining"]["steps"] == 0
    assert len({p.spec.config_hash for p in (post_hoc, control, plans["full"], plans["random"])}) == 4
    # the run keeps the source's name and revision; the pretrain stage builds the small encoder from it
    assert plans["full"].spec.model == str(encoder) and plans["full"].spec.model_revision == post_hoc.spec.model_revision
    assert plans["random"].stages == ("pretrain", "fit", "train", "score") and post_hoc.stages == ("fit", "train", "score")
    key = fitcache.key(plans["random"].spec, plans["random"].adapter, stage.BACKBONE, "")
    assert key["pretraining"] == recipes[0] and key["head"] == {"kind": "base", "labels": ()} and key["adapter"] == "ksub"


def test_planning_writes_no_model_the_stage_writes_the_small_encoder_once(encoder, tmp_path, monkeypatch):
    """Planning stays cheap: the small encoder from scratch is written by the pretrain stage, when the
    run first loads a task model, and a second load reads it back."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    p = plan(_request(encoder, "random"))
    assert not (tmp_path / "models").exists() and p.model_ref.location == str(encoder.resolve())
    source = stage.source(p.model_ref, p.spec.recipe["pretraining"])
    written = Path(source.location)
    assert [f.name for f in (tmp_path / "models").iterdir()] == [written.name] and written.name.startswith("scratch-")
    assert AutoConfig.from_pretrained(written).num_hidden_layers == 1
    assert (source.name, source.revision, source.kind) == (p.model_ref.name, p.model_ref.revision, "encoder")
    stamp = (written / "model.safetensors").stat().st_mtime_ns
    assert stage.source(p.model_ref, p.spec.recipe["pretraining"]) == source
    assert (written / "model.safetensors").stat().st_mtime_ns == stamp


def test_the_minilm_encoder_keeps_its_width_and_vocabulary(minilm_ref):
    p = plan(RunRequest("glue", "ksub", "minilm", "smoke", settings=("tasks=sst2",), device="cpu", pretrain=STEPS))
    source = stage.source(p.model_ref, p.spec.recipe["pretraining"])
    config = AutoConfig.from_pretrained(source.location)
    assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (1, 384, 30522)
    assert source.pooling == minilm_ref.pooling == "mean"  # the task model is built as MiniLM's is


@pytest.mark.parametrize("request_kw, message", [
    ({"pretrain": -1}, "must be a number of steps, or 0"),
    ({"recover": 5}, "--recover .* does not apply"),
    ({"profile": "paper"}, "250k steps"),
])
def test_bad_pretraining_requests_are_config_errors(encoder, request_kw, message):
    base = {"suite": "glue", "adapter": "ksub", "model": str(encoder), "profile": "smoke", "settings": ("tasks=sst2",),
            "device": "cpu", "pretrain": STEPS}
    with pytest.raises(ConfigError, match=message):
        plan(RunRequest(**{**base, **request_kw}))


def test_adapters_that_replace_no_table_are_refused(encoder):
    with pytest.raises(ConfigError, match="adapter 'multisense' cannot be pretrained with: it acts after"):
        plan(RunRequest("glue", "multisense", str(encoder), "smoke", settings=("tasks=sst2",), device="cpu", pretrain=STEPS))


def test_masked_positions_loss_is_the_mlm_loss():
    """The loss read at the masked positions only equals BERT's masked-LM loss over every position."""
    torch.manual_seed(0)
    mlm = BertForMaskedLM(BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)).eval()
    ids = torch.randint(5, 100, (3, 12))
    labels = torch.where(torch.rand(3, 12) < 0.3, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    assert torch.allclose(pretrain.MaskedPositions(mlm)(ids, labels)["loss"], mlm(input_ids=ids, labels=labels).loss, atol=1e-6)


def test_from_scratch_draws_the_trained_tensors_and_keeps_the_codes(minilm_table):
    """k-sub on an MLM: codes from the pretrained table stay; sub-tables and the decoder bias start from scratch."""
    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=1, num_attention_heads=12, intermediate_size=64)
    mlm = BertForMaskedLM(config)
    with torch.no_grad():
        mlm.get_input_embeddings().weight.copy_(minilm_table)
    applied = ADAPTERS.get("ksub")().apply(mlm, FitContext(profile="smoke"))
    embedding = applied.model.get_input_embeddings()
    codes, means = embedding.concept_ids.clone(), embedding.codebooks.detach().clone()
    assert applied.model.get_output_embeddings().concepts is embedding  # the decoder is the method's tied head
    values = pretrain.from_scratch(applied.model, 0.02, seed=0)
    assert values == 3 * 32 * 128 + 30522  # sub-tables and the decoder's bias
    assert torch.equal(embedding.concept_ids, codes) and len(np.unique(codes.numpy(), axis=0)) == 30522
    assert not torch.allclose(embedding.codebooks, means) and abs(float(embedding.codebooks.detach().std()) - 0.02) < 0.002
    assert not applied.model.get_output_embeddings().bias.any()


@pytest.fixture(scope="module")
def arms(encoder, tmp_path_factory):
    """The three arms and the control, run once: the claims table first without the control."""
    db = tmp_path_factory.mktemp("pretrain-runs") / "results.duckdb"
    store = Store(db)
    runs = {arm: execute(_request(encoder, arm), store)[-1].record for arm in ("random", "clustered")}
    before = claims.table(store, (CONTRAST, LEVEL)).set_index("claim").verdict
    runs["full"] = store.load(runs["random"].baseline_run_id)
    runs["control"] = execute(_request(encoder, "full", 0), store)[-1].record
    return store, runs, before


def test_three_arms_and_the_control_end_to_end(arms, encoder):
    store, runs, _ = arms
    assert {r.status for r in runs.values()} == {"finished"}
    assert runs["clustered"].baseline_run_id == runs["random"].baseline_run_id == runs["full"].run_id  # one full-table arm
    full = runs["full"].compression.embedding_params_after
    for arm in ("random", "clustered"):
        r = runs[arm]
        assert r.compression.embedding_params_after == 3 * 32 * 16 and r.compression.embedding_params_after / full < 0.01
        assert r.compression.embedding_params_before == full == 30522 * 48  # against the small full-table encoder
        done = r.fit.details["pretraining"]
        assert done["steps"] == STEPS and len(done["loss_curve"]) == STEPS and np.isfinite(done["held_out_loss"])
        assert {c.task for c in r.comparisons} >= {"sst2"} and all(c.n_paired for c in r.comparisons)
        assert reference.run_regime(r.spec.recipe) == reference.PRETRAINED_SMALL
    assert runs["full"].fit.details["pretraining"]["steps"] == STEPS
    assert runs["control"].fit.details["pretraining"] == {"steps": 0, "tokens": 0, "initialised_values": 30522 * 49}
    assert reference.run_regime(runs["control"].spec.recipe) == reference.NOT_PRETRAINED + " + fine-tuned"
    listed = runs_frame(store, 10).set_index("run_id").config  # `harness list runs`
    assert json.loads(listed[runs["random"].run_id])["pretrain"] == STEPS and json.loads(listed[runs["control"].run_id])["pretrain"] == 0


def test_clustered_codes_come_from_the_source_table(arms, encoder, fit_cache):
    """The pretrained model in the cache holds unique codes: Algorithm 2 over the source's table, not the
    random one of the encoder built from scratch."""
    store, runs, _ = arms
    digest = runs["clustered"].fit.details["pretrained_model_cache"]["key"]
    model, _, _ = saved.load(fit_cache / digest)
    codes = model.get_input_embeddings().concept_ids.numpy()
    assert len(np.unique(codes, axis=0)) == 30522
    adapter = ADAPTERS.get("ksub")(ADAPTERS.get("ksub").config_class(allocation="clustered"))
    table = AutoModel.from_pretrained(encoder).get_input_embeddings().weight
    expected = adapter.allocate(table, FitContext(profile="smoke", seed=0, budget=KSUB_BUDGETS.smoke))
    assert np.array_equal(codes, expected)


def test_the_pretrained_model_is_reused_by_a_rerun_and_by_another_task(arms, encoder):
    store, runs, _ = arms
    again = execute(_request(encoder, "random", force=True), store)[-1].record
    assert again.fit.details["fit_cache"]["reused"]
    assert [s.value for s in again.scores] == [s.value for s in runs["random"].scores]
    other = plan(RunRequest("glue", "ksub", str(encoder), "smoke", settings=("tasks=rte",), device="cpu", pretrain=STEPS))
    task = other.suite.tasks(other.suite_config)[0]
    model, tokenizer = models.load(stage.source(other.model_ref, other.spec.recipe["pretraining"]), task.head)
    fit = FitContext(profile="smoke", seed=0, tokenizer=tokenizer, budget=other.adapter_budget)
    applied = stage.pretrained(other.adapter, other.spec, other.data_dir, model, fit)
    assert applied.details["pretrained_model_cache"]["reused"]  # another head, the same pretrained backbone


def test_claims_pair_the_arms_and_ask_for_the_control(arms):
    store, runs, before = arms
    question = "no run of the encoder not pretrained (--pretrain 0) shows the pretraining mattered"
    rows = claims.table(store, (CONTRAST, LEVEL)).set_index("claim")
    contrast = rows.loc[CONTRAST.text]
    level = rows.loc[LEVEL.text]
    assert before[CONTRAST.text] == f"setting differs: {question}"
    clustered, random = contrast.runs.split(" vs ")
    assert clustered == runs["clustered"].run_id and level.runs == random  # the newest random run (a rerun may be newer)
    assert store.load(random).spec == runs["random"].spec and "small encoder from scratch (1L x 48" in level["family (paper / run)"]
    for row in (contrast, level):  # smoke's two steps do not lift the full table above the control
        assert row.verdict.startswith(f"setting differs: pretraining too short to matter: the full table pretrained {STEPS} steps is")


def test_a_small_scale_pretraining_sits_beside_the_papers():
    row = type("Row", (), {"regime": reference.PRETRAINED, "setting": "fine-tuned", "notes": "", "metric": "accuracy"})()
    assert reference.difference(row, "accuracy", None, "fine-tuned", {reference.PRETRAINED_SMALL}) == ""
    assert reference.difference(row, "accuracy", None, "fine-tuned", {reference.FINE_TUNED}).startswith("regime:")


def test_pretraining_is_deterministic(encoder, monkeypatch, tmp_path):
    """Two pretrainings of the same spec, the cache off, give the same weights."""
    monkeypatch.setenv("HARNESS_FIT_CACHE", "off")
    p = plan(_request(encoder, "random"))
    source = stage.source(p.model_ref, p.spec.recipe["pretraining"]).location
    config, settings = AutoConfig.from_pretrained(source), p.spec.recipe["pretraining"]
    fit = FitContext(profile="smoke", seed=0, workdir=tmp_path, tokenizer=AutoTokenizer.from_pretrained(source), budget=p.adapter_budget)
    first, second = (pretrain.backbone(p.adapter, config, p.spec.model, settings, p.data_dir, fit).model.state_dict() for _ in range(2))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_the_paper_profile_is_refused_in_one_line(encoder):
    from typer.testing import CliRunner

    from harness.cli import app

    result = CliRunner().invoke(app, ["run", "--suite", "glue", "--set", "tasks=sst2", "--adapter", "ksub", "--model", str(encoder),
                                      "--profile", "paper", "--pretrain", "100", "--device", "cpu"])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: --pretrain at the paper's scale is not run here") and "250k steps" in line


def test_a_pretrained_run_exports_its_small_encoder(arms, tmp_path):
    store, runs, _ = arms
    folder = export(runs["clustered"].run_id, tmp_path / "out", store)
    model, _, info = saved.load(folder)
    assert model.config.num_hidden_layers == 1 and type(model.get_input_embeddings()).__name__ == "ConceptEmbedding"
    assert info.meta["fit_cache"]["reused"]  # the run's fit, from the cache
