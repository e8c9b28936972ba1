"""The results store: DuckDB (``results.duckdb``) behind one write path, JSON records first.

DuckDB allows one read-write process at a time, and a second process cannot even read while a
writer holds the file. So every write opens the database, commits one transaction and closes it;
readers retry briefly. Every state of a run (running, finished, failed) is first written as a JSON
record in the journal beside the database (``<db stem>.records/<run_id>.json``,
:mod:`harness.results.journal`); each write then ingests every pending record in one transaction, so
a record the database could not take (busy, or the process died) is ingested by the next writer and
nothing is lost. Runs whose process died are marked failed by the next writer
(:mod:`harness.results.liveness`).

Schema version: this harness reads and writes results schema v5 (:data:`SCHEMA_VERSION`). A store
of another version is refused, by readers and writers alike, with one line that says which schema
this harness reads and how to make a new store; nothing is written to it. Reads go through
:mod:`harness.results.queries`, which holds their SQL; the Store keeps the connections, the write
path and the schema.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb
import pandas as pd

from harness.errors import EmptyStoreError, StoreBusyError, StoreError
from harness.results import liveness, queries
from harness.results.journal import Journal
from harness.results.records import Comparison, ItemOutputs, RunRecord, RunSpec, Score
from harness.results.reference import PaperResult

SCHEMA_VERSION = 5

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, config_hash VARCHAR NOT NULL, status VARCHAR NOT NULL,
    model VARCHAR, model_revision VARCHAR, adapter VARCHAR, adapter_config JSON,
    adapter_package VARCHAR, adapter_version VARCHAR, suite VARCHAR, suite_config JSON,
    profile VARCHAR, seed INTEGER, recipe JSON, adapter_budget JSON, data JSON, fit_data JSON, device VARCHAR,
    started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, wall_s DOUBLE, error VARCHAR, baseline_run_id VARCHAR,
    git_sha VARCHAR, host VARCHAR, pid INTEGER, hardware JSON, versions JSON, data_files JSON, details JSON,
    fit_seconds DOUBLE, fit_details JSON, variant VARCHAR, code VARCHAR
);
CREATE TABLE IF NOT EXISTS scores (
    run_id VARCHAR NOT NULL, task VARCHAR, language VARCHAR, split VARCHAR, metric VARCHAR,
    value DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n INTEGER, higher_is_better BOOLEAN, pct_base DOUBLE, chance DOUBLE,
    shots INTEGER, setting VARCHAR
);
CREATE TABLE IF NOT EXISTS comparisons (
    run_id VARCHAR NOT NULL, task VARCHAR, language VARCHAR, split VARCHAR, metric VARCHAR, baseline_run_id VARCHAR,
    n_paired INTEGER, pct_base_ci_low DOUBLE, pct_base_ci_high DOUBLE, difference DOUBLE, difference_ci_low DOUBLE,
    difference_ci_high DOUBLE, chance_adjusted_pct_base DOUBLE, p_value DOUBLE, flip_rate DOUBLE, agreement DOUBLE,
    baseline_above_chance BOOLEAN, unpaired VARCHAR
);
CREATE TABLE IF NOT EXISTS compression (
    run_id VARCHAR PRIMARY KEY, embedding_params_before BIGINT, embedding_params_after BIGINT,
    storage_bytes_before BIGINT, storage_bytes_after BIGINT, total_params_before BIGINT,
    total_params_after BIGINT, vocab_size_before BIGINT, vocab_size_after BIGINT, freed_slots BIGINT,
    emb_param_fraction DOUBLE, storage_fraction DOUBLE
);
CREATE TABLE IF NOT EXISTS items (
    run_id VARCHAR NOT NULL, task VARCHAR, language VARCHAR, split VARCHAR, metric VARCHAR, item VARCHAR,
    value DOUBLE, prediction VARCHAR, gold VARCHAR, weight DOUBLE, cluster VARCHAR
);
CREATE TABLE IF NOT EXISTS efficiency (
    run_id VARCHAR NOT NULL, phase VARCHAR, batch INTEGER, seq_len INTEGER, p50_ms DOUBLE,
    p95_ms DOUBLE, throughput DOUBLE, peak_mem_mb DOUBLE, samples_ms DOUBLE[]
);
CREATE TABLE IF NOT EXISTS paper_results (
    paper VARCHAR, "table" VARCHAR, method VARCHAR, base_model VARCHAR, config VARCHAR, suite VARCHAR,
    paper_suite VARCHAR, task VARCHAR, language VARCHAR, setting VARCHAR, metric VARCHAR, value DOUBLE,
    pct_base DOUBLE, pct_base_printed DOUBLE, emb_param_fraction DOUBLE, model_param_fraction DOUBLE, notes VARCHAR,
    paper_setting VARCHAR
);
CREATE OR REPLACE VIEW results AS
SELECT r.run_id, r.code, r.model, r.adapter, CAST(r.adapter_config AS VARCHAR) AS config, r.suite,
       CAST(r.suite_config AS VARCHAR) AS suite_config, r.profile, r.seed, r.variant, s.task, s.language, s.split,
       s.metric, s.setting, s.shots, s.value, s.ci_low, s.ci_high, s.n, s.chance, s.pct_base, k.pct_base_ci_low,
       k.pct_base_ci_high, k.chance_adjusted_pct_base, k.difference, k.difference_ci_low, k.difference_ci_high,
       k.p_value, k.flip_rate, k.agreement, k.n_paired, k.unpaired, k.baseline_above_chance, c.emb_param_fraction,
       c.storage_bytes_after AS storage_bytes, r.baseline_run_id, r.finished_at
FROM scores s JOIN runs r USING (run_id) LEFT JOIN compression c USING (run_id)
LEFT JOIN comparisons k ON k.run_id = s.run_id AND k.task = s.task AND k.language = s.language
     AND k.split = s.split AND k.metric = s.metric
WHERE r.status = 'finished';
"""

