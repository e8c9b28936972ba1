"""harness.sidefiles: side files read as UTF-8, each failure naming file and line; output paths checked before the work."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError, DataError
from harness.sidefiles import check_output, read_csv, read_text


def test_text_in_another_encoding_names_the_line(tmp_path):
    path = tmp_path / "matrix.txt"
    path.write_bytes("xnli minilm asg\nxnli minilm sg  # café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"matrix.txt is not UTF-8 text \(line 2, byte 37\); save the matrix file as UTF-8"):
        read_text(path, "matrix file", ConfigError)
    path.write_bytes("suites: [xnli]\n".encode("utf-16"))
    with pytest.raises(DataError, match=r"\(line 1, byte 0\)"):
        read_text(path, "sweep file")


def test_nul_byte_folder_and_missing_file_are_one_line_each(tmp_path):
    (tmp_path / "nul.txt").write_bytes(b"a\nb\x00\n")
    with pytest.raises(DataError, match=r"not a text file \(a NUL byte on line 2\)"):
        read_text(tmp_path / "nul.txt", "matrix file")
    with pytest.raises(DataError, match="Is a directory"):
        read_text(tmp_path, "matrix file")
    with pytest.raises(DataError, match="No such file or directory"):
        read_text(tmp_path / "none.txt", "matrix file")


def test_csv_rows_carry_their_line_and_a_short_row_is_refused(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text('a,b,c\n1,2,3\n\n"x\ny",5,6\n7,8\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"p.csv:6: 2 fields where the header has 3"):
        read_csv(path, "CSV", ("a", "b"))
    path.write_text('a,b,c\n1,2,3\n\n"x\ny",5,6\n', encoding="utf-8")
    assert read_csv(path, "CSV", ("a", "b")) == [(2, {"a": "1", "b": "2", "c": "3"}), (5, {"a": "x\ny", "b": "5", "c": "6"})]
    with pytest.raises(DataError, match=r"p.csv:1: the header lacks column\(s\) d"):
        read_csv(path, "CSV", ("a", "d"))


def test_output_paths_refused_before_the_work(tmp_path):
    (tmp_path / "file").write_text("keep me")
    check_output(tmp_path / "new" / "deeper", "--out", folder=True)  # made by the command
    check_output(tmp_path / "report.json", "--json", folder=False)
    for path, folder, message in [
        (tmp_path / ("x" * 300), True, "File name too long"),
        (tmp_path / "file", True, "is an existing file"),
        (tmp_path / "file" / "out", True, "lies under"),
        (tmp_path, False, "is an existing folder"),
    ]:
        with pytest.raises(ConfigError, match=message):
            check_output(path, "--out", folder=folder)
    assert (tmp_path / "file").read_text() == "keep me" and not (tmp_path / "new").exists()
