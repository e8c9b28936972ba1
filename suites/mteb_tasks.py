"""The MTEB side of the ``mteb_clf`` suite (:mod:`harness.suites.mteb_clf`): its two classification
tasks as MTEB ``AbsTaskClassification`` subclasses over splits already read from the data directory,
and the per-item outputs read back from MTEB's saved predictions. Imported when the suite scores:
mteb takes seconds to import, which planning and listing never pay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset, DatasetDict
from mteb.abstasks.classification import AbsTaskClassification
from mteb.abstasks.task_metadata import TaskMetadata

from harness.results.records import ItemOutputs
from harness.suites.mteb_data import Labeled


def _metadata(name: str, description: str, reference: str) -> TaskMetadata:
    return TaskMetadata(
        name=name, description=description, reference=reference,
        # local release files; their sha256 is stored with the harness run (provenance data_files)
        dataset={"path": "HARNESS_DATA_DIR", "revision": "local"},
        type="Classification", category="t2c", modalities=["text"], eval_splits=["test"],
        eval_langs=["eng-Latn"], main_score="accuracy",
    )


class LocalClassification(AbsTaskClassification):
    """An MTEB classification task over train/test splits already read from the data directory."""

    def __init__(self, splits: dict[str, Labeled], samples_per_label: int, n_experiments: int, seed: int):
        super().__init__(seed=seed)
        self.samples_per_label, self.n_experiments = samples_per_label, n_experiments
        self.splits = splits

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        self.dataset = DatasetDict({
            split: Dataset.from_dict({"text": d.text, "label": d.label.tolist()}) for split, d in self.splits.items()
        })
        self.data_loaded = True


class Banking77Local(LocalClassification):
    metadata = _metadata("HarnessBanking77", "Banking77 intents (77 classes), local release files", "https://arxiv.org/abs/2003.04807")


class TweetEvalSentimentLocal(LocalClassification):
    metadata = _metadata(
        "HarnessTweetEvalSentiment", "TweetEval sentiment (3 classes); validation split used for training",
        "https://arxiv.org/abs/2010.12421",
    )

TASKS: dict[str, type[LocalClassification]] = {"banking77": Banking77Local, "tweeteval_sentiment": TweetEvalSentimentLocal}
"""The suite's task names -> their MTEB task classes."""


def prediction_items(name: str, task: LocalClassification, rows: np.ndarray, folder: Path) -> ItemOutputs:
    """Per test text: the share of MTEB's experiments that predicted its label (0/1 with one
    experiment, which then also gives the predicted label), from MTEB's saved predictions."""
    saved = json.loads((folder / task.prediction_file_name).read_text(encoding="utf-8"))
    runs = np.asarray(saved["default"]["test"])  # (n_experiments, n_test)
    gold = task.splits["test"].label
    predicted = tuple(str(p) for p in runs[0]) if len(runs) == 1 else ()
    return ItemOutputs(
        name, "en", "test", "accuracy", tuple(str(r) for r in rows), tuple((runs == gold).mean(axis=0)),
        predicted, tuple(str(g) for g in gold) if predicted else (),
    )