RUN_COLUMNS = (
    "run_id", "config_hash", "status", "model", "model_revision", "adapter", "adapter_config",
    "adapter_package", "adapter_version", "suite", "suite_config", "profile", "seed", "recipe", "adapter_budget",
    "data", "fit_data", "device", "started_at", "finished_at", "wall_s", "error", "baseline_run_id", "git_sha", "host",
    "pid", "hardware", "versions", "data_files", "details", "fit_seconds", "fit_details", "variant", "code",
)
SCORE_COLUMNS = tuple(f.name for f in dataclasses.fields(Score))
COMPARISON_COLUMNS = tuple(f.name for f in dataclasses.fields(Comparison))


def default_path(explicit: str | Path | None = None) -> Path:
    return Path(explicit or os.environ.get("HARNESS_DB", "results.duckdb")).expanduser().resolve()


def _is_lock_error(err: Exception) -> bool:
    """DuckDB's refusal while another process holds the file ("Could not set lock on file ...
    Conflicting lock is held"); a damaged block's checksum error names a "block", which is no lock."""
    text = str(err).lower()
    return "could not set lock" in text or "conflicting lock" in text


def _run_row(rec: RunRecord) -> tuple:
    s, p = rec.spec, rec.provenance
    return (
        rec.run_id, s.config_hash, rec.status, s.model, s.model_revision, s.adapter,
        json.dumps(s.adapter_config), p.adapter_package, p.adapter_version, s.suite,
        json.dumps(s.suite_config), s.profile, s.seed, json.dumps(s.recipe), json.dumps(s.adapter_budget),
        json.dumps(s.data), json.dumps(s.fit_data), rec.device, rec.started_at, rec.finished_at,
        rec.wall_s, rec.error, rec.baseline_run_id, p.git_sha, p.host, p.pid, json.dumps(p.hardware),
        json.dumps(p.versions), json.dumps(p.data_files), json.dumps(rec.details),
        rec.fit.seconds if rec.fit else None, json.dumps(rec.fit.details) if rec.fit else None, s.variant, s.code,
    )


