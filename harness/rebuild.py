"""An adapter's modules as data: described when a compressed model is saved, rebuilt when it is loaded.

Every module of the compressed model whose class differs from the bare architecture's at the same
path (or that the architecture lacks) is recorded with its class (``package.module:Qualname``), its
plain attributes (numbers, strings, dtypes), the names, shapes and dtypes of its parameters and
buffers, and its children (nested descriptions, or the path of a module seen earlier, so an output
head that shares its input side's codebooks shares them again). Classes are imported only from
torch, transformers, the harness and the registered adapter's own package.

A contract module: it imports nothing of the harness but its errors, so :class:`harness.adapter.Adapter`
rebuilds through it without reaching the runner (:mod:`harness.runner.saved` writes the folder).
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from torch import nn

from harness.errors import ConfigError, DataError

_SCALARS = (bool, int, float, str, type(None))


def _class_path(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


def _import_class(path: str, allowed: tuple[str, ...]) -> type:
    module, _, qualname = path.partition(":")
    if not module.split(".")[0] in allowed:
        raise DataError(f"saved model names class {path}, outside {', '.join(allowed)}; it is not loaded (no remote code)")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _encode(value: Any) -> Any:
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"dtype"}:
        return getattr(torch, value["dtype"])
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


def _plain(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return isinstance(value, (*_SCALARS, torch.dtype))


def _tensor_spec(t: torch.Tensor) -> dict[str, Any]:
    return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}


def describe(module: nn.Module, path: str, seen: dict[int, str], derived: dict[str, torch.Tensor]) -> dict[str, Any]:
    """One module as data (see the module docstring); its non-persistent buffers go into ``derived``."""
    seen[id(module)] = path
    attrs = {}
    for key, value in vars(module).items():
        if key.startswith("_"):  # torch's own bookkeeping (hooks, parameter dicts)
            continue
        if not _plain(value):
            raise ConfigError(
                f"{_class_path(module)} at '{path}' holds attribute '{key}' of type {type(value).__name__}, which cannot be saved "
                "as data; give the adapter a rebuild() classmethod"
            )
        attrs[key] = _encode(value)
    buffers = {}
    for name, buf in module._buffers.items():
        if buf is None:
            continue
        persistent = name not in module._non_persistent_buffers_set
        buffers[name] = {**_tensor_spec(buf), "persistent": persistent}
        if not persistent:
            derived[f"{path}.{name}" if path else name] = buf.detach().contiguous().cpu()
    children: dict[str, Any] = {}
    for name, child in module._modules.items():
        child_path = f"{path}.{name}" if path else name
        if child is None:
            children[name] = None
        elif id(child) in seen:
            children[name] = {"ref": seen[id(child)]}
        else:
            children[name] = describe(child, child_path, seen, derived)
    params = {name: _tensor_spec(p) for name, p in module._parameters.items() if p is not None}
    nulls = [name for name, p in module._parameters.items() if p is None]
    return {"class": _class_path(module), "attrs": attrs, "params": params, "null_params": nulls, "buffers": buffers, "children": children}


def construct(spec: dict[str, Any], path: str, root: nn.Module, allowed: tuple[str, ...]) -> nn.Module:
    """Build a module from its description with empty tensors of the recorded shapes (values are
    loaded afterwards); references resolve against ``root``, where earlier modules already sit."""
    cls = _import_class(spec["class"], allowed)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise DataError(f"saved model names {spec['class']}, which is not a torch module")
    module = cls.__new__(cls)
    nn.Module.__init__(module)
    for key, value in spec["attrs"].items():
        setattr(module, key, _decode(value))
    for name, t in spec["params"].items():
        module.register_parameter(name, nn.Parameter(torch.empty(t["shape"], dtype=getattr(torch, t["dtype"])), requires_grad=False))
    for name in spec["null_params"]:
        module.register_parameter(name, None)
    for name, t in spec["buffers"].items():
        module.register_buffer(name, torch.empty(t["shape"], dtype=getattr(torch, t["dtype"])), persistent=t["persistent"])
    for name, child in spec["children"].items():
        child_path = f"{path}.{name}" if path else name
        if child is None:
            module._modules[name] = None
        elif "ref" in child:
            module._modules[name] = root.get_submodule(child["ref"])
        else:
            module._modules[name] = construct(child, child_path, root, allowed)
    return module


def _set_submodule(root: nn.Module, path: str, module: nn.Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, module)


def adapter_modules(model: nn.Module, skeleton: nn.Module) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """The modules of ``model`` that ``skeleton`` (the bare architecture) does not have at the same
    path with the same class, described outermost first (a module met again at another path is a
    reference to the first); plus their non-persistent buffers."""
    plain = {path: type(m) for path, m in skeleton.named_modules()}
    seen: dict[int, str] = {}
    out: list[dict[str, Any]] = []
    derived: dict[str, torch.Tensor] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        if any(path.startswith(d["path"] + ".") for d in out):
            continue
        if id(module) in seen:
            if seen[id(module)] != path and plain.get(path) is not type(module):
                out.append({"path": path, "ref": seen[id(module)]})
            continue
        if plain.get(path) is type(module):
            seen[id(module)] = path
            continue
        out.append({"path": path, **describe(module, path, seen, derived)})
    return out, derived


def restore_modules(model: nn.Module, modules: list[dict[str, Any]], derived: dict[str, torch.Tensor], allowed: tuple[str, ...]) -> nn.Module:
    """Put the described modules into ``model`` (built from the saved config), outermost first, set
    their non-persistent buffers, and let each that defines ``reattach(model)`` reinstall what is not
    a module (a forward hook)."""
    for spec in modules:
        if "ref" in spec:
            _set_submodule(model, spec["path"], model.get_submodule(spec["ref"]))
        else:
            _set_submodule(model, spec["path"], construct(spec, spec["path"], model, allowed))
    for key, value in derived.items():
        owner, _, name = key.rpartition(".")
        getattr(model.get_submodule(owner), "_buffers")[name] = value
    for spec in modules:
        for module in model.get_submodule(spec["path"]).modules():
            if hasattr(module, "reattach"):
                module.reattach(model)
    return model


def architecture_of(model: nn.Module) -> str:
    """Where the model's class lives: a transformers class by name, or a harness class by path."""
    cls = type(model)
    if cls.__module__.startswith("transformers."):
        return f"transformers:{cls.__name__}"
    return _class_path(cls)


def skeleton(architecture: str, config: Any) -> nn.Module:
    """The bare architecture from a config, random weights (what the adapter's modules replace)."""
    module, _, name = architecture.partition(":")
    if module == "transformers":
        import transformers

        return getattr(transformers, name)(config)
    cls = _import_class(architecture, ("harness",))
    if not hasattr(cls, "from_config"):
        raise ConfigError(f"{architecture} has no from_config(config), so a saved copy cannot be rebuilt; give it one "
                          "(adapters/ade.py has an example), or declare the adapter cacheable = False")
    return cls.from_config(config)
