"""The bad-input catalogue (README.md beside this file lists what each case gets).

Every case runs the real CLI against a copy of the session's smoke database and asserts the exit
code, ONE line on stderr starting with ``error:`` naming the problem (progress lines aside), and an
intact database: it still opens and its finished runs and scores are unchanged. Most cases fail in
the plan, before any model loads; the data, database, NaN and SIGINT cases run until they fail.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results.journal import Journal
from tests.conftest import read_sql

HARNESS = os.path.join(os.path.dirname(sys.executable), "harness")
BASE = ["run", "--suite", "xnli", "--device", "cpu"]
RUN = [*BASE, "--model", "minilm", "--profile", "smoke"]
SWEEP = ["sweep", "--adapter", "asg", "--suite", "xnli", "--model", "minilm", "--profile", "smoke"]


@dataclass
class Env:
    """What a case may build: a scratch folder, the shared database copy, a data folder with one broken file."""

    tmp: Path
    db: Path
    data: Path

    def xnli(self, dev: bytes) -> str:
        """A data folder whose xnli.dev.tsv is ``dev`` (the test split is the real file)."""
        folder = self.tmp / "data"
        (folder / "xnli").mkdir(parents=True)
        (folder / "xnli" / "xnli.dev.tsv").write_bytes(dev)
        (folder / "xnli" / "xnli.test.tsv").symlink_to(self.data / "xnli" / "xnli.test.tsv")
        return str(folder)

    def xnli_test_languages(self, keep: tuple[str, ...]) -> str:
        """A data folder whose xnli.test.tsv keeps the whole rows of ``keep`` only (dev is the real file)."""
        folder = self.tmp / "data"
        (folder / "xnli").mkdir(parents=True)
        (folder / "xnli" / "xnli.dev.tsv").symlink_to(self.data / "xnli" / "xnli.dev.tsv")
        with open(self.data / "xnli" / "xnli.test.tsv", "rb") as f:
            header, *rows = f.readlines()
        kept = [row for row in rows if row.split(b"\t", 1)[0].decode() in keep]
        (folder / "xnli" / "xnli.test.tsv").write_bytes(header + b"".join(kept))
        return str(folder)

    def real_dev(self, lines: int = 200) -> bytes:
        with open(self.data / "xnli" / "xnli.dev.tsv", "rb") as f:
            return b"".join(next(f) for _ in range(lines))

    def file(self, name: str) -> str:
        """An existing file in the scratch folder."""
        (self.tmp / name).write_text("keep me\n")
        return str(self.tmp / name)

    def paper_csv(self, value: str) -> str:
        """The packaged paper CSV's header and first row, its value column set to ``value``."""
        from harness.results.reference import packaged_csv

        header, row = packaged_csv().read_text(encoding="utf-8").splitlines()[:2]
        fields = row.split(",")
        fields[header.split(",").index("value")] = value
        path = self.tmp / "paper.csv"
        path.write_text(f"{header}\n{','.join(fields)}\n", encoding="utf-8")
        return str(path)

    def sweep_file(self, text: str | bytes) -> str:
        path = self.tmp / "sweep.yaml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return str(path)


@dataclass(frozen=True)
class Case:
    name: str
    args: Callable[[Env], list[str]]   # the command line after `harness`; --db is added unless given
    fragment: str                      # a piece of the one error line
    code: int = 2


def _truncated(env: Env) -> bytes:
    head = env.real_dev(200)
    cut = env.real_dev(201)[len(head):]
    return head + cut[: cut.index(b"\t") + 3]  # the last row stops inside its second field


