"""The results store: DuckDB (``results.duckdb``) behind one write path, JSON records first.

DuckDB allows one read-write process at a time, and a second process cannot even read while a
writer holds the file. So every write opens the database, commits one transaction and closes it;
readers retry briefly. Each finished or failed run is first written as a JSON record beside the
database (``<db stem>.records/<run_id>.json``); a record the database could not take (busy, or
the process died) is ingested by the next writer, so nothing is lost.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import duckdb
import pandas as pd

from harness.errors import StoreBusyError, StoreError
from harness.results.records import (
    CompressionReport,
    FitReport,
    LatencyStats,
    Provenance,
    RunRecord,
    RunSpec,
    Score,
)
from harness.results.reference import PaperResult

SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, config_hash VARCHAR NOT NULL, status VARCHAR NOT NULL,
    model VARCHAR, model_revision VARCHAR, adapter VARCHAR, adapter_config JSON,
    adapter_package VARCHAR, adapter_version VARCHAR, suite VARCHAR, suite_config JSON,
    profile VARCHAR, seed INTEGER, recipe JSON, adapter_budget JSON, data JSON, fit_data JSON, device VARCHAR,
    started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, wall_s DOUBLE, error VARCHAR, baseline_run_id VARCHAR,
    git_sha VARCHAR, host VARCHAR, pid INTEGER, hardware JSON, versions JSON, data_files JSON, details JSON,
    fit_seconds DOUBLE, fit_details JSON
);
CREATE TABLE IF NOT EXISTS scores (
    run_id VARCHAR NOT NULL, task VARCHAR, language VARCHAR, split VARCHAR, metric VARCHAR,
    value DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n INTEGER, higher_is_better BOOLEAN, pct_base DOUBLE, chance DOUBLE,
    shots INTEGER
);
ALTER TABLE scores ADD COLUMN IF NOT EXISTS shots INTEGER;
CREATE TABLE IF NOT EXISTS compression (
    run_id VARCHAR PRIMARY KEY, embedding_params_before BIGINT, embedding_params_after BIGINT,
    storage_bytes_before BIGINT, storage_bytes_after BIGINT, total_params_before BIGINT,
    total_params_after BIGINT, vocab_size_before BIGINT, vocab_size_after BIGINT, freed_slots BIGINT,
    emb_param_fraction DOUBLE, storage_fraction DOUBLE
);
CREATE TABLE IF NOT EXISTS items (
    run_id VARCHAR NOT NULL, task VARCHAR, language VARCHAR, split VARCHAR, metric VARCHAR, item VARCHAR,
    value DOUBLE, prediction VARCHAR, gold VARCHAR
);
CREATE TABLE IF NOT EXISTS efficiency (
    run_id VARCHAR NOT NULL, phase VARCHAR, batch INTEGER, seq_len INTEGER, p50_ms DOUBLE,
    p95_ms DOUBLE, throughput DOUBLE, peak_mem_mb DOUBLE, samples_ms DOUBLE[]
);
CREATE TABLE IF NOT EXISTS paper_results (
    paper VARCHAR, "table" VARCHAR, method VARCHAR, base_model VARCHAR, config VARCHAR, suite VARCHAR,
    paper_suite VARCHAR, task VARCHAR, language VARCHAR, setting VARCHAR, metric VARCHAR, value DOUBLE,
    pct_base DOUBLE, pct_base_printed DOUBLE, emb_param_fraction DOUBLE, model_param_fraction DOUBLE, notes VARCHAR
);
CREATE OR REPLACE VIEW results AS
SELECT r.run_id, r.model, r.adapter, CAST(r.adapter_config AS VARCHAR) AS config, r.suite,
       CAST(r.suite_config AS VARCHAR) AS suite_config, r.profile, r.seed, s.task, s.language, s.split,
       s.metric, s.value, s.ci_low, s.ci_high, s.n, s.pct_base, s.shots, c.emb_param_fraction,
       c.storage_bytes_after AS storage_bytes, r.baseline_run_id, r.finished_at
FROM scores s JOIN runs r USING (run_id) LEFT JOIN compression c USING (run_id)
WHERE r.status = 'finished';
"""

RUN_COLUMNS = (
    "run_id", "config_hash", "status", "model", "model_revision", "adapter", "adapter_config",
    "adapter_package", "adapter_version", "suite", "suite_config", "profile", "seed", "recipe", "adapter_budget",
    "data", "fit_data", "device", "started_at", "finished_at", "wall_s", "error", "baseline_run_id", "git_sha", "host",
    "pid", "hardware", "versions", "data_files", "details", "fit_seconds", "fit_details",
)


def default_path(explicit: str | Path | None = None) -> Path:
    return Path(explicit or os.environ.get("HARNESS_DB", "results.duckdb")).expanduser().resolve()


