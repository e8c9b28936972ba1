"""The adapter contract: a compressed-embedding method as a model transformation.

An adapter takes a base transformers model and returns a model that keeps the transformers
interface (``get_input_embeddings``, ``get_output_embeddings``, ``forward``, ``tie_weights``), so
the same object goes to HF Trainer, lm-eval's HFLM and an MTEB encoder, plus a
:class:`CompressionReport`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import torch
from torch import nn

from harness.results.records import CompressionReport, EmbeddingFootprint

ProgressFn = Callable[[str, int, int], None]
"""``progress(label, done, total)``: how an adapter reports fitting progress."""


def no_progress(label: str, done: int, total: int) -> None:
    """The default ProgressFn: report nothing."""
    return None


@dataclass(frozen=True)
class FitContext:
    """What the runner hands an adapter for fitting: the seed, the device and a progress callback.

    Methods that need fitting data (contextual vectors, distillation text) get it here, never from
    a hard-coded path.
    """

    seed: int = 0
    device: str = "cpu"
    threads: int = 0  # 0 = library default
    progress: ProgressFn = field(default=no_progress, compare=False)


def _embedding_modules(model: nn.Module) -> list[nn.Module]:
    modules = [model.get_input_embeddings()]
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if out is not None:
        modules.append(out)
    return modules


def footprint(model: nn.Module) -> EmbeddingFootprint:
    """Count the token-embedding modules' unique parameters and stored bytes.

    Tied input/output weights count once. Storage is what ``state_dict`` holds: parameters plus
    persistent buffers (ConceptID maps, index tables, quantized tables). Position and token-type
    tables are not token embeddings and are left out.

    A module whose values are not ``nn.Parameter``s (a quantized table held in integer buffers)
    reports their number with a method ``stored_values() -> int``; it is counted instead of that
    module's parameters, in the embedding and in the total parameters, once even when shared.
    """
    params = _param_counts(_embedding_modules(model))
    stored: dict[int, int] = {}
    for module in _embedding_modules(model):
        for t in module.state_dict().values():
            stored[t.data_ptr()] = t.numel() * t.element_size()
    total = sum(_param_counts([model]).values())
    return EmbeddingFootprint(sum(params.values()), sum(stored.values()), total)


def _param_counts(roots: list[nn.Module]) -> dict[int, int]:
    """id of a parameter or a ``stored_values()`` module -> its count, over ``roots`` and their children."""
    counts: dict[int, int] = {}
    covered: set[int] = set()
    for root in roots:
        for module in root.modules():
            if hasattr(module, "stored_values"):
                counts[id(module)] = module.stored_values()
                covered.update(id(p) for p in module.parameters())
    for root in roots:
        for p in root.parameters():
            if id(p) not in covered:
                counts[id(p)] = p.numel()
    return counts


def untie(model: nn.Module) -> None:
    """Stop ``tie_weights()`` from copying the input table onto a replaced or kept output head."""
    model.config.tie_word_embeddings = False
    text_config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else None
    if text_config is not None:
        text_config.tie_word_embeddings = False


def replace_tables(
    model: nn.Module,
    fit_table: Callable[[torch.Tensor], nn.Module],
    make_head: Callable[[nn.Module, torch.Tensor | None], nn.Module] | None,
    output: bool,
) -> nn.Module:
    """The common ``compress``: the input table becomes ``fit_table(table)``; a linear output head
    becomes ``make_head(fitted, bias)`` when ``output`` and ``make_head`` are given, reusing the
    input's fitted module when the head is tied to it (the tie is preserved) and fitting its own
    table otherwise. Any head is untied afterwards, so ``tie_weights()`` leaves it as it is."""
    table = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    fitted = fit_table(table)
    model.set_input_embeddings(fitted)
    if head is None:
        return model
    if output and make_head is not None and isinstance(head, nn.Linear):
        head_fitted = fitted if head.weight is table else fit_table(head.weight)
        model.set_output_embeddings(make_head(head_fitted, head.bias))
    untie(model)
    return model


class Adapter(ABC):
    """A compressed-embedding method.

    Subclasses set ``name`` and ``config_class`` (a frozen dataclass validated in
    ``__post_init__``) and implement :meth:`compress`.

    Contract of ``compress(model, fit)``: replace the model's token-embedding modules in place and
    return the model. Afterwards ``get_input_embeddings()(ids)`` still maps ``(B, T)`` ids to
    ``(B, T, D)`` vectors, ``forward`` keeps its signature, ``get_output_embeddings()`` (if the
    model had one) maps ``(..., D)`` hidden states to ``(..., V)`` logits, and ``tie_weights()``
    does not undo the change. Fixed id maps must be persistent buffers so that storage counts them.

    Example: ASG with k=4, m=2 on a 10x8 table replaces ``nn.Embedding(10, 8)`` with a module
    holding a (2*4, 4) codebook parameter and a (10, 2) uint8 ConceptID buffer: embedding params
    go from 80 to 32 and storage from 320 bytes to 128 + 20.
    """

    name: ClassVar[str]
    config_class: ClassVar[type]

    def __init__(self, config: Any | None = None):
        self.config = config if config is not None else self.config_class()

    def check(self, vocab_size: int, hidden_size: int) -> None:
        """Validate the config against the model's table shape before any work (raise ConfigError)."""

    @abstractmethod
    def compress(self, model: nn.Module, fit: FitContext) -> nn.Module:
        """Replace the embedding modules of ``model`` (see the class docstring)."""

    def apply(self, model: nn.Module, fit: FitContext) -> tuple[nn.Module, CompressionReport]:
        before = footprint(model)
        model = self.compress(model, fit)
        return model, CompressionReport.between(before, footprint(model))
