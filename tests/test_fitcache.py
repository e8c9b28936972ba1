"""The fit cache (harness.runner.fitcache) through the runner's own fit step (Pipeline.fit), on real
MiniLM with a small ASG: a second fit of the same key is loaded, not fitted; a corrupt or partial
entry is deleted and fitted again; ``harness cache list|clear``; ``harness export`` of a finished
run loads back to the cached model."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from typer.testing import CliRunner

from harness import load_compressed
from harness.runner import fitcache
from harness.adapter import no_progress
from harness.cli import app
from harness.runner.pipeline import Pipeline
from harness.runner.plan import RunRequest, plan
from harness.sources import models

SETTINGS = ("k=16", "m=8", "niter=5")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "fits"
    monkeypatch.setenv("HARNESS_FIT_CACHE", str(folder))
    return folder


@pytest.fixture
def counted(monkeypatch):
    """Counts calls of AsgAdapter.compress (a real fit)."""
    from harness.adapters.asg import AsgAdapter

    calls = []
    original = AsgAdapter.compress

    def compress(self, model, fit):
        calls.append(1)
        return original(self, model, fit)

    monkeypatch.setattr(AsgAdapter, "compress", compress)
    return calls


def _fit(tmp_path, seed=0):
    p = plan(RunRequest("mteb_clf", "asg", "minilm", "smoke", seed, SETTINGS, device="cpu"))
    task = p.suite.tasks(p.suite_config)[0]
    model, tokenizer = models.load(p.model_ref, task.head)
    return Pipeline(p, p.spec, p.adapter, tmp_path / "work", no_progress).fit(model, tokenizer, task, None)


def _embed(model) -> torch.Tensor:
    ids = torch.arange(0, 30522, 997)[None]
    with torch.inference_mode():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state


def test_second_fit_is_loaded_and_identical(cache_dir, counted, tmp_path):
    first, info = _fit(tmp_path)
    assert not info.reused and len(counted) == 1 and info.fit_seconds > 0
    again, hit = _fit(tmp_path)
    assert hit.reused and len(counted) == 1 and hit.key == info.key and hit.fit_seconds == info.fit_seconds
    assert torch.equal(_embed(first.model.eval()), _embed(again.model))
    assert again.report == first.report and again.details == first.details
    assert type(again.model.get_input_embeddings()).__name__ == "ConceptEmbedding"
    other, fresh = _fit(tmp_path, seed=1)  # another seed is another key
    assert not fresh.reused and fresh.key != info.key and len(counted) == 2


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "drop the manifest"])
def test_damaged_entry_is_refit_not_loaded(damage, cache_dir, counted, tmp_path):
    _, info = _fit(tmp_path)
    entry = cache_dir / info.key
    weights = entry / "model.safetensors"
    if damage == "flip a byte":
        raw = bytearray(weights.read_bytes())
        raw[-5] ^= 0xFF  # inside a tensor: safetensors itself would load it silently
        weights.write_bytes(bytes(raw))
    elif damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:1000])
    else:
        (entry / fitcache.MANIFEST).unlink()
    _, again = _fit(tmp_path)
    assert not again.reused and len(counted) == 2
    _, third = _fit(tmp_path)  # the refit wrote an intact entry
    assert third.reused and len(counted) == 2


def test_cache_off_fits_every_time(monkeypatch, counted, tmp_path):
    monkeypatch.setenv("HARNESS_FIT_CACHE", "off")
    _fit(tmp_path)
    _, info = _fit(tmp_path)
    assert not info.reused and info.key is None and len(counted) == 2


def test_cache_list_and_clear(cache_dir, tmp_path):
    _, info = _fit(tmp_path)
    runner = CliRunner()
    listed = runner.invoke(app, ["cache", "list"])
    assert listed.exit_code == 0 and info.key in listed.output and "asg k=16 m=8" in listed.output
    bad = runner.invoke(app, ["cache", "clear", "0123456789abcdef0123"])
    assert bad.exit_code == 2 and "'0123456789abcdef0123' is not a cached fit's digest" in bad.output
    cleared = runner.invoke(app, ["cache", "clear", info.key[:8]])  # a unique prefix, as `git` takes one
    assert cleared.exit_code == 0 and f"removed {info.key}" in cleared.output and not list(cache_dir.iterdir())


def _tree(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"" for p in sorted(folder.rglob("*"))}


def test_cache_clear_deletes_only_what_the_cache_wrote(tmp_path, monkeypatch):
    """Neither a path given as a digest (``../..``, an absolute folder) nor a foreign folder inside the
    cache is ever deleted (bad input III: `cache clear /any/dir` removed that folder); `clear` alone
    removes the cache's entries and the partial ones a killed process left, and says which."""
    home = tmp_path / "home"
    cache_dir = home / "a" / "b" / "fits"
    monkeypatch.setenv("HARNESS_FIT_CACHE", str(cache_dir))
    _, info = _fit(tmp_path)
    (home / "a" / "notes.txt").write_text("a user's file")
    (home / "precious").mkdir()
    (home / "precious" / "thesis.tex").write_text("chapter 1")
    (cache_dir / "mine").mkdir()                       # a folder the user put inside the cache
    (cache_dir / "mine" / "keep.txt").write_text("x")
    (cache_dir / "0123456789abcdef0123").mkdir()       # a digest's name, but no manifest: not the cache's
    partial = cache_dir / f".{info.key}.4242.tmp"      # what a killed fit leaves
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"partial")
    before = _tree(home)
    runner = CliRunner()
    for argv in (["../.."], [".."], [str(home / "precious")], ["mine"], ["0123456789abcdef0123"], [""], [info.key, "../.."]):
        result = runner.invoke(app, ["cache", "clear", *argv])
        assert result.exit_code == 2, (argv, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "nothing was removed" in lines[0], (argv, lines)
        assert _tree(home) == before, argv
    cleared = runner.invoke(app, ["cache", "clear"])
    assert cleared.exit_code == 0 and f"removed {info.key}" in cleared.output and f"removed {partial.name}" in cleared.output
    assert "removed 2 cached fits" in cleared.output
    after = _tree(home)
    assert {k for k in before if k not in after} == {k for k in before if info.key in k}
    assert sorted(p.name for p in cache_dir.iterdir()) == ["0123456789abcdef0123", "mine"]


@pytest.mark.slow
def test_run_records_reuse_and_export_loads_the_cached_model(cache_dir, counted, baselines_store, tmp_path):
    """Two smoke runs of MTEB classification (beside the session's mteb_clf baseline): the rerun
    (--force) reuses the fit and says so; the run's export rebuilds the same model and writes a model
    card with its scores."""
    from harness.runner.run import execute

    store = baselines_store
    request = RunRequest("mteb_clf", "asg", "minilm", "smoke", 0, SETTINGS, device="cpu")
    first = execute(request, store)[-1].record
    rerun = execute(dataclasses.replace(request, force=True), store)[-1].record
    assert first.fit.details["fit_cache"]["reused"] is False and rerun.fit.details["fit_cache"]["reused"] is True
    assert len(counted) == 1 and rerun.compression == first.compression
    stored = store.load(rerun.run_id)
    assert stored.fit.details["fit_cache"]["reused"] is True
    out = tmp_path / "export"
    result = CliRunner().invoke(app, ["export", first.run_id, "--out", str(out), "--db", str(store.path)])
    assert result.exit_code == 0, result.output
    assert len(counted) == 1  # exported from the cache, not refitted
    model, tokenizer = load_compressed(out)
    cached, _ = _fit(tmp_path)
    assert torch.equal(_embed(model), _embed(cached.model))
    card = (out / "README.md").read_text()
    assert "Aggregate Semantic Grouping" in card and "k=16" in card and first.scores[0].task in card
    assert json.loads((out / "scores.json").read_text())[0]["value"] == first.scores[0].value
    missing = CliRunner().invoke(app, ["export", "no-such-run", "--out", str(out), "--db", str(store.path)])
    assert missing.exit_code == 2 and "no run 'no-such-run'" in missing.output


def test_mteb_loader_reports_the_compressed_counts(cache_dir, tmp_path):
    """harness.integrations.mteb on a cached fit (a saved folder like an export): an MTEB encoder whose
    ModelMeta counts the compressed embedding, and whose loader rebuilds the same encoder."""
    from mteb.models import EncoderProtocol

    from harness.integrations import mteb as mteb_model
    from harness.suites.mteb_tasks import Banking77Local

    applied, info = _fit(tmp_path)
    encoder = mteb_model.load(cache_dir / info.key)
    meta = encoder.mteb_model_meta
    assert isinstance(encoder, EncoderProtocol) and meta.name == "harness/minilm-asg" and meta.embed_dim == 384
    assert meta.n_embedding_parameters == applied.report.embedding_params_after == 16 * 384
    assert meta.n_parameters == applied.report.total_params_after < applied.report.total_params_before
    texts = {"text": ["card still not here", "how do I top up?"]}
    got = encoder.encode([texts], task_metadata=Banking77Local.metadata, hf_split="test", hf_subset="default")
    again = meta.load_model().encode([texts], task_metadata=Banking77Local.metadata, hf_split="test", hf_subset="default")
    assert got.shape == (2, 384) and (got == again).all()
