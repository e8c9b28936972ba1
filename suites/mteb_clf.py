"""MTEB classification on local data: Banking77 and TweetEval sentiment, through ``mteb.evaluate``.

Protocol (MTEB's ``AbsTaskClassification``): embed train and test texts with the frozen
(compressed) model, mean-pooled (``suites/mteb_encoder.py``); fit a logistic regression on the
training embeddings; accuracy on test (``Score.setting`` ``linear-probe``: the encoder is not trained). MTEB's defaults (8 examples per label, 10 experiments) use
very little of the training data, so the budget sets ``samples_per_label`` to the largest label
count (all training data) and one experiment, except on smoke. ``cache=None``: MTEB's default
result cache would silently return an earlier model's scores.

Decoders (SmolLM2) embed by the same mean over their causal last hidden states (padded on the right, so a
text's states do not depend on its batch). Paper 004 first made Llama bidirectional with LLM2Vec,
which is not available offline (its Limitation 2 names the causal states as the alternative).

Data on hand: Banking77 train/test (77 intents); TweetEval sentiment has no train split here, so
its validation split (2,000 tweets) is the training data and test is evaluated.
CIs: bootstrap over test examples of the per-example correctness (averaged over experiments),
read from MTEB's saved predictions; these are also the per-item outputs (keyed by the text's row in
the test file, with the predicted label when there is one experiment). Chance: the majority-class
share of the scored test texts (TweetEval sentiment: about 48% neutral, far above a uniform 1/3).
"""

from __future__ import annotations

import csv
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from datasets import Dataset, DatasetDict
from harness.suites.mteb_encoder import CompressedEncoder, model_meta
from mteb.abstasks.classification import AbsTaskClassification
from mteb.abstasks.task_metadata import TaskMetadata
from sklearn.exceptions import UndefinedMetricWarning

from harness.budgets import Budgets
from harness.errors import DataError
from harness.measure import chance
from harness.results.records import ItemOutputs
from harness.sources.data import DataSource, local_or_hub
from harness.suite import Suite, SuiteContext, SuiteData, SuiteResult, Task, score_items


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


@dataclass(frozen=True)
class ClfBudget:
    samples_per_label: int | None  # training examples per label; None = all training data
    n_experiments: int             # MTEB re-draws of the training sample
    test_examples: int | None      # seeded test sample per task; None = all
    batch_size: int = 64
    max_length: int = 128


@dataclass(frozen=True)
class MtebClfConfig:
    """No settings: both tasks always run."""


BUDGETS = Budgets(
    smoke=ClfBudget(samples_per_label=1, n_experiments=2, test_examples=32, batch_size=32),
    quick=ClfBudget(samples_per_label=None, n_experiments=1, test_examples=2000),
    paper=ClfBudget(samples_per_label=None, n_experiments=1, test_examples=None),
)
BANKING77 = DataSource(("banking77/train.csv", "banking77/test.csv", "banking77/categories.json"), "mteb/banking77")
TWEETEVAL = DataSource(
    tuple(f"tweeteval_sentiment/{n}" for n in ("val_text.txt", "val_labels.txt", "test_text.txt", "test_labels.txt")),
    "cardiffnlp/tweet_eval:sentiment",
)


class MtebClassification(Suite):
    name = "mteb_clf"
    description = "MTEB classification (mteb.evaluate, frozen mean-pooled model + logistic regression): Banking77, TweetEval sentiment"
    kinds = ("encoder", "decoder")
    default_model = "minilm"
    config_class = MtebClfConfig
    budgets = BUDGETS
    tasks_by_name: ClassVar[dict[str, type[LocalClassification]]] = {"banking77": Banking77Local, "tweeteval_sentiment": TweetEvalSentimentLocal}

    def sources(self, config: MtebClfConfig, budget: ClfBudget) -> tuple[DataSource, ...]:
        return (BANKING77, TWEETEVAL)

    def prepare(self, data_dir: Path | None, config: MtebClfConfig, budget: ClfBudget) -> SuiteData:
        banking, b_files = local_or_hub(
            data_dir, BANKING77, read_banking77, lambda: _read_hub("mteb/banking77", None, {"train": "train", "test": "test"}),
        )
        tweets, t_files = local_or_hub(
            data_dir, TWEETEVAL, read_tweeteval,
            lambda: _read_hub("cardiffnlp/tweet_eval", "sentiment", {"train": "validation", "test": "test"}),
        )
        return SuiteData({"banking77": banking, "tweeteval_sentiment": tweets}, {**b_files, **t_files})

    def train_texts(self, task: Task, data: SuiteData, config: MtebClfConfig) -> list[str]:
        """Both tasks' training texts together (paper 004 built one dictionary from all MTEB training sets)."""
        return [t for name in self.tasks_by_name for t in data.splits[name]["train"].text]

    def _task(self, name: str, splits: dict[str, Labeled], budget: ClfBudget, seed: int) -> tuple[LocalClassification, np.ndarray]:
        """The MTEB task over the budget's seeded test sample, and the sampled rows of the test file."""
        rows = np.arange(len(splits["test"].label))
        if budget.test_examples is not None and budget.test_examples < len(rows):
            rows = np.sort(np.random.default_rng(seed).permutation(len(rows))[: budget.test_examples])
        per_label = budget.samples_per_label or int(np.bincount(splits["train"].label).max())
        task = self.tasks_by_name[name]({"train": splits["train"], "test": splits["test"].take(rows)}, per_label, budget.n_experiments, seed)
        return task, rows

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        import mteb

        budget = ctx.budget
        meta = model_meta(ctx.model, ctx.config_hash, model, budget.max_length)
        encoder = CompressedEncoder(model, tokenizer, meta, ctx.device, budget.max_length)
        sampled = {name: self._task(name, data.splits[name], budget, ctx.seed) for name in self.tasks_by_name}
        tasks = {name: task for name, (task, _) in sampled.items()}
        predictions = ctx.workdir / "mteb_predictions"
        ctx.progress("mteb", 0, 1)
        with warnings.catch_warnings():  # tiny smoke samples leave some labels unpredicted
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            mteb.evaluate(
                encoder, list(tasks.values()), cache=None, prediction_folder=predictions,
                encode_kwargs={"batch_size": budget.batch_size}, show_progress_bar=False,
            )
        ctx.progress("mteb", 1, 1)
        rng = np.random.default_rng(ctx.seed)
        scores, items, details = [], [], {"n_experiments": budget.n_experiments, "chance": "majority-class share of the scored test texts"}
        for name, (task, rows) in sampled.items():
            items.append(_items(name, task, rows, predictions))
            scores.append(score_items([items[-1]], rng, chance=chance.majority(task.splits["test"].label), setting="linear-probe"))
            details[name] = {"train_examples": len(task.splits["train"].label), "samples_per_label": task.samples_per_label, "test_examples": len(rows)}
        return SuiteResult(scores, details, items)


def _items(name: str, task: LocalClassification, rows: np.ndarray, folder: Path) -> ItemOutputs:
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


def _read_hub(hub_id: str, config: str | None, splits: dict[str, str]) -> dict[str, Labeled]:
    """The hub copy, with the same split roles as the local files (``splits``: ours -> hub's)."""
    from datasets import load_dataset

    out = {}
    for ours, theirs in splits.items():
        ds = load_dataset(hub_id, config, split=theirs)
        out[ours] = Labeled(list(ds["text"]), np.array(ds["label"], dtype=np.int64))
    return out
