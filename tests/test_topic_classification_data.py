"""ag_news / dbpedia14 data: the release CSV reader and the deterministic carve of one file."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import DataError
from harness.suites.topic_classification import carve, read_release_csv


def test_ag_news_test_file_reads_balanced(data_dir):
    data = read_release_csv(data_dir / "ag_news" / "test.csv", 4)
    assert len(data) == 7600 and np.bincount(data.label).tolist() == [1900] * 4
    assert data.text[0] == ("Fears for T N pension after talks Unions representing workers at Turner   Newall say they "
                            "are 'disappointed' after talks with stricken parent firm Federal Mogul.")
    assert data.label[0] == 2  # "3" = Business


def test_carve_is_disjoint_stratified_and_repeatable(data_dir):
    data = read_release_csv(data_dir / "ag_news" / "test.csv", 4)
    train, held = carve(data, 50, 20)
    assert np.bincount(train.label).tolist() == [50] * 4 and np.bincount(held.label).tolist() == [20] * 4
    assert not set(train.text) & set(held.text)
    again, _ = carve(data, 50, 20)
    assert again.text == train.text
    with pytest.raises(DataError):
        carve(data, 1900, 1)


def test_malformed_row_names_file_and_line(tmp_path):
    path = tmp_path / "test.csv"
    path.write_text('"1","a title","a body"\n"7","bad class","x"\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"test.csv:2: malformed"):
        read_release_csv(path, 4)
