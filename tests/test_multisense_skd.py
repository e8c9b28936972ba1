"""multisense (paper 004): smoke runs through `harness run` on MiniLM and mteb_clf, and bad input
exiting 2 with one line (SKD's tests: tests/test_skd.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.results.store import Store
from tests.conftest import read_sql


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return tmp_path_factory.mktemp("senses") / "results.duckdb"


def _run(db, adapter: str, *settings: str):
    args = ["run", "--suite", "mteb_clf", "--adapter", adapter, "--model", "minilm", "--profile", "smoke", "--db", str(db)]
    return CliRunner().invoke(app, args + [a for kv in settings for a in ("--set", kv)])


@pytest.mark.slow
def test_smoke_runs_report_the_dictionary(db, data_dir):
    result = _run(db, "multisense", "k=3", "clustering=mcl")
    assert result.exit_code == 0, result.output
    store = Store(db)
    (ms,) = [store.load(r) for r in read_sql(store.path, "SELECT run_id FROM runs WHERE adapter = 'multisense'").run_id]
    facts = ms.fit.details
    assert facts["clustering"] == "mcl" and 0 < facts["tokens_with_senses"] <= facts["fit_tokens"]
    hist = {int(n): c for n, c in facts["senses_per_token_histogram"].items()}  # senses -> tokens (JSON keys are strings)
    assert max(hist) > 3  # MCL's own count (at least 5 for a token with 5 vectors), not capped by k
    assert sum(hist.values()) == facts["tokens_with_senses"] == facts["table6"]["n_valid_tokens"]
    assert facts["table6"]["n_tokens_gt15_senses"] == sum(c for n, c in hist.items() if n > 15)
    assert facts["share_below_k"] == pytest.approx(sum(c for n, c in hist.items() if n < 3) / facts["tokens_with_senses"])
    # MCL ran on the tokens with 5 vectors or more, each of which gets at least 5 senses; the others keep theirs
    assert facts["mcl"]["tokens_clustered"] == sum(c for n, c in hist.items() if n >= 5) > 0
    assert 0 <= facts["mcl"]["tokens_one_cluster"] <= facts["mcl"]["tokens_clustered"]
    assert facts["fit_cache"]["key"] is not None and facts["fit_cache"]["note"] is None  # the MCL dictionary saves: its fit is cached
    assert ms.compression.storage_bytes_after == ms.compression.storage_bytes_before + facts["dictionary_bytes"]
    base = {(s.task, s.metric): s.value for s in store.load(ms.baseline_run_id).scores}
    assert len(ms.scores) == 2
    for s in ms.scores:  # %Base by hand from the baseline run's stored score
        assert s.pct_base == pytest.approx(100 * s.value / base[(s.task, s.metric)]), s

    result = _run(db, "multisense", "min_count=1000000")  # the smoke fit text has no such token
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]  # progress lines aside
    assert len(errors) == 1 and "gives no token a sense" in errors[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "adapter, setting, fragment",
    [
        ("multisense", "k=0", "k=0 must be a positive integer"),
        ("multisense", "clustering=agglomerative", "is not one of kmeans, mcl"),
    ],
)
def test_bad_config_exits_2_with_one_line(adapter, setting, fragment):
    result = CliRunner().invoke(app, ["run", "--suite", "mteb_clf", "--adapter", adapter, "--model", "minilm", "--set", setting])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output
