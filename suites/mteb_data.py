"""The ``mteb_clf`` suite's data (:mod:`harness.suites.mteb_clf`): Banking77 and TweetEval sentiment as
texts and integer labels, from their release files or from the hub."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import DataError


@dataclass(frozen=True)
class Labeled:
    text: list[str]
    label: np.ndarray  # (n,) int64

    def take(self, idx: np.ndarray) -> Labeled:
        return Labeled([self.text[i] for i in idx], self.label[idx])


def read_banking77(paths: list[Path]) -> dict[str, Labeled]:
    """``train.csv`` / ``test.csv`` (header text,category) with ids from ``categories.json``."""
    train, test, categories = paths
    ids = {name: i for i, name in enumerate(json.loads(categories.read_text(encoding="utf-8")))}
    out = {}
    for split, path in (("train", train), ("test", test)):
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows or set(rows[0]) != {"text", "category"} or any(r["category"] not in ids for r in rows):
            raise DataError(f"{path}: expected the Banking77 CSV (header text,category; categories from categories.json)")
        out[split] = Labeled([r["text"] for r in rows], np.array([ids[r["category"]] for r in rows], dtype=np.int64))
    return out


def read_tweeteval(paths: list[Path]) -> dict[str, Labeled]:
    """TweetEval sentiment ``{val,test}_{text,labels}.txt``; val becomes the training split."""
    val_text, val_labels, test_text, test_labels = paths
    out = {}
    for split, text_path, label_path in (("train", val_text, val_labels), ("test", test_text, test_labels)):
        texts = text_path.read_text(encoding="utf-8").splitlines()
        labels = label_path.read_text(encoding="utf-8").split()
        if len(texts) != len(labels) or any(v not in ("0", "1", "2") for v in labels):
            raise DataError(f"{text_path}, {label_path}: need one label (0/1/2) per text line; restore the TweetEval files")
        out[split] = Labeled(texts, np.array(labels, dtype=np.int64))
    return out


def read_hub(hub_id: str, config: str | None, splits: dict[str, str]) -> dict[str, Labeled]:
    """The hub copy, with the same split roles as the local files (``splits``: ours -> hub's)."""
    from datasets import load_dataset

    out = {}
    for ours, theirs in splits.items():
        ds = load_dataset(hub_id, config, split=theirs)
        out[ours] = Labeled(list(ds["text"]), np.array(ds["label"], dtype=np.int64))
    return out
