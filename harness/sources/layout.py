"""Where a transformers model keeps its parts, found by what they are, never by a family's attribute names.

Token tables and heads come from the model's own accessors (``get_input_embeddings``,
``get_output_embeddings``); the backbone from ``base_model``; the stack of transformer layers from
``get_decoder()`` where the model has one (decoders and encoder-decoders) and otherwise from the
backbone, as its longest list of like blocks (Llama's ``layers``, GPT-2's ``h``, GPT-NeoX's
``layers``, T5's ``block``); the projections inside them by what they compute (``nn.Linear`` and
transformers' ``Conv1D``, GPT-2's layer), whatever they are called.
"""

from __future__ import annotations

from torch import nn


def _stack_root(model: nn.Module) -> nn.Module:
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    if isinstance(decoder, nn.Module) and decoder is not model:
        return decoder
    return getattr(model, "base_model", model)


def blocks(model: nn.Module) -> tuple[str, nn.ModuleList]:
    """(name relative to ``model``, list) of the model's transformer layers (see the module docstring)."""
    root = _stack_root(model)
    prefix = next((name for name, m in model.named_modules() if m is root), "")
    found = [(name, m) for name, m in root.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) and len({type(b) for b in m}) == 1 and any(True for _ in m.parameters())]
    if not found:
        raise ValueError(f"{type(model).__name__} has no list of transformer layers")
    name, stack = max(found, key=lambda item: len(item[1]))
    return ".".join(part for part in (prefix, name) if part), stack


def projections(module: nn.Module) -> list[str]:
    """Names (last component, sorted) of the layers in ``module`` that compute x W + b: ``nn.Linear``
    and transformers' ``Conv1D``."""
    from transformers.pytorch_utils import Conv1D

    return sorted({name.rsplit(".", 1)[-1] for name, m in module.named_modules() if isinstance(m, (nn.Linear, Conv1D))})


def hidden_size(model: nn.Module) -> int:
    """The width of the model's hidden states (its text config's ``hidden_size``, T5's ``d_model``)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return int(getattr(config, "hidden_size", None) or config.d_model)
