"""The CLI answers refusals it can make from names before it imports torch and the models' libraries.

Each command runs in a fresh interpreter (its imports are the point), through a small
wrapper that calls the ``harness`` entry point and then lists which heavy modules got imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import CUDA

HEAVY = ("torch", "transformers", "peft", "lm_eval", "mteb", "faiss", "scipy", "pandas", "duckdb")
WRAPPER = f"""
import json, sys
from harness.cli import main
try:
    main()
finally:
    print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)
"""


def _harness(*args: str) -> tuple[int, list[str], list[str]]:
    """Exit code, stderr lines before the wrapper's, and the heavy modules the command imported."""
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    return proc.returncode, lines[:-1], json.loads(lines[-1])


@pytest.mark.parametrize(("args", "message"), [
    (["--suite", "xnl", "--adapter", "asg"], "error: unknown suite 'xnl'; did you mean 'xnli'?"),
    (["--suite", "xnli", "--adapter", "product_quant"], "error: unknown adapter 'product_quant'"),
    (["--suite", "xnli", "--adapter", "asg", "--set", "nosuch"], "error: --set 'nosuch' is not key=value"),
    (["--suite", "xnli", "--adapter", "asg", "--profile", "fast"], "error: unknown profile 'fast'"),
])
def test_a_refusal_from_names_imports_no_torch(args, message):
    code, errors, heavy = _harness("run", *args)
    assert code == 2, errors
    assert len(errors) == 1 and errors[0].startswith(message), errors
    assert heavy == []


def test_help_loads_no_command_s_libraries():
    """``harness --help`` and a command's ``--help`` read only the commands' signatures."""
    for args in (["--help"], ["results", "--help"], ["run", "--help"]):
        code, errors, heavy = _harness(*args)
        assert code == 0 and errors == [] and heavy == [], (args, errors, heavy)


@pytest.mark.parametrize(("setting", "line"), [
    ("nosuch=1", "error: --set nosuch is not a setting of adapter 'asg' or suite 'xnli'; valid keys: k, m, shared, output, niter, train"),
    ("k=abc", "error: --set k=abc is not an integer"),
    ("shared=maybe", "error: --set shared=maybe is not a boolean; use true or false"),
    ("train=all", "error: --set train=all is not one of "),
])
def test_a_bad_setting_is_refused_from_the_cached_settings_without_torch(setting, line):
    """The first refusal of a bad ``--set`` (a key neither has, a value not of its type) reads the
    adapter's and suite's settings from their classes and caches them; the next is answered from the
    cache, with the same line and no torch."""
    args = ("run", "--suite", "xnli", "--adapter", "asg", "--set", setting)
    first, second = _harness(*args), _harness(*args)
    assert first[:2] == second[:2]
    assert first[0] == 2 and len(first[1]) == 1 and first[1][0].startswith(line), first
    assert second[2] == []


def test_a_model_nothing_resolves_is_refused_before_torch_loads():
    """A ``--model`` that is no packaged alias and no directory, with no hub to ask: one line, naming the
    packaged models, and the alias it may mean."""
    code, errors, heavy = _harness("run", "--suite", "xnli", "--adapter", "asg", "--model", "MiniLM")
    assert code == 2 and len(errors) == 1, errors
    assert errors[0].startswith("error: unknown model 'MiniLM'; use a packaged model (minilm, smollm2, me5-small)")
    assert "did you mean 'minilm'?" in errors[0]
    assert heavy == []


def test_missing_data_of_a_request_planned_before_is_refused_before_torch_loads(tmp_path):
    """The first refusal of missing data comes from the plan, which remembers the sources the request
    reads; the next is answered from them, with the same line and no torch."""
    args = ("run", "--suite", "xnli", "--adapter", "asg", "--set", "k=64", "--data-dir", str(tmp_path))
    first, second = _harness(*args), _harness(*args)
    assert first[:2] == second[:2]
    assert first[0] == 2 and first[1] == [
        f"error: dataset files missing under {tmp_path}: expected xnli/xnli.dev.tsv; set HARNESS_DATA_DIR or --data-dir "
        "to a folder holding them, or go online for the hub's facebook/xnli"
    ], first
    assert second[2] == []


