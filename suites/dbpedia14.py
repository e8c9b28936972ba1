"""DBpedia-14 (Zhang et al., 2015; Lehmann et al., 2015): 14-class ontology classification of
Wikipedia titles + abstracts, paper 002 Tables 1 and 4.

No DBpedia-14 file is on hand here: put the release's ``train.csv`` and ``test.csv``
(``dbpedia_csv.tar.gz``) under ``<data dir>/dbpedia14/``, or run online to load the hub's
``fancyzhx/dbpedia_14``. The default split carves train and eval rows from the test file (70,000
rows); ``--set split=release`` trains on the 560,000-row train file.
"""

from __future__ import annotations

from harness.suites.finetune import FinetuneBudget
from harness.suites.topic_classification import TopicClassification

from harness.budgets import Budgets
from harness.suite import Head

LABELS = (
    "Company", "EducationalInstitution", "Artist", "Athlete", "OfficeHolder", "MeanOfTransportation", "Building",
    "NaturalPlace", "Village", "Animal", "Plant", "Album", "Film", "WrittenWork",
)

BUDGETS = Budgets(
    smoke=FinetuneBudget(train_examples=56, eval_examples=28, epochs=1, learning_rate=1e-4, batch_size=16, max_length=64),
    # carved from the test file: 100 train and 50 eval rows per class
    quick=FinetuneBudget(train_examples=1400, eval_examples=700, epochs=2, learning_rate=8e-5, batch_size=32, max_length=64),
    # paper 002 Section 4.2: AdamW, batch 32, 500-1000 warm-up steps, 70,000 steps (4 epochs)
    paper=FinetuneBudget(train_examples=None, eval_examples=None, epochs=4, learning_rate=5e-5, batch_size=32, warmup=1000),
)


class Dbpedia14(TopicClassification):
    name = "dbpedia14"
    description = "DBpedia-14 ontology classes: fine-tune, accuracy and macro F1/precision/recall"
    head = Head("sequence_classification", LABELS)
    folder = "dbpedia14"
    hub_id = "fancyzhx/dbpedia_14"
    hub_body = "content"
    budgets = BUDGETS
