"""The lm-eval model type ``compressed`` (harness.integrations.lm_eval) through lm-eval's own Python
entry point, ``lm_eval.simple_evaluate(model="compressed", model_args=...)``, on the smoke SST-2
task of the lm_eval suite: fitted from ``base=,adapter=`` and loaded from a saved folder, the two
give the same log-likelihood for every choice."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.registry import SUITES
from harness.suites.lm_eval_client import render_tasks, write_jsonl

ARGS = "base=smollm2,adapter=asg,k=16,m=8,niter=5,batch_size=4"


@pytest.fixture
def sst2_tasks(tmp_path, data_dir):
    """The lm_eval suite's SST-2 task over the first 6 sentences of the smoke data."""
    from lm_eval.tasks import TaskManager

    suite = SUITES.get("lm_eval")()
    sst2 = suite.prepare(data_dir, suite.config_class(tasks="sst2"), suite.budgets.smoke).splits["sst2"]
    path = write_jsonl(tmp_path / "sst2.jsonl", ({"sentence": s, "label": int(y)} for s, y in zip(sst2.text[:6], sst2.label[:6])))
    return TaskManager(include_path=str(render_tasks(["sst2"], tmp_path, {"sst2.jsonl": path})), include_defaults=False)


def _evaluate(model_args: str, manager) -> tuple[dict, np.ndarray]:
    import lm_eval

    import harness.integrations.lm_eval  # noqa: F401  registers "compressed"

    out = lm_eval.simple_evaluate(
        model="compressed", model_args=model_args, tasks=["harness_sst2"], task_manager=manager, log_samples=True,
        bootstrap_iters=0, cache_requests=False, random_seed=0, numpy_random_seed=0, torch_random_seed=0, verbosity="WARNING",
    )
    samples = sorted(out["samples"]["harness_sst2"], key=lambda s: s["doc_id"])
    return out["results"]["harness_sst2"], np.array([[r[0] for r in s["filtered_resps"]] for s in samples], dtype=np.float64)


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
