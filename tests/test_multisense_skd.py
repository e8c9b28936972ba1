"""multisense and skd (paper 004): the student cut from the teacher's layers, smoke runs through
`harness run` on MiniLM and mteb_clf, and bad input exiting 2 with one line."""

from __future__ import annotations

import pytest
import torch
from harness.adapters.skd import cut_student
from transformers import BertConfig, BertModel
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import ConfigError
from harness.results.store import Store


def test_student_is_the_teachers_first_layers(tiny_decoder):
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64)).eval()
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        bert_states = encoder(input_ids=ids, output_hidden_states=True).hidden_states
        llama_states = tiny_decoder.model(input_ids=ids, output_hidden_states=True).hidden_states
        assert len(cut_student(encoder, 2)) == 2 and encoder.config.num_hidden_layers == 2
        assert torch.allclose(encoder(input_ids=ids).last_hidden_state, bert_states[2], atol=1e-6)
        cut_student(tiny_decoder, 1)  # a decoder's student keeps the final norm and the tied head
        assert torch.allclose(tiny_decoder.model(input_ids=ids).last_hidden_state, tiny_decoder.model.norm(llama_states[1]), atol=1e-6)
    with pytest.raises(ConfigError, match="must be below the teacher's 1 layers"):
        cut_student(tiny_decoder, 1)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return tmp_path_factory.mktemp("senses") / "results.duckdb"


def _run(db, adapter: str, *settings: str):
    args = ["run", "--suite", "mteb_clf", "--adapter", adapter, "--model", "minilm", "--profile", "smoke", "--db", str(db)]
    return CliRunner().invoke(app, args + [a for kv in settings for a in ("--set", kv)])


@pytest.mark.slow
def test_smoke_runs_report_the_dictionary_and_the_student(db, data_dir):
    result = _run(db, "multisense", "k=3", "clustering=mcl")
    assert result.exit_code == 0, result.output
    store = Store(db)
    (ms,) = [store.load(r) for r in store.query("SELECT run_id FROM runs WHERE adapter = 'multisense'").run_id]
    facts = ms.fit.details
    assert facts["clustering"] == "mcl" and 0 < facts["tokens_with_senses"] <= facts["fit_tokens"]
    assert max(int(n) for n in facts["senses_per_token_histogram"]) <= 3
    hist = {int(n): c for n, c in facts["senses_per_token_histogram"].items()}  # senses -> tokens (JSON keys are strings)
    assert sum(hist.values()) == facts["tokens_with_senses"]
    assert facts["share_below_k"] == pytest.approx(sum(c for n, c in hist.items() if n < 3) / facts["tokens_with_senses"])
    assert ms.compression.storage_bytes_after == ms.compression.storage_bytes_before + facts["dictionary_bytes"]
    base = {(s.task, s.metric): s.value for s in store.load(ms.baseline_run_id).scores}
    assert len(ms.scores) == 2
    for s in ms.scores:  # %Base by hand from the baseline run's stored score
        assert s.pct_base == pytest.approx(100 * s.value / base[(s.task, s.metric)]), s

    result = _run(db, "skd", "k=3", "layers=2")
    assert result.exit_code == 0, result.output
    (skd,) = [store.load(r) for r in store.query("SELECT run_id FROM runs WHERE adapter = 'skd'").run_id]
    facts = skd.fit.details
    assert facts["student_layers"] == 2 and facts["teacher_layers"] == 6
    assert facts["student_params"] == facts["teacher_params"] - 4 * 1_774_464  # four MiniLM layers of 1.77M weights
    assert facts["skd_steps"] > 0 and facts["dictionary_bytes"] > 0

    result = _run(db, "multisense", "min_count=1000000")  # the smoke fit text has no such token
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]  # progress lines aside
    assert len(errors) == 1 and "gives no token a sense" in errors[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "adapter, setting, fragment",
    [
        ("multisense", "k=0", "k=0 must be a positive integer"),
        ("multisense", "clustering=agglomerative", "is not one of kmeans, mcl"),
        ("skd", "layers=0", "layers=0 must be a positive integer"),
        ("skd", "cap=-5", "cap=-5 must be a positive integer"),
    ],
)
def test_bad_config_exits_2_with_one_line(adapter, setting, fragment):
    result = CliRunner().invoke(app, ["run", "--suite", "mteb_clf", "--adapter", adapter, "--model", "minilm", "--set", setting])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output
