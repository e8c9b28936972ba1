"""What a model is, read from its metadata alone: kind, token table shape, pooling, tokenizer fit.

Planning a run reads these without loading (or converting) any weights:

* **Kind** from what the architecture is in transformers' auto mappings and the config, never from
  a class name: ``config.is_encoder_decoder`` (T5, mT5, BART) is an encoder-decoder; a model type
  with a causal-LM class and no masked-LM class (GPT-2, OPT, Bloom, Llama, Gemma ...) or a config
  with ``is_decoder`` is a decoder; any other model type transformers knows is an encoder.
  A model with its own code (``auto_map`` in its config) is read only with ``trust_remote_code``;
  its kind then follows the auto classes it registers.
* **Shape** of the token table from the architecture built on the meta device (no memory, no
  weights): rows and width of ``get_input_embeddings().weight`` (ELECTRA's 64-wide table under a
  96-wide hidden size included), with the layer sizes budgets are chosen by.
* **Pooling** of a sentence-transformers directory from its own ``modules.json`` and pooling config.
* **Tokenizer**: a directory must ship one (transformers would otherwise build a 5-token tokenizer
  that maps every word to ``[UNK]``), and its ids must fit the table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from harness.errors import ModelSourceError

Kind = Literal["encoder", "decoder", "encoder-decoder"]
KINDS: tuple[str, ...] = get_args(Kind)
Pooling = Literal["cls", "mean"]

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model")
"""Files any one of which holds a tokenizer's vocabulary (fast, WordPiece, BPE, SentencePiece)."""

_CAUSAL_AUTO = ("AutoModelForCausalLM",)
_SEQ2SEQ_AUTO = ("AutoModelForSeq2SeqLM",)


@dataclass(frozen=True)
class Shape:
    """A model's token table and the layer sizes budgets are chosen by (``harness.budgets.is_large``)."""

    vocab_size: int                # rows of the input token table
    embedding_dim: int             # its width; may differ from hidden_size (ELECTRA, ALBERT)
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int | None = None


def raw_config(path: Path) -> dict[str, Any]:
    """``config.json`` of a local model directory, as written."""
    file = path / "config.json"
    if not file.is_file():
        raise ModelSourceError(f"{path} has no config.json; point --model at a saved transformers model directory")
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ModelSourceError(f"{file} is not JSON ({err}); save the model again with save_pretrained") from None


def check_architecture(raw: dict[str, Any], where: str, trust_remote_code: bool) -> None:
    """Refuse, in one line, a model that needs its own code (unless trusted) or whose model type
    this transformers does not know."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if raw.get("auto_map"):
        if not trust_remote_code:
            raise ModelSourceError(
                f"{where} runs its own code (config.json auto_map: {', '.join(raw['auto_map'])}); "
                "pass --trust-remote-code to run it, only if you trust its source"
            )
        return
    model_type = raw.get("model_type")
    if model_type not in CONFIG_MAPPING_NAMES:
        raise ModelSourceError(
            f"{where} has model_type {model_type!r}, an architecture transformers {transformers.__version__} does not know; "
            "upgrade transformers, or use a model of a known architecture"
        )


def config_of(location: str, trust_remote_code: bool):
    """The model's transformers config (``trust_remote_code`` passed on, so nothing asks on stdin)."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(location, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as err:
        raise ModelSourceError(f"cannot read the config of '{location}' ({err.__class__.__name__}: {str(err)[:120]})") from None


def kind_of(config) -> Kind:
    """decoder, encoder or encoder-decoder, from the config and transformers' auto mappings (module docstring)."""
    from transformers.models.auto import modeling_auto

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if getattr(config, "is_encoder_decoder", False) or getattr(text, "is_encoder_decoder", False):
        return "encoder-decoder"
    auto_map = getattr(config, "auto_map", None) or {}
    if auto_map:
        if any(name in auto_map for name in _SEQ2SEQ_AUTO):
            return "encoder-decoder"
        return "decoder" if any(name in auto_map for name in _CAUSAL_AUTO) else "encoder"
    model_type = config.model_type
    causal = model_type in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    masked = model_type in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    if getattr(text, "is_decoder", False) or (causal and not masked):
        return "decoder"
    return "encoder"


def shape_of(config, trust_remote_code: bool, where: str) -> Shape:
    """The token table's shape and the layer sizes, from the architecture built on the meta device."""
    import torch
    from transformers import AutoModel

    try:
        with torch.device("meta"):
            model = AutoModel.from_config(config, trust_remote_code=trust_remote_code)
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ModelSourceError(f"{where}: transformers cannot build this architecture ({err.__class__.__name__}: {str(err)[:120]})") from None
    table = getattr(model.get_input_embeddings(), "weight", None)
    if not isinstance(table, torch.Tensor) or table.dim() != 2:
        raise ModelSourceError(f"{where} has no token-embedding table (get_input_embeddings() holds no 2-D weight); use a text model")
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    hidden = getattr(text, "hidden_size", None) or getattr(text, "d_model", None) or table.shape[1]
    layers = getattr(text, "num_hidden_layers", None) or getattr(text, "num_layers", None) or 0
    heads = getattr(text, "num_attention_heads", None) or getattr(text, "num_heads", None) or 1
    ffn = getattr(text, "intermediate_size", None) or getattr(text, "d_ff", None)
    return Shape(int(table.shape[0]), int(table.shape[1]), int(hidden), int(layers), int(heads), ffn)


def pooling_of(path: Path) -> Pooling:
    """How a sentence-transformers directory embeds a sentence (its ``modules.json`` and pooling
    config): ``mean`` or ``cls``; ``cls`` for a plain transformers directory. Another pooling mode
    is refused in one line."""
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return "cls"
    modules = json.loads(modules_file.read_text(encoding="utf-8"))
    pooling = [m for m in modules if str(m.get("type", "")).endswith("Pooling")]
    if not pooling:
        return "cls"
    config_file = path / pooling[0].get("path", "") / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    modes = sorted(key.removeprefix("pooling_mode_") for key, on in config.items() if key.startswith("pooling_mode_") and on)
    if modes == ["mean_tokens"]:
        return "mean"
    if modes == ["cls_token"]:
        return "cls"
    raise ModelSourceError(
        f"{path} is a sentence-transformers model pooling by {' + '.join(modes) or 'no mode'} ({config_file}); "
        "the harness embeds sentences by mean or first-token pooling only"
    )


def check_tokenizer(path: Path, vocab_size: int, trust_remote_code: bool) -> int:
    """The tokenizer shipped in ``path`` fits a ``vocab_size``-row table; returns its size. A
    directory without tokenizer files, or whose tokenizer has ids beyond the table, is refused."""
    from transformers import AutoTokenizer

    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ModelSourceError(
            f"{path} has no tokenizer (none of {', '.join(TOKENIZER_FILES)}); save the model's tokenizer there "
            "with tokenizer.save_pretrained(DIR)"
        )
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    largest = max(tokenizer.get_vocab().values(), default=-1)
    if largest >= vocab_size:
        raise ModelSourceError(
            f"{path}: the tokenizer has ids up to {largest} but the token table has {vocab_size} rows; "
            "save the tokenizer the model was trained with"
        )
    return len(tokenizer)
