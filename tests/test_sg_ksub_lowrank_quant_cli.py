"""sg, ksub, lowrank and quant through `harness run`: smoke runs end to end (one shared baseline), bad configs exit 2."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results.records import BASE_PHASE
from harness.results.store import Store
from tests.conftest import read_sql

V, D = 30522, 384

SMOKE = {
    "sg": (["fraction=0.01"], lambda f: 0.0095 < f <= 305 / V),
    "ksub": (["allocation=clustered", "kmeans=equal"], lambda f: f == pytest.approx(32 / V)),
    "lowrank": (["r=16"], lambda f: f == pytest.approx(16 * (V + D) / (V * D))),
    "quant": (["bits=4"], lambda f: f == 1.0),
}
STORAGE = {  # bytes after, id maps and scales included
    "ksub": 32 * D * 4 + V * 3,
    "lowrank": 16 * (V + D) * 4,
    "quant": V * D // 2 + V * 4,
}


@pytest.fixture(scope="module")
def db(smoke_db, tmp_path_factory):
    """A copy of the session's smoke store: the methods share its baseline, as they would a user's."""
    db = tmp_path_factory.mktemp("more-adapters") / "results.duckdb"
    shutil.copy(smoke_db, db)
    return db


@pytest.mark.slow
@pytest.mark.parametrize("adapter", SMOKE)
def test_smoke_run_end_to_end(db, data_dir, adapter):
    settings, fraction_ok = SMOKE[adapter]
    args = ["run", "--suite", "xnli", "--adapter", adapter, "--model", "minilm", "--profile", "smoke", "--db", str(db)]
    result = CliRunner().invoke(app, args + [a for kv in settings for a in ("--set", kv)])
    assert result.exit_code == 0, result.output
    store = Store(db)
    runs = read_sql(store.path, f"SELECT run_id, status FROM runs WHERE adapter = '{adapter}'")
    assert runs.status.tolist() == ["finished"]
    record = store.load(runs.run_id[0])
    assert fraction_ok(record.compression.emb_param_fraction)
    assert record.compression.storage_bytes_before == V * D * 4
    if adapter in STORAGE:
        assert record.compression.storage_bytes_after == STORAGE[adapter]
    assert len(record.scores) == 16 and all(s.pct_base is not None or s.value == 0 for s in record.scores)
    phases = {e.phase: e for e in record.efficiency}
    assert set(phases) == {"forward", BASE_PHASE + "forward"}  # the unchanged model is timed in the same run
    assert all(e.throughput > 0 for e in phases.values())
    assert read_sql(store.path, "SELECT count(*) AS n FROM runs WHERE adapter = 'none'").n[0] == 1  # the stored baseline, reused


@pytest.mark.parametrize(
    "adapter, setting, fragment",
    [
        ("sg", "fraction=0", "fraction=0.0 must be in (0, 1]"),
        ("sg", "fraction=0.00001", "gives no group for V=30522"),
        ("ksub", "K=385", "K=385 sub-embeddings cannot split a table 384 wide"),
        ("ksub", "M=20", "M=20 gives 20^3 < V=30522 codes"),
        ("ksub", "kmeans=equal", "kmeans=equal applies to clustered allocation"),
        ("ksub", "allocation=kmeans", "is not one of random, clustered"),
        ("lowrank", "r=400", "nothing is saved; pick r <= 379"),
        ("quant", "bits=3", "bits=3 is not supported"),
    ],
)
def test_bad_config_exits_2_with_one_line(adapter, setting, fragment):
    result = CliRunner().invoke(app, ["run", "--suite", "xnli", "--adapter", adapter, "--model", "minilm", "--set", setting])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output
