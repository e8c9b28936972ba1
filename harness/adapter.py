"""The adapter contract: a compressed-embedding method as a model transformation.

An adapter takes a base transformers model and returns a model that keeps the transformers
interface (``get_input_embeddings``, ``get_output_embeddings``, ``forward``, ``tie_weights``), so
the same object goes to HF Trainer, lm-eval's HFLM and an MTEB encoder, plus a
:class:`CompressionReport`. What an adapter needs beyond the model it declares as data: its fit
corpora, whether it needs the teacher, its budget per profile and the stage at which it acts; the
runner reads those and fills a :class:`FitContext`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from harness import file_pages
from harness.budgets import Budgets
from harness.errors import ConfigError
from harness.methods.tables import input_table, replaced_input
from harness.rebuild import restore_modules
from harness.results.records import CompressionReport, EmbeddingFootprint
from harness.sources.corpora import Corpus

ProgressFn = Callable[[str, int, int], None]
"""``progress(label, done, total)``: how adapters and suites report progress."""

Stage = Literal["before_finetune", "after_finetune"]
"""When an adapter acts: on the loaded model before the suite fine-tunes it (table replacement), or
on the fine-tuned model before the suite scores it (a drop-in such as paper 004's sense dictionary).
For suites that do not fine-tune, both are the same point."""


def no_progress(label: str, done: int, total: int) -> None:
    """The default ProgressFn: report nothing."""
    return None


@dataclass(frozen=True)
class FitContext:
    """What the runner hands an adapter for fitting. Fitting data comes from here, never from a
    hard-coded path.

    ``teacher`` is a frozen copy (eval mode, no gradients) of the model as the adapter receives it
    (the unchanged model; for ``after_finetune`` adapters the fine-tuned one), built only for adapters
    that declare ``needs_teacher`` and freed after fitting. ``corpora`` holds exactly the corpora the
    adapter declared. ``budget`` is the adapter's budget for this profile (None without budgets).
    """

    profile: str = "smoke"
    seed: int = 0
    device: str = "cpu"
    workdir: Path | None = None
    tokenizer: Any = None
    corpora: Mapping[str, Corpus] = field(default_factory=dict)
    budget: Any = None
    teacher: nn.Module | None = field(default=None, compare=False)
    threads: int = 0  # 0 = library default
    progress: ProgressFn = field(default=no_progress, compare=False)

    def corpus(self, name: str) -> Corpus:
        if name not in self.corpora:
            declared = ", ".join(self.corpora) or "none"
            raise ConfigError(f"fit corpus '{name}' was not declared by the adapter (declared: {declared}); add it to corpora()")
        return self.corpora[name]


@dataclass
class Compressed:
    """What ``compress`` returns when it changes more than the model's modules."""

    model: nn.Module
    tokenizer: Any = None              # a changed tokenizer; None = unchanged. Everything after the adapter uses it
    vocab_size: int | None = None      # rows the compressed model stores or composes a vector for; None = unchanged
    freed_slots: int = 0               # vocabulary slots freed (report)
    details: dict[str, Any] = field(default_factory=dict)  # the method's facts, stored with the run


@dataclass
class Applied:
    """An adapter's result as the runner uses it."""

    model: nn.Module
    tokenizer: Any
    report: CompressionReport
    details: dict[str, Any]


class TokenStorage:
    """Marker for modules that hold per-token state outside the input/output embeddings (a sense
    dictionary after the last layer): :func:`footprint` counts them as embedding storage."""


def _embedding_modules(model: nn.Module) -> list[nn.Module]:
    modules = [model.get_input_embeddings()]
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if out is not None:
        modules.append(out)
    modules += [m for m in model.modules() if isinstance(m, TokenStorage)]
    return modules


def footprint(model: nn.Module) -> EmbeddingFootprint:
    """Count the token-embedding modules' unique parameters and stored bytes.

    Tied input/output weights count once. Storage is what ``state_dict`` holds: parameters plus
    persistent buffers (ConceptID maps, index tables, quantized tables). Position and token-type
    tables are not token embeddings and are left out; modules marked :class:`TokenStorage` (a sense
    dictionary) are counted in.

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


def recoverable(model: nn.Module, names: Sequence[str]) -> dict[str, torch.Tensor]:
    """The floating-point parameters and buffers called one of ``names`` inside the model's
    token-embedding modules, by their name in ``model`` (a tensor shared by a tied head once): what
    recovery training trains (:attr:`Adapter.recovers`)."""
    wanted: set[int] = set()
    for module in _embedding_modules(model):
        for sub in module.modules():
            own = [*sub.named_parameters(recurse=False), *sub.named_buffers(recurse=False)]
            wanted |= {id(t) for name, t in own if name in names and t.is_floating_point()}
    return {name: t for name, t in [*model.named_parameters(), *model.named_buffers()] if id(t) in wanted}


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
    adapter: str = "the adapter",
) -> nn.Module:
    """The common ``compress``: the input table becomes ``fit_table(table)`` (keeping the original
    module's scale: :func:`replaced_input`); a linear output head becomes ``make_head(fitted, bias)``
    when ``output`` and ``make_head`` are given, reusing the input's fitted module when the head is
    tied to it (the tie is preserved) and fitting its own table otherwise. Any head is untied
    afterwards, so ``tie_weights()`` leaves it as it is. An encoder-decoder's shared table is
    replaced for its encoder and decoder alike (transformers' ``set_input_embeddings``)."""
    original = model.get_input_embeddings()
    table = input_table(model)
    head = model.get_output_embeddings()
    fitted = fit_table(table)
    model.set_input_embeddings(replaced_input(original, fitted, adapter))
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
    ``__post_init__``) and implement :meth:`compress`. What else they need they declare:

    * ``budgets``: a :class:`~harness.budgets.Budgets` table of the adapter's own budget dataclass
      (fit texts, steps, lr, batch ...) per profile; the selected entry is ``fit.budget`` and part of
      the run's identity, and ``harness list adapters`` shows the table.
    * :meth:`corpora`: names of the fit corpora it reads (:mod:`harness.sources.corpora`).
    * ``needs_teacher``: a frozen copy of the model it receives arrives as ``fit.teacher``.
    * ``stage``: ``before_finetune`` (the default) or ``after_finetune``.
    * ``kinds``: the model kinds it supports (``encoder``, ``decoder``, ``encoder-decoder``; by default the
      first two: an encoder-decoder is taken only by a method that says so).
    * ``cacheable``: whether its fit can be kept in the fit cache (:mod:`harness.runner.fitcache`):
      False when nothing is fitted (``none``) or when its fitted model cannot be saved
      (:meth:`rebuild`); it is then fitted on every run, and the run's fit details say why.
    * ``recovers``: the names of the tensors of its token-embedding modules that recovery training
      (``harness run --recover STEPS``, :mod:`harness.methods.recover`) trains toward the unchanged
      model: its own new parameters (codebooks, group vectors, factors ...), found by
      :func:`recoverable`. ``no_recovery`` says why an adapter cannot take recovery (it distills
      already, or replaces the whole model); :meth:`recovery_refusal` gives the reason the plan
      refuses ``--recover`` (and ``--pretrain``) with, generic ones included.
    * ``unchanged``: True only for the baseline ``none``, the model as it is: nothing of it is
      replaced, timed beside itself or recovered (``--pretrain`` pretrains its full table).
    * ``heads``: the task heads (:class:`~harness.suite.Head` kinds) it supports, for a method that
      builds the task model itself instead of replacing tables inside it (ADE's SAT classifier);
      None, the default, is any head. The plan refuses a suite with another head before any work.
    * :meth:`word_senses`: senses of whole words, for a suite that scores words (``word_sim``);
      None, the default, for a method without senses of its own.
    * :meth:`small_settings`: the settings its conformance cases use on a small test model (a 1,000-token
      table 48 wide), where its defaults do not fit one.

    Contract of ``compress(model, fit)``: replace the model's token-embedding modules in place (or
    build a new model with the same task-facing interface) and return it, or a :class:`Compressed`
    when the tokenizer or vocabulary changes too. Afterwards ``get_input_embeddings()(ids)`` still
    maps ``(B, T)`` ids to ``(B, T, D)`` vectors, ``forward`` keeps its signature,
    ``get_output_embeddings()`` (if the model had one) maps ``(..., D)`` hidden states to
    ``(..., V)`` logits, and ``tie_weights()`` does not undo the change. Fixed id maps must be
    persistent buffers so that storage counts them.

    Example: ASG with k=4, m=2 on a 10x8 table replaces ``nn.Embedding(10, 8)`` with a module
    holding a (2*4, 4) codebook parameter and a (10, 2) uint8 ConceptID buffer: embedding params
    go from 80 to 32 and storage from 320 bytes to 128 + 20.
    """

    name: ClassVar[str]
    config_class: ClassVar[type]
    budgets: ClassVar[Budgets | None] = None
    needs_teacher: ClassVar[bool] = False
    stage: ClassVar[Stage] = "before_finetune"
    kinds: ClassVar[tuple[str, ...]] = ("encoder", "decoder")
    cacheable: ClassVar[bool] = True  # False: fitted on every run, never saved to the fit cache (see above)
    heads: ClassVar[tuple[str, ...] | None] = None
    recovers: ClassVar[tuple[str, ...]] = ()
    no_recovery: ClassVar[str | None] = None
    unchanged: ClassVar[bool] = False

    def __init__(self, config: Any | None = None):
        self.config = config if config is not None else self.config_class()

    def corpora(self) -> tuple[str, ...]:
        """Names of the fit corpora this configuration reads (``wikitext2_train``, ``c4_sample``, a hub id)."""
        return ()

    def check(self, vocab_size: int, hidden_size: int) -> None:
        """Validate the config against the model's table shape before any work (raise ConfigError)."""

    @classmethod
    def small_settings(cls, vocab_size: int, hidden_size: int) -> dict[str, str]:
        """Settings, as ``--set`` takes them, that fit a small model of ``vocab_size`` tokens and width
        ``hidden_size`` where the defaults are sized for real ones: the conformance cases
        (``tests/test_conformance.py``) build the adapter with them on a 1,000-token table 48 wide, so
        :meth:`check` passes there. The default shrinks the built-in adapters' sizes by name (``k``,
        ``m``, ``K``, ``r``, ``keep``, ``anchors``, ``layers``) where the config has them; an adapter
        with another size (a number of buckets, of rows) overrides it, e.g. ``{"buckets": "20"}``."""
        segments = max(d for d in range(1, 9) if hidden_size % d == 0)  # m must divide the width
        small = {"k": 16, "m": segments, "K": 3, "r": 8, "keep": vocab_size // 10, "anchors": 32, "layers": 1}
        names = {f.name for f in dataclasses.fields(cls.config_class)}
        return {k: str(v) for k, v in small.items() if k in names}

    @abstractmethod
    def compress(self, model: nn.Module, fit: FitContext) -> nn.Module | Compressed:
        """Replace the embedding modules of ``model`` (see the class docstring)."""

    def word_senses(self, model: nn.Module, occurrences: Callable[[nn.Module], list[np.ndarray]],
                    seed: int) -> list[np.ndarray] | None:
        """Senses of whole words (paper 004 Appendix E), or None (the default): the method has no
        senses of its own, and a suite that scores words scores their occurrences themselves.

        ``occurrences(m)`` reads every word's contextual occurrences from a model ``m``, as the suite
        reads them for every run: one ``(n_w, D)`` float32 array per word. A method with senses calls
        it on the model its senses come from (``model`` is the model as the adapter returned it;
        multisense reads it with its drop-in suspended, as paper 004 builds word senses from the
        encoder's last layer) and returns one ``(k_w, D)`` float array per word, its own number of
        senses (multisense: k-means, at most its ``k``). The suite then scores a word pair by the
        largest dot product over their senses, as it scores the baseline's occurrences."""
        return None

    @classmethod
    def recovery_refusal(cls) -> str | None:
        """Why this adapter cannot take recovery training; None when it can (it names ``recovers``).
        A method that replaced its table and left ``recovers`` out is told to declare it; "nothing of
        it was replaced" is said of the baseline alone."""
        if cls.no_recovery:
            return cls.no_recovery
        if cls.stage == "after_finetune":
            return ("it acts after the suite's fine-tuning, on the fine-tuned model; recovery heals a replaced "
                    "table before it, against the unchanged model")
        if cls.unchanged:
            return "it names no tensors to train (recovers is empty): nothing of it was replaced"
        if not cls.recovers:
            return ("its class declares no `recovers` yet, the names of the tensors in the embedding modules it builds "
                    "that recovery may train (e.g. recovers = (\"codebooks\",)); declare them (docs/plugins.md)")
        return None

    @classmethod
    def rebuild(cls, model: nn.Module, saved: Any, derived: Mapping[str, torch.Tensor], config: Any) -> nn.Module:
        """Put this adapter's modules back into ``model``, the bare architecture built from a saved
        compressed model's config (:mod:`harness.runner.saved`), with empty tensors the caller then loads.

        ``saved.modules`` describes the modules ``compress`` built (class, plain attributes, tensor
        shapes, children); ``derived`` holds their non-persistent buffers; ``config`` is the adapter
        config they were fitted with. The default rebuilds them from that description, importing
        classes only from torch, transformers, the harness and this adapter's own package, and calls
        ``reattach(model)`` on each module that defines it (a forward hook). An adapter whose modules
        hold state that is not a tensor or a plain value overrides this."""
        allowed = ("torch", "transformers", "harness", cls.__module__.split(".")[0])
        return restore_modules(model, saved.modules, dict(derived), allowed)

    def apply(self, model: nn.Module, fit: FitContext) -> Applied:
        """``compress`` plus the compression report (:func:`applied`)."""
        return applied(model, fit, self.compress)


def applied(model: nn.Module, fit: FitContext, compress: Callable[[nn.Module, FitContext], nn.Module | Compressed]) -> Applied:
    """``compress(model, fit)`` plus the compression report (parameters and bytes counted before and
    after). The pages of a table ``compress`` replaced are handed back (:mod:`harness.file_pages`), so the
    process's resident memory falls by what the report says was removed."""
    before = footprint(model)
    vocab_before = getattr(model.get_input_embeddings(), "num_embeddings", None)
    tables = [getattr(m, "weight", None) for m in (model.get_input_embeddings(), model.get_output_embeddings())]
    out = compress(model, fit)
    if not isinstance(out, Compressed):
        out = Compressed(out)
    file_pages.release_replaced([t for t in tables if isinstance(t, torch.Tensor)], out.model)
    tokenizer = out.tokenizer if out.tokenizer is not None else fit.tokenizer
    vocab_after = out.vocab_size if out.vocab_size is not None else vocab_before
    report = CompressionReport.between(before, footprint(out.model), vocab_before, vocab_after, out.freed_slots)
    return Applied(out.model, tokenizer, report, out.details)