CASES = [
    # names and values (the plan)
    Case("unknown suite in a sweep", lambda e: ["sweep", "--adapter", "asg", "--suite", "xnl", "--grid", "k=64"], "unknown suite 'xnl'; did you mean 'xnli'?"),
    Case("unknown adapter", lambda e: [*RUN, "--adapter", "product_quant"], "unknown adapter 'product_quant'"),
    Case("unknown model path", lambda e: [*BASE, "--adapter", "asg", "--model", "/nonexistent/model"], "unknown model '/nonexistent/model'"),
    Case("model folder without config.json", lambda e: [*BASE, "--adapter", "asg", "--model", str(e.tmp)], "has no config.json"),
    Case("unknown device", lambda e: [*RUN[:3], *RUN[5:], "--adapter", "asg", "--device", "tpu"], "unknown device 'tpu'"),
    Case("fraction not a number", lambda e: [*RUN, "--adapter", "sg", "--set", "fraction=most"], "fraction"),
    Case("fraction above 1", lambda e: [*RUN, "--adapter", "sg", "--set", "fraction=1.5"], "fraction"),
    Case("setting not a finite number", lambda e: [*RUN, "--adapter", "ade", "--set", "temperature=inf"], "--set temperature=inf is not a finite number"),
    Case("boolean not true/false", lambda e: [*RUN, "--adapter", "asg", "--set", "shared=maybe"], "shared"),
    Case("m not dividing D", lambda e: [*RUN, "--adapter", "asg", "--set", "m=5"], "m=5 does not divide the table's width 384"),
    Case("k > V", lambda e: [*RUN, "--adapter", "asg", "--set", "k=30523"], "exceeds the vocabulary size 30522"),
    Case("rank above the hidden size", lambda e: [*RUN, "--adapter", "lowrank", "--set", "r=1000"], "r=1000"),
    Case("unsupported bit width", lambda e: [*RUN, "--adapter", "quant", "--set", "bits=3"], "bits"),
    Case("unknown profile", lambda e: [*BASE, "--model", "minilm", "--profile", "tiny", "--adapter", "asg"], "unknown profile 'tiny'"),
    Case("missing data folder", lambda e: [*RUN, "--adapter", "asg", "--data-dir", str(e.tmp / "nowhere")], "dataset files missing"),
    # data files
    Case("empty data file", lambda e: [*RUN, "--adapter", "asg", "--data-dir", e.xnli(b"")], "xnli.dev.tsv"),
    Case("corrupt data file (binary)", lambda e: [*RUN, "--adapter", "asg", "--data-dir", e.xnli(bytes(range(256)) * 64)], "xnli.dev.tsv"),
    Case("truncated data file", lambda e: [*RUN, "--adapter", "asg", "--data-dir", e.xnli(_truncated(e))], "xnli.dev.tsv:201: malformed row"),
    Case("data file in Latin-1", lambda e: [*RUN, "--adapter", "asg", "--data-dir", e.xnli(e.real_dev().decode().encode("latin-1", "replace") + "fr\tentailment\tcafé\tthé\n".encode("latin-1"))], "not UTF-8"),
    Case("data file in UTF-16", lambda e: [*RUN, "--adapter", "asg", "--data-dir", e.xnli(e.real_dev().decode().encode("utf-16"))], "not UTF-8"),
    Case("test file with 4 of 15 languages", lambda e: [*RUN, "--adapter", "asg", "--data-dir", e.xnli_test_languages(("ar", "bg", "de", "el"))],
         "xnli.test.tsv holds 4 of the 15 XNLI languages (found ar, bg, de, el; expected ar, bg, de, el, en,"),
    # seeds, names close to known ones, output paths, the database path, recovery steps
    Case("negative seed", lambda e: [*RUN, "--adapter", "asg", "--seed", "-1"], "--seed -1 is out of range"),
    Case("negative seed in --seeds", lambda e: [*RUN, "--adapter", "asg", "--seeds", "0,-1"], "--seeds -1 is out of range"),
    Case("setting key in another case", lambda e: [*RUN, "--adapter", "asg", "--set", "K=3"], "did you mean 'k'?"),
    Case("model alias in another case", lambda e: [*BASE, "--adapter", "asg", "--model", "MiniLM", "--profile", "smoke"], "did you mean 'minilm'?"),
    Case("results for a misspelt suite", lambda e: ["results", "--suite", "xnl"], "no suite 'xnl' among the runs in"),
    Case("results for a misspelt profile", lambda e: ["results", "--profile", "quik"], "unknown profile 'quik'; did you mean 'quick'?"),
    Case("export over an existing file", lambda e: ["export", "no-such-run", "--out", e.file("exists.txt")], "is an existing file"),
    Case("database path is a folder", lambda e: [*RUN, "--adapter", "asg", "--db", str(e.tmp)], "is a folder; pass a database file"),
    Case("recovery steps above the cap", lambda e: [*RUN, "--adapter", "asg", "--recover", "100000000"], "above the 12 h cap"),
    # the papers' numbers
    Case("paper CSV value not finite", lambda e: ["reference", "load", "--csv", e.paper_csv("nan")], "paper.csv:2: value='nan' is not a finite number"),
    # sweep files and options
    Case("sweep file missing", lambda e: ["sweep", str(e.tmp / "none.yaml")], "cannot read sweep file"),
    Case("sweep file not YAML", lambda e: ["sweep", e.sweep_file("suites: [xnli\nadapters: {")], "is not valid YAML"),
    Case("sweep file not UTF-8", lambda e: ["sweep", e.sweep_file("suites: [xnli]".encode("utf-16"))], "is not UTF-8"),
    Case("sweep file unknown key", lambda e: ["sweep", e.sweep_file("suites: [xnli]\nadaptors: []\n")], "unknown key(s) adaptors"),
    Case("sweep file grid not a mapping", lambda e: ["sweep", e.sweep_file("suites: [xnli]\nadapters:\n  - adapter: asg\n    grid: [64]\n")], "grid must map each setting"),
    Case("sweep seeds not integers", lambda e: [*SWEEP, "--grid", "k=64", "--seeds", "0,one"], "are not integers"),
    Case("sweep --grid without =", lambda e: [*SWEEP, "--grid", "k64"], "is not key=v1,v2"),
    Case("sweep --grid empty value", lambda e: [*SWEEP, "--grid", "k=64,,256"], "has an empty item"),
    Case("sweep bad point among good", lambda e: [*SWEEP, "--grid", "k=64,99999"], "sweep point asg k=99999 on xnli (seed 0)"),
    Case("sweep unknown backend", lambda e: [*SWEEP, "--grid", "k=64", "--backend", "slurm"], "unknown backend 'slurm'"),
    Case("sweep FILE and --adapter", lambda e: ["sweep", e.sweep_file("suites: [xnli]"), "--adapter", "asg"], "not both"),
]


