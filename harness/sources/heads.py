"""Heads as data: a :class:`Head` names the model class a task needs; :func:`build` makes it.

Each head kind maps to a transformers auto class and the keyword arguments it takes (labels,
regression), so adding a task kind is a table row, not an if/elif. Models whose sentence embedding
is a mean over token vectors (the sentence-transformers models here: all-MiniLM-L6-v2 and
multilingual-e5-small, and any directory whose sentence-transformers config says so: model source
``pooling="mean"``) get a classifier over that same mean
(:class:`MeanPooledClassifier`) instead of a randomly initialised pooler on the first token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from transformers import AutoModel
from transformers.modeling_outputs import SequenceClassifierOutput

from harness.errors import ModelSourceError

HeadKind = Literal["base", "sequence_classification", "regression", "token_classification", "question_answering", "causal_lm"]

AUTO_CLASSES: dict[str, str] = {
    "base": "AutoModel",
    "sequence_classification": "AutoModelForSequenceClassification",
    "regression": "AutoModelForSequenceClassification",
    "token_classification": "AutoModelForTokenClassification",
    "question_answering": "AutoModelForQuestionAnswering",
    "causal_lm": "AutoModelForCausalLM",
}
SENTENCE_HEADS = frozenset({"sequence_classification", "regression"})


@dataclass(frozen=True)
class Head:
    """The model class a task needs, as data.

    ``labels`` names the classes or tags (``id2label``); sequence and token classification get
    ``num_labels = len(labels)``, regression one output.
    """

    kind: HeadKind
    labels: tuple[str, ...] = ()

    def kwargs(self) -> dict:
        """Keyword arguments for the auto class's ``from_pretrained``."""
        if self.kind == "regression":
            return {"num_labels": 1, "problem_type": "regression"}
        if not self.labels:
            return {}
        return {
            "num_labels": len(self.labels),
            "id2label": dict(enumerate(self.labels)),
            "label2id": {label: i for i, label in enumerate(self.labels)},
        }


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, D) hidden states, (B, T) attention mask -> (B, D) mean over real tokens."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)


class MeanPooledClassifier(nn.Module):
    """Sequence classification (or regression) over the mean of the encoder's last hidden states,
    the pooling the model was trained to embed with; dropout and a linear layer as in BERT's head.

    Keeps the interface the harness and HF Trainer use: ``config`` (with ``num_labels``,
    ``id2label``, ``problem_type``), ``get_input_embeddings``/``set_input_embeddings``,
    ``base_model_prefix`` naming the encoder, and ``forward(..., labels=None)`` returning loss and logits.
    """

    base_model_prefix = "encoder"

    def __init__(self, encoder: nn.Module, head: Head):
        super().__init__()
        self.encoder = encoder
        self.config = encoder.config
        for key, value in head.kwargs().items():
            setattr(self.config, key, value)
        self.dropout = nn.Dropout(getattr(self.config, "hidden_dropout_prob", 0.1))
        self.classifier = nn.Linear(self.config.hidden_size, self.config.num_labels)
        nn.init.normal_(self.classifier.weight, std=getattr(self.config, "initializer_range", 0.02))
        nn.init.zeros_(self.classifier.bias)

    @classmethod
    def from_config(cls, config) -> "MeanPooledClassifier":
        """A freshly initialised classifier of ``config`` (labels or regression as it says): what
        :mod:`harness.runner.saved` rebuilds before loading saved tensors."""
        if config.problem_type == "regression":
            return cls(AutoModel.from_config(config), Head("regression"))
        return cls(AutoModel.from_config(config), Head("sequence_classification", tuple(config.id2label[i] for i in range(config.num_labels))))

    def get_input_embeddings(self) -> nn.Module:
        return self.encoder.get_input_embeddings()

    def set_input_embeddings(self, module: nn.Module) -> None:
        self.encoder.set_input_embeddings(module)

    def get_output_embeddings(self) -> None:
        return None

    def tie_weights(self) -> None:
        """Nothing is tied: there is no output embedding."""

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs) -> SequenceClassifierOutput:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        logits = self.classifier(self.dropout(mean_pool(hidden, attention_mask)))
        loss = None
        if labels is not None:
            if self.config.num_labels == 1:
                loss = nn.functional.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
            else:
                loss = nn.functional.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)


SEQ2SEQ_CLASSES: dict[str, str] = {"causal_lm": "AutoModelForSeq2SeqLM", "base": "AutoModel"}
"""An encoder-decoder's classes: its language-model head is a seq2seq LM (T5, mT5, BART)."""


def build(location: str, head: Head, kind: str = "encoder", pooling: str = "cls", dtype: str = "float32",
          trust_remote_code: bool = False) -> nn.Module:
    """The model at ``location`` of ``kind`` in ``dtype`` with ``head``: the auto class of its kind, or a
    mean-pooled classifier. A checkpoint that has a task head of another size (2 classes where the
    task has 3) gets the task's head, freshly initialised, as transformers does with
    ``ignore_mismatched_sizes``; code shipped with the model runs only when ``trust_remote_code``."""
    import transformers

    options = {"dtype": getattr(torch, dtype), "trust_remote_code": trust_remote_code}
    if pooling == "mean" and head.kind in SENTENCE_HEADS:
        encoder = AutoModel.from_pretrained(location, **options)
        return MeanPooledClassifier(encoder, head).to(options["dtype"])
    if kind == "encoder-decoder":
        if head.kind not in SEQ2SEQ_CLASSES:
            raise ModelSourceError(f"'{location}' is an encoder-decoder; the harness builds it with an LM head or none, not {head.kind}")
        auto = SEQ2SEQ_CLASSES[head.kind]
    else:
        auto = AUTO_CLASSES[head.kind]
    if head.labels or head.kind == "regression":
        options["ignore_mismatched_sizes"] = True
    return getattr(transformers, auto).from_pretrained(location, **options, **head.kwargs())