def _is_lock_error(err: Exception) -> bool:
    return "lock" in str(err).lower()


def _run_row(rec: RunRecord) -> tuple:
    s, p = rec.spec, rec.provenance
    return (
        rec.run_id, s.config_hash, rec.status, s.model, s.model_revision, s.adapter,
        json.dumps(s.adapter_config), p.adapter_package, p.adapter_version, s.suite,
        json.dumps(s.suite_config), s.profile, s.seed, json.dumps(s.recipe), json.dumps(s.adapter_budget),
        json.dumps(s.data), json.dumps(s.fit_data), rec.device, rec.started_at, rec.finished_at,
        rec.wall_s, rec.error, rec.baseline_run_id, p.git_sha, p.host, p.pid, json.dumps(p.hardware),
        json.dumps(p.versions), json.dumps(p.data_files), json.dumps(rec.details),
        rec.fit.seconds if rec.fit else None, json.dumps(rec.fit.details) if rec.fit else None,
    )


class Store:
    """Runs, scores, compression and efficiency in one DuckDB file."""

    def __init__(self, path: str | Path | None = None, retries: int = 20, wait_s: float = 0.25):
        self.path = default_path(path)
        self.records_dir = self.path.with_name(self.path.stem + ".records")
        self.retries, self.wait_s = retries, wait_s

    # -- connections -------------------------------------------------------------------------

    @contextmanager
    def _connect(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        if read_only and not self.path.exists():
            raise StoreError(f"no results database at {self.path}; run `harness run ...` first or pass --db PATH")
        for attempt in range(self.retries):
            try:
                con = duckdb.connect(str(self.path), read_only=read_only)
                break
            except duckdb.Error as err:
                if not _is_lock_error(err) or attempt == self.retries - 1:
                    error = StoreBusyError if _is_lock_error(err) else StoreError
                    raise error(f"cannot open {self.path}: {str(err).splitlines()[0]}; close the other process or use --db") from None
                time.sleep(self.wait_s)
        try:
            yield con
        finally:
            con.close()

    @contextmanager
    def _write(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect(read_only=False) as con:
            _check_schema(con, self.path)
            con.execute(SCHEMA)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    # -- writes ------------------------------------------------------------------------------

    def start(self, rec: RunRecord) -> None:
        """Record a run as running; also ingest leftover JSON records and mark dead runs failed."""
        pending = self._pending_records()
        with self._write() as con:
            for old in pending:
                self._upsert(con, old)
            self._fail_dead_runs(con)
            self._upsert(con, rec)
        for old in pending:
            self._record_path(old.run_id).with_suffix(".ingested").touch()

    def save(self, rec: RunRecord) -> bool:
        """Write the JSON record, then ingest it. Returns False when the DB was busy (kept on disk)."""
        path = self._record_path(rec.run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(rec.to_json())
        tmp.replace(path)
        try:
            with self._write() as con:
                self._upsert(con, rec)
        except StoreError:
            return False
        path.with_suffix(".ingested").touch()
        return True

    def replace_paper_results(self, rows: list[PaperResult]) -> None:
        """Replace the papers' reported numbers in one transaction (loading twice changes nothing)."""
        with self._write() as con:
            con.execute("DELETE FROM paper_results")
            marks = ", ".join("?" for _ in dataclasses.fields(PaperResult))
            con.executemany(f"INSERT INTO paper_results VALUES ({marks})", [dataclasses.astuple(r) for r in rows])

    def _record_path(self, run_id: str) -> Path:
        return self.records_dir / f"{run_id}.json"

    def _pending_records(self) -> list[RunRecord]:
        if not self.records_dir.is_dir():
            return []
        return [
            RunRecord.from_json(p.read_text())
            for p in sorted(self.records_dir.glob("*.json"))
            if not p.with_suffix(".ingested").exists()
        ]

    @staticmethod
    def _upsert(con: duckdb.DuckDBPyConnection, rec: RunRecord) -> None:
        for table in ("runs", "scores", "compression", "efficiency", "items"):
            con.execute(f"DELETE FROM {table} WHERE run_id = ?", [rec.run_id])
        marks = ", ".join("?" for _ in RUN_COLUMNS)
        con.execute(f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({marks})", list(_run_row(rec)))
        if rec.scores:
            con.executemany(
                "INSERT INTO scores VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [[rec.run_id, *dataclasses.astuple(s)] for s in rec.scores],
            )
        if rec.compression is not None:
            c = rec.compression
            con.execute(
                "INSERT INTO compression VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [rec.run_id, *dataclasses.astuple(c), c.emb_param_fraction, c.storage_fraction],
            )
        if rec.items:
            con.register("new_items", _items_frame(rec))
            con.execute("INSERT INTO items SELECT * FROM new_items")
            con.unregister("new_items")
        for e in rec.efficiency:
            con.execute(
                "INSERT INTO efficiency VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [rec.run_id, e.phase, e.batch, e.seq_len, e.p50_ms, e.p95_ms, e.throughput, e.peak_mem_mb, list(e.samples_ms)],
            )

    @staticmethod
    def _fail_dead_runs(con: duckdb.DuckDBPyConnection) -> None:
        host = socket.gethostname()
        for run_id, pid in con.execute("SELECT run_id, pid FROM runs WHERE status = 'running' AND host = ?", [host]).fetchall():
            if pid is not None and not _pid_alive(pid):
                con.execute(
                    "UPDATE runs SET status = 'failed', error = 'process died before the run finished' WHERE run_id = ?",
                    [run_id],
                )

    # -- reads -------------------------------------------------------------------------------

    def query(self, sql: str, params: list | None = None) -> pd.DataFrame:
        """Read-only, parameterised query; an absent database reads as empty where possible."""
        with self._connect(read_only=True) as con:
            return con.execute(sql, params or []).df()

    def find_finished(self, spec: RunSpec) -> RunRecord | None:
        """The newest finished run with the same config hash, if any (run reuse)."""
        if not self.path.exists():
            return None
        ids = self.query(
            "SELECT run_id FROM runs WHERE config_hash = ? AND status = 'finished' ORDER BY finished_at DESC LIMIT 1",
            [spec.config_hash],
        )
        return self.load(ids.run_id[0]) if len(ids) else None

    def load(self, run_id: str) -> RunRecord:
        """One run with its scores, compression, fit and efficiency; per-item outputs stay in the
        ``items`` table (query them with :meth:`query`), so ``items`` is empty here."""
        with self._connect(read_only=True) as con:
            cur = con.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE run_id = ?", [run_id])
            row = cur.fetchone()
            if row is None:
                raise StoreError(f"no run '{run_id}' in {self.path}; list runs with `harness list runs`")
            r = dict(zip(RUN_COLUMNS, row))
            scores = con.execute(
                "SELECT task, language, split, metric, value, ci_low, ci_high, n, higher_is_better, pct_base, chance, shots FROM scores WHERE run_id = ?",
                [run_id],
            ).fetchall()
            comp = con.execute(
                "SELECT embedding_params_before, embedding_params_after, storage_bytes_before, storage_bytes_after, "
                "total_params_before, total_params_after, vocab_size_before, vocab_size_after, freed_slots "
                "FROM compression WHERE run_id = ?",
                [run_id],
            ).fetchone()
            eff = con.execute(
                "SELECT phase, batch, seq_len, samples_ms, p50_ms, p95_ms, throughput, peak_mem_mb FROM efficiency WHERE run_id = ?",
                [run_id],
            ).fetchall()
        return _record_from_row(r, scores, comp, eff)


def _check_schema(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse to write a database made by another schema version (its tables lack or misplace columns)."""
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if "meta" not in tables:
        return
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is not None and row[0] != str(SCHEMA_VERSION):
        raise StoreError(f"{path} has results schema v{row[0]}, this harness writes v{SCHEMA_VERSION}; move it aside or pass --db NEW.duckdb")


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
        }))
    return pd.concat(frames, ignore_index=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat(timespec="seconds")


def _record_from_row(r: dict, scores: list, comp: tuple | None, eff: list) -> RunRecord:
    spec = RunSpec(
        r["model"], r["model_revision"], r["adapter"], json.loads(r["adapter_config"]), r["suite"],
        json.loads(r["suite_config"]), r["profile"], r["seed"], json.loads(r["recipe"]),
        json.loads(r["adapter_budget"] or "{}"), json.loads(r["data"] or "{}"), json.loads(r["fit_data"] or "{}"),
    )
    prov = Provenance(
        r["git_sha"], r["adapter_package"], r["adapter_version"], r["host"], r["pid"],
        json.loads(r["hardware"]), json.loads(r["versions"]), json.loads(r["data_files"]),
    )
    return RunRecord(
        run_id=r["run_id"], spec=spec, status=r["status"], started_at=_iso(r["started_at"]), device=r["device"],
        provenance=prov, finished_at=_iso(r["finished_at"]) if r["finished_at"] else None, wall_s=r["wall_s"],
        error=r["error"], baseline_run_id=r["baseline_run_id"],
        compression=CompressionReport(*comp) if comp else None,
        fit=FitReport(r["fit_seconds"], json.loads(r["fit_details"] or "{}")) if r["fit_seconds"] is not None else None,
        scores=[Score(*s) for s in scores],
        efficiency=[LatencyStats(e[0], e[1], e[2], tuple(e[3]), *e[4:]) for e in eff],
        details=json.loads(r["details"]) if r["details"] else {},
    )
