"""skd (paper 004 Section 3.3): the student cut from the teacher's layers, its parameter share
counted as paper 004 Table 7 counts it, a smoke run through `harness run` on MiniLM and mteb_clf
with the share beside its scores, and bad input exiting 2 with one line."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel, BertConfig, BertModel
from typer.testing import CliRunner

from harness.adapters.skd import SkdConfig, cut_student, layer_params
from harness.cli import app
from harness.errors import ConfigError
from harness.results.store import Store
from tests.conftest import read_sql

MINILM_LAYER = 1_774_464  # parameters of one MiniLM transformer layer (D=384, 1,536 hidden)


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


def test_default_student_keeps_the_papers_share_of_minilms_layers(minilm_ref):
    """Paper 004 Tables 7-8: students keep 7% (DeBERTa) to 19% (Llama) of the teacher's parameters;
    counted over the layer stack, MiniLM's default student keeps 1 of 6 equal layers. The embedding
    table is left out of the count on both sides (the student shares it, frozen)."""
    model = AutoModel.from_pretrained(minilm_ref.location)
    teacher = layer_params(model)
    assert teacher == 6 * MINILM_LAYER
    cut_student(model, SkdConfig().layers)
    student = layer_params(model)
    assert student == MINILM_LAYER and 0.07 <= student / teacher <= 0.19
    assert model.get_input_embeddings().weight.numel() == 30522 * 384  # kept whole, not counted


@pytest.mark.slow
def test_smoke_run_reports_the_parameter_ratio_beside_its_scores(tmp_path, data_dir):
    db = tmp_path / "results.duckdb"
    args = ["run", "--suite", "mteb_clf", "--adapter", "skd", "--model", "minilm", "--profile", "smoke", "--db", str(db), "--set", "k=3"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    store = Store(db)
    (skd,) = [store.load(r) for r in read_sql(store.path, "SELECT run_id FROM runs WHERE adapter = 'skd'").run_id]
    facts, report = skd.fit.details, skd.compression
    assert facts["student_layers"] == 1 and facts["teacher_layers"] == 6
    assert (facts["teacher_params"], facts["student_params"]) == (6 * MINILM_LAYER, MINILM_LAYER)
    assert facts["params_ratio"] == pytest.approx(1 / 6)
    # the whole-model ratio is the compression report's, stored beside every score of the run
    assert (facts["teacher_model_params"], facts["student_model_params"]) == (report.total_params_before, report.total_params_after)
    assert report.total_params_before - report.total_params_after == 5 * MINILM_LAYER
    assert facts["model_params_ratio"] == pytest.approx(report.total_params_after / report.total_params_before)
    assert 0 < facts["weight_bytes_ratio"] < 1 and facts["skd_steps"] > 0 and facts["dictionary_bytes"] > 0
    assert len(skd.scores) == 2 and all(s.pct_base is not None for s in skd.scores)


@pytest.mark.parametrize(
    "setting, fragment",
    [("layers=0", "layers=0 must be a positive integer"), ("cap=-5", "cap=-5 must be a positive integer")],
)
def test_bad_config_exits_2_with_one_line(setting, fragment):
    result = CliRunner().invoke(app, ["run", "--suite", "mteb_clf", "--adapter", "skd", "--model", "minilm", "--set", setting])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output
