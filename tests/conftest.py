"""Shared fixtures: real packaged models, the shared data directory, DuckDB in tmp_path.

The tests run in the configuration users get (STYLE 17): the fit cache on, the data directory
the Makefile's ``make test`` gives (``../shared/data``), the models' cache where users have it.
The fit cache lives in one temporary folder per test session, shared by its xdist workers (entries are
written aside and renamed, as for two users' runs at once), so fits are shared across tests as
across a user's runs, and the user's own cache is neither read nor written. A test that needs the
cache off sets ``HARNESS_FIT_CACHE=off`` itself; one that counts entries points it at its own folder.

``make test`` runs one xdist worker per core (pyproject's addopts); each worker, and the commands it
starts, then uses one torch/OpenMP thread, so the workers do not oversubscribe the cores.

The ``gpu`` tier (tests marked ``gpu``: ``pytest -m gpu``) needs a CUDA device and is skipped, with
one line saying why, where torch sees none; CI never requires it. Without a GPU the Triton kernels
are tested on CPU tensors through Triton's interpreter, switched on here before Triton is imported.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HARNESS_DATA_DIR", str(REPO.parent / "shared" / "data"))
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # read by torch and faiss here and in the commands a test starts

import torch  # noqa: E402  (after OMP_NUM_THREADS: OpenMP reads it when torch loads it)

CUDA = torch.cuda.is_available()
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # read when a kernel is defined: the kernels then run on CPU tensors


def pytest_collection_modifyitems(config, items):
    """Skip the ``gpu`` tier where torch sees no CUDA device."""
    if CUDA:
        return
    skip = pytest.mark.skip(reason="gpu tier: torch sees no CUDA device (run `pytest -m gpu` on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--adapter", action="append", default=[], metavar="NAME",
        help="tests/test_conformance.py: check this installed adapter (repeatable; plugins included) instead of the built-in ones",
    )


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory) -> Path:
    """A folder every worker of the session shares. A store here is filled once: the first worker to
    need a run makes it, and the runner's run lock makes any other wait for it and reuse it, as two
    users' processes on one database would."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def baselines_store(shared_dir):
    """The session's store of unchanged-model smoke runs (one per suite, model and settings), made once
    for its workers: the suite contract and the lm_eval task tests read the same run."""
    from harness.results.store import Store

    return Store(shared_dir / "baselines.duckdb")


def with_items(store, record):
    """``record`` with its per-item outputs read from ``store`` (a reused run's stay there)."""
    import dataclasses

    return dataclasses.replace(record, items=store.items(record.run_id))


@pytest.fixture(scope="session", autouse=True)
def fit_cache(shared_dir) -> Path:
    """The session's fit cache folder, one for all its workers (set before any session fixture runs a fit)."""
    folder = shared_dir / "fits"
    folder.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_FIT_CACHE", str(folder))
        yield folder


@pytest.fixture(autouse=True)
def _private_db(tmp_path, monkeypatch):
    """Tests never write the committed results.duckdb."""
    monkeypatch.setenv("HARNESS_DB", str(tmp_path / "results.duckdb"))


@pytest.fixture(autouse=True)
def _main_module_kept():
    """Streamlit's AppTest installs the page it runs as ``sys.modules["__main__"]`` and leaves it there;
    a process a later test in the same worker spawns (multiprocessing re-runs the parent's main) would
    then run that page's script and die."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = Path(os.environ["HARNESS_DATA_DIR"])
    if not (path / "xnli" / "xnli.test.tsv").exists():
        pytest.fail(f"shared data not found at {path}; set HARNESS_DATA_DIR")
    return path


@pytest.fixture(scope="session")
def minilm_ref():
    from harness.sources import models

    return models.resolve("minilm")


@pytest.fixture(scope="session")
def minilm_table(minilm_ref):
    """MiniLM's real (30522, 384) token-embedding table."""
    from transformers import AutoModel

    return AutoModel.from_pretrained(minilm_ref.location).get_input_embeddings().weight.detach()


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """SmolLM2's real tokenizer (byte-level BPE, V=49152), without the model."""
    from transformers import AutoTokenizer

    from harness.sources import models

    return AutoTokenizer.from_pretrained(models.resolve("smollm2").location)


@pytest.fixture
def tiny_decoder():
    """A two-layer random Llama with tied embeddings (V=512, D=64): SmolLM2's structure, small."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="session")
def smoke_db(shared_dir, data_dir) -> Path:
    """A results database filled by real smoke runs: baseline + ASG (k=256) on MiniLM / XNLI.

    One for the session's workers (:func:`shared_dir`): every test that reads a store (results,
    leaderboard) shares one pair of runs; a test that writes works on a copy.
    """
    from typer.testing import CliRunner

    from harness.cli import app

    (shared_dir / "smoke").mkdir(exist_ok=True)
    db = shared_dir / "smoke" / "results.duckdb"
    args = ["run", "--suite", "xnli", "--adapter", "asg", "--model", "minilm", "--profile", "smoke", "--set", "k=256", "--db", str(db)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture(scope="session")
def leaderboard_db(smoke_db, tmp_path_factory) -> Path:
    """A copy of ``smoke_db`` with the papers' reported numbers loaded (``harness reference load``)."""
    import shutil

    from typer.testing import CliRunner

    from harness.cli import app

    db = tmp_path_factory.mktemp("leaderboard") / "results.duckdb"
    shutil.copy(smoke_db, db)
    result = CliRunner().invoke(app, ["reference", "load", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db


def assert_items_reproduce_scores(scores, items, without=(), every=True) -> None:
    """Every score (except metrics in ``without``; with ``every=False`` only those that have items
    behind them) is what the per-item outputs behind it give (:func:`harness.measure.compare.value_of`:
    ``sum(values) / sum(weights)``, or the corpus statistic their metric names), macro-averaged for
    ``avg``: what the paired statistics resample."""
    from harness.measure.compare import items_behind, value_of

    for s in scores:
        if s.metric in without:
            continue
        behind = items_behind(s, items)
        if not behind and not every:
            continue
        assert behind, f"no per-item outputs behind {s}"
        assert value_of(behind) == pytest.approx(s.value, rel=1e-9, abs=1e-12), s
        assert sum(len(i.ids) for i in behind) == s.n and all(len(set(i.ids)) == len(i.ids) for i in behind)


def read_sql(db, statement: str, params: list | None = None):
    """The stored rows themselves, by plain SQL on a read-only DuckDB connection (a DataFrame): what a
    test checks of the tables beside the typed reads the harness makes (:mod:`harness.results.queries`)."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(statement, params or []).df()
