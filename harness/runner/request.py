"""A run request as typed on the command line, and what can be checked of it from metadata alone.

The CLI refuses a bad request before it imports torch and the models' libraries (names and settings:
:mod:`harness.registry`); from here, a seed out of range, a model name that is neither packaged, a
directory nor (online) a hub id, and data files missing for a request planned before. What a plan
read and made is remembered per request in ``$HARNESS_CACHE_DIR/planned_data.json`` while the
adapter's and the suite's code is unchanged (the registry's stamp): the data sources, and the run
spec, which :func:`planned_spec` gives back with what can change under unchanged code read afresh
(``harness list matrix`` plans its entries so, without torch). The plan (:mod:`harness.runner.plan`)
checks all of it again, and the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from harness import cachefile
from harness.errors import ConfigError, UnknownNameError, did_you_mean
from harness.registry import ADAPTERS, SUITES
from harness.sources import corpora, models
from harness.sources.data import DataSource, data_root, hub_offline, revisions

if TYPE_CHECKING:
    from harness.results.records import RunOutcome, RunSpec
    from harness.results.store import Store

SEED_MAX = 2**31 - 1
"""The largest seed: the store's ``seed`` column is a 32-bit integer (numpy's legacy seeding takes < 2**32)."""

REMEMBERED = 512
"""Requests whose data sources are remembered; the oldest is dropped first."""


@dataclass(frozen=True)
class RunRequest:
    """What the user asked for, as typed on the command line."""

    suite: str
    adapter: str
    model: str | None = None
    profile: str = "quick"
    seed: int = 0
    settings: tuple[str, ...] = ()
    data_dir: str | None = None
    device: str = "auto"
    force: bool = False
    recover: int = 0             # recovery training steps after the adapter's fit (harness.runner.stages.recover); 0 = off
    recover_lora: bool = False   # recovery also trains LoRA on the top layers
    pretrain: int | None = None  # masked-LM steps of a small encoder from scratch with the method's table (harness.runner.stages.pretrain); 0 = not pretrained; None = off
    dtype: str = "float32"       # the precision the model loads in (harness.sources.models.DTYPES)
    trust_remote_code: bool = False  # run code shipped with the model (config auto_map); never asked on stdin


def check_seed(seed: int, option: str = "--seed") -> None:
    """A seed the whole run can use: numpy's legacy seeding (``transformers.set_seed``) takes 0 to
    2**32 - 1 and the store's ``seed`` column is a 32-bit integer."""
    if not 0 <= seed <= SEED_MAX:
        raise ConfigError(f"{option} {seed} is out of range: a seed is a whole number from 0 to {SEED_MAX}, e.g. {option} 0")


def describe_model(request: RunRequest, name: str) -> models.ModelRef:
    """The model from its metadata (nothing converted); an unknown name close to a packaged alias
    (``MiniLM``) says which it may mean."""
    try:
        return models.describe(name, request.dtype, request.trust_remote_code)
    except UnknownNameError as err:
        hint = did_you_mean(name, models.PACKAGED)
        if not hint:
            raise
        raise UnknownNameError(f"{err}; {hint.strip()}") from None


def check_model_name(request: RunRequest) -> None:
    """Refuse a ``--model`` that names no packaged model and no directory where no hub can be asked
    (offline, or not owner/name), without reading any model's metadata."""
    name = request.model
    if name is None or name in models.PACKAGED or Path(name).expanduser().is_dir():
        return
    if hub_offline() or "/" not in name:
        describe_model(request, name)


def remember_data(request: RunRequest, sources: Iterable[DataSource], fit_sources: Iterable[DataSource]) -> None:
    """Remember the data sources the plan of ``request`` reads: its suite's and its fit corpora's."""
    _remember(request, {"sources": _listed(sources), "fit_sources": _listed(fit_sources)})


def remember_spec(request: RunRequest, spec: RunSpec, default_model: str | tuple[str, ...]) -> None:
    """Remember the spec the plan of ``request`` made (the suite's ``default_model`` names the model
    when the request does not), for :func:`planned_spec`."""
    _remember(request, {"default_model": default_model, "spec": json.loads(json.dumps(asdict(spec), default=str))})