class Store:
    """Runs, scores, compression and efficiency in one DuckDB file."""

    def __init__(self, path: str | Path | None = None, retries: int = 20, wait_s: float = 0.25):
        self.path = default_path(path)
        self.records_dir = self.path.parent / (self.path.stem + ".records")  # with_name() refuses "/" before _connect can say it is a folder
        self.journal = Journal(self.records_dir)
        self.retries, self.wait_s = retries, wait_s

    # -- connections -------------------------------------------------------------------------

    @contextmanager
    def _connect(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        if self.path.is_dir():
            raise StoreError(f"--db {self.path} is a folder; pass a database file, e.g. --db {self.path / 'results.duckdb'} (made on the first run)")
        if read_only and not self.path.exists():
            raise StoreError(f"no results database at {self.path}; run `harness run ...` first or pass --db PATH")
        for attempt in range(self.retries):
            try:
                con = duckdb.connect(str(self.path), read_only=read_only)
                break
            except duckdb.Error as err:
                if not _is_lock_error(err):
                    raise StoreError(f"cannot open {self.path}: {str(err).splitlines()[0]}; it is not a readable DuckDB database: restore it or pass --db another file") from None
                if attempt == self.retries - 1:
                    raise StoreBusyError(f"cannot open {self.path}: {str(err).splitlines()[0]}; close the other process or use --db") from None
                time.sleep(self.wait_s)
        try:
            yield con
        except duckdb.Error as err:  # the one place a damaged file becomes its one-line error
            raise StoreError(
                f"cannot read {self.path}: {str(err).splitlines()[0]}; the database is damaged: restore it from a copy "
                "(`git checkout results.duckdb` for the committed one) or pass --db another file"
            ) from None
        finally:
            con.close()

    @contextmanager
    def reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection to a database of this schema version, for :mod:`harness.results.queries`
        (the module that holds the read SQL); EmptyStoreError for a file without the harness's tables."""
        with self._connect(read_only=True) as con:
            _check_schema(con, self.path, writing=False)
            yield con

    def _check_intact(self) -> None:
        """Before a write opens the file read-write: its schema version, then every column of every
        table read read-only (DuckDB checks each block's checksum as it reads it), so a store of
        another version or a damaged one (cut short, a flipped byte) is refused with its one-line
        error and left byte-identical, never rewritten."""
        if not self.path.exists():
            return
        with self._connect(read_only=True) as con:
            _check_schema(con, self.path, writing=True)
            tables = con.execute("SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'").fetchall()
            for (table,) in tables:
                con.execute(f'SELECT max(hash(COLUMNS(*))) FROM "{table}"').fetchall()

    @contextmanager
    def _write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._check_intact()
        with self._connect(read_only=False) as con:
            con.execute(SCHEMA)
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
                yield con
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    # -- writes ------------------------------------------------------------------------------

    def start(self, rec: RunRecord) -> None:
        """Record a run as running (journal first, then the database unless it is busy)."""
        self.journal.write(rec)
        try:
            self.ingest()
        except StoreError:  # not busy: a corrupt database or another schema; the run never started
            self.journal.path(rec.run_id).unlink(missing_ok=True)
            raise

    def save(self, rec: RunRecord) -> bool:
        """Write the JSON record, then ingest it. Returns False when the DB was busy (kept on disk)."""
        self.journal.write(rec)
        try:
            ingested = self.ingest()
        except StoreError:
            return False
        return ingested is not None and rec.run_id in ingested

    def check_writable(self) -> None:
        """A writer's first step, before any run starts: the checks every write makes
        (:meth:`_check_intact`), so a store of another schema version, or a damaged one, is refused
        with its one line before any work is done."""
        self._check_intact()

    def ingest(self) -> list[str] | None:
        """Ingest every pending journal record and mark runs of dead processes failed, in one
        transaction; returns the run ids ingested, or None when another process holds the database."""
        entries = self.journal.pending()
        try:
            with self._write() as con:
                for e in entries:
                    self._upsert(con, e.record)
                self._fail_dead_runs(con)
        except StoreBusyError:
            return None
        self.journal.mark_ingested(entries)
        return [e.record.run_id for e in entries]

    def replace_paper_results(self, rows: list[PaperResult]) -> None:
        """Replace the papers' reported numbers in one transaction (loading twice changes nothing)."""
        names = [f.name for f in dataclasses.fields(PaperResult)]
        # one frame inserted by name (executemany takes about 1.5 ms a row); object columns keep None as NULL
        frame = pd.DataFrame({n: pd.Series([getattr(r, n) for r in rows], dtype=object) for n in names})
        with self._write() as con:
            con.execute("DELETE FROM paper_results")
            _insert_frame(con, "paper_results", frame)

    @staticmethod
    def _upsert(con: duckdb.DuckDBPyConnection, rec: RunRecord) -> None:
        for table in ("runs", "scores", "compression", "efficiency", "items", "comparisons"):
            con.execute(f"DELETE FROM {table} WHERE run_id = ?", [rec.run_id])
        marks = ", ".join("?" for _ in RUN_COLUMNS)
        con.execute(f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({marks})", list(_run_row(rec)))
        for table, columns, rows in (("scores", SCORE_COLUMNS, rec.scores), ("comparisons", COMPARISON_COLUMNS, rec.comparisons)):
            if rows:
                con.executemany(
                    f"INSERT INTO {table} (run_id, {', '.join(columns)}) VALUES (?, {', '.join('?' for _ in columns)})",
                    [[rec.run_id, *dataclasses.astuple(row)] for row in rows],
                )
        if rec.compression is not None:
            c = rec.compression
            con.execute(
                "INSERT INTO compression VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [rec.run_id, *dataclasses.astuple(c), c.emb_param_fraction, c.storage_fraction],
            )
        if rec.items:
            _insert_frame(con, "items", _items_frame(rec))
        for e in rec.efficiency:
            con.execute(
                "INSERT INTO efficiency VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [rec.run_id, e.phase, e.batch, e.seq_len, e.p50_ms, e.p95_ms, e.throughput, e.peak_mem_mb, list(e.samples_ms)],
            )

    def _fail_dead_runs(self, con: duckdb.DuckDBPyConnection) -> None:
        for run_id, host, pid in con.execute("SELECT run_id, host, pid FROM runs WHERE status = 'running'").fetchall():
            if liveness.alive(self.records_dir, run_id, host, pid) is False:
                con.execute(
                    "UPDATE runs SET status = 'failed', error = 'process died before the run finished' WHERE run_id = ?",
                    [run_id],
                )

    # -- reads -------------------------------------------------------------------------------

    def tables(self) -> set[str]:
        """The tables the database holds: none for a missing file or a DuckDB file without the
        harness's tables (where a read raises EmptyStoreError), so a reader can show an empty view."""
        if not self.path.exists():
            return set()
        with self._connect(read_only=True) as con:
            return _tables(con)

    def items(self, run_id: str) -> list[ItemOutputs]:
        """A run's per-item outputs (:func:`harness.results.queries.run_items`)."""
        return queries.run_items(self, run_id)

    def find_finished(self, spec: RunSpec) -> RunRecord | None:
        """The newest finished run with the same config hash, if any (run reuse): in the database, or
        still waiting in the journal."""
        waiting = [e.record for e in self.journal.pending() if e.record.status == "finished" and e.record.spec.config_hash == spec.config_hash]
        if waiting:
            return max(waiting, key=lambda r: r.finished_at or "")
        if not self.path.exists():
            return None
        try:
            run_id = queries.newest_finished(self, spec.config_hash)
        except EmptyStoreError:
            return None
        return self.load(run_id) if run_id is not None else None

    def stale_run_ids(self) -> list[str]:
        """Runs made by other code than the installed one (their code fingerprint differs, or they
        have none): kept in the store, never reused, hidden by default from results and the leaderboard."""
        return queries.stale_run_ids(self)

    def load(self, run_id: str) -> RunRecord:
        """One run with its scores, comparisons, compression, fit and efficiency; per-item outputs stay
        in the ``items`` table (:meth:`items`), so ``items`` is empty here."""
        return queries.record(self, run_id)


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def _schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The database's schema version; None for a database without the meta table (new or empty);
    a meta table without the key counts as this version."""
    if "meta" not in _tables(con):
        return None
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row is not None else SCHEMA_VERSION


def _check_schema(con: duckdb.DuckDBPyConnection, path: Path, writing: bool) -> None:
    """Refuse a database of another schema version with one line; a reader also refuses a file
    without the harness's tables (EmptyStoreError: no runs yet), which a writer fills."""
    version = _schema_version(con)
    if version is None:
        if not writing and "runs" not in _tables(con):
            raise EmptyStoreError(f"no runs in {path} yet; `harness run --suite SUITE --adapter ADAPTER --db {path}` stores the first")
        return
    if version < SCHEMA_VERSION:
        raise StoreError(
            f"{path} was written by an older harness (schema v{version}); this harness reads v{SCHEMA_VERSION}: "
            "re-make it with `make reference FRESH=1` or `harness run ... --db NEW.duckdb`"
        )
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} has results schema v{version}, this harness uses v{SCHEMA_VERSION}; move it aside or pass --db NEW.duckdb")


def _insert_frame(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> None:
    """Append ``frame``'s rows to ``table``, columns matched by name."""
    con.register(f"new_{table}", frame)
    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM new_{table}")
    con.unregister(f"new_{table}")


def _items_frame(rec: RunRecord) -> pd.DataFrame:
    """One row per item of every ItemOutputs of the run, in the ``items`` table's column order."""
    frames = []
    for it in rec.items:
        n = len(it.ids)
        frames.append(pd.DataFrame({
            "run_id": rec.run_id, "task": it.task, "language": it.language, "split": it.split, "metric": it.metric,
            "item": list(it.ids), "value": list(it.values),
            "prediction": list(it.predictions) if it.predictions else [None] * n,
            "gold": list(it.gold) if it.gold else [None] * n,
            "weight": list(it.weights) if it.weights else [None] * n,
            "cluster": list(it.clusters) if it.clusters else [None] * n,
        }))
    return pd.concat(frames, ignore_index=True)
