"""Generative QA: an encoder-decoder fine-tuned to write the answer (TyDiQA-GoldP English as text to
text), scored by SQuAD F1 / exact match on MLQA dev in 7 languages, as the ``qa`` suite scores.

Paper 000 (Table 2) reports mT5's TyDiQA-GoldP F1 / EM with ASG's shared codebook on the input and
output tables (Section 2.4). mT5 answers by generating text, not by pointing at a span, so this
suite is ``qa``'s data and scoring with a text-to-text protocol (:class:`~harness.suites.qa.QuestionAnswering`
supplies data, sampling, per-language scores and items; only training and answering differ):

* Input ``question: {question} context: {context}`` (T5's SQuAD format, Raffel et al. 2020,
  Appendix D), cut to ``max_length`` tokens; target the first gold answer, at most
  ``answer_tokens`` tokens. Fine-tuned through the shared protocol (HF Trainer, all weights, the
  adapter's modules included); the model shifts the target into its decoder's input itself.
* Answers by greedy decoding of at most ``answer_tokens`` tokens, special tokens dropped, then
  normalised and scored as the official scripts do (:mod:`harness.measure.squad`).

Choices where the paper is open, written down here: the GoldP dev answers are blanked in every copy
on hand, so, as ``qa`` does, the model trained on TyDiQA-GoldP English is scored on MLQA dev
(zero-shot cross-lingual transfer, ``Score.setting`` ``zero-shot``); the paper's learning rate for
mT5 (1e-3, Appendix) is the paper profile's, with 3 epochs at batch 32 (BERT's SQuAD recipe, as
``qa``'s); greedy decoding (the paper does not say how it decodes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from harness.suites import squad
from harness.suites.finetune import FinetuneBudget, finetune
from harness.suites.qa import QaConfig, QuestionAnswering
from transformers import DataCollatorForSeq2Seq

from harness.budgets import Budgets
from harness.sources.corpora import Text
from harness.suite import Head, SuiteContext, SuiteData, Task

IGNORED = -100  # label of padded target positions (the loss skips them)


@dataclass(frozen=True)
class GenerativeQaBudget(FinetuneBudget):
    answer_tokens: int = 32  # longest target trained on, and longest answer generated


BUDGETS = Budgets(
    smoke=GenerativeQaBudget(train_examples=32, eval_examples=8, epochs=1, learning_rate=1e-3, batch_size=8, max_length=128,
                             eval_batch_size=16, answer_tokens=16),
    quick=GenerativeQaBudget(train_examples=1500, eval_examples=100, epochs=1, learning_rate=1e-3, batch_size=16, max_length=256,
                             warmup=0.1),
    paper=GenerativeQaBudget(train_examples=None, eval_examples=None, epochs=3, learning_rate=1e-3, batch_size=32, max_length=512),
)


def prompt(question: squad.Question) -> str:
    """The text-to-text input of one question (T5's SQuAD format)."""
    return f"question: {question.question.strip()} context: {question.context}"


def features(tokenizer: Any, questions: list[squad.Question], max_length: int, answer_tokens: int, targets: bool) -> list[dict[str, Any]]:
    """Encoder inputs of the questions, with the first gold answer as ``labels`` when ``targets``."""
    enc = tokenizer([prompt(q) for q in questions], truncation=True, max_length=max_length)
    rows = [{"input_ids": ids, "attention_mask": mask} for ids, mask in zip(enc["input_ids"], enc["attention_mask"])]
    if targets:
        answers = tokenizer(text_target=[q.answers[0] for q in questions], truncation=True, max_length=answer_tokens)
        for row, labels in zip(rows, answers["input_ids"]):
            row["labels"] = labels
    return rows


@torch.inference_mode()
def generate(model: Any, tokenizer: Any, rows: list[dict[str, Any]], budget: GenerativeQaBudget, ctx: SuiteContext) -> list[str]:
    """Greedy answers of at most ``answer_tokens`` tokens, batched by input length, in input order."""
    model.eval().to(ctx.device)
    order = np.argsort([len(r["input_ids"]) for r in rows], kind="stable")
    answers: list[str] = [""] * len(rows)
    steps = range(0, len(order), budget.eval_batch_size)
    for done, start in enumerate(steps):
        idx = order[start:start + budget.eval_batch_size]
        batch = tokenizer.pad([rows[i] for i in idx], return_tensors="pt")
        out = model.generate(**{k: v.to(ctx.device) for k, v in batch.items()}, max_new_tokens=budget.answer_tokens, do_sample=False,
                             num_beams=1)
        for i, text in zip(idx, tokenizer.batch_decode(out, skip_special_tokens=True)):
            answers[i] = text.strip()
        ctx.progress("generating answers", done + 1, len(steps))
    return answers


class GenerativeQuestionAnswering(QuestionAnswering):
    name = "qa_generative"
    description = "Generative QA (encoder-decoders): TyDiQA-GoldP en as text to text, SQuAD F1/EM on MLQA dev in 7 languages"
    head = Head("causal_lm")  # an encoder-decoder's LM head: a seq2seq model (harness.sources.heads)
    kinds = ("encoder-decoder",)
    default_model = "google/mt5-small"  # no packaged encoder-decoder: online, or --model DIR (a T5 or mT5 folder)
    config_class = QaConfig
    budgets = BUDGETS

    def train(self, task: Task, model, tokenizer, data: SuiteData, ctx: SuiteContext):
        b = ctx.budget
        rows = features(tokenizer, self._training(data, ctx), b.max_length, b.answer_tokens, targets=True)
        return finetune(model, rows, DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=IGNORED), b, ctx)

    def train_texts(self, task: Task, data: SuiteData, config: QaConfig) -> list[Text]:
        """The text-to-text inputs the model reads."""
        return [prompt(q) for q in data.splits["train"]]

    @staticmethod
    def reading(budget: GenerativeQaBudget) -> dict[str, int]:
        """Input length and longest answer, for the run's details."""
        return {"max_length": budget.max_length, "answer_tokens": budget.answer_tokens}

    def answer(self, model, tokenizer, questions: list[squad.Question], ctx: SuiteContext) -> list[str]:
        b = ctx.budget
        return generate(model, tokenizer, features(tokenizer, questions, b.max_length, b.answer_tokens, targets=False), b, ctx)
