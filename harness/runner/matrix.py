"""The committed store's reference matrix: which `harness run` commands make it, and
which of them a store holds current.

The matrix is data, ``matrix.txt`` beside this module (read by ``harness list matrix`` and ``make
reference``): one entry per line, ``suite model adapter [key=value | --option=value] ...``, in
``## section``s. Each entry is planned as ``harness run`` would plan it (quick profile, seed 0;
:func:`harness.runner.plan.plan`, or the spec its last plan under the same code made:
:func:`harness.runner.request.planned_spec`), so its run spec, the code fingerprint included, is
exactly the one a run would store. Against a store an entry, and each distinct baseline the entries share, is

* ``current``: a finished run with the same config hash (``harness run`` would reuse it);
* ``stale``: a finished run of the same configuration made by other code, data or budget (kept in
  the store, never reused);
* ``missing``: none.

An entry is to do when it or its baseline is not current; ``make reference`` runs those, one entry
at a time, so a stopped re-make goes on with what is still to do. The minutes beside each entry are
the wall time its newest stored run of the same configuration took (current or stale), else that of
the newest run of the same adapter, suite, model and recovery training, else its baseline's (both
marked ``~``), else unknown.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.errors import ConfigError, HarnessError
from harness.results import queries
from harness.results.records import RunSpec
from harness.results.store import Store
from harness.runner.request import RunRequest, planned_spec, remembering
from harness.sidefiles import read_text

MATRIX = Path(__file__).with_name("matrix.txt")
PROFILE, SEED = "quick", 0
CURRENT, STALE, MISSING = "current", "stale", "missing"
BASELINES = "baselines (one per suite, model and settings; run with their entries)"
COLUMNS = ["section", "entry", "status", "run_id", "minutes", "estimate", "todo", "note"]


FIXED = {"suite", "adapter", "model", "profile", "seed", "settings", "data_dir", "device", "force"}  # what a line cannot set
OPTIONS = {f.name: f.default for f in dataclasses.fields(RunRequest) if f.name not in FIXED}  # run options: --recover=100, --recover-lora


@dataclass(frozen=True)
class Entry:
    """One line of the matrix: a ``harness run`` without its profile, seed and database."""

    section: str
    line: str                      # as written, without the note
    note: str
    suite: str
    model: str
    adapter: str
    settings: tuple[str, ...] = ()  # key=value, given to ``--set``
    options: tuple[tuple[str, object], ...] = ()  # run options (:class:`RunRequest` fields): (("recover", 100),)

    @property
    def recover(self) -> int:
        return int(dict(self.options).get("recover", 0))

    def request(self, profile: str = PROFILE) -> RunRequest:
        return RunRequest(self.suite, self.adapter, self.model, profile, SEED, self.settings, **dict(self.options))


def _option(word: str, where: str) -> tuple[str, object]:
    """``--recover=100`` -> ("recover", 100), ``--recover-lora`` -> ("recover_lora", True): a field of
    :class:`RunRequest` other than those the matrix fixes, its value read as the field's default's type."""
    name, _, value = word[2:].partition("=")
    field = name.replace("-", "_")
    if field not in OPTIONS:
        raise ConfigError(f"{where}: '{word}' is no run option; use key=value settings and {', '.join('--' + o.replace('_', '-') for o in OPTIONS)}")
    default = OPTIONS[field]
    if isinstance(default, bool):
        if value not in ("", "true", "false"):
            raise ConfigError(f"{where}: '{word}' is a flag: write --{name}")
        return field, value != "false"
    try:
        return field, type(default)(value) if default is not None else int(value)  # None: a number of steps (--pretrain=500)
    except ValueError:
        raise ConfigError(f"{where}: '{word}': the value must be of type {type(default).__name__ if default is not None else 'int'}, e.g. --{name}={default if default is not None else 100}") from None


def parse(text: str, source: str = "matrix") -> list[Entry]:
    """The entries of a matrix file's text; a malformed line is a ConfigError naming it."""
    entries, section = [], ""
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.startswith("## "):
            section = raw[3:].strip()
            continue
        line, _, note = raw.partition("#")
        words = line.split()
        if not words:
            continue
        where = f"{source}:{number}"
        if len(words) < 3:
            raise ConfigError(f"{where}: '{line.strip()}' needs at least suite, model and adapter")
        options = [_option(w, where) for w in words[3:] if w.startswith("--")]
        settings = [w for w in words[3:] if not w.startswith("--")]
        for word in settings:
            if "=" not in word:
                raise ConfigError(f"{where}: '{word}' is neither a key=value setting nor a --run-option")
        entries.append(Entry(section, " ".join(words), note.strip(), *words[:3], tuple(settings), tuple(options)))
    return entries


def read(path: Path = MATRIX) -> list[Entry]:
    entries = parse(read_text(path, "matrix file", ConfigError), str(path))
    if not entries:
        raise ConfigError(f"{path} holds no entries; write one per line: suite model adapter [key=value ...], e.g. xnli minilm asg k=64")
    return entries


