"""Generated command lines against the whole ``harness`` command (hypothesis; README.md beside this file).

Every command and option of the click tree gets values from a table of valid ones (:func:`_values`),
often mutated: another type, a sign, zero, huge, NaN, empty, Unicode, control characters, a byte
that is not UTF-8; options repeated and unknown ones added; environment variables set; and files
made for the example (:class:`Scratch`): stores (a copy of the smoke store, cut short, a table
dropped, not DuckDB, read-only, missing), text in Latin-1, UTF-16 or binary, CSV and matrix files
with missing columns or short rows, a data folder with a file cut short. ``run`` and ``sweep`` always
get ``--dry-run`` (valid, they would train for minutes) and ``bench`` one option its checks refuse
(valid, it measures for minutes; tests/test_bench.py runs it); ``leaderboard`` is left out (valid,
it replaces the process with a server).

The property (:func:`_check`): exit 0; or exit 2 with click's usage error, its message shown, or one
line ``error: ...`` on stderr (progress lines aside); never a traceback; nothing printed that a
terminal would act on instead of show; a failed command leaves every file as it was (each table of
each store checksummed too); and no command changes a file outside the paths it was given to write.

In CI: :data:`EXAMPLES` (300) in this process and :data:`SAMPLE` (12) as real processes, seeded.
``HARNESS_FUZZ_EXAMPLES=N HARNESS_FUZZ_PROCESSES=1`` runs N as real processes instead (README.md).
A failure hypothesis shrinks is kept in ``regressions.json`` and re-run every time.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unicodedata
import zlib
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
import typer.main
from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.budgets import PROFILES
from harness.cli import app
from harness.registry import ADAPTERS, SUITES
from harness.results.reference import packaged_csv
from harness.runner import matrix

HERE = Path(__file__).parent
HARNESS = str(Path(sys.executable).with_name("harness"))
EXAMPLES = int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "300"))
PROCESSES = os.environ.get("HARNESS_FUZZ_PROCESSES") == "1"
SEED = os.environ.get("HARNESS_FUZZ_SEED")  # unset: each test's own fixed seed
LOG = os.environ.get("HARNESS_FUZZ_LOG")    # a file: one JSON line per example (vector, exit code, violation)
SAMPLE = 12
LEFT_OUT = {("leaderboard",)}


# -- vectors ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ref:
    """A placeholder made real for each example by :class:`Scratch`: a file or folder, or a run id of the store."""

    kind: str


@dataclass(frozen=True)
class Vector:
    """A command line after ``harness`` and environment variables set for it."""

    args: tuple[str | Ref, ...]
    env: tuple[tuple[str, str | Ref], ...] = ()

    def to_json(self) -> dict:
        token = lambda t: {"ref": t.kind} if isinstance(t, Ref) else t  # noqa: E731
        return {"args": [token(a) for a in self.args], "env": {k: token(v) for k, v in self.env}}

    @classmethod
    def from_json(cls, data: dict) -> Vector:
        token = lambda t: Ref(t["ref"]) if isinstance(t, dict) else t  # noqa: E731
        return cls(tuple(token(a) for a in data["args"]), tuple((k, token(v)) for k, v in data.get("env", {}).items()))


def _commands() -> dict[tuple[str, ...], object]:
    """Every command of the click tree by its path, ``("list", "runs")``."""
    out = {}

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        else:
            out[path] = command

    walk(typer.main.get_command(app), ())
    return {path: c for path, c in out.items() if path not in LEFT_OUT}


COMMANDS = _commands()
# how often each command is drawn: those with options to explore more often than the bare listings
WEIGHT = {("run",): 6, ("sweep",): 4, ("results",): 3, ("export",): 3, ("reference", "load"): 3, ("list", "matrix"): 3,
          ("show",): 2, ("list", "runs"): 2, ("bench",): 2, ("cache", "clear"): 2}

MUTANTS = (
    "", " ", "0", "-0", "-1", "1.5", "99999999999999999999", "1e309", "nan", "inf", "-inf", "true", "x", "²", "٣", "é",
    "日本語", "🙂", "\u200b", "\u202e", "a\nb", "\t", "\r", "\x1b[31m", "\x7f", "\udce9", "x" * 300, "-", "--", "..", "../..", "/",
    ",", "=", "k=", "=1", "a=b=c",
)
EXTRA = ("--bogus", "-z", "--sed", "stray", "--help")


def _typos(value: str) -> list[str]:
    return [value.upper(), value + "x", value[:-1], "-" + value, value + "0" * 20, f"{value},{value}", value.replace("=", "==")]


def _mutated(valid: st.SearchStrategy) -> st.SearchStrategy:
    """A valid value four times in five (so that a good share of vectors is valid throughout and
    reaches the checks behind the first), else a mutant, a typo of a valid one, or a file where a
    name goes."""
    typo = valid.flatmap(lambda v: st.sampled_from(_typos(v)) if isinstance(v, str) and v else st.just(v))
    bad = st.one_of(typo, st.sampled_from(MUTANTS), _refs("file", "folder", "missing"))
    return st.integers(0, 9).flatmap(lambda i: valid if i < 8 else bad)  # one_of would not keep the share


def _refs(*kinds: str) -> st.SearchStrategy:
    return st.sampled_from([Ref(k) for k in kinds])


def _joined(values, most: int = 3) -> st.SearchStrategy:
    return st.lists(st.sampled_from(values), min_size=1, max_size=most, unique=True).map(",".join)


SUITE_NAMES, ADAPTER_NAMES, MODELS = SUITES.names(), ADAPTERS.names(), ("minilm", "smollm2", "me5-small")
DATA_CUT = ("word_similarity/EN-WS-353-ALL.txt", "glue/CoLA/dev.tsv", "glue/SST-2/dev.tsv", "copa/val.jsonl",
            "banking77/test.csv", "wikiann/en/dev.tsv", "bc5cdr/devel.tsv", "xnli/xnli.dev.tsv")
DBS = ("db", "db", "db", "db-missing", "db-cut", "db-without-scores", "db-without-runs", "not-duckdb", "empty", "folder", "db-readonly")
DATA = ("data", "data", "data-missing", "file", *(f"data-cut:{f}" for f in DATA_CUT))
TEXTS = ("latin1", "utf16", "binary", "nul", "empty", "missing", "folder")


def _settings() -> list[str]:
    """key=value of every adapter and suite setting at its default, bare and scoped."""
    pairs = set()
    for scope, configs in (("adapter", [ADAPTERS.get(n).config_class for n in ADAPTER_NAMES]),
                           ("suite", [SUITES.get(n)().config_class for n in SUITE_NAMES])):
        for config in configs:
            for f in dataclasses.fields(config):
                value = str(f.default).lower() if isinstance(f.default, bool) else str(f.default)
                pairs |= {f"{f.name}={value}", f"{scope}.{f.name}={value}"}
    return sorted(pairs)


def _values() -> dict[str, st.SearchStrategy]:
    """Valid values of each option or argument, by ``command option`` or option name alone."""
    run_ids = _refs("run-asg", "run-none", "run-prefix", "run-missing")
    return {
        "--suite": st.sampled_from(SUITE_NAMES), "sweep --suite": _joined(SUITE_NAMES, 2),
        "--adapter": st.sampled_from(ADAPTER_NAMES), "--model": st.sampled_from(MODELS), "sweep --model": _joined(MODELS, 2),
        "--profile": st.sampled_from(PROFILES), "--seed": st.sampled_from(["0", "1", "2"]), "--seeds": _joined(["0", "1", "2"]),
        "--set": st.sampled_from(_settings()), "--db": _refs(*DBS), "--data-dir": _refs(*DATA),
        "--device": st.sampled_from(["auto", "cpu", "cuda", "cuda:0"]), "--recover": st.sampled_from(["0", "10"]),
        "--pretrain": st.sampled_from(["0", "10"]), "--dtype": st.sampled_from(["float32", "bfloat16", "float16"]),
        "sweep file": _refs("yaml", "yaml", "yaml-list", "yaml-types", "yaml-tag", "yaml-deep", *TEXTS),
        "--grid": st.sampled_from(["k=64,256", "m=24,48", "fraction=0.1,0.4", "recover=0,10", "r=32,64", "bits=8,4", "recover_lora=true"]),
        "--backend": st.sampled_from(["local", "ray"]), "--jobs": st.sampled_from(["1", "2"]), "--address": st.just("auto"),
        "--cpus": st.sampled_from(["1", "2"]), "--format": st.sampled_from(["table", "csv", "json"]),
        "show run_id": run_ids, "export run_id": run_ids, "--out": _refs("new", "new-deep", "long-name", "under-file", "file", "folder"),
        "bench --json": _refs("new", "long-name", "under-file", "file", "folder"), "--only": _joined(["heads", "decode", "memory", "fit", "after-fit"]),
        "--rounds": st.sampled_from(["1", "2"]), "--niter": st.sampled_from(["1", "10"]), "--llama-layers": st.sampled_from(["1", "2"]),
        "--threads": st.sampled_from(["0", "1"]), "--limit": st.sampled_from(["0", "5", "50"]),
        "--matrix": _refs("matrix", "matrix", "matrix-short", "matrix-option", *TEXTS),
        "--csv": _refs("csv", "csv", "csv-short-rows", "csv-missing-columns", "csv-nan", "csv-quote", *TEXTS),
        "cache clear digest": st.sampled_from(["../..", "/", "abc", "notes", "0"]),
    }


VALUES = _values()


def _value_of(path: tuple[str, ...], param) -> st.SearchStrategy:
    name = param.opts[0] if param.param_type_name == "option" else param.name
    for key in (f"{' '.join(path)} {name}", f"{path[-1]} {name}", name):
        if key in VALUES:
            return _mutated(VALUES[key])
    raise KeyError(f"no values for {' '.join(path)} {name}: add them to _values()")


# list matrix without --matrix plans the whole packaged matrix (seconds a vector); a sweep without a FILE
# needs --adapter and --suite, which only the matrix entries give together (_coherent)
USUALLY = {"list matrix --matrix", "sweep file"}
# bench: one of these comes last (click keeps an option's last value), so its checks refuse the vector fast
BENCH_REFUSED = (("--device", "tpu"), ("--only", "nope"), ("--rounds", "0"), ("--threads", "-1"), ("--niter", "0"),
                 ("--llama-layers", "0"), ("--random", "--only", "memory"), ("--device", "cuda:x"))
ENV = {
    "COLUMNS": st.sampled_from(["1", "0", "-3", "abc", "20", "100000"]), "HARNESS_DB": _refs(*DBS), "HARNESS_DATA_DIR": _refs(*DATA),
    "HARNESS_FIT_CACHE": st.one_of(st.just("off"), _refs("cache", "file", "missing")), "PYTHONIOENCODING": st.sampled_from(["ascii", "latin-1"]),
}


def _matrix_groups() -> list[list[list[str]]]:
    """The reference matrix's entries (harness/runner/matrix.txt) as option groups of ``run``: suite,
    model, adapter and settings that go together, so that a generated run can be valid throughout."""
    out = []
    for e in matrix.read():
        options = [[f"--{name.replace('_', '-')}", *([] if value is True else [str(value)])] for name, value in e.options]
        out.append([["--suite", e.suite], ["--model", e.model], ["--adapter", e.adapter], *(["--set", s] for s in e.settings), *options])
    return out


MATRIX_GROUPS = _matrix_groups()


@st.composite
def _coherent(draw, path: tuple[str, ...]) -> list[list[str]]:
    """For run and sweep, half the time an entry of the matrix (each value mutated as any other); else nothing."""
    if path not in (("run",), ("sweep",)) or draw(st.booleans()):
        return []
    groups = draw(st.sampled_from(MATRIX_GROUPS))
    if path == ("sweep",):  # a sweep takes --grid, not --recover / --pretrain / --recover-lora
        groups = [g if g[0] != "--set" else ["--grid", g[1]] for g in groups if g[0] in ("--suite", "--model", "--adapter", "--set")]
    return [[g[0], *(draw(_mutated(st.just(v))) for v in g[1:])] for g in groups]


@st.composite
def vectors(draw) -> Vector:
    """A command, some of its options (required ones nearly always) with values, extra tokens, environment."""
    path = draw(st.sampled_from([p for p in COMMANDS for _ in range(WEIGHT.get(p, 1))]))
    groups = draw(_coherent(path))
    given = {g[0] for g in groups} | ({"file"} if groups and path == ("sweep",) else set())  # a sweep FILE, or its options
    for param in COMMANDS[path].params:
        if param.opts[0] in given:
            continue
        usually = param.required or f"{' '.join(path)} {param.opts[0]}" in USUALLY
        if draw(st.integers(0, 9)) < (9 if usually else 3):
            flag = param.param_type_name == "option" and param.is_flag
            count = draw(st.integers(1, 3)) if getattr(param, "multiple", False) or param.nargs == -1 else 1
            for _ in range(count):
                value = [] if flag else [draw(_value_of(path, param))]
                groups.append(([param.opts[0]] if param.param_type_name == "option" else []) + value)
    groups += [[draw(st.sampled_from(EXTRA))] for _ in range(draw(st.integers(0, 9)) // 8)]  # an unknown option one time in five
    if groups and draw(st.integers(0, 9)) == 0:  # an option given twice
        groups.append(draw(st.sampled_from(groups)))
    args = [t for group in draw(st.permutations(groups)) for t in group]
    if path in (("run",), ("sweep",)):
        args.append("--dry-run")
    if path == ("bench",):
        args += draw(st.sampled_from(BENCH_REFUSED))
    env = draw(st.lists(st.sampled_from(sorted(ENV)), max_size=2, unique=True))
    return Vector((*path, *args), tuple((k, draw(ENV[k])) for k in env))


# -- one example's files ----------------------------------------------------------------------------

@dataclass
class Base:
    """What every example's files are made from, once per session."""

    store: Path
    variants: dict[str, Path]   # db-without-scores, db-without-runs
    runs: dict[str, str]        # adapter -> run id
    data: Path
    fits: Path                  # the session's fit cache


