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
