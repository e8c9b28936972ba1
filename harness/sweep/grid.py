"""A sweep as data: adapters x setting grids x suites x models x seeds, expanded into run requests.

From a YAML file::

    suites: [xnli]                 # or suite: xnli
    models: [minilm]               # optional; default: each suite's default model
    profile: smoke                 # default quick
    seeds: [0, 1]                  # default [0]
    set: {train: en}               # settings for every point (optional)
    adapters:
      - adapter: asg
        grid: {k: [64, 256, 1024]}   # the cartesian product of the lists
        set: {m: 48}                 # fixed settings of this adapter (optional)
      - adapter: sg
        grid: {fraction: [0.1, 0.4]}

or from the command line: ``--adapter asg --grid k=64,256,1024 --suite xnli,wikiann --seeds 0,1``.
``recover`` and ``recover_lora`` (grid or set) are the run's recovery training options
(``--grid recover=0,100,500`` gives a curve over steps), not adapter settings.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.runner.plan import RunRequest
from harness.sidefiles import read_text


@dataclass(frozen=True)
class AdapterGrid:
    """One adapter, the values to sweep per setting, and fixed settings."""

    adapter: str
    grid: tuple[tuple[str, tuple[str, ...]], ...] = ()
    settings: tuple[str, ...] = ()

    def settings_product(self) -> list[tuple[str, ...]]:
        keys = [k for k, _ in self.grid]
        return [
            (*self.settings, *(f"{k}={v}" for k, v in zip(keys, values)))
            for values in itertools.product(*(vs for _, vs in self.grid))
        ]


@dataclass(frozen=True)
class Sweep:
    adapters: tuple[AdapterGrid, ...]
    suites: tuple[str, ...]
    models: tuple[str | None, ...] = (None,)
    seeds: tuple[int, ...] = (0,)
    profile: str = "quick"
    settings: tuple[str, ...] = ()   # suite (or adapter) settings for every point
    data_dir: str | None = None
    device: str = "auto"

    def points(self) -> list[RunRequest]:
        """Every run request, model-major, then suite, seed, adapter and grid order."""
        return [
            RunRequest(suite, grid.adapter, model, self.profile, seed, settings, self.data_dir, self.device,
                       recover=steps, recover_lora=lora)
            for model in self.models
            for suite in self.suites
            for seed in self.seeds
            for grid in self.adapters
            for settings, steps, lora in (run_options((*self.settings, *values)) for values in grid.settings_product())
        ]


RUN_KEYS = ("recover", "recover_lora")
"""Grid and ``set`` keys that are options of the run, not settings of the adapter or suite:
``recover=0,100,500`` sweeps recovery training steps (``harness run --recover``)."""


def run_options(settings: tuple[str, ...]) -> tuple[tuple[str, ...], int, bool]:
    """``settings`` without :data:`RUN_KEYS`, and the recovery steps and LoRA flag they set."""
    options = dict(s.partition("=")[::2] for s in settings if s.partition("=")[0] in RUN_KEYS)
    rest = tuple(s for s in settings if s.partition("=")[0] not in RUN_KEYS)
    steps, lora = options.get("recover", "0"), options.get("recover_lora", "false").lower()
    if not (steps.isascii() and steps.isdigit()):  # str.isdigit() also takes '²', which int() refuses
        raise ConfigError(f"recover={steps} is not a number of steps; write e.g. --grid recover=0,100,500")
    if lora not in ("true", "false"):
        raise ConfigError(f"recover_lora={lora} must be true or false")
    return rest, int(steps), lora == "true"


def _csv(text: str, what: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in text.split(","))
    if not all(items):
        raise ConfigError(f"{what} '{text}' has an empty item; write a comma-separated list such as k=64,256")
    return items


def _seeds(values: Any, where: str) -> tuple[int, ...]:
    items = values if isinstance(values, list) else [values]
    try:
        return tuple(int(str(v)) for v in items)
    except ValueError:
        raise ConfigError(f"{where}: seeds {values!r} are not integers; write e.g. seeds: [0, 1]") from None


def parse_grid(items: list[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``["k=64,256", "m=24,48"]`` -> ``(("k", ("64", "256")), ("m", ("24", "48")))``."""
    out = []
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--grid {item!r} is not key=v1,v2,...; write it as e.g. --grid k=64,256,1024")
        out.append((key.strip(), _csv(values, f"--grid {key.strip()}")))
    keys = [k for k, _ in out]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"--grid names a setting twice ({', '.join(keys)}); give each key once")
    return tuple(out)


