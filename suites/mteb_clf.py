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

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from harness.budgets import Budgets
from harness.measure import chance
from harness.sources.data import DataSource, local_or_hub
from harness.suites.mteb_data import Labeled, read_banking77, read_hub, read_tweeteval
from harness.suite import Suite, SuiteContext, SuiteData, SuiteResult, Task, score_items


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
    task_names: ClassVar[tuple[str, ...]] = ("banking77", "tweeteval_sentiment")

    def sources(self, config: MtebClfConfig, budget: ClfBudget) -> tuple[DataSource, ...]:
        return (BANKING77, TWEETEVAL)

    def prepare(self, data_dir: Path | None, config: MtebClfConfig, budget: ClfBudget) -> SuiteData:
        banking, b_files = local_or_hub(
            data_dir, BANKING77, read_banking77, lambda: read_hub("mteb/banking77", None, {"train": "train", "test": "test"}),
        )
        tweets, t_files = local_or_hub(
            data_dir, TWEETEVAL, read_tweeteval,
            lambda: read_hub("cardiffnlp/tweet_eval", "sentiment", {"train": "validation", "test": "test"}),
        )
        return SuiteData({"banking77": banking, "tweeteval_sentiment": tweets}, {**b_files, **t_files})

    def train_texts(self, task: Task, data: SuiteData, config: MtebClfConfig) -> list[str]:
        """Both tasks' training texts together (paper 004 built one dictionary from all MTEB training sets)."""
        return [t for name in self.task_names for t in data.splits[name]["train"].text]

    def _task(self, name: str, splits: dict[str, Labeled], budget: ClfBudget, seed: int) -> tuple[Any, np.ndarray]:
        """The MTEB task over the budget's seeded test sample, and the sampled rows of the test file."""
        from harness.suites.mteb_tasks import TASKS

        rows = np.arange(len(splits["test"].label))
        if budget.test_examples is not None and budget.test_examples < len(rows):
            rows = np.sort(np.random.default_rng(seed).permutation(len(rows))[: budget.test_examples])
        per_label = budget.samples_per_label or int(np.bincount(splits["train"].label).max())
        task = TASKS[name]({"train": splits["train"], "test": splits["test"].take(rows)}, per_label, budget.n_experiments, seed)
        return task, rows

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        import mteb  # seconds to import: only scoring needs it (mteb_tasks and mteb_encoder subclass its classes)
        from sklearn.exceptions import UndefinedMetricWarning

        from harness.suites.mteb_encoder import CompressedEncoder, model_meta
        from harness.suites.mteb_tasks import prediction_items

        budget = ctx.budget
        meta = model_meta(ctx.model, ctx.config_hash, model, budget.max_length)
        encoder = CompressedEncoder(model, tokenizer, meta, ctx.device, budget.max_length)
        sampled = {name: self._task(name, data.splits[name], budget, ctx.seed) for name in self.task_names}
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
            items.append(prediction_items(name, task, rows, predictions))
            scores.append(score_items([items[-1]], rng, chance=chance.majority(task.splits["test"].label), setting="linear-probe"))
            details[name] = {"train_examples": len(task.splits["train"].label), "samples_per_label": task.samples_per_label, "test_examples": len(rows)}
        return SuiteResult(scores, details, items)
