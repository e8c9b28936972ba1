"""Data side of the single-text topic classification suites (ag_news, dbpedia14): the Zhang et
al. (2015) CSV release reader, the hub reader, and a deterministic stratified carve of one file
into train and eval rows when only a test file is on hand."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import DataError


@dataclass(frozen=True)
class TextSet:
    """Texts with integer labels in [0, C)."""

    text: list[str]
    label: np.ndarray  # (n,) int64

    def __len__(self) -> int:
        return len(self.label)

    def take(self, idx: np.ndarray) -> TextSet:
        return TextSet([self.text[i] for i in idx], self.label[idx])


def join(title: str, body: str) -> str:
    """One text from a title and a body, joined by a space as the hub builders of ag_news and
    dbpedia_14 do; the release's backslash line breaks are kept, as on the hub."""
    return f"{title} {body}"


def read_release_csv(path: Path, n_classes: int) -> TextSet:
    """A release CSV: no header, rows ``"class index (1-based)","title","body"``."""
    texts, labels = [], []
    with path.open(encoding="utf-8", newline="") as f:
        for line, row in enumerate(csv.reader(f), start=1):
            if len(row) != 3 or not row[0].isdigit() or not 1 <= int(row[0]) <= n_classes:
                raise DataError(f"{path}:{line}: malformed row (need \"class 1-{n_classes}\",\"title\",\"body\"); restore the release file")
            labels.append(int(row[0]) - 1)
            texts.append(join(row[1], row[2]))
    if not labels:
        raise DataError(f"{path}: no rows; restore the release file")
    return TextSet(texts, np.array(labels, dtype=np.int64))


def read_hub(hub_id: str, split: str, title: str, body: str) -> TextSet:
    """A split of a hub dataset with fields ``label`` (0-based), ``title`` and ``body``."""
    from datasets import load_dataset

    ds = load_dataset(hub_id, split=split)
    return TextSet([join(t, b) for t, b in zip(ds[title], ds[body])], np.array(ds["label"], dtype=np.int64))


def stratified_take(labels: np.ndarray, per_class: int | None, rng: np.random.Generator) -> np.ndarray:
    """Sorted row indices: ``per_class`` random rows of every class (all rows when None)."""
    if per_class is None:
        return np.arange(len(labels))
    picks = [rng.permutation(np.flatnonzero(labels == c))[:per_class] for c in np.unique(labels)]
    return np.sort(np.concatenate(picks))


def carve(data: TextSet, train_per_class: int, eval_per_class: int, seed: int = 0) -> tuple[TextSet, TextSet]:
    """Disjoint stratified train and eval sets from one file, the same for every run (``seed`` is
    fixed by the suite, not the run's seed, so baseline and methods of every seed share it)."""
    rng = np.random.default_rng(seed)
    train_idx, eval_idx = [], []
    for c in np.unique(data.label):
        rows = rng.permutation(np.flatnonzero(data.label == c))
        if len(rows) < train_per_class + eval_per_class:
            raise DataError(f"class {c} has {len(rows)} rows, fewer than {train_per_class} train + {eval_per_class} eval; use a smaller profile")
        train_idx.append(rows[:train_per_class])
        eval_idx.append(rows[train_per_class:train_per_class + eval_per_class])
    return data.take(np.sort(np.concatenate(train_idx))), data.take(np.sort(np.concatenate(eval_idx)))