def from_options(
    adapter: str, grid: list[str], suites: str, models: str | None, seeds: str, profile: str,
    settings: list[str], data_dir: str | None, device: str,
) -> Sweep:
    return Sweep(
        (AdapterGrid(adapter, parse_grid(grid)),), _csv(suites, "--suite"),
        _csv(models, "--model") if models else (None,), _seeds(list(_csv(seeds, "--seeds")), "--seeds"),
        profile, tuple(settings), data_dir, device,
    )


_TOP_KEYS = {"suites", "suite", "models", "model", "profile", "seeds", "seed", "set", "adapters"}
_ADAPTER_KEYS = {"adapter", "grid", "set"}


def _assignments(mapping: Any, where: str) -> tuple[str, ...]:
    if mapping is None:
        return ()
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where} must be a mapping of setting: value; write e.g. set: {{m: 48}}")
    return tuple(f"{k}={_scalar(v, f'{where}.{k}')}" for k, v in mapping.items())


def _scalar(value: Any, where: str) -> str:
    if isinstance(value, (dict, list)) or value is None:
        raise ConfigError(f"{where} must be a single value, got {value!r}")
    return str(value).lower() if isinstance(value, bool) else str(value)


def _names(doc: dict, plural: str, singular: str, path: Path, required: bool) -> tuple:
    value = doc.get(plural, doc.get(singular))
    if value is None:
        if required:
            raise ConfigError(f"{path}: no '{plural}'; list at least one, e.g. {plural}: [xnli]")
        return (None,)
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) and v for v in items):
        raise ConfigError(f"{path}: '{plural}' must be a name or a list of names, got {value!r}")
    return tuple(items)


def _adapter_grid(entry: Any, index: int, path: Path) -> AdapterGrid:
    where = f"{path}: adapters[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("adapter"), str):
        raise ConfigError(f"{where} must be a mapping with an 'adapter' name; write e.g. - adapter: asg")
    unknown = set(entry) - _ADAPTER_KEYS
    if unknown:
        raise ConfigError(f"{where} has unknown key(s) {', '.join(sorted(map(str, unknown)))}; use adapter, grid, set")
    grid = entry.get("grid") or {}
    if not isinstance(grid, dict):
        raise ConfigError(f"{where}.grid must map each setting to a list of values; write e.g. grid: {{k: [64, 256]}}")
    axes = []
    for key, values in grid.items():
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ConfigError(f"{where}.grid.{key} is an empty list; give at least one value")
        axes.append((str(key), tuple(_scalar(v, f"{where}.grid.{key}") for v in values)))
    return AdapterGrid(entry["adapter"], tuple(axes), _assignments(entry.get("set"), f"{where}.set"))


def from_yaml(path: str | Path, data_dir: str | None = None, device: str = "auto") -> Sweep:
    """Read a sweep file (see the module docstring); every problem is a ConfigError naming the file."""
    import yaml

    path = Path(path)
    try:
        doc = yaml.safe_load(read_text(path, "sweep file", ConfigError))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path} is not valid YAML{where}; check its indentation and colons") from None
    except RecursionError:  # PyYAML's parser recurses once per level of nesting
        raise ConfigError(f"{path} nests its YAML too deeply to read; a sweep file is a mapping of lists a few levels deep") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path} must be a YAML mapping with suites, adapters, ...; see `harness sweep --help`")
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; use {', '.join(sorted(_TOP_KEYS))}")
    entries = doc.get("adapters")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: 'adapters' must be a non-empty list; write e.g. adapters: [{{adapter: asg, grid: {{k: [64]}}}}]")
    profile = doc.get("profile", "quick")
    if not isinstance(profile, str):
        raise ConfigError(f"{path}: profile must be a name (smoke, quick or paper), got {profile!r}")
    return Sweep(
        tuple(_adapter_grid(e, i, path) for i, e in enumerate(entries)),
        _names(doc, "suites", "suite", path, required=True), _names(doc, "models", "model", path, required=False),
        _seeds(doc.get("seeds", doc.get("seed", 0)), str(path)), profile, _assignments(doc.get("set"), f"{path}: set"),
        data_dir, device,
    )
