"""The sense-dictionary size benchmark (issue 14: the dictionary's size scales linearly with the cap),
run end to end on real MiniLM and WikiText-2 train at a tiny size."""

from __future__ import annotations

import json
import sys

import pytest
from harness.benchmarks import sense_dictionary


@pytest.mark.slow
def test_dictionary_bytes_follow_the_formula_and_grow_linearly_with_the_caps(tmp_path, monkeypatch, data_dir):
    out = tmp_path / "sense_dictionary.json"
    argv = ["sense_dictionary", "--tokens", "3000", "--caps", "2,4,8", "--ks", "1,2,4", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    sense_dictionary.main()
    result = json.loads(out.read_text())
    assert result["fit_tokens"] >= 3000 and result["tokens_seen_max_cap_times"] > 0
    for row in result["by_vector_cap"] + result["by_sense_cap"]:
        assert row["dictionary_bytes"] == row["formula_dictionary_bytes"], row  # sum_t min(n_t, k) D 2 + 8 (V + 1)
    vectors = [r["vector_bytes"] for r in result["by_vector_cap"]]
    assert vectors == sorted(vectors) and vectors[0] < vectors[-1]
    # tokens seen at least the largest cap (k) times grow exactly linearly with the cap (k)
    assert result["frequent_vector_bytes_vs_cap"]["r2"] == pytest.approx(1.0)
    assert result["frequent_dictionary_bytes_vs_k"]["r2"] == pytest.approx(1.0)
    assert result["frequent_dictionary_bytes_vs_k"]["slope"] > 0
