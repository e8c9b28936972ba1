"""The lm-eval model type ``compressed`` (harness.integrations.lm_eval) through lm-eval's own Python
entry point, ``lm_eval.simple_evaluate(model="compressed", model_args=...)``, and through the
README's command line ``harness-lm-eval --model compressed --model_args pretrained=DIR --tasks ...``
as written (no ``--device``: it must run on this CPU machine), on the smoke SST-2 task of the
lm_eval suite: fitted from ``base=,adapter=`` and loaded from a saved folder, the entry points give
the same log-likelihood for every choice."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.errors import ConfigError
from harness.registry import SUITES
from harness.suites.lm_eval_client import render_tasks, write_jsonl

ARGS = "base=smollm2,adapter=asg,k=16,m=8,niter=5,batch_size=4"
CLI = str(Path(sys.executable).with_name("harness-lm-eval"))  # the console script `make setup` installs
THIS_MACHINE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def sst2_dir(tmp_path, data_dir) -> Path:
    """The lm_eval suite's SST-2 task (``harness_sst2``) over the first 6 sentences of the smoke data: its include path."""
    suite = SUITES.get("lm_eval")()
    sst2 = suite.prepare(data_dir, suite.config_class(tasks="sst2"), suite.budgets.smoke).splits["sst2"]
    path = write_jsonl(tmp_path / "sst2.jsonl", ({"sentence": s, "label": int(y)} for s, y in zip(sst2.text[:6], sst2.label[:6])))
    return render_tasks(["sst2"], tmp_path, {"sst2.jsonl": path})


@pytest.fixture
def sst2_tasks(sst2_dir):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(sst2_dir), include_defaults=False)


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory, smollm2_tokenizer) -> Path:
    """A saved compressed model as `harness export` writes it (harness.runner.saved), small: ASG
    (k=16, m=8) fitted on a two-layer random Llama with SmolLM2's tokenizer and a tied head."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.adapter import FitContext
    from harness.adapters.asg import AsgAdapter, AsgConfig
    from harness.runner import saved

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(smollm2_tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
    )).eval()
    config = AsgConfig(k=16, m=8, niter=2)
    applied = AsgAdapter(config).apply(model, FitContext(tokenizer=smollm2_tokenizer, budget=AsgAdapter.budgets.smoke))
    folder = tmp_path_factory.mktemp("export")
    saved.save(folder, applied.model, applied.tokenizer, "asg", dataclasses.asdict(config), dataclasses.asdict(applied.report))
    return folder


def _evaluate(model_args: str, manager, limit: int | None = None) -> tuple[dict, np.ndarray]:
    import lm_eval

    import harness.integrations.lm_eval  # noqa: F401  registers "compressed"

    out = lm_eval.simple_evaluate(
        model="compressed", model_args=model_args, tasks=["harness_sst2"], task_manager=manager, log_samples=True,
        bootstrap_iters=0, cache_requests=False, random_seed=0, numpy_random_seed=0, torch_random_seed=0, verbosity="WARNING",
        limit=limit,
    )
    return out["results"]["harness_sst2"], _logliks(out["samples"]["harness_sst2"])


def _logliks(samples: list[dict]) -> np.ndarray:
    """(docs, choices) log-likelihoods of lm-eval's logged samples, by document."""
    ordered = sorted(samples, key=lambda s: s["doc_id"])
    return np.array([[r[0] for r in s["filtered_resps"]] for s in ordered], dtype=np.float64)


def test_readme_command_line_runs_as_written(tiny_export, sst2_dir, sst2_tasks, tmp_path):
    """`harness-lm-eval --model compressed --model_args pretrained=DIR --tasks ...` with no --device
    (lm-eval's own default is cuda:0) runs on the device this machine has and scores what
    simple_evaluate scores in this process."""
    out = tmp_path / "out"
    command = [CLI, "--model", "compressed", "--model_args", f"pretrained={tiny_export}", "--tasks", "harness_sst2",
               "--include_path", str(sst2_dir), "--limit", "4", "--output_path", str(out), "--log_samples"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert results["config"]["device"] == "auto"  # what lm-eval handed the model type: resolved by it, not cuda:0
    samples = [json.loads(line) for line in next(out.rglob("samples_harness_sst2_*.jsonl")).read_text().splitlines()]
    in_process, loglik = _evaluate(f"pretrained={tiny_export}", sst2_tasks, limit=4)
    assert loglik.shape == (4, 2) and np.isfinite(loglik).all()
    np.testing.assert_allclose(_logliks(samples), loglik, rtol=1e-6)
    assert results["results"]["harness_sst2"]["acc,none"] == in_process["acc,none"]


def test_model_type_takes_the_device_that_exists(tiny_export):
    """No device given (simple_evaluate passes none): the model type resolves `auto` as
    `harness run --device auto` does; a device this machine lacks is a one-line ConfigError."""
    from harness.integrations.lm_eval import CompressedLM

    assert CompressedLM(pretrained=str(tiny_export)).model.device.type == THIS_MACHINE
    if THIS_MACHINE == "cpu":
        with pytest.raises(ConfigError, match="no CUDA GPU is visible"):
            CompressedLM(pretrained=str(tiny_export), device="cuda")


def test_cli_bad_model_args_exit_2_with_one_line(sst2_dir):
    """harness-lm-eval maps a harness error to one line on stderr and exit code 2, as `harness` does
    (run as a user runs it, in its own process: in-process, pytest's captured streams confuse lm-eval's logging)."""
    command = [CLI, "--model", "compressed", "--model_args", "adapter=asg", "--tasks", "harness_sst2", "--include_path", str(sst2_dir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    err = done.stderr.strip().splitlines()
    assert err[-1].startswith("error: model_args need pretrained=DIR") and "Traceback" not in done.stderr


@pytest.mark.slow
def test_compressed_model_type_through_simple_evaluate(sst2_tasks, tmp_path, monkeypatch):
    from harness.runner import fitcache

    monkeypatch.setenv("HARNESS_FIT_CACHE", str(tmp_path / "fits"))
    fitted, loglik = _evaluate(ARGS, sst2_tasks)
    assert loglik.shape == (6, 2) and np.isfinite(loglik).all() and (loglik < 0).all()
    assert 0.0 <= fitted["acc,none"] <= 1.0
    entries = fitcache.FitCache(tmp_path / "fits").entries()
    assert len(entries) == 1 and entries[0].key["adapter_config"]["k"] == 16  # the fit went through the cache
    loaded, again = _evaluate(f"pretrained={entries[0].path},batch_size=4", sst2_tasks)
    np.testing.assert_array_equal(again, loglik)
    assert loaded["acc,none"] == fitted["acc,none"]


def test_model_args_without_a_model_are_a_config_error():
    import harness.integrations.lm_eval as lm

    with pytest.raises(ConfigError, match="pretrained=DIR"):
        lm.CompressedLM(adapter="asg")
