"""Vocab Diet's pure parts: decomposition map, composed tables, mean offsets, reallocation, distillation loss."""

from __future__ import annotations

import pytest
import torch

from harness.errors import ConfigError, DataError
from harness.methods.vocab import decomposition
from harness.methods.vocab.decomposition import CAPITALIZED, NO_SPACE, Decomposition

UNIMORPH_ROWS = """walk\twalked\tV;PST
walk\twalked\tV;V.PTCP;PST
walk\twalking\tV;V.PTCP;PRS
walk\twalks\tV;3;SG;PRS
walk\twalk\tV;NFIN
dream\tdreamed\tV;PST
dream\tdreamt\tV;PST
find\tfound\tV;PST
found\tfounded\tV;PST
have\thad\tV;PST
"""
VOCAB = ["<s>", "Ġwalk", "Ġwalked", "walked", "ĠWalked", "Walk", "Ġwalking", "ĠWalks", "Ġdream", "Ġdreamed",
         "Ġdreamt", "Ġfind", "Ġfound", "ĠFound", "Ġhave", "Ġhad", "Ġtree", "ĠTree", "Ġzzzz", "ĠZzzz", ",", "ĠFind",
         "Ġwalks", "Ġtrees", "Ġhappy", "Ġhappier", "ĠHappiest", "Ġdreams"]


@pytest.fixture
def unimorph(tmp_path):
    path = tmp_path / "eng.tsv"
    path.write_text(UNIMORPH_ROWS, encoding="utf-8")
    return decomposition.read_unimorph(path)


def _named(decomp: Decomposition) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {VOCAB[f]: (VOCAB[b], tuple(decomp.transformations[k] for k in ks)) for f, (b, ks) in decomp.forms.items()}


def test_decomposition_map(unimorph):
    """UniMorph's verbs where it has the lemma, lemminflect's nouns, adjectives and other verbs; spaced forms only."""
    vocab = {t: i for i, t in enumerate(VOCAB)}
    counts = {"tree": 3, "Tree": 1, "find": 1, "Find": 5}
    decomp = decomposition.build(vocab, "Ġ", unimorph, word_counts=counts, special_ids=[0])
    both = "N;PL+V;3;SG;PRS"  # paper Table 1's "Plural (N) & Present Singular (V)"
    assert _named(decomp) == {
        "Ġwalked": ("Ġwalk", ("V;PST",)),                      # PST and PTCP;PST read as PST
        "ĠWalked": ("Ġwalk", ("V;PST", CAPITALIZED)),
        "Ġwalking": ("Ġwalk", ("V;V.PTCP;PRS",)),
        "Ġwalks": ("Ġwalk", (both,)),                          # lemminflect's noun plural = UniMorph's 3sg
        "ĠWalks": ("Ġwalk", (both, CAPITALIZED)),
        "Ġdreams": ("Ġdream", ("N;PL",)),                      # UniMorph's 'dream' lists no 3sg: a plural only
        "ĠFound": ("Ġfound", (CAPITALIZED,)),                   # a lemma stays a base, not find+PST
        # 'find' is written capitalized more often than not (a name): ĠFind keeps its row
        "ĠTree": ("Ġtree", (CAPITALIZED,)),                     # a word-list word decomposes by case
        "Ġtrees": ("Ġtree", (both,)),                           # 'tree' is no UniMorph lemma: lemminflect's verb too
        "Ġhappier": ("Ġhappy", ("ADJ;CMPR",)),                  # adjective degrees from lemminflect
        "ĠHappiest": ("Ġhappy", ("ADJ;SPRL", CAPITALIZED)),
    }  # dreamed/dreamt share a tag (ambiguous), 'have' is a function word, 'zzzz' is no word,
    # unspaced 'walked' and 'Walk' keep their rows (post-hoc setup)
    assert decomp.counts() == {"ADJ;CMPR": 1, "ADJ;SPRL": 1, "N;PL": 1, both: 3, "V;PST": 2, "V;V.PTCP;PRS": 1,
                               CAPITALIZED: 5}
    assert decomp.english_words == 22  # leading-space letter tokens whose lower case is a word (not zzzz, Zzzz)
    assert decomp.whole_word_forms() == len(decomp.forms) == 11
    assert _named(decomp.only([vocab["ĠTree"]])) == {"ĠTree": ("Ġtree", (CAPITALIZED,))}


def test_unspaced_variants_are_a_setting(unimorph):
    """Paper Section 7's map also composes the variant without the leading space."""
    vocab = {t: i for i, t in enumerate(VOCAB)}
    decomp = decomposition.build(vocab, "Ġ", unimorph, special_ids=[0], unspaced=True)
    named = _named(decomp)
    assert named["walked"] == ("Ġwalk", ("V;PST", NO_SPACE)) and named["Walk"] == ("Ġwalk", (NO_SPACE, CAPITALIZED))
    assert decomp.counts()[NO_SPACE] == 2 and decomp.whole_word_forms() == len(decomp.forms) - 2


