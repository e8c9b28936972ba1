"""The committed store's reference matrix: the packaged matrix holds what the store must
answer, and ``harness list matrix`` tells each entry current, stale or missing against a store, so
``make reference`` runs only what is to do (``--todo``)."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import ConfigError
from harness.registry import SUITES
from harness.results.store import Store
from harness.runner import matrix
from tests.conftest import read_sql

TABLE_METHODS = {"asg", "sg", "ksub", "lowrank", "quant"}


def test_a_matrix_line_reads_as_a_run_and_a_bad_line_names_itself():
    entries = matrix.parse("## one\nxnli me5-small asg k=256   # a note\n\n# a comment\nbpb smollm2 asg --recover=100 --recover-lora\n")
    assert [(e.section, e.suite, e.model, e.adapter, e.settings, e.options, e.note) for e in entries] == [
        ("one", "xnli", "me5-small", "asg", ("k=256",), (), "a note"),
        ("one", "bpb", "smollm2", "asg", (), (("recover", 100), ("recover_lora", True)), ""),
    ]
    request = entries[1].request()
    assert (request.recover, request.recover_lora, request.profile, request.seed) == (100, True, "quick", 0)
    with pytest.raises(ConfigError, match=r"m:2: '--seed=3' is no run option; use key=value settings and --recover"):
        matrix.parse("xnli me5-small asg\nxnli me5-small asg --seed=3", "m")
    with pytest.raises(ConfigError, match=r"m:1: '--recover=many': the value must be of type int"):
        matrix.parse("bpb smollm2 asg --recover=many", "m")
    (pretrained,) = matrix.parse("glue minilm ksub tasks=sst2 --pretrain=500")  # an option whose default is None
    assert pretrained.request().pretrain == 500
    with pytest.raises(ConfigError, match=r"m:1: '--pretrain=long': the value must be of type int, e.g. --pretrain=100"):
        matrix.parse("glue minilm ksub --pretrain=long", "m")
    with pytest.raises(ConfigError, match="m:1: 'k256' is neither a key=value setting nor a --run-option"):
        matrix.parse("xnli me5-small asg k256", "m")
    with pytest.raises(ConfigError, match="m:1: 'xnli asg' needs at least suite, model and adapter"):
        matrix.parse("xnli asg", "m")


def test_the_packaged_matrix_compares_the_table_methods_and_covers_every_suite():
    """The table methods (ASG at two budgets, int8 and int4) on me5-small XNLI and SmolLM2 bpb, and a
    method on every suite but dbpedia14 (no data on hand) and qa_generative (no packaged encoder-decoder)."""
    entries = matrix.read()
    for suite, model in (("xnli", "me5-small"), ("bpb", "smollm2")):
        posthoc = [e for e in entries if (e.suite, e.model) == (suite, model) and not e.recover]
        assert {e.adapter for e in posthoc} >= TABLE_METHODS, suite
        assert len({e.settings for e in posthoc if e.adapter == "asg"}) >= 2, f"{suite}: ASG at one budget"
        assert {"bits=4"} <= {s for e in posthoc if e.adapter == "quant" for s in e.settings}, f"{suite}: no int4"
    assert {e.suite for e in entries} == set(SUITES.names()) - {"dbpedia14", "qa_generative"}
    controls = [e for e in entries if e.adapter == "none"]  # a none entry is only the pretraining's control
    assert all(dict(e.options).get("pretrain") == 0 for e in controls), "baselines run with their entries"
    assert len({e.line for e in entries}) == len(entries), "an entry twice"


@pytest.fixture
def store(smoke_db, tmp_path) -> Store:
    """The smoke store (baseline + ASG k=256 on MiniLM XNLI) and an ASG k=128 run made by other code."""
    shutil.copy(smoke_db, tmp_path / "r.duckdb")
    store = Store(tmp_path / "r.duckdb")
    (asg,) = [store.load(r) for r in read_sql(store.path, "SELECT run_id FROM runs WHERE adapter = 'asg'").run_id]
    old = dataclasses.replace(asg.spec, adapter_config={**asg.spec.adapter_config, "k": 128}, code="older-code")
    store.save(dataclasses.replace(asg, run_id="old-asg-128", spec=old, wall_s=90.0))
    return store


def test_each_entry_reads_current_stale_or_missing_and_only_those_not_current_are_to_do(store, tmp_path):
    file = tmp_path / "matrix.txt"
    file.write_text("## smoke\nxnli minilm asg k=256\nxnli minilm asg k=128\nxnli minilm quant   # int8\n")
    frame = matrix.status(matrix.read(file), store, profile="smoke").set_index("entry")
    assert list(frame.status) == [matrix.CURRENT, matrix.STALE, matrix.MISSING, matrix.CURRENT]  # the baseline last
    assert frame.run_id["xnli minilm asg k=128"] == "old-asg-128" and frame.minutes["xnli minilm asg k=128"] == 1.5
    assert frame.estimate["xnli minilm quant"] == "~"  # nothing like it stored: its baseline's minutes
    assert frame.minutes["xnli minilm quant"] == frame.minutes["xnli minilm none"]
    assert list(frame.todo) == [False, True, True, False]
    out = CliRunner().invoke(app, ["list", "matrix", "--db", str(store.path), "--matrix", str(file), "--profile", "smoke", "--todo"])
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines() == ["xnli minilm asg k=128", "xnli minilm quant"]
    listed = CliRunner().invoke(app, ["list", "matrix", "--db", str(store.path), "--matrix", str(file), "--profile", "smoke"])
    said = " ".join(listed.stdout.split())  # prose folds at spaces to fit the terminal
    assert "4 runs (2 current, 1 stale, 1 missing)" in said and "the whole matrix takes about" in said
    bad = CliRunner().invoke(app, ["list", "matrix", "--matrix", str(tmp_path / "none.txt")])
    assert bad.exit_code == 2 and "cannot read matrix file" in bad.output and "No such file" in bad.output


def test_a_remembered_spec_is_the_plans_until_a_file_it_read_changes(tmp_path, monkeypatch, data_dir):
    """What ``harness list matrix`` takes instead of planning again: the spec the last plan of the same
    request made, with the seed put in, and nothing once a data file that plan read has changed."""
    from harness.runner.plan import plan
    from harness.runner.request import RunRequest, planned_spec

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copytree(data_dir / "word_similarity", tmp_path / "data" / "word_similarity")
    (tmp_path / "data" / "wikitext2").symlink_to(data_dir / "wikitext2")  # the suite's context corpus
    request = RunRequest("word_sim", "quant", "minilm", "smoke", data_dir=str(tmp_path / "data"))
    assert planned_spec(request) is None  # never planned
    spec = plan(request).spec
    assert planned_spec(request).config_hash == spec.config_hash
    other_seed = dataclasses.replace(request, seed=3)
    assert planned_spec(other_seed).config_hash == plan(other_seed).spec.config_hash != spec.config_hash
    (changed, _), *_ = spec.data.items()
    path = tmp_path / "data" / changed
    path.chmod(0o644)
    path.write_text(path.read_text() + "\n")
    assert planned_spec(request) is None
    assert plan(request).spec.data[changed] != spec.data[changed]


def test_plans_inside_nested_remembering_blocks_are_written_once_and_kept(tmp_path, monkeypatch, data_dir):
    """A ``remembering()`` block inside another leaves the writing to the outer one: what the plans
    remembered is in the cache file after the outer block, not lost to the inner block's end."""
    from harness.runner.plan import plan
    from harness.runner.request import RunRequest, planned_spec, remembering

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    request = RunRequest("word_sim", "quant", "minilm", "smoke", data_dir=str(data_dir))
    with remembering():
        with remembering():
            spec = plan(request).spec
        assert not list((tmp_path / "cache").rglob("planned_data.json"))  # held until the outer block ends
        assert planned_spec(request).config_hash == spec.config_hash
    assert planned_spec(request).config_hash == spec.config_hash  # read back from the file