MATRIX = "## smoke\nxnli minilm asg k=64  # a note\n"
SWEEP = "suites: [xnli]\nmodels: [minilm]\nprofile: smoke\nadapters:\n  - adapter: asg\n    grid: {k: [64]}\n"


class Scratch:
    """One example's folder; each :class:`Ref` is made there on first use (stores are copies)."""

    def __init__(self, root: Path, base: Base):
        self.root, self.base, self.made = root, base, {}
        root.mkdir(parents=True)

    def token(self, t: str | Ref) -> str:
        if isinstance(t, str):
            return t
        if t.kind not in self.made:
            self.made[t.kind] = self._make(t.kind)
        return self.made[t.kind]

    def _make(self, kind: str) -> str:
        if kind.startswith("run-"):
            ids = self.base.runs
            return {"run-asg": ids["asg"], "run-none": ids["none"], "run-prefix": ids["asg"][:9], "run-missing": "20260101-000000-asg-abcdef"}[kind]
        if kind == "data":
            return str(self.base.data)
        if kind.startswith("data-cut:"):
            return str(self._data_cut(kind.partition(":")[2]))
        path = self.root / {"db": "results.duckdb", "cache": "cache", "long-name": "x" * 300}.get(kind, kind)
        if kind == "db" or kind == "db-readonly":
            shutil.copy(self.base.store, path)
            path.chmod(0o444 if kind == "db-readonly" else 0o644)
        elif kind in self.base.variants:
            shutil.copy(self.base.variants[kind], path)
        elif kind == "db-cut":
            data = self.base.store.read_bytes()
            path.write_bytes(data[: len(data) // 2])
        elif kind in ("folder", "cache"):
            (path / "notes").mkdir(parents=True)
            (path / "notes" / "keep.txt").write_text("keep me\n")
        elif kind == "under-file":
            self.token(Ref("file"))
            path = self.root / "file" / "out"
        elif kind in TEXT_FILES:
            path.write_bytes(TEXT_FILES[kind])
        return str(path)

    def _data_cut(self, cut: str) -> Path:
        """A data folder of links to the shared files, ``cut`` a copy cut short inside a line."""
        folder = self.root / ("data-" + cut.replace("/", "-"))
        for entry in self.base.data.iterdir():
            if entry.name != cut.split("/")[0]:
                (folder / entry.name).parent.mkdir(parents=True, exist_ok=True)
                (folder / entry.name).symlink_to(entry)
        for source in (self.base.data / cut.split("/")[0]).rglob("*"):
            target = folder / source.relative_to(self.base.data)
            if source.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                if source.relative_to(self.base.data).as_posix() == cut:
                    data = source.read_bytes()
                    target.write_bytes(data[: len(data) // 2 + 7])
                else:
                    target.symlink_to(source)
        return folder


TEXT_FILES = {
    "file": b"keep me\n", "empty": b"", "not-duckdb": b"this is not a database\n" * 200, "matrix": MATRIX.encode(),
    "matrix-short": b"## smoke\nxnli minilm\n", "matrix-option": b"xnli minilm asg --recover=x --bogus k\n", "yaml": SWEEP.encode(),
    "yaml-list": b"- xnli\n- asg\n", "yaml-types": b"suites: 3\nseeds: [a]\nprofile: [x]\nadapters: [asg]\n",
    "yaml-tag": b"suites: !!python/object/apply:os.system ['true']\nadapters: []\n", "yaml-deep": b"[" * 5000,
    "latin1": "xnli minilm asg k=64  # café\nsuites: [xnli]\n".encode("latin-1"), "utf16": (MATRIX + SWEEP).encode("utf-16"),
    "binary": bytes((i * 37 + 11) % 256 for i in range(2048)), "nul": b"suites: [xnli]\x00\n",
}


def _paper_csv(keep: int = 12) -> bytes:
    return b"".join(packaged_csv().read_bytes().splitlines(keepends=True)[:keep])


def _csv_files() -> dict[str, bytes]:
    lines = _paper_csv().decode().splitlines(keepends=True)
    header, row = lines[0], lines[1]
    fields = row.rstrip("\n").split(",")
    value = header.split(",").index("value")
    return {
        "csv": "".join(lines).encode(), "csv-short-rows": (header + ",".join(fields[:3]) + "\n").encode(),
        "csv-missing-columns": (header.replace(",value", "") + row).encode(),
        "csv-nan": (header + ",".join(fields[:value] + ["nan"] + fields[value + 1:]) + "\n").encode(),
        "csv-quote": (header + '"unterminated,' + row).encode(),
    }


TEXT_FILES |= _csv_files()


# -- running one vector, and the property -----------------------------------------------------------

@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    exception: BaseException | None = None


def _invoke(argv: list[str], env: dict[str, str | None], cwd: Path, processes: bool) -> Outcome:
    if processes:
        full = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
        proc = subprocess.run([HARNESS, *argv], env=full, cwd=cwd, capture_output=True, timeout=600)
        decode = lambda b: b.decode("utf-8", "backslashreplace")  # noqa: E731  (a latin-1 or ascii stream shows as escapes)
        return Outcome(proc.returncode, decode(proc.stdout), decode(proc.stderr))
    with contextlib.chdir(cwd):
        result = CliRunner(env=env).invoke(app, argv)
    exception = result.exception if not isinstance(result.exception, SystemExit) else None
    return Outcome(result.exit_code, result.stdout, result.stderr, exception)


PROGRESS = re.compile(r".+: \d+/\d+ \(\d+s\)")


def _visible(text: str) -> bool:
    """No character a terminal acts on instead of showing, but the newline."""
    return all(ch == "\n" or unicodedata.category(ch) not in ("Cc", "Cs") for ch in text)


def _failure_shape(stderr: str) -> str | None:
    """None when stderr is click's usage error with its message shown, or one ``error:`` line after
    progress lines (a sweep names each bad point on a line of its own); else what is wrong."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if lines and lines[0].startswith("Usage: "):
        shown = [line for line in lines if line.startswith("Error: ") or re.match(r"[│|] \S", line)]  # | where the stream is not UTF-8
        return None if shown else f"usage error without its message: {stderr!r}"
    lines = [line for line in lines if not PROGRESS.fullmatch(line)]
    sweep = len(lines) > 1 and all(line.startswith("error: sweep point ") for line in lines)
    if not lines or not lines[0].startswith("error: ") or (len(lines) > 1 and not sweep):
        return f"not one 'error:' line: {stderr!r}"
    return None


def _snapshot(root: Path) -> dict[str, str]:
    """Every file, link and folder under ``root``: a digest of its bytes, its target, or 'folder'."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = "folder"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _tables(db: Path) -> dict[str, tuple] | None:
    """(rows, checksum) of each table of a store; None where it cannot be read."""
    try:
        with contextlib.closing(duckdb.connect(str(db), read_only=True)) as con:
            names = [n for (n,) in con.execute("SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'").fetchall()]
            return {n: con.execute(f'SELECT count(*), sum(hash(t))::VARCHAR FROM "{n}" t').fetchone() for n in names}
    except duckdb.Error:
        return None


def _write_targets(argv: list[str], env: dict[str, str | None], root: Path) -> list[Path]:
    """The paths a command was given to write: its store (with its journal), --out, --json, the fit cache."""
    given = [env.get("HARNESS_DB"), env.get("HARNESS_FIT_CACHE")]
    given += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--db", "--out", "--json")]
    targets = []
    for value in filter(None, given):
        path = Path(root, value).resolve()
        targets += [path, *([path.with_name(path.stem + ".records"), path.with_name(path.name + ".wal")] if path.name else [])]
    return targets


def _check(vector: Vector, base: Base, root: Path, processes: bool) -> Outcome:
    """Run ``vector`` in ``root`` and assert the property; returns what it gave."""
    scratch = Scratch(root, base)
    cache = ("cache",) == vector.args[:1]
    env = {"HARNESS_DB": scratch.token(Ref("db")), "HARNESS_FIT_CACHE": scratch.token(Ref("cache")) if cache else str(base.fits)}
    env |= {k: scratch.token(v) for k, v in vector.env}
    argv = [scratch.token(a) for a in vector.args]
    stores = [Path(p) for k, p in scratch.made.items() if k in ("db", "db-readonly", *base.variants)]
    files, tables = _snapshot(root), {db: _tables(db) for db in stores}
    out = _invoke(argv, env, root, processes)
    assert out.exception is None, f"{vector}: {out.exception!r}\n{out.stderr}"
    assert "Traceback" not in out.stderr and out.code in (0, 2), f"{vector}: exit {out.code}\n{out.stderr}"
    assert _visible(out.stdout) and _visible(out.stderr), f"{vector}: a control character printed: {out.stderr!r}"
    after = _snapshot(root)
    changed = {p for p in files.keys() | after.keys() if files.get(p) != after.get(p)}
    if out.code:
        assert _failure_shape(out.stderr) is None, f"{vector}: {_failure_shape(out.stderr)}"
        assert {db: _tables(db) for db in stores} == tables, f"{vector}: a failed command changed rows"
        assert not changed, f"{vector}: a failed command changed {sorted(changed)}"
    targets = _write_targets(argv, env, root)
    outside = [p for p in changed if not any(Path(root, p).resolve().is_relative_to(t) for t in targets)]
    assert not outside, f"{vector}: changed {outside}, outside the paths it was given to write"
    return out


# -- the tests --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base(smoke_db, data_dir, fit_cache, tmp_path_factory) -> Base:
    folder = tmp_path_factory.mktemp("generated")
    variants = {}
    for table in ("scores", "runs"):
        variants[f"db-without-{table}"] = folder / f"without-{table}.duckdb"
        shutil.copy(smoke_db, variants[f"db-without-{table}"])
        with contextlib.closing(duckdb.connect(str(variants[f"db-without-{table}"]))) as con:
            con.execute(f"DROP VIEW IF EXISTS results; DROP TABLE {table}")
    with contextlib.closing(duckdb.connect(str(smoke_db), read_only=True)) as con:
        runs = dict(con.execute("SELECT adapter, run_id FROM runs WHERE status = 'finished'").fetchall())
    return Base(smoke_db, variants, runs, data_dir, fit_cache)


@pytest.fixture(scope="module")
def shared_data_unchanged(data_dir):
    """No example writes the shared data folder (a cut data folder links to it)."""
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in data_dir.rglob("*") if p.is_file()}
    yield
    assert {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in data_dir.rglob("*") if p.is_file()} == before


def _property(base: Base, tmp: Path, examples: int, processes: bool, name: str) -> collections.Counter:
    """Run the property over ``examples`` generated vectors; returns the count of each (command, exit code)."""
    tally, passed = collections.Counter(), set()
    counter = iter(range(10**9))

    @seed(int(SEED) if SEED else zlib.crc32(name.encode()))  # each test its own vectors, the same every run
    @settings(max_examples=examples, deadline=None, database=None, print_blob=True, suppress_health_check=list(HealthCheck))
    @given(vector=vectors())
    def prop(vector):
        key = json.dumps(vector.to_json(), sort_keys=True)
        assume(key not in passed)  # a vector drawn again is not an example; a failing one is replayed as it shrinks
        root, start = tmp / f"{name}-{next(counter)}", time.monotonic()
        try:
            out = _check(vector, base, root, processes)
        except AssertionError as err:
            _log(vector, None, str(err), time.monotonic() - start, "")
            raise
        finally:
            shutil.rmtree(root, ignore_errors=True)
        passed.add(key)
        tally[(" ".join(next(p for p in COMMANDS if vector.args[:len(p)] == p)), out.code)] += 1
        _log(vector, out.code, None, time.monotonic() - start, out.stderr)

    prop()
    print(f"{sum(tally.values())} vectors ({'real processes' if processes else 'in process'}): " +
          ", ".join(f"{cmd} -> {code}: {n}" for (cmd, code), n in sorted(tally.items())))
    return tally


def _log(vector: Vector, code: int | None, violation: str | None, seconds: float, stderr: str) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            line = {**vector.to_json(), "code": code, "violation": violation, "seconds": round(seconds, 2), "stderr": stderr[-400:]}
            f.write(json.dumps(line) + "\n")


def test_generated_vectors(base, tmp_path, shared_data_unchanged):
    tally = _property(base, tmp_path, EXAMPLES, PROCESSES, "v")
    assert sum(tally.values()) >= min(EXAMPLES, 300) * 0.9  # distinct vectors; hypothesis may stop early when few are left
    assert {code for _, code in tally} == {0, 2}, "both outcomes drawn"


def test_generated_vectors_as_processes(base, tmp_path, shared_data_unchanged):
    """A seeded sample as real processes: the encoding of argv and streams, the environment, exit codes."""
    _property(base, tmp_path, SAMPLE, True, "p")


REGRESSIONS = json.loads((HERE / "regressions.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"], marks=[pytest.mark.xfail(reason=c["xfail"], strict=True)] if "xfail" in c else [])
                                  for c in REGRESSIONS])
def test_regression(case, base, tmp_path):
    """Each failure the generator found, shrunk, in process; a real process where ``process`` says so."""
    _check(Vector.from_json(case), base, tmp_path / "r", case.get("process", False))


def test_every_option_has_values():
    """A new option or command is generated with the rest: it needs valid values in :func:`_values`."""
    for path, command in COMMANDS.items():
        for param in command.params:
            if not (param.param_type_name == "option" and param.is_flag):
                _value_of(path, param)
