"""Every registered adapter through `harness run`, as a user runs it: the fit cache on, the adapter's
default settings, the smoke profile, on the cheapest suite it supports; then the same command with
--force. The second run takes the fit from the cache (the entry the first run wrote) and gives the
same scores, per-item outputs and compression report: a loaded fit is the fitted one. An
adapter that declares ``cacheable = False`` fits again and its run says why.

The models are local model directories (``--model DIR``, a source users have) with random weights
and the packaged models' real tokenizers: a 5-layer BERT with MiniLM's vocabulary and a 4-layer
Llama with SmolLM2's, small enough that twenty runs stay cheap, wide enough (96) for every adapter's
defaults (ASG's 48 segments, SKD's 4-layer student)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import HarnessError
from harness.registry import ADAPTERS
from harness.results.store import Store
from harness.runner.plan import RunRequest, plan
from tests.conftest import read_sql


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory, minilm_ref, smollm2_tokenizer) -> dict[str, Path]:
    """``encoder`` and ``decoder`` model directories, saved as transformers saves a model."""
    from transformers import AutoTokenizer, BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("tiny-models")
    encoder = BertModel(BertConfig(vocab_size=30522, hidden_size=96, num_hidden_layers=5, num_attention_heads=4, intermediate_size=192))
    decoder = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(smollm2_tokenizer), hidden_size=96, intermediate_size=192, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
    ))
    tokenizers = {"encoder": AutoTokenizer.from_pretrained(minilm_ref.location), "decoder": smollm2_tokenizer}
    for kind, model in (("encoder", encoder), ("decoder", decoder)):
        model.save_pretrained(root / kind)
        tokenizers[kind].save_pretrained(root / kind)
    return {kind: root / kind for kind in tokenizers}


# (suite, model kind, suite settings), cheapest first: one GLUE task fine-tuned on 32 sentences (any
# encoder adapter, ADE's classifier and the sense dictionaries' task_train included); bits per byte
# of three 300-byte documents for decoder-only adapters (Vocab Diet)
CANDIDATES = (("glue", "encoder", ("tasks=sst2",)), ("bpb", "decoder", ()))


def cheapest_suite(adapter: str, models: dict[str, Path]) -> tuple[str, Path, tuple[str, ...]]:
    """The first candidate the plan accepts for ``adapter`` with its defaults (model kind, head, fit corpus)."""
    refusals = []
    for suite, kind, settings in CANDIDATES:
        try:
            plan(RunRequest(suite, adapter, str(models[kind]), "smoke", settings=settings, device="cpu"))
            return suite, models[kind], settings
        except HarnessError as err:
            refusals.append(str(err))
    raise AssertionError(f"adapter '{adapter}' supports none of {CANDIDATES}: {refusals}")


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("every-adapter") / "results.duckdb"


@pytest.fixture(scope="module")
def own_fit_cache(tmp_path_factory):
    """A fit cache of this module's own, so that each adapter's first run is a fresh fit."""
    folder = tmp_path_factory.mktemp("every-adapter-fits")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_FIT_CACHE", str(folder))
        yield folder


def _runs(store: Store, adapter: str, model: Path) -> list:
    """The finished runs of ``adapter`` on ``model``, oldest first (``none``: the baseline's runs too)."""
    ids = read_sql(store.path, "SELECT run_id FROM runs WHERE adapter = ? AND model = ? AND status = 'finished' ORDER BY started_at",
                      [adapter, str(model)]).run_id
    return [store.load(r) for r in ids]


def _outputs(store: Store, rec) -> tuple:
    """Scores, per-item outputs (predictions included) and the compression report."""
    return [(s.task, s.language, s.metric, s.value) for s in rec.scores], store.items(rec.run_id), rec.compression


@pytest.mark.slow
@pytest.mark.parametrize("adapter", ADAPTERS.names())
def test_second_run_reuses_the_fit_and_scores_the_same(adapter, tiny_models, db, own_fit_cache):
    suite, model, settings = cheapest_suite(adapter, tiny_models)
    args = ["run", "--suite", suite, "--adapter", adapter, "--model", str(model), "--profile", "smoke", "--db", str(db),
            *[a for kv in settings for a in ("--set", kv)]]
    for extra in ([], ["--force"]):
        result = CliRunner().invoke(app, args + extra)
        assert result.exit_code == 0, result.output
    store = Store(db)
    first, second = _runs(store, adapter, model)[-2:]
    cached = first.fit.details["fit_cache"], second.fit.details["fit_cache"]
    if ADAPTERS.get(adapter).cacheable:
        assert not cached[0]["reused"] and cached[1]["reused"] and cached[0]["key"] == cached[1]["key"]
        assert (own_fit_cache / cached[0]["key"]).is_dir()
    else:
        assert not any(c["reused"] for c in cached) and all("cacheable = False" in c["note"] for c in cached)
    assert _outputs(store, second) == _outputs(store, first)