@pytest.mark.skipif(CUDA, reason="torch sees a CUDA device here: --device cuda is not refused")
def test_device_cuda_without_a_gpu_is_refused_before_torch_loads():
    """Where torch sees no CUDA device, no GPU driver is loaded either, and the CLI says so without torch."""
    code, errors, heavy = _harness("run", "--suite", "xnli", "--adapter", "asg", "--device", "cuda")
    assert code == 2, errors
    assert errors == ["error: --device cuda but no GPU driver is loaded (no NVIDIA or ROCm driver, no libcuda); use --device cpu or auto"]
    assert heavy == []


def test_cached_settings_are_used_only_while_the_code_they_came_from_is_unchanged(tmp_path, monkeypatch):
    import os

    import adapters.asg
    from harness.registry import Registry

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    fresh = lambda: Registry("harness.adapters", "harness.adapter:Adapter", "adapter")  # noqa: E731
    settings = fresh().settings("asg")
    assert list(settings) == ["k", "m", "shared", "output", "niter"]
    assert settings["k"] == {"type": "int"} and settings["shared"] == {"type": "bool"}
    cache = tmp_path / "settings.json"
    known = json.loads(cache.read_text())
    known["harness.adapters:asg"]["settings"] = {"cached": {"type": "str"}}
    cache.write_text(json.dumps(known))
    assert fresh().settings("asg") == {"cached": {"type": "str"}}
    source = adapters.asg.__file__
    st = os.stat(source)
    try:  # the adapter's file edited: its keys are read from the class again
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
        assert fresh().settings("asg") == settings
    finally:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert json.loads(cache.read_text())["harness.adapters:asg"]["settings"] == settings


def test_a_matrix_listed_again_is_planned_from_its_remembered_specs_without_torch(tmp_path, monkeypatch):
    """``harness list matrix`` plans each entry as ``harness run`` would (torch, the first time); listed
    again under the same code it takes the specs those plans made, and prints the same table."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    file = tmp_path / "matrix.txt"
    file.write_text("xnli minilm asg k=64\nbpb smollm2 asg --recover=100\n")
    args = ("list", "matrix", "--matrix", str(file), "--db", str(tmp_path / "r.duckdb"), "--profile", "smoke")
    first = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, timeout=300)
    second = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, timeout=300)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert "torch" in json.loads(first.stderr.splitlines()[-1])
    assert "torch" not in json.loads(second.stderr.splitlines()[-1])
    assert second.stdout == first.stdout and "bpb smollm2 asg --recover=100" in second.stdout


def test_a_run_stored_under_a_plan_made_before_is_reused_without_torch(smoke_db, tmp_path, monkeypatch):
    """The smoke store's two runs, asked for twice on a fresh cache: the first plans (torch), the
    second finds both runs by the spec that plan remembered and prints the same tables without torch;
    --dry-run plans, whatever is stored."""
    import shutil

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    db = tmp_path / "r.duckdb"
    shutil.copy(smoke_db, db)
    args = ["run", "--suite", "xnli", "--adapter", "asg", "--model", "minilm", "--profile", "smoke", "--set", "k=256", "--db", str(db)]
    done = [subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, timeout=300) for _ in range(2)]
    assert [d.returncode for d in done] == [0, 0], done[0].stderr + done[1].stderr
    assert "torch" in json.loads(done[0].stderr.splitlines()[-1])
    assert "torch" not in json.loads(done[1].stderr.splitlines()[-1])
    assert done[1].stdout == done[0].stdout and "reused" in done[1].stdout
    code, _, heavy = _harness(*args, "--dry-run")
    assert code == 0 and "torch" in heavy  # --dry-run plans, as --force does
