"""Vocab Diet end to end on explicit inputs: SmolLM2's real tokenizer, a small random decoder of its vocabulary."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from harness.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def fit_texts(data_dir):
    from harness.sources import corpora

    lines = (data_dir / "wikitext2" / "train.txt").read_text(encoding="utf-8").splitlines(keepends=True)[:3000]
    c4 = [json.loads(line)["text"] for line in (data_dir / "c4_sample" / "c4_sample.jsonl").open(encoding="utf-8")][:40]
    return {"wikitext2_train": corpora.wikitext_articles(lines)[:40], "c4_sample": c4}


@pytest.fixture
def small_decoder(smollm2_tokenizer):
    """Two random Llama layers over SmolLM2's vocabulary (V=49152, D=64), tied tables."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(smollm2_tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    return LlamaForCausalLM(config).eval()


def _diet(model, tokenizer, texts, **settings):
    from harness.adapters.vocabdiet import BUDGETS, VocabDietAdapter, VocabDietConfig

    teacher = copy.deepcopy(model).requires_grad_(False)
    return VocabDietAdapter(VocabDietConfig(**settings)).diet(model, tokenizer, teacher, texts, BUDGETS.smoke)


def test_diet_frees_rows_reallocates_and_distills(small_decoder, smollm2_tokenizer, fit_texts):
    from harness.adapter import footprint

    vocab = len(smollm2_tokenizer)
    before = footprint(small_decoder)
    diet = _diet(small_decoder, smollm2_tokenizer, fit_texts, reallocate=20, filter=False)
    d = diet.details
    assert d["forms_removed"] == diet.freed_slots == d["forms_found"] > 8000 and d["filter"] == "off"
    kinds = d["transformations"]
    assert sum(kinds.values()) >= diet.freed_slots and kinds["capitalized"] > 1000 and "no_space" not in kinds
    assert kinds["N;PL"] > 1000 and kinds["N;PL+V;3;SG;PRS"] > 1000 and kinds["ADJ;CMPR"] > 10  # paper Table 1's rows
    assert 0 < d["freed_share_of_vocab"] < d["freed_share_of_english_words"] < 1
    assert d["freed_share_of_english_words"] == diet.freed_slots / d["english_word_tokens"]  # all forms spaced
    assert diet.vocab_size == vocab - diet.freed_slots + 20
    assert len(diet.tokenizer) == vocab + 20
    assert set(d["distill_loss"]) == {"stage1", "stage2"}
    model = diet.model
    assert model.get_input_embeddings().table.shape[0] == diet.vocab_size
    assert not any("lora" in name for name, _ in model.named_parameters())  # LoRA merged into the layers
    after = footprint(model)
    assert after.embedding_params < 0.85 * before.embedding_params
    text = "The walkers walked 2019 kilometres, Walking home."
    ids = diet.tokenizer(text, return_tensors="pt").input_ids
    assert diet.tokenizer.decode(ids[0]) == text
    assert model(input_ids=ids).logits.shape == (1, ids.shape[1], vocab + 20)


def test_filter_probes_the_first_forms_and_keeps_the_rest(small_decoder, smollm2_tokenizer, fit_texts):
    """A suite that loads the base model (tokenizer) has no head to decode the probe with: the map
    stays unfiltered and the details say so. With the head, the first forms by id are probed and
    only those read back stay composed; the unprobed ones keep their rows and are counted."""
    from harness.adapters.vocabdiet import BUDGETS

    bare = _diet(copy.deepcopy(small_decoder).model, smollm2_tokenizer, fit_texts, distill="none")
    probed = _diet(small_decoder, smollm2_tokenizer, fit_texts, distill="none", criterion="embed")
    b, p = bare.details, probed.details
    assert b["filter"].startswith("skipped") and b["probe_failures"] == 0 and b["forms_removed"] == b["forms_found"]
    assert p["filter"] == "probed" and p["criterion"] == "embed" and p["forms_found"] == b["forms_found"]
    assert p["forms_probed"] == BUDGETS.smoke.probe_forms == p["probe"]["all"]["n"]
    assert p["forms_unprobed_kept"] == p["forms_found"] - p["forms_probed"]
    assert p["forms_removed"] == p["forms_probed"] - p["probe_failures"] == round(p["probe"]["all"]["embed"] * 64)
    assert all(r["embed"] <= r["detok"] for r in p["probe"].values())
    assert probed.freed_slots == p["forms_removed"]


def test_generation_produces_composed_forms(small_decoder, smollm2_tokenizer, fit_texts):
    """Removed forms stay reachable by decoding: with a long output "capitalized" vector and the last
    hidden state pinned along it, every greedy step picks a capitalized (composed) form, decoded as one."""
    diet = _diet(small_decoder, smollm2_tokenizer, fit_texts, distill="none", filter=False)
    model = diet.model
    head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    capitalized = 10 * torch.randn(64)
    with torch.no_grad():
        head.transforms[-1] = capitalized
    model.model.norm.register_forward_hook(lambda module, args, out: capitalized.expand_as(out))
    prompt = smollm2_tokenizer("The river", return_tensors="pt").input_ids
    out = model.generate(prompt, max_new_tokens=4, do_sample=False)[0, prompt.shape[1]:]
    assert embedding.composed()[out].all()
    text = smollm2_tokenizer.decode(out)
    assert smollm2_tokenizer.decode(smollm2_tokenizer.encode(text, add_special_tokens=False)) == text
    assert all(word[0].isupper() for word in text.split())


def test_bad_input_is_one_line_error(small_decoder, smollm2_tokenizer, fit_texts, minilm_ref, tmp_path):
    from transformers import AutoTokenizer

    with pytest.raises(ConfigError, match="exceeds the .* freed slots"):
        _diet(small_decoder, smollm2_tokenizer, fit_texts, reallocate=10**6, distill="none", filter=False)
    with pytest.raises(ConfigError, match="no leading-space marker"):
        _diet(small_decoder, AutoTokenizer.from_pretrained(minilm_ref.location), fit_texts, distill="none")
    empty = tmp_path / "eng.tsv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match="no lemma"):
        _diet(small_decoder, smollm2_tokenizer, fit_texts, unimorph=str(empty))
    with pytest.raises(ConfigError, match="reallocate=-1"):
        _diet(small_decoder, smollm2_tokenizer, fit_texts, reallocate=-1)


@pytest.mark.parametrize("setting, fragment", [
    ("unimorph={empty}", "has no lemma<TAB>form<TAB>features rows"),   # refused in the plan, before any model
    ("reallocate=60000", "exceeds the vocabulary (49152 tokens)"),
    ("reallocate=40000", "freed slots; set --set reallocate=N"),       # known once the map is built
])
def test_cli_bad_input_exits_2_with_one_line(setting, fragment, tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    args = ["run", "--suite", "tokenizer", "--adapter", "vocabdiet", "--model", "smollm2", "--profile", "smoke",
            "--set", "distill=none", "--set", setting.format(empty=empty), "--db", str(tmp_path / "r.duckdb")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]  # model loading logs aside
    assert len(errors) == 1 and errors[0].startswith("error: ") and fragment in errors[0], result.stderr
    assert "Traceback" not in result.output