def _stored(store: Store) -> pd.DataFrame:
    """Every finished run: identity columns, configs parsed, recovery (steps, LoRA) and wall minutes."""
    columns = ["run_id", "config_hash", "model", "adapter", "suite", "profile", "seed", "adapter_config", "suite_config", "recovery", "minutes", "finished_at"]
    if "runs" not in store.tables():  # no file yet, or a DuckDB file without the harness's tables: every entry is missing
        return pd.DataFrame(columns=columns)
    runs = queries.finished_runs(store)
    return runs.assign(
        adapter_config=runs.adapter_config.map(json.loads), suite_config=runs.suite_config.map(json.loads),
        recovery=runs.recipe.map(lambda r: _recovery(json.loads(r or "{}"))),
    )[columns]


def _recovery(recipe: dict) -> tuple[int, bool]:
    steps = recipe.get("recovery") or {}
    return int(steps.get("steps", 0)), bool(steps.get("lora", False))


def _agrees(stored: dict, planned: dict) -> bool:
    """Settings both name hold the same values (a setting added to the code since is not a difference)."""
    return all(stored[k] == planned[k] for k in stored.keys() & planned.keys())


def _match(spec: RunSpec, runs: pd.DataFrame) -> tuple[str, str | None, float | None, str]:
    """(status, run id, minutes, how the minutes were estimated) of one planned spec among the stored runs."""
    same = runs[runs.config_hash.eq(spec.config_hash)]
    if len(same):
        return CURRENT, same.run_id.iloc[0], same.minutes.iloc[0], "run"
    kind = runs[runs.model.eq(spec.model) & runs.adapter.eq(spec.adapter) & runs.suite.eq(spec.suite)]
    alike = kind[kind.profile.eq(spec.profile) & kind.seed.eq(spec.seed) & kind.recovery.map(_recovery(spec.recipe).__eq__)
                 & kind.adapter_config.map(lambda c: _agrees(c, spec.adapter_config))
                 & kind.suite_config.map(lambda c: _agrees(c, spec.suite_config))]
    if len(alike):
        return STALE, alike.run_id.iloc[0], alike.minutes.iloc[0], "run"
    kind = kind[kind.recovery.map(_recovery(spec.recipe).__eq__)]  # another configuration, trained alike
    return MISSING, None, (kind.minutes.iloc[0] if len(kind) else None), ("~" if len(kind) else "")


def _plan(request: RunRequest) -> RunSpec:
    from harness.runner.plan import plan  # the suite and adapter classes, so torch: only for what no plan remembers

    return plan(request).spec


def _baseline_line(spec: RunSpec, entry: Entry) -> str:
    suite_settings = [s for s in entry.settings if s.partition("=")[0].removeprefix("suite.") in spec.suite_config]
    pretraining = [f"--pretrain={spec.recipe['pretraining']['steps']}"] if spec.recipe.get("pretraining") else []
    return " ".join([spec.suite, entry.model, "none", *suite_settings, *pretraining])


def status(entries: list[Entry], store: Store, profile: str = PROFILE) -> pd.DataFrame:
    """One row per entry (:data:`COLUMNS`), then one per distinct baseline: its status against the
    store, the run behind it, the minutes it took and whether ``make reference`` has it to do (an entry
    whose baseline is not current is to do). An entry that does not plan (an unknown setting, missing
    data) reads ``invalid: why``."""
    runs = _stored(store)
    planned, baselines = [], {}
    with remembering():
        for e in entries:
            request = e.request(profile)
            try:
                spec = planned_spec(request) or _plan(request)
            except HarnessError as err:
                planned.append((e, None, None, f"invalid: {err}"))
                continue
            base = spec.baseline()
            baselines.setdefault(base.config_hash, (base, _baseline_line(base, e)))
            planned.append((e, spec, base.config_hash, ""))
    base_rows = {key: [BASELINES, line, *_match(base, runs)] for key, (base, line) in baselines.items()}
    rows = []
    for e, spec, base_key, invalid in planned:
        if spec is None:
            rows.append([e.section, e.line, invalid, None, None, "", True, e.note])
            continue
        state, run_id, minutes, how = _match(spec, runs)
        base = base_rows[base_key]
        if pd.isna(minutes) and not pd.isna(base[4]):  # nothing like it stored: its baseline's minutes
            minutes, how = base[4], "~"
        todo = state != CURRENT or base[2] != CURRENT
        rows.append([e.section, e.line, state, run_id, minutes, how, todo, e.note])
    rows += [[*row, row[2] != CURRENT, ""] for row in base_rows.values()]
    return pd.DataFrame(rows, columns=COLUMNS)


def summary_line(frame: pd.DataFrame) -> str:
    """Counts by status and the hours the stored runs' wall times add up to (each run alone on the
    machine that made it: the committed store's, a 2-core CPU): the whole matrix, and what is to do
    (baselines counted once)."""
    counts = frame.status.str.partition(":")[0].value_counts()
    told = ", ".join(f"{counts[s]} {s}" for s in (CURRENT, STALE, MISSING, "invalid") if s in counts)
    whole, todo = frame.minutes.sum() / 60, frame.minutes[frame.todo].sum() / 60
    unknown = int(frame.minutes.isna().sum())
    return (f"{len(frame)} runs ({told}); by the stored runs' wall time, the whole matrix takes about {whole:.1f} hours, "
            f"what is to do about {todo:.1f} h" + (f" ({unknown} without a stored run to go by)" if unknown else ""))