def planned_spec(request: RunRequest) -> RunSpec | None:
    """The spec the plan of ``request`` makes, without planning: the spec its last plan under the code
    installed now made, with the request's seed and the code fingerprint (which also counts files
    beside the code) put in; None where no such plan is remembered, or where the model's revision
    or a data file's sha256 differs from what that plan read (the plan then decides)."""
    from harness.results.fingerprint import code_fingerprint
    from harness.results.records import RunSpec

    entry = _entry(request)
    if entry is None or "spec" not in entry:
        return None
    spec = entry["spec"]
    ref = describe_model(request, request.model or models.preferred(entry["default_model"]))
    if (ref.name, ref.revision) != (spec["model"], spec["model_revision"]):
        return None
    data_dir = data_root(request.data_dir)
    read = [(spec["data"], _sources(entry["sources"])), (spec["fit_data"], _sources(entry["fit_sources"]))]
    read += [(stage["data"], [corpora.source(name) for name in stage["corpora"]])  # recovery's and pretraining's corpora
             for stage in spec["recipe"].values() if isinstance(stage, dict) and {"corpora", "data"} <= stage.keys()]
    if any(revisions(data_dir, sources) != data for data, sources in read):
        return None
    return RunSpec(**{**spec, "seed": request.seed, "code": code_fingerprint(request.adapter, request.suite)})


def stored_outcomes(request: RunRequest, store: Store) -> list[RunOutcome] | None:
    """The runs of ``request`` (baseline, then method) reused from ``store`` without planning, by the
    spec :func:`planned_spec` gives; None where that spec is unknown, a run is not stored, or
    ``--force`` asks for a new one (the runner then plans, and makes what is missing)."""
    from harness.results.records import RunOutcome

    spec = None if request.force else planned_spec(request)
    if spec is None:
        return None
    store.check_writable()  # a damaged store, or one of another schema, is refused as the runner refuses it
    found = [store.find_finished(s) for s in [spec.baseline(), *([spec] if spec.adapter != "none" else [])]]
    if None in found:
        return None
    return [RunOutcome(record, reused=True, stored=True) for record in found]


def check_data(request: RunRequest) -> None:
    """Raise the plan's DataError for files missing under the request's data directory, where the
    request was planned before with the code installed now; otherwise leave it to the plan."""
    entry = _entry(request)
    if entry is not None:
        revisions(data_root(request.data_dir), [*_sources(entry["sources"]), *_sources(entry["fit_sources"])])


_held: dict[str, Any] | None = None
"""What is remembered, read once and kept in memory inside :func:`remembering`."""


@contextlib.contextmanager
def remembering() -> Iterator[None]:
    """Plans made inside remember what they read and made in memory, and the cache file is written
    once at the end, where it changed (``harness list matrix`` plans many requests: one write, not two a plan).
    A block inside another leaves the writing to the outer one."""
    global _held
    if _held is not None:
        yield
        return
    _held = before = _known()
    try:
        yield
    finally:
        held, _held = _held, None
        if held is not before:
            cachefile.write(_cache(), held)


def _known() -> dict[str, Any]:
    if _held is not None:
        return _held
    known = cachefile.read(_cache())
    return known if isinstance(known, dict) else {}


def _entry(request: RunRequest) -> dict[str, Any] | None:
    """What the last plan of ``request`` remembered, if it planned under the code installed now."""
    entry = _known().get(_key(request))
    valid = isinstance(entry, dict) and entry.get("stamp") == _stamp(request) and "fit_sources" in entry
    return entry if valid else None


def _remember(request: RunRequest, part: dict[str, Any]) -> None:
    """Add ``part`` to what is remembered of ``request`` (a new entry under other code); written only when it
    changes, and inside :func:`remembering` at the block's end."""
    global _held
    known, key, stamp = _known(), _key(request), _stamp(request)
    entry = known.get(key) if isinstance(known.get(key), dict) and known[key].get("stamp") == stamp else {"stamp": stamp}
    if {**entry, **part} != known.get(key):
        kept = [(k, v) for k, v in known.items() if k != key][-(REMEMBERED - 1):]
        changed = dict([*kept, (key, {**entry, **part})])
        if _held is None:
            cachefile.write(_cache(), changed)
        else:
            _held = changed


def _listed(sources: Iterable[DataSource]) -> list[list]:
    return [[list(s.files), s.hub_id, s.where_from] for s in sources]


def _sources(listed: list[list]) -> list[DataSource]:
    return [DataSource(tuple(files), hub_id, where_from) for files, hub_id, where_from in listed]


def _cache() -> Path:
    return models.cache_dir() / "planned_data.json"


def _key(request: RunRequest) -> str:
    """The request without what leaves its data sources alone (seed, data directory, device, --force)."""
    fields = {k: v for k, v in asdict(request).items() if k not in ("seed", "data_dir", "device", "force")}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def _stamp(request: RunRequest) -> str:
    return f"{ADAPTERS.stamp(request.adapter)}:{SUITES.stamp(request.suite)}"