def test_unimorph_errors(tmp_path):
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="no lemma"):
        decomposition.read_unimorph(empty)
    bad = tmp_path / "bad.tsv"
    bad.write_text("walk\twalked\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.tsv:1"):
        decomposition.read_unimorph(bad)


def test_marker_detection(minilm_ref, smollm2_tokenizer):
    from transformers import AutoTokenizer

    assert decomposition.leading_space_marker(smollm2_tokenizer) == "Ġ"
    with pytest.raises(ConfigError, match="no leading-space marker"):
        decomposition.leading_space_marker(AutoTokenizer.from_pretrained(minilm_ref.location))


def _toy_decomposition() -> Decomposition:
    # ids 5, 6 are forms of base 2 (t0; t0+t1), id 7 of base 3 (t1)
    return Decomposition(("t0", "t1"), {5: (2, (0,)), 6: (2, (0, 1)), 7: (3, (1,))})


def test_mean_offsets_is_the_mean_of_single_transformation_pairs():
    from harness.adapters.vocabdiet import mean_offsets

    table = torch.randn(10, 4)
    offsets = mean_offsets(_toy_decomposition(), table)
    assert torch.allclose(offsets[0], table[5] - table[2])       # id 6 has two transformations: not used
    assert torch.allclose(offsets[1], table[7] - table[3])


def test_composed_tables_match_the_dense_composition(tiny_decoder):
    from harness.adapters.vocabdiet import compose

    from harness.adapter import footprint

    table = tiny_decoder.get_input_embeddings().weight.detach().clone()
    before = footprint(tiny_decoder)
    decomp = _toy_decomposition()
    model = compose(tiny_decoder, decomp)
    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    assert head.weight is emb.table and model.config.tie_word_embeddings is False  # the tie is kept, by sharing
    t_in, t_out = emb.transforms.detach(), head.transforms.detach()
    dense_in, dense_out = table.clone(), table.clone()
    for form, (base, kinds) in decomp.forms.items():
        dense_in[form] = table[base] + t_in[list(kinds)].sum(0)
        dense_out[form] = table[base] + t_out[list(kinds)].sum(0)
    ids = torch.arange(table.shape[0])
    assert torch.allclose(emb(ids), dense_in, atol=1e-6)
    hidden = torch.randn(3, 2, table.shape[1])
    assert torch.allclose(head(hidden), hidden @ dense_out.T, atol=1e-5)
    model.tie_weights()
    assert model.get_output_embeddings() is head
    after = footprint(model)
    assert emb.table.shape[0] == table.shape[0] - 3
    assert after.embedding_params == (table.shape[0] - 3) * 64 + 2 * 2 * 64  # kept rows + E_T + U_T
    # stored: kept rows and E_T, U_T in fp32, the int32 row map and the uint8 transformation masks
    assert after.storage_bytes == after.embedding_params * 4 + 512 * 4 + 512 * 1
    assert before.embedding_params == 512 * 64
    logits = model(input_ids=torch.tensor([[1, 5, 6, 7]])).logits
    assert logits.shape == (1, 4, table.shape[0])


def test_reallocated_tokenizer_round_trips_and_compresses(smollm2_tokenizer, data_dir):
    from harness.suites import texts

    from harness.methods.vocab import reallocation

    fit = texts.wikitext("valid", data_dir)[0][:30]
    tokens = reallocation.learn_merges(smollm2_tokenizer, fit, 200)
    assert len({t.text for t in tokens}) == 200 and not {t.text for t in tokens} & smollm2_tokenizer.get_vocab().keys()
    first = len(smollm2_tokenizer)
    changed = reallocation.with_new_tokens(smollm2_tokenizer, tokens, first)
    assert len(changed) == first + 200

    def tokens_of(tok, texts):
        return sum(len(tok.encode(t, add_special_tokens=False)) for t in texts)

    assert tokens_of(changed, fit) < 0.98 * tokens_of(smollm2_tokenizer, fit)  # bytes/token up by > 2% on the fit text
    test = texts.wikitext("test", data_dir)[0]
    ids = changed(test, add_special_tokens=False)["input_ids"]
    assert changed.batch_decode(ids) == test                  # text -> ids -> text on WikiText-2 test
    assert max(max(row) for row in ids) >= first               # and the new tokens are used there
    with pytest.raises(ConfigError, match="fewer than reallocate"):
        reallocation.learn_merges(smollm2_tokenizer, fit[:1], 100000)


def test_kl_to_teacher():
    from harness.methods.distill import kl_to_teacher

    teacher = torch.randn(2, 5, 7)
    assert kl_to_teacher(teacher, teacher).abs() < 1e-6
    assert kl_to_teacher(torch.randn(2, 5, 7), teacher) > 0
    extra = torch.cat([teacher, torch.full((2, 5, 3), 5.0)], dim=-1)  # student mass on ids the teacher lacks
    assert kl_to_teacher(extra, teacher) > 0.5
