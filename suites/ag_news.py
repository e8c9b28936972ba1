"""AG News (Zhang et al., 2015): 4-class news topic classification, paper 002 Tables 1 and 3.

The data directory holds only the release's 7,600-row test file (1,900 per class), so by default
train and eval rows are carved from it (:mod:`harness.suites.topic_classification`); ``--set
split=release`` trains on the 120,000-row train file (``ag_news/train.csv``, or the hub).
"""

from __future__ import annotations

from harness.suites.finetune import FinetuneBudget
from harness.suites.topic_classification import TopicClassification

from harness.budgets import Budgets
from harness.suite import Head

BUDGETS = Budgets(
    smoke=FinetuneBudget(train_examples=48, eval_examples=32, epochs=1, learning_rate=1e-4, batch_size=16, max_length=64),
    # carved from the test file: 400 train and 200 eval rows per class; 100 steps fit one shared CPU core
    quick=FinetuneBudget(train_examples=1600, eval_examples=800, epochs=2, learning_rate=8e-5, batch_size=32, max_length=64),
    # paper 002 Section 4.2: AdamW, batch 32, 500-1000 warm-up steps, 30,000 steps (8 epochs)
    paper=FinetuneBudget(train_examples=None, eval_examples=None, epochs=8, learning_rate=5e-5, batch_size=32, warmup=1000),
)


class AgNews(TopicClassification):
    name = "ag_news"
    description = "AG News 4-class topics: fine-tune, accuracy and macro F1/precision/recall"
    head = Head("sequence_classification", ("World", "Sports", "Business", "Sci/Tech"))
    folder = "ag_news"
    hub_id = "fancyzhx/ag_news"
    hub_body = "description"
    budgets = BUDGETS
