"""A run records the commit it was made from; a run made from a tree with uncommitted changes also
stores their patch beside its record, so the code can be recovered (``git apply`` on the commit); the
reference store refuses such a tree outright (``make reference``)."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.results.journal import Journal
from harness.results.records import Provenance
from harness.runner import provenance

REPO = Path(__file__).resolve().parents[1]
GIT = ("git", "-c", "user.email=test@example.org", "-c", "user.name=test")


def _git(root: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    """A git checkout with one commit (a module, a binary file, an ignored folder) that provenance reads as the harness's."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "checkout"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "score.py").write_text("def score(x):\n    return 2 * x\n")
    (root / "pkg" / "table.bin").write_bytes(bytes(range(256)))
    (root / ".gitignore").write_text(".venv/\n")
    (root / "results.duckdb").write_bytes(b"store v1")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "first")
    monkeypatch.setattr(provenance, "ROOT", root)
    return root


def test_a_clean_tree_records_its_commit_alone(checkout):
    (checkout / "results.duckdb").write_bytes(b"store v2")  # the store's own files never count
    (checkout / ".venv").mkdir()
    (checkout / ".venv" / "x.py").write_text("ignored = True\n")
    code = provenance.source()
    head = _git(checkout, "rev-parse", "HEAD")
    assert code.git_sha == head and not code.patch
    assert code.save_patch(Journal(checkout / "results.records"), "run-1") is None
    assert Provenance(code.git_sha, "", "", "", 0, {}, {}).commit == head


def test_a_dirty_tree_records_the_patch_that_recovers_it(checkout, tmp_path):
    (checkout / "pkg" / "score.py").write_text("def score(x):\n    return 3 * x\n")       # tracked, changed
    (checkout / "pkg" / "table.bin").write_bytes(bytes(range(255, -1, -1)))                 # binary, changed
    (checkout / "pkg" / "helper.py").write_text("ONE = 1\n")                                # untracked, not ignored
    code = provenance.source()
    recorded = Provenance(code.git_sha, "", "", "", 0, {}, {})
    assert recorded.dirty and recorded.commit == _git(checkout, "rev-parse", "HEAD") and len(recorded.patch_sha256) == 16
    patch = code.save_patch(Journal(checkout / "results.records"), "run-2")
    assert patch == checkout / "results.records" / "run-2.patch"

    recovered = tmp_path / "recovered"
    _git(tmp_path, "clone", "-q", str(checkout), str(recovered))
    _git(recovered, "checkout", "-q", recorded.commit)
    _git(recovered, "apply", str(patch))
    for name in ("score.py", "table.bin", "helper.py"):
        assert filecmp.cmp(checkout / "pkg" / name, recovered / "pkg" / name, shallow=False), name


def test_outside_a_checkout_the_commit_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    code = provenance.source()
    assert code.git_sha == "unknown" and Provenance(code.git_sha, "", "", "", 0, {}, {}).commit == "unknown"


def test_make_reference_refuses_a_tree_with_uncommitted_changes(checkout):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    shutil.copy(REPO / "Makefile", checkout / "Makefile")
    _git(checkout, "add", "Makefile")
    _git(checkout, "commit", "-q", "-m", "the Makefile")
    (checkout / "pkg" / "score.py").write_text("def score(x):\n    return 4 * x\n")
    refused = subprocess.run(["make", "-s", "reference", "BIN=/nonexistent"], cwd=checkout, capture_output=True, text=True)
    assert refused.returncode != 0 and refused.stdout == ""
    assert refused.stderr.splitlines()[0].startswith("error: make reference needs a committed tree")
    _git(checkout, "checkout", "-q", "--", "pkg/score.py")
    (checkout / "results.duckdb").write_bytes(b"store v3")  # what make reference itself writes does not count
    clean = subprocess.run(["make", "-s", "reference", "BIN=/nonexistent"], cwd=checkout, capture_output=True, text=True)
    assert "needs a committed tree" not in clean.stderr and "/nonexistent/harness" in clean.stderr  # past the check


def _stored(tmp_path, git_sha: str):
    from harness.results.records import RunRecord, RunSpec
    from harness.results.store import Store

    store = Store(tmp_path / "r.duckdb")
    spec = RunSpec("minilm", "rev", "none", {}, "tokenizer", {}, "quick", 0)
    store.save(RunRecord("run-3", spec, "finished", "2026-01-01T00:00:00+00:00", "cpu", Provenance(git_sha, "pkg", "0.1", "host", 1, {}, {}),
                         finished_at="2026-01-01T00:01:00+00:00", wall_s=1.0))
    return store


@pytest.mark.parametrize("git_sha, patch, expected", [
    ("a" * 40, False, "code: commit " + "a" * 40 + "\n"),
    ("a" * 40 + "+dirty:0123456789abcdef", True, "with uncommitted changes: patch {patch} (sha256 0123456789abcdef)"),
    ("a" * 40 + "+dirty:0123456789abcdef", False, "with uncommitted changes whose patch is not at {patch}: they cannot be recovered"),
    ("unknown", False, "commit unknown): it cannot be recovered"),
])
def test_harness_show_says_where_the_code_of_a_run_is(tmp_path, git_sha, patch, expected):
    from typer.testing import CliRunner

    from harness.cli import app

    store = _stored(tmp_path, git_sha)
    path = store.journal.patch_path("run-3")
    if patch:
        store.journal.write_patch("run-3", b"diff --git a/x b/x\n")
    out = CliRunner().invoke(app, ["show", "run-3", "--db", str(store.path)], env={"COLUMNS": "400"})  # wide enough not to fold
    assert out.exit_code == 0, out.output
    assert expected.format(patch=path) in out.output
