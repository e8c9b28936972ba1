"""A compressed model on disk, rebuilt without refitting and without ``trust_remote_code``.

A saved directory holds::

    config.json          the compressed model's transformers config (tie flag, vocabulary size, layers as changed)
    model.safetensors    every tensor of its state dict (shared tensors once)
    modules.safetensors  the non-persistent buffers of the modules the adapter built (derived id maps)
    harness.json         architecture, adapter name + config, the adapter's modules (below), report, details
    tokenizer files      the tokenizer the run used after the adapter (a changed one, or the base one)

Loading builds the architecture from ``config.json`` (a transformers class, or a harness class with
``from_config(config)``: :class:`~harness.sources.heads.MeanPooledClassifier`, ADE's SAT classifier)
with its parameters on the meta device, lets the adapter's *registered* class rebuild its modules
(:meth:`harness.adapter.Adapter.rebuild`), puts the saved tensors in place strictly (the file's
memory-mapped tensors themselves, not copies: a table the adapter replaced is never allocated, and
no byte of the base table is read), and freezes the parameters that were frozen when it was saved
(the rest train), so a loaded fit fine-tunes as the fresh one does.

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
from safetensors.torch import load_file, save_file, save_model
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


def _assign(model: nn.Module, path: Path) -> None:
    """Make the tensors in ``path`` the model's own (``load_state_dict(assign=True)``), every name of a
    shared tensor (a tied head, a module reached twice) getting the one tensor saved for it."""
    tensors = load_file(str(path))
    names: dict[int, list[str]] = {}
    for name, t in model.state_dict(keep_vars=True).items():
        names.setdefault(id(t), []).append(name)
    found = {n[0]: next((x for x in n if x in tensors), None) for n in names.values()}
    missing = sorted(first for first, hit in found.items() if hit is None)
    unexpected = sorted(set(tensors) - {x for n in names.values() for x in n})
    if missing or unexpected:
        raise DataError(f"{path} does not match the rebuilt model (missing {missing[:3]}, unexpected {unexpected[:3]}); export it again")
    model.load_state_dict({x: tensors[found[n[0]]] for n in names.values() for x in n}, assign=True)
    params = dict(model.named_parameters(remove_duplicate=False))
    for first, *others in (n for n in names.values() if n[0] in params):  # assign gave each name its own Parameter
        for other in others:
            owner, _, attr = other.rpartition(".")
            model.get_submodule(owner).register_parameter(attr, params[first])


def _fill_unsaved_buffers(model: nn.Module, directory: Path) -> None:
    """Compute the architecture's buffers that no checkpoint holds (position ids, rotary frequencies)
    with transformers' own initialisation, as ``from_pretrained`` does after building on the meta
    device: every loaded tensor is marked initialised, so only those buffers are written."""
    from transformers import PreTrainedModel

    for t in [*model.parameters(), *model.buffers()]:
        if not t.is_meta:
            t._is_hf_initialized = True
    for module in model.modules():
        for name, buf in module._buffers.items():
            if buf is not None and buf.is_meta:
                module._buffers[name] = torch.empty_like(buf, device="cpu")
    inner = {id(m) for outer in model.modules() if isinstance(outer, PreTrainedModel) for m in list(outer.modules())[1:]}
    for module in model.modules():
        if isinstance(module, PreTrainedModel) and id(module) not in inner:
            module.initialize_weights()
    left = [name for name, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise DataError(f"{directory} leaves {left[:3]} of the rebuilt model without values; export it again")


def load(directory: Path) -> tuple[nn.Module, Any, Saved]:
    """Rebuild the model saved in ``directory``: (model in eval mode, tokenizer, description)."""
    from transformers import AutoConfig

    from harness.registry import ADAPTERS

    directory = Path(directory)
    saved = read(directory)
    cls = ADAPTERS.get(saved.adapter)
    config = cls.config_class(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.adapter_config.items()})
    with torch.device("meta"):  # nothing of the bare architecture is allocated: the adapter's modules replace some of it
        model = skeleton(saved.architecture, AutoConfig.from_pretrained(directory)).to(getattr(torch, saved.dtype))
    model = cls.rebuild(model, saved, load_file(str(directory / DERIVED)), config)
    _assign(model, directory / WEIGHTS)
    _fill_unsaved_buffers(model, directory)
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
