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


def _coerce(name: str, raw: str, hint: Any) -> Any:
    origin = get_origin(hint)
    optional = [a for a in get_args(hint) if a is not type(None)] if type(None) in get_args(hint) else []
    if len(optional) == 1:  # ``int | None``: "none" gives None, anything else parses as the other type
        return None if raw.lower() == "none" else _coerce(name, raw, optional[0])
    if origin is Literal:
        choices = get_args(hint)
        if raw not in choices:
            raise ConfigError(f"--set {name}={raw} is not one of {', '.join(map(str, choices))}")
        return raw
    if hint is bool:
        low = raw.lower()
        if low in _TRUE | _FALSE:
            return low in _TRUE
        raise ConfigError(f"--set {name}={raw} is not a boolean; use true or false")
    if hint in (int, float):
        try:
            value = hint(raw)
        except ValueError:
            raise ConfigError(f"--set {name}={raw} is not {'an integer' if hint is int else 'a number'}") from None
        if hint is float and not math.isfinite(value):  # float() reads nan, inf and 1e309; no setting means them
            raise ConfigError(f"--set {name}={raw} is not a finite number")
        return value
    if hint is str:
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
        kwargs[key] = _coerce(key, raw, fields[key])
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
