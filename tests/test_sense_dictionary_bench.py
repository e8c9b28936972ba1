"""The sense-dictionary size benchmark (the dictionary's size scales linearly with the cap;
MCL's senses per token beside paper 004 Table 6), run end to end on real MiniLM and
WikiText-2 train at a tiny size."""

from __future__ import annotations

import json
import sys

import pytest
from harness.benchmarks import sense_dictionary


@pytest.mark.slow
def test_dictionary_bytes_follow_the_formula_and_grow_linearly_with_the_caps(tmp_path, monkeypatch, data_dir, capsys):
    out = tmp_path / "sense_dictionary.json"
    argv = ["sense_dictionary", "--tokens", "3000", "--caps", "2,4,8", "--ks", "1,2,4", "--mcl", "--mcl-scales", "1,30", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    sense_dictionary.main()
    result = json.loads(out.read_text())
    # MCL: a token with under 5 vectors keeps them; with 5 to 8, at most 8 clusters give int(0.1 c) = 0: the minimum, 5
    assert [r["max_senses"] for r in result["mcl_by_vector_cap"]] == [2, 4, 5, 5]
    # the largest cap's vectors 30x larger: the same geometry, yet MCL splits what it kept whole (docs/methods.md)
    as_read, larger = result["mcl_by_vector_cap"][2]["mcl"], result["mcl_by_vector_cap"][3]["mcl"]
    assert result["mcl_by_vector_cap"][3]["scale"] == 30 and as_read["tokens_clustered"] == larger["tokens_clustered"] > 0
    assert as_read["tokens_one_cluster"] > larger["tokens_one_cluster"] and as_read["clusters_median"] < larger["clusters_median"]
    assert result["paper_table6"] == {"n_valid_tokens": 72513, "n_tokens_le15_senses": 57888, "pct_tokens_le15_senses": 79.83,
                                      "n_tokens_gt15_senses": 14625, "pct_tokens_gt15_senses": 20.17}
    for row in result["mcl_by_vector_cap"]:
        bins = row["table6"]  # at most 8 vectors a token here: every token has at most 15 senses
        assert bins["n_valid_tokens"] == bins["n_tokens_le15_senses"] == result["tokens_with_vectors"] and bins["n_tokens_gt15_senses"] == 0
    printed = capsys.readouterr().out
    assert "Llama-3-8B-Instruct, MTEB (paper)" in printed and "14,625 (20.17%)" in printed and "cap=8, vectors x30" in printed
    assert result["fit_tokens"] >= 3000 and result["tokens_seen_max_cap_times"] > 0
    for row in result["by_vector_cap"] + result["by_sense_cap"]:
        assert row["dictionary_bytes"] == row["formula_dictionary_bytes"], row  # sum_t min(n_t, k) D 2 + 8 (V + 1)
    vectors = [r["vector_bytes"] for r in result["by_vector_cap"]]
    assert vectors == sorted(vectors) and vectors[0] < vectors[-1]
    # a token seen at least the largest cap (k) times keeps cap vectors (k senses) of D fp16 values: the
    # frequent part is frequent tokens x cap x D x 2 bytes, so its line has exactly that slope through 0
    dim_bytes = 384 * 2
    for row in result["by_vector_cap"]:
        assert row["frequent_vector_bytes"] == result["tokens_seen_max_cap_times"] * row["cap"] * dim_bytes, row
    for row in result["by_sense_cap"]:
        assert row["frequent_dictionary_bytes"] == result["tokens_with_max_k_vectors"] * row["k"] * dim_bytes, row
    line = result["frequent_dictionary_bytes_vs_k"]
    assert line["slope"] == pytest.approx(result["tokens_with_max_k_vectors"] * dim_bytes) and line["intercept"] == pytest.approx(0, abs=1e-3 * line["slope"])
