"""XNLI loader: counts, balance, parallel subsets, and errors for missing or malformed files."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from harness.suites import xnli

from harness.errors import DataError


@pytest.fixture(scope="module")
def test_split(data_dir):
    data, files = xnli.load("test", data_dir)
    return data, files


def test_test_split_counts(test_split):
    data, files = test_split
    assert len(data) == 15 * 5010
    assert Counter(data.language.tolist()) == {lang: 5010 for lang in xnli.LANGUAGES}
    for lang in xnli.LANGUAGES:
        assert Counter(data.label[data.language == lang].tolist()) == {0: 1670, 1: 1670, 2: 1670}
    (path, digest), = files.items()
    assert path.endswith("xnli.test.tsv") and len(digest) == 16


def test_dev_split_counts(data_dir):
    data, _ = xnli.load("dev", data_dir)
    assert len(data) == 15 * 2490
    assert Counter(data.label.tolist()) == {0: 12450, 1: 12450, 2: 12450}


def test_parallel_subset_takes_same_rows_in_every_language(test_split):
    data, _ = test_split
    sub, ids = xnli.parallel_subset(data, 20, np.random.default_rng(0))
    assert len(sub) == 15 * 20 and len(ids) == len(sub)
    assert all(np.array_equal(ids[sub.language == "en"], ids[sub.language == lang]) for lang in xnli.LANGUAGES)
    labels = [sub.label[sub.language == lang] for lang in xnli.LANGUAGES]
    assert all(np.array_equal(labels[0], other) for other in labels[1:])  # XNLI rows are parallel


def test_missing_files_name_the_expected_files(tmp_path):
    with pytest.raises(DataError, match=r"xnli/xnli.dev.tsv.*HARNESS_DATA_DIR"):
        xnli.load("dev", tmp_path)


def test_malformed_row_is_reported_with_line(tmp_path):
    (tmp_path / "xnli").mkdir()
    bad = tmp_path / "xnli" / "xnli.dev.tsv"
    bad.write_text("language\tgold_label\tsentence1\tsentence2\nen\tentailment\ta\tb\nen\tmaybe\ta\tb\n")
    with pytest.raises(DataError, match=r"xnli.dev.tsv:3: malformed row"):
        xnli.load("dev", tmp_path)


def test_mnli_release_lines_are_read_and_unlabelled_pairs_dropped(tmp_path):
    path = tmp_path / "multinli_1.0_train.jsonl"
    rows = [("neutral", "a", "b"), ("-", "c", "d"), ("contradiction", "e", "f")]
    path.write_text("".join(f'{{"gold_label": "{g}", "sentence1": "{s1}", "sentence2": "{s2}", "genre": "x"}}\n' for g, s1, s2 in rows))
    pairs = xnli.read_mnli(path)
    assert pairs.premise == ["a", "e"] and pairs.label.tolist() == [1, 2] and set(pairs.language) == {"en"}
    path.write_text('{"gold_label": "neutral"}\n')
    with pytest.raises(DataError, match=r"multinli_1.0_train.jsonl:1: not a MultiNLI JSON line"):
        xnli.read_mnli(path)


def test_paper_profile_trains_on_mnli_or_refuses(tmp_path):
    """Offline without MNLI the paper profile exits 2 naming the file and where to put it; it never
    falls back to the 2,490 dev pairs. train=dev-all is not the paper's recipe either."""
    from typer.testing import CliRunner

    from harness.cli import app

    (tmp_path / "xnli").mkdir()
    for split in ("dev", "test"):
        (tmp_path / "xnli" / f"xnli.{split}.tsv").write_text("language\tgold_label\tsentence1\tsentence2\n")
    run = ["run", "--suite", "xnli", "--model", "minilm", "--profile", "paper", "--data-dir", str(tmp_path), "--db", str(tmp_path / "r.duckdb")]
    result = CliRunner().invoke(app, run)
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert f"under {tmp_path}: expected multinli/multinli_1.0_train.jsonl" in result.stderr
    assert "multinli_1.0.zip" in result.stderr and "nyu-mll/multi_nli" in result.stderr
    result = CliRunner().invoke(app, [*run, "--set", "train=dev-all"])
    assert result.exit_code == 2 and "not the paper's recipe" in result.stderr and "--profile quick" in result.stderr
    assert xnli.BUDGETS.quick.train_data == "xnli-dev" and xnli.BUDGETS.paper.train_data == "mnli"


@pytest.mark.parametrize("suite, cut", [("xnli", "dev"), ("tokenizer", "test")])
def test_a_file_cut_to_some_languages_is_refused_when_planned(tmp_path, data_dir, suite, cut):
    """XNLI's release TSVs keep whole rows of two languages: every suite that reads the file refuses it in
    its plan (harness.runner.datacheck), naming the languages found and expected, before any model loads."""
    from harness.runner.plan import RunRequest, plan

    for entry in data_dir.iterdir():
        if entry.name != "xnli":
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / "xnli").mkdir()
    for split in ("dev", "test"):
        source, target = data_dir / "xnli" / f"xnli.{split}.tsv", tmp_path / "xnli" / f"xnli.{split}.tsv"
        if split != cut:
            target.symlink_to(source)
            continue
        header, *rows = source.read_bytes().splitlines(keepends=True)
        target.write_bytes(header + b"".join(r for r in rows if r.split(b"\t", 1)[0] in (b"en", b"de")))
    with pytest.raises(DataError, match=rf"xnli.{cut}.tsv holds 2 of the 15 XNLI languages \(found de, en; expected ar, bg, .*; missing ar, bg, el, es,"):
        plan(RunRequest(suite, "none", "minilm", "smoke", data_dir=str(tmp_path), device="cpu"))
