"""Recovery training as a run option: ``--recover STEPS`` is planned, refused with the
adapter's reason where it cannot apply, part of the run's identity and of the fit-cache key (the
baseline stays the post-hoc run's), swept by ``--grid recover=...``, and run end to end: progress
lines while it trains, what it did in the fit details, and the recovered fit reused from the cache
(scores equal to the fresh fit's).

The model is a local 2-layer Llama with SmolLM2's real tokenizer (random weights; a source users
have, ``--model DIR``), on the smoke ``bpb`` suite."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.result_views import runs_frame
from harness.errors import ConfigError
from harness.registry import ADAPTERS
from harness.results.fingerprint import adapter_fingerprint
from harness.results.store import Store
from harness.runner import fitcache
from harness.runner.plan import RunRequest, plan
from harness.runner.run import execute
from harness.sweep.grid import from_options, run_options
from harness.sweep.points import plan_points, recovery_estimates
from tests.conftest import read_sql

ASG = ("k=16", "m=8")


@pytest.fixture(scope="module")
def decoder(tmp_path_factory, smollm2_tokenizer) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("recovery-decoder")
    LlamaForCausalLM(LlamaConfig(
        vocab_size=len(smollm2_tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
    )).save_pretrained(folder)
    smollm2_tokenizer.save_pretrained(folder)
    return folder


def _request(decoder: Path, recover: int = 0, **kw) -> RunRequest:
    return RunRequest("bpb", kw.pop("adapter", "asg"), str(decoder), "smoke", settings=ASG, device="cpu", recover=recover, **kw)


def test_recovery_is_part_of_the_identity_but_not_of_the_baseline(decoder):
    post_hoc, recovered = plan(_request(decoder)), plan(_request(decoder, 3))
    assert "recovery" not in post_hoc.spec.recipe
    assert recovered.spec.recipe["recovery"]["steps"] == 3 and recovered.spec.recipe["recovery"]["lora"] is False
    assert recovered.spec.config_hash != post_hoc.spec.config_hash
    assert recovered.spec.config_hash != plan(_request(decoder, 3, recover_lora=True)).spec.config_hash
    assert recovered.spec.baseline() == post_hoc.spec.baseline()  # one baseline for both
    assert set(recovered.spec.recipe["recovery"]["data"]) == {"wikitext2/train.txt", "c4_sample/c4_sample.jsonl"}
    head = recovered.suite.tasks(recovered.suite_config)[0].head
    keys = [fitcache.key(p.spec, p.adapter, head, "t") for p in (post_hoc, recovered)]
    assert keys[0]["code"] == adapter_fingerprint("asg")  # docstrings and comments do not throw fits away
    assert "recovery" not in keys[0] and keys[1]["recovery"]["steps"] == 3
    assert fitcache.digest(keys[0]) != fitcache.digest(keys[1])
    # the fit before recovery is the post-hoc run's fit
    assert fitcache.key(recovered.spec, recovered.adapter, head, "t", recovery=False) == keys[0]


@pytest.mark.parametrize("adapter, reason", [("vocabdiet", "distills"), ("none", "no tensors")])
def test_adapters_that_cannot_recover_are_refused_with_their_reason(decoder, adapter, reason):
    with pytest.raises(ConfigError, match=f"adapter '{adapter}' cannot take --recover: .*{reason}"):
        plan(RunRequest("bpb", adapter, str(decoder), "smoke", device="cpu", recover=2))


def test_a_method_that_declares_no_recovers_is_told_to_declare_it(decoder):
    """A plugin that replaced the table but left out ``recovers`` is refused for that reason, not with
    "nothing of it was replaced" (true of the baseline only), by recovery and pretraining alike."""
    from harness.adapters.asg import AsgAdapter
    from harness.runner.stages import pretrain, recover

    class Undeclared(AsgAdapter):  # replaces the table as ASG does, says nothing of what recovery may train
        name = "undeclared"
        recovers = ()

    with pytest.raises(ConfigError, match="adapter 'undeclared' cannot take --recover: its class declares no `recovers` yet") as err:
        recover.recipe(5, False, Undeclared(), "smoke", False, None)
    assert "nothing of it was replaced" not in str(err.value) and "docs/plugins.md" in str(err.value)
    assert "nothing of it was replaced" in ADAPTERS.get("none").recovery_refusal()
    p = plan(_request(decoder))
    with pytest.raises(ConfigError, match="adapter 'undeclared' cannot be pretrained with: its class declares no `recovers` yet"):
        pretrain.recipe(5, "smoke", Undeclared(), dataclasses.replace(p.model_ref, kind="encoder"), None, False, None)


def test_recovery_is_estimated_from_a_measured_step_and_capped(decoder):
    """The estimate is the steps times a step timed on the planned model; above the cap only --lift-cap
    runs it (--force re-runs a stored run and leaves the cap in place)."""
    from harness.runner import estimate

    found = estimate.recovery(plan(_request(decoder, 40)))
    assert found.steps == 40 and 0 < found.step_s < 60 and found.seconds == 40 * found.step_s
    assert found.line().startswith("recovery: 40 steps x ") and "measured now on cpu" in found.line()
    steps = int(estimate.CAP_S / found.step_s) * 10  # ten times the cap at this step time
    with pytest.raises(ConfigError, match=r"above the 12 h cap for a run: give fewer steps, or --lift-cap"):
        estimate.recovery(plan(_request(decoder, steps)))
    with pytest.raises(ConfigError, match=r"above the 12 h cap"):
        estimate.recovery(plan(_request(decoder, steps, force=True)))
    assert estimate.recovery(plan(_request(decoder, steps)), lift_cap=True).seconds > estimate.CAP_S


def test_after_finetune_adapters_get_a_generic_reason():
    assert "after the suite's fine-tuning" in ADAPTERS.get("multisense").recovery_refusal()


@pytest.mark.parametrize("request_kw, message", [
    ({"recover": -1}, "must be 0"), ({"recover_lora": True}, "give the steps too"),
])
def test_bad_recovery_options_are_config_errors(decoder, request_kw, message):
    with pytest.raises(ConfigError, match=message):
        plan(_request(decoder, **request_kw))


def test_sweep_grid_sweeps_recovery_steps(decoder):
    assert run_options(("k=16", "recover=100", "recover_lora=true")) == (("k=16",), 100, True)
    with pytest.raises(ConfigError, match="not a number of steps"):
        run_options(("recover=many",))
    points = plan_points(from_options("asg", ["recover=0,2"], "bpb", str(decoder), "0", "smoke", list(ASG), None, "cpu"))
    baselines = [p for p in points if p.baseline_hash is None]
    methods = [p for p in points if p.baseline_hash is not None]
    assert len(baselines) == 1 and len(methods) == 2
    assert [p.request.recover for p in methods] == [0, 2] and "recover=2" in methods[1].label


def test_recovered_run_end_to_end_and_from_the_fit_cache(decoder, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_FIT_CACHE", str(tmp_path / "fits"))
    store = Store(tmp_path / "results.duckdb")
    lines, said = [], []
    first = execute(_request(decoder, 3), store, lambda label, done, total: lines.append((label, done, total)), said.append)[-1].record
    assert ("asg: recover", 3, 3) in lines  # a progress line per step
    assert len(said) == 1 and said[0].startswith("recovery: 3 steps x ")  # the estimate, before anything ran
    done = first.fit.details["recovery"]
    assert done["steps"] == 3 and done["trained"] == ["model.embed_tokens.codebooks"] and done["seconds"] > 0
    assert first.spec.recipe["recovery"]["steps"] == 3
    listed = runs_frame(store, 5).set_index("run_id").config  # `harness list runs`
    assert json.loads(listed[first.run_id]) == {**first.spec.adapter_config, "recover": 3}  # not the post-hoc run's
    entries = fitcache.FitCache(tmp_path / "fits").entries()  # the post-hoc fit and the recovered one
    assert sorted("recovery" in e.key for e in entries) == [False, True]
    again = execute(_request(decoder, 3, force=True), store)[-1].record
    assert again.fit.details["fit_cache"]["reused"] and again.fit.details["recovery"] == done
    assert [s.value for s in again.scores] == [s.value for s in first.scores]


def test_kill_9_during_recovery_loses_nothing_stored(decoder, tmp_path):
    """A `harness run` killed (SIGKILL) while recovery trains: its baseline, stored before, stays with its
    scores; the run reads as failed once the next writer ingests; no recovered fit enters the cache."""
    db, fits = tmp_path / "r.duckdb", tmp_path / "fits"
    args = [os.path.join(os.path.dirname(sys.executable), "harness"), "run", "--suite", "bpb", "--adapter", "asg",
            "--model", str(decoder), "--profile", "smoke", "--device", "cpu", "--set", "k=16", "--set", "m=8",
            "--recover", "100000", "--lift-cap", "--db", str(db)]  # a long recovery, past the estimate's cap
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "HARNESS_FIT_CACHE": str(fits)})
    for line in proc.stderr:  # a plain progress line per tenth of the steps (stderr is a pipe)
        if line.startswith("asg: recover: "):
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    store = Store(db)
    store.ingest()
    runs = read_sql(store.path, "SELECT adapter, status, error, run_id FROM runs ORDER BY adapter")
    assert list(zip(runs.adapter, runs.status)) == [("asg", "failed"), ("none", "finished")]
    assert runs.error[0] == "process died before the run finished"
    listed = runs_frame(store, 5).set_index("adapter")  # `harness list runs`, the failed run's fit details NULL
    assert json.loads(listed.config["asg"]) == {"k": 16, "m": 8, "shared": False, "output": True, "niter": 25, "recover": 100000}
    assert len(read_sql(store.path, f"SELECT * FROM scores WHERE run_id = '{runs.run_id[1]}'")) > 0
    assert ["recovery" in e.key for e in fitcache.FitCache(fits).entries()] == [False]  # the post-hoc fit only


def test_a_sweep_prints_each_points_estimate_and_only_lift_cap_passes_the_cap(decoder, tmp_path):
    """harness sweep as harness run: the estimate of every recovering point before any runs; a point
    above the cap stops the sweep with exit 2 naming it, and --lift-cap lets it through."""
    grid = ["--set", "k=16", "--set", "m=8", "--grid", "recover=2,100000000"]
    args = ["sweep", "--adapter", "asg", "--suite", "bpb", "--model", str(decoder), "--profile", "smoke", "--device", "cpu", *grid]
    refused = CliRunner().invoke(app, [*args, "--db", str(tmp_path / "r.duckdb")])
    assert refused.exit_code == 2, refused.output
    lines = refused.stderr.splitlines()
    estimates = [line for line in lines if "recover=2 on bpb" in line]
    assert len(estimates) == 1 and ": recovery: 2 steps x " in estimates[0]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and "recover=100000000 on bpb" in errors[0] and "or --lift-cap to run it anyway" in errors[0]
    assert not any(line.startswith(("sweep: ", "started")) for line in lines)  # refused before the driver ran anything
    said: list[str] = []
    points = plan_points(from_options("asg", ["recover=2,100000000"], "bpb", str(decoder), "0", "smoke", ["k=16", "m=8"], None, "cpu"))
    recovery_estimates(points, Store(tmp_path / "r.duckdb"), True, said.append)
    assert [line.split(": recovery: ")[1].split(" x ")[0] for line in said] == ["2 steps", "100,000,000 steps"]
