"""Pure logic of the lm-eval / tokenizer suites: BPB arithmetic, ratio CIs, WikiText articles,
task YAML rendering, whole-word counting. No model runs here."""

from __future__ import annotations

import math

import pytest
import yaml
from harness.suites import texts
from harness.suites.lm_eval import LmEvalConfig
from harness.suites.lm_eval_client import TASKS_DIR, render_tasks
from harness.suites.tokenizer import count

from harness.errors import ConfigError
from harness.measure.metrics import bits_per_byte
from harness.sources import corpora


def test_bits_per_byte_is_nll_over_ln2_over_bytes():
    assert bits_per_byte(math.log(2) * 1000, 1000) == pytest.approx(1.0)
    assert bits_per_byte(693.147, 500) == pytest.approx(2.0, rel=1e-5)


def test_wikitext_lines_group_into_detokenized_articles():
    lines = [" \n", " = Alpha = \n", " \n", " = = History = = \n", " It is a cat @-@ like dog , he said . \n",
             " = Beta = \n", " Second article . \n"]
    docs = corpora.wikitext_articles(lines)
    assert docs == ["= Alpha =\n\n== History ==\nIt is a cat-like dog, he said.", "= Beta =\nSecond article."]


def test_prefix_cuts_at_whitespace_within_byte_budget():
    text = "naïve words here and more"
    cut = texts.prefix(text, 12)
    assert len(cut.encode()) <= 12 and text.startswith(cut) and not cut.endswith(" ")
    assert texts.prefix(text, None) == text and texts.prefix(text, 1000) == text


def test_render_tasks_writes_absolute_data_paths(tmp_path):
    data = {f"xnli_{lang}.jsonl": tmp_path / f"xnli_{lang}.jsonl" for lang in ("en", "de")}
    root = render_tasks(["xnli"], tmp_path, data)
    written = sorted(p.name for p in (root / "xnli").glob("*.yaml"))
    assert written == ["_xnli_common.yaml", "xnli_de.yaml", "xnli_en.yaml"]  # unselected languages left out
    en = yaml.safe_load((root / "xnli" / "xnli_en.yaml").read_text())
    assert en["dataset_kwargs"]["data_files"] == {"test": str(tmp_path / "xnli_en.jsonl")}
    assert en["dataset_kwargs"]["cache_dir"].startswith(str(tmp_path))
    assert en["include"] == "_xnli_common.yaml" and "right? Yes" in en["doc_to_choice"]
    assert len(list((TASKS_DIR / "xnli").glob("xnli_*.yaml"))) == 15


def test_lm_eval_languages_are_validated():
    assert LmEvalConfig(languages="all").selected()[0] == "ar" and len(LmEvalConfig(languages="all").selected()) == 15
    assert LmEvalConfig(languages="en, de").selected() == ("en", "de")
    with pytest.raises(ConfigError, match="xx"):
        LmEvalConfig(languages="en,xx")


def test_whole_word_tokens_and_bytes(minilm_ref):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(minilm_ref.location)
    c = count(tok, ["the cat sat", "unbelievablyness"])
    assert c.bytes.tolist() == [11, 16]
    assert c.whole_word_tokens[0] == 3 == c.tokens[0]          # three single-token words
    assert c.tokens[1] > 1 and c.whole_word_tokens[1] == 0     # one word split into pieces