def _digest(db: Path) -> str:
    """The finished runs and their scores, as a hash (a failed run added by a case is allowed)."""
    runs = read_sql(db, "SELECT * EXCLUDE (hardware, versions) FROM runs WHERE status = 'finished' ORDER BY run_id")
    scores = read_sql(db, "SELECT s.* FROM scores s JOIN runs r USING (run_id) WHERE r.status = 'finished' ORDER BY ALL")
    return hashlib.sha256((runs.to_csv() + scores.to_csv()).encode()).hexdigest()


@pytest.fixture(scope="module")
def shared_db(smoke_db, tmp_path_factory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("bad_inputs") / "results.duckdb"
    shutil.copy(smoke_db, db)
    return db, _digest(db)


@pytest.fixture
def env(tmp_path, shared_db, data_dir) -> Env:
    return Env(tmp_path, shared_db[0], data_dir)


def _error_line(stderr: str) -> str:
    """The one error line; progress lines (``label: done/total``) may precede it."""
    errors = [line for line in stderr.strip().splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return errors[0]


def _assert_intact(db: Path, digest: str) -> None:
    assert _digest(db) == digest
    assert not [p for p in Journal(db.with_name(db.stem + ".records")).pending() if p.record.status == "running"]


def _stored(db: Path) -> tuple[int, int]:
    """Runs in the database (any status) and run records in its journal."""
    return len(read_sql(db, "SELECT run_id FROM runs")), len(list(db.with_name(db.stem + ".records").glob("*.json")))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_catalogue(case: Case, env: Env, shared_db):
    args = case.args(env)
    before = _stored(env.db)
    result = CliRunner().invoke(app, [*args, *([] if "--db" in args else ["--db", str(env.db)])])
    assert result.exit_code == case.code, result.output
    assert case.fragment in _error_line(result.stderr)
    assert _stored(env.db) == before  # nothing stored, not even a failed run
    _assert_intact(*shared_db)


def test_catalogue_has_at_least_25_cases():
    assert len(CASES) + len(SPECIAL) >= 25
    readme = (Path(__file__).with_name("README.md")).read_text()
    for name in [c.name for c in CASES] + SPECIAL:
        assert f"| {name} |" in readme, f"README.md does not list '{name}'"


# Cases that need more than a command line; each is a test below and a row in README.md.
SPECIAL = ["locked database", "corrupt database", "damaged database", "older schema", "empty database", "read-only database folder", "full disk", "NaN training loss", "SIGINT mid-run"]


def test_empty_database(tmp_path):
    """A valid DuckDB file without the harness's tables: reading it is an answer (no runs yet), not a traceback."""
    import duckdb

    db = tmp_path / "empty.duckdb"
    duckdb.connect(str(db)).close()
    for command in (["results"], ["list", "runs"]):
        result = CliRunner().invoke(app, [*command, "--db", str(db)])
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith(f"no runs in {db} yet"), result.output
    result = CliRunner().invoke(app, ["results", "--db", str(db), "-f", "json"])  # a script reads no rows, not a sentence
    assert result.exit_code == 0 and json.loads(result.stdout) == [] and f"no runs in {db} yet" in result.stderr, result.output
    result = CliRunner().invoke(app, ["list", "matrix", "--db", str(db)])  # `make reference` on it: every entry to make
    assert result.exit_code == 0 and "current" not in result.stdout and "missing" in result.stdout, result.output
    result = CliRunner().invoke(app, ["show", "20260101-000000-asg-abcdef", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert f"no runs in {db} yet" in _error_line(result.stderr)


def test_locked_database(shared_db):
    db, digest = shared_db
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(db)!r}); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        result = CliRunner().invoke(app, ["results", "--db", str(db)])
    finally:
        holder.kill()
        holder.wait()
    assert result.exit_code == 2
    assert "close the other process" in _error_line(result.stderr)
    _assert_intact(db, digest)


def test_corrupt_database(tmp_path):
    db = tmp_path / "results.duckdb"
    garbage = b"this is not a database" * 1000
    db.write_bytes(garbage)
    result = CliRunner().invoke(app, [*RUN, "--adapter", "asg", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "is not a readable DuckDB database" in _error_line(result.stderr)
    assert db.read_bytes() == garbage  # left as it was, for the user to restore
    assert not list(tmp_path.glob("results.records/*.json"))  # no run started


def _cut_short(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flipped(data: bytes) -> bytes:
    """A byte flipped in the middle of every 256 KiB block after DuckDB's 12 KiB of headers."""
    out = bytearray(data)
    for at in range(12288 + 131072, len(out), 262144):
        out[at] ^= 0x5A
    return bytes(out)


@pytest.mark.parametrize("damage", [_cut_short, _flipped], ids=["cut short", "byte flipped"])
def test_damaged_database(damage, shared_db, tmp_path):
    """A DuckDB file cut short or with flipped bytes opens, but its blocks fail their checksums: every
    command that writes refuses it before writing (the file stays byte-identical), and every read says
    so in one line."""
    db = tmp_path / "results.duckdb"
    db.write_bytes(damage(shared_db[0].read_bytes()))
    damaged = db.read_bytes()
    for command in (["reference", "load"], [*RUN, "--adapter", "asg"], ["results", "--model", "minilm"], ["list", "runs"]):
        result = CliRunner().invoke(app, [*command, "--db", str(db)])
        assert result.exit_code == 2, (command, result.output)
        line = _error_line(result.stderr)
        assert "the database is damaged" in line or "not a readable DuckDB database" in line, (command, line)
        assert db.read_bytes() == damaged, command
    assert not list(tmp_path.glob("results.records/*.json"))  # no run started


def test_older_schema(shared_db, tmp_path):
    """A store an older harness wrote (its meta row says schema v4): every command, reader or writer,
    refuses it with one line naming the schema this harness reads and how to re-make the store, and
    leaves it byte-identical."""
    import duckdb

    db = tmp_path / "results.duckdb"
    shutil.copy(shared_db[0], db)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    older = db.read_bytes()
    (run_id,) = read_sql(db, "SELECT run_id FROM runs WHERE adapter = 'asg'").run_id
    for command in (["reference", "load"], [*RUN, "--adapter", "asg"], ["results"], ["list", "runs"], ["show", run_id]):
        result = CliRunner().invoke(app, [*command, "--db", str(db)])
        assert result.exit_code == 2, (command, result.output)
        assert _error_line(result.stderr) == (
            f"error: {db} was written by an older harness (schema v4); this harness reads v5: "
            "re-make it with `make reference FRESH=1` or `harness run ... --db NEW.duckdb`"), command
        assert db.read_bytes() == older, command
    assert not list(tmp_path.glob("results.records/*.json"))  # no run started


def _mount_tmpfs(folder: Path, size: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs (a read-only or full file system)")
    folder.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True)
    if proc.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")


@pytest.fixture
def tmpfs(tmp_path):
    folder = tmp_path / "mnt"
    yield folder
    subprocess.run(["umount", str(folder)], capture_output=True)


def test_read_only_database_folder(shared_db, tmpfs):
    _mount_tmpfs(tmpfs, "64m")
    db = tmpfs / "results.duckdb"
    shutil.copy(shared_db[0], db)
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    result = CliRunner().invoke(app, [*RUN, "--adapter", "asg", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "is not writable" in _error_line(result.stderr)
    assert _digest(db) == shared_db[1]
    assert CliRunner().invoke(app, ["results", "--db", str(db)]).exit_code == 0  # reading still works


def test_full_disk(shared_db, tmpfs):
    _mount_tmpfs(tmpfs, "64m")
    db = tmpfs / "results.duckdb"
    shutil.copy(shared_db[0], db)
    with open(tmpfs / "filler", "wb") as f:  # fill the file system to the last block
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    result = CliRunner().invoke(app, [*RUN, "--adapter", "asg", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "the disk is full" in _error_line(result.stderr)
    assert _digest(db) == shared_db[1]


def test_nan_training_loss(shared_db, tmp_path, minilm_ref):
    """A checkpoint whose weights hold NaN: fine-tuning stops with one line, the run is recorded failed."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(minilm_ref.location)
    with torch.no_grad():
        model.embeddings.LayerNorm.weight.fill_(float("nan"))
    model.save_pretrained(tmp_path / "nan-minilm")
    AutoTokenizer.from_pretrained(minilm_ref.location).save_pretrained(tmp_path / "nan-minilm")
    db, digest = shared_db
    result = CliRunner().invoke(app, [*BASE, "--profile", "smoke", "--model", str(tmp_path / "nan-minilm"), "--adapter", "asg", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "fine-tuning diverged: the mean training loss is nan" in _error_line(result.stderr)
    failed = read_sql(db, "SELECT error FROM runs WHERE status = 'failed' AND model LIKE '%nan-minilm%'")
    assert len(failed) == 1 and failed.error[0].startswith("TrainingError: fine-tuning diverged")
    _assert_intact(db, digest)


def _as_at_a_terminal() -> None:
    """The child's SIGINT as a terminal's foreground job has it: default and unblocked. A worker
    process that earlier tests left with SIGINT ignored or blocked (a multiprocessing helper started
    from it) would hand that on, and Ctrl-C would never reach the run."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_mid_run(shared_db):
    """Ctrl-C while the baseline of a new seed fine-tunes: exit 130, one line, the run recorded failed.
    At the quick profile (78 steps, minutes): a smoke baseline's 3 steps could all end, and the run with
    them, before a busy machine delivers the signal."""
    db, digest = shared_db
    records = db.with_name(db.stem + ".records")
    before = set(records.glob("*.json"))
    quick = [*BASE, "--model", "minilm", "--profile", "quick"]
    proc = subprocess.Popen([HARNESS, *quick, "--adapter", "none", "--seed", "99", "--db", str(db)], stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            preexec_fn=_as_at_a_terminal)
    seen = []
    for line in proc.stderr:  # a progress line per step: interrupt once fine-tuning has begun (a quiet
        seen.append(line)     # machine finishes a smoke baseline in 5 s, so a fixed delay could miss it)
        if "fine-tuning:" in line:
            break
    else:
        pytest.fail("the run ended before fine-tuning began:\n" + "".join(seen))
    assert list(records.glob("*.lease")), "a run in progress holds a lease"
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    stderr = "".join(seen) + rest
    assert proc.returncode == 130, stderr
    assert "interrupted; the run in progress is recorded as failed" in _error_line(stderr)
    (new,) = set(records.glob("*.json")) - before
    run = read_sql(db, "SELECT status, error FROM runs WHERE run_id = ?", [new.stem])
    assert run.to_dict("records") == [{"status": "failed", "error": "interrupted (SIGINT)"}]
    assert not list(records.glob("*.lease"))
    _assert_intact(db, digest)
