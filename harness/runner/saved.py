"""A compressed model on disk, rebuilt without refitting and without ``trust_remote_code``.

A saved directory holds::

    config.json          the compressed model's transformers config (tie flag, vocabulary size, layers as changed)
    model.safetensors    every tensor of its state dict (shared tensors once)
    modules.safetensors  the non-persistent buffers of the modules the adapter built (derived id maps)
    harness.json         architecture, adapter name + config, the adapter's modules (below), report, details
    tokenizer files      the tokenizer the run used after the adapter (a changed one, or the base one)

Loading builds the architecture from ``config.json`` (a transformers class, or a harness class with
``from_config(config)``: :class:`~harness.sources.heads.MeanPooledClassifier`, ADE's SAT classifier),
lets the adapter's *registered* class rebuild its modules (:meth:`harness.adapter.Adapter.rebuild`),
loads the tensors strictly, and freezes the parameters that were frozen when it was saved (the rest
train), so a loaded fit fine-tunes as the fresh one does.

The adapter's modules are described as data by :mod:`harness.rebuild`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from harness.errors import DataError
from harness.rebuild import adapter_modules, architecture_of, skeleton

FORMAT = 1
INFO = "harness.json"
WEIGHTS = "model.safetensors"
DERIVED = "modules.safetensors"


@dataclass
class Saved:
    """What a saved directory describes, besides its tensors."""

    architecture: str                 # "transformers:LlamaForCausalLM" or "harness.sources.heads:MeanPooledClassifier"
    adapter: str
    adapter_config: dict[str, Any]
    modules: list[dict[str, Any]]     # the adapter's modules, as described in the module docstring
    report: dict[str, Any] = dataclasses.field(default_factory=dict)
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)   # run, model, spec: free-form provenance
    frozen: list[str] = dataclasses.field(default_factory=list)      # parameters that do not train (requires_grad False)
    dtype: str = "float32"
    format: int = FORMAT


def _tokenizer(directory: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory)


def save(directory: Path, model: nn.Module, tokenizer: Any, adapter: str, adapter_config: dict, report: dict | None = None,
         details: dict | None = None, meta: dict | None = None) -> Saved:
    """Write the compressed model, its tokenizer and a description of the adapter's modules to ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with torch.device("meta"):  # only its module classes are compared, so no memory is filled
        bare = skeleton(architecture_of(model), model.config)
    modules, derived = adapter_modules(model, bare)
    floats = [p.dtype for n, p in model.named_parameters() if p.is_floating_point()]
    saved = Saved(
        architecture_of(model), adapter, adapter_config, modules, report or {}, details or {}, meta or {},
        [name for name, p in model.named_parameters() if not p.requires_grad],
        str(floats[0] if floats else torch.float32).removeprefix("torch."),
    )
    model.config.save_pretrained(directory)
    save_model(model, str(directory / WEIGHTS))
    save_file(derived, str(directory / DERIVED))
    tokenizer.save_pretrained(directory)
    (directory / INFO).write_text(json.dumps(dataclasses.asdict(saved), indent=1, default=str), encoding="utf-8")
    return saved


def read(directory: Path) -> Saved:
    """The description in ``directory/harness.json`` (DataError when absent or of another format)."""
    path = Path(directory) / INFO
    if not path.is_file():
        raise DataError(f"{directory} holds no {INFO}; pass a directory written by `harness export`")
    raw = json.loads(path.read_text(encoding="utf-8"))
    if raw.get("format") != FORMAT:
        raise DataError(f"{path} has format {raw.get('format')}, this harness reads format {FORMAT}; export it again")
    return Saved(**raw)


def load(directory: Path) -> tuple[nn.Module, Any, Saved]:
    """Rebuild the model saved in ``directory``: (model in eval mode, tokenizer, description)."""
    from transformers import AutoConfig

    from harness.registry import ADAPTERS

    directory = Path(directory)
    saved = read(directory)
    cls = ADAPTERS.get(saved.adapter)
    config = cls.config_class(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.adapter_config.items()})
    model = skeleton(saved.architecture, AutoConfig.from_pretrained(directory)).to(getattr(torch, saved.dtype))
    model = cls.rebuild(model, saved, load_file(str(directory / DERIVED)), config)
    missing, unexpected = load_model(model, str(directory / WEIGHTS), strict=False)
    if missing or unexpected:
        raise DataError(f"{directory / WEIGHTS} does not match the rebuilt model (missing {sorted(missing)[:3]}, "
                        f"unexpected {sorted(unexpected)[:3]}); export it again")
    for name, p in model.named_parameters():  # what trains after the fit trains after loading
        p.requires_grad_(name not in saved.frozen)
    return model.eval(), _tokenizer(directory), saved


def checksums(directory: Path) -> dict[str, str]:
    """sha256 of every file in ``directory`` (names relative to it)."""
    out = {}
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file():
            digest = hashlib.sha256()
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            out[str(path.relative_to(directory))] = digest.hexdigest()
    return out
