"""Typed, frozen configs built from ``--set key=value`` strings.

An override must name a known field and parse as that field's type (nanoGPT's one good check);
validation itself lives in each config's ``__post_init__`` and does no I/O.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Literal, get_args, get_origin

from harness.errors import ConfigError, did_you_mean

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def parse_assignments(pairs: list[str]) -> dict[str, str]:
    """``["k=1024", "m=48"]`` -> ``{"k": "1024", "m": "48"}``; malformed items raise ConfigError."""
    out: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {item!r} is not key=value; write it as e.g. --set k=1024")
        if key in out:
            raise ConfigError(f"--set {key} is given twice; keep one")
        out[key] = value.strip()
    return out


def route_settings(pairs: dict[str, str], adapter_keys: list[str], suite_keys: list[str], adapter: str,
                   suite: str) -> tuple[dict[str, str], dict[str, str]]:
    """Route each ``--set`` key to the adapter's or the suite's settings (an ``adapter.`` or ``suite.``
    prefix picks one; a bare key goes to whichever has it, the adapter first); a key neither has raises
    ConfigError naming the valid keys."""
    to_adapter, to_suite = {}, {}
    for key, value in pairs.items():
        scope, _, bare = key.rpartition(".")
        if scope == "adapter" or (not scope and bare in adapter_keys):
            to_adapter[bare] = value
        elif scope == "suite" or (not scope and bare in suite_keys):
            to_suite[bare] = value
        else:
            valid = ", ".join([*adapter_keys, *suite_keys]) or "none"
            hint = did_you_mean(bare, [*adapter_keys, *suite_keys])
            raise ConfigError(f"--set {key} is not a setting of adapter '{adapter}' or suite '{suite}'; {hint}valid keys: {valid}")
    return to_adapter, to_suite


def setting_type(hint: Any) -> dict[str, Any]:
    """A field's type annotation as the JSON-able form :func:`coerce` reads (and the registry caches, so
    a bad value is refused without importing the config's class): ``{"type": "int"}``, ``"float"``,
    ``"bool"`` or ``"str"``; ``{"choices": [...]}`` for a Literal; ``"optional": true`` for ``X | None``;
    ``{"type": None}`` for a type the command line cannot give."""
    args = get_args(hint)
    others = [a for a in args if a is not type(None)]
    if type(None) in args and len(others) == 1:
        return {**setting_type(others[0]), "optional": True}
    if get_origin(hint) is Literal:
        return {"choices": list(args)}
    return {"type": next((name for name, t in _SCALARS.items() if hint is t), None)}


_SCALARS = {"int": int, "float": float, "bool": bool, "str": str}


def coerce(name: str, raw: str, kind: dict[str, Any]) -> Any:
    """``--set name=raw`` parsed as the setting's type (:func:`setting_type`); a value it cannot be is a ConfigError."""
    if kind.get("optional"):  # ``int | None``: "none" gives None, anything else parses as the other type
        return None if raw.lower() == "none" else coerce(name, raw, {**kind, "optional": False})
    if "choices" in kind:
        if raw not in kind["choices"]:
            raise ConfigError(f"--set {name}={raw} is not one of {', '.join(map(str, kind['choices']))}")
        return raw
    scalar = kind.get("type")
    if scalar == "bool":
        low = raw.lower()
        if low in _TRUE | _FALSE:
            return low in _TRUE
        raise ConfigError(f"--set {name}={raw} is not a boolean; use true or false")
    if scalar in ("int", "float"):
        try:
            value = _SCALARS[scalar](raw)
        except ValueError:
            raise ConfigError(f"--set {name}={raw} is not {'an integer' if scalar == 'int' else 'a number'}") from None
        if scalar == "float" and not math.isfinite(value):  # float() reads nan, inf and 1e309; no setting means them
            raise ConfigError(f"--set {name}={raw} is not a finite number")
        return value
    if scalar == "str":
        return raw
    raise ConfigError(f"--set {name} cannot be set from the command line")


def config_fields(cls: type) -> dict[str, Any]:
    """Field name -> resolved type annotation of a config dataclass."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def build_config(cls: type, values: dict[str, str], owner: str) -> Any:
    """Instantiate config dataclass ``cls`` from string overrides; unknown keys raise ConfigError."""
    fields = config_fields(cls)
    kwargs = {}
    for key, raw in values.items():
        if key not in fields:
            valid = ", ".join(fields) or "none"
            raise ConfigError(f"--set {key} is not a setting of {owner}; {did_you_mean(key, fields)}valid keys: {valid}")
        kwargs[key] = coerce(key, raw, setting_type(fields[key]))
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{owner}: {err}") from None


def as_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def require_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{name}={value} must be a positive integer")
