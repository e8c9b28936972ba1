"""Paper 003's downstream tasks (App. D) as data: files, hub ids, few-shot pools, chance levels.

Every reader returns documents in the layout of the hub dataset that lm-eval's own task uses
(``allenai/ai2_arc``, ``aps/super_glue`` boolq / copa, ``baber/piqa``, ``allenai/winogrande``
winogrande_xl, ``Rowan/hellaswag``), so lm-eval's own YAMLs and ``utils.py`` apply unchanged,
whether the documents come from the release files under the data directory or from the hub.

Few-shot examples come from documents that are never scored: ARC's Dev files (the hub's
``validation``), COPA's ``train.jsonl``; BoolQ, PIQA, WinoGrande and HellaSwag have only their
scored split on hand, so :func:`held_out_pool` sets aside a fixed part of it as the pool.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np

from harness.measure import chance
from harness.errors import DataError
from harness.sources.data import DataSource, json_lines, local_or_hub

Doc = dict[str, Any]
POOL_SIZE = 100  # documents held out as the few-shot pool when the scored file is the only split


@dataclass(frozen=True)
class Split:
    """One task's documents: ``scored`` are evaluated, ``pool`` only ever serves as few-shot examples."""

    scored: list[Doc]
    pool: list[Doc]
    ids: list[str]    # each scored document's position in its file (the item id of per-item outputs)


@dataclass(frozen=True)
class HubSource:
    path: str                 # the dataset_path of lm-eval's task
    name: str | None          # its dataset_name
    scored: str               # the split this harness scores (the local file's counterpart)
    pool: str | None = None   # a separate few-shot split; None: held out of ``scored``


@dataclass(frozen=True)
class FewShotTask:
    """One of paper 003's tasks: where its documents are and how chance is defined."""

    name: str                                  # harness task name = YAML stem = lm-eval task ``harness_<name>``
    files: tuple[str, ...]                     # under the data directory
    read_local: Callable[[list[Path]], Split]
    hub: HubSource
    group: Callable[[Doc], str] | None         # documents with one key stay on one side of a held-out pool
    n_choices: Callable[[Doc], int]
    gold: Callable[[Doc], int]
    chance: Literal["uniform", "majority"]     # uniform: mean of 1/choices; majority: the largest class share
    metrics: tuple[str, ...]                   # what lm-eval's own task reports
    split_name: str                            # the release split scored, as in the scores table

    @property
    def source(self) -> DataSource:
        hub = self.hub.path if self.hub.name is None else f"{self.hub.path}:{self.hub.name}"
        return DataSource(self.files, hub)


def read_jsonl(path: Path) -> list[Doc]:
    return list(json_lines(path))


def read_labels(path: Path, count: int, allowed: set[str]) -> list[str]:
    """A ``.lst`` label file: one label a line, aligned with the documents of its JSONL file."""
    labels = path.read_text(encoding="utf-8").split()
    if len(labels) != count or not set(labels) <= allowed:
        raise DataError(f"{path}: {len(labels)} labels for {count} documents (need one of {sorted(allowed)} per line); restore the original file")
    return labels


def _require(path: Path, docs: list[Doc], keys: set[str]) -> list[Doc]:
    for i, doc in enumerate(docs, start=1):
        if not keys <= doc.keys():
            raise DataError(f"{path}:{i}: missing {sorted(keys - doc.keys())}; restore the original file")
    return docs


def held_out_pool(docs: list[Doc], group: Callable[[Doc], str], size: int = POOL_SIZE) -> Split:
    """Set aside at least ``size`` documents, whole groups at a time, as the few-shot pool.

    Groups (WinoGrande twins, a BoolQ passage, a PIQA goal, a HellaSwag context) are taken in
    the order of the sha256 of their key, so the pool is the same for every seed, profile and
    library version, and no scored document shares a group with a few-shot example. Both parts
    keep the file order.
    """
    members: dict[str, list[int]] = defaultdict(list)
    for i, doc in enumerate(docs):
        members[group(doc)].append(i)
    held: set[int] = set()
    for key in sorted(members, key=lambda k: hashlib.sha256(k.encode()).hexdigest()):
        if len(held) >= size:
            break
        held.update(members[key])
    kept = [i for i in range(len(docs)) if i not in held]
    return Split([docs[i] for i in kept], [docs[i] for i in sorted(held)], [str(i) for i in kept])


def separate_pool(scored: list[Doc], pool: list[Doc]) -> Split:
    """A task whose few-shot pool is a split of its own (ARC Dev, COPA train)."""
    return Split(scored, pool, [str(i) for i in range(len(scored))])


def chance_level(task: FewShotTask, docs: list[Doc]) -> float:
    """Expected accuracy without skill on ``docs`` (:mod:`harness.measure.chance`): a uniform guess
    among each item's options (ARC has 3- and 5-choice items), or the majority class share where the
    answer is a label (BoolQ, where always answering "yes" is the baseline to beat)."""
    if task.chance == "uniform":
        return chance.uniform_choice([task.n_choices(d) for d in docs])
    return chance.majority([task.gold(d) for d in docs])


# -- ARC ---------------------------------------------------------------------------------------


def _arc_doc(path: Path, line: int, raw: Doc) -> Doc:
    """Release layout ``{id, question: {stem, choices: [{text, label}]}, answerKey}`` -> the hub's
    ``{id, question, choices: {text, label}, answerKey}``. Some keys are digits 1-4, as their labels are."""
    try:
        choices = raw["question"]["choices"]
        doc = {
            "id": raw["id"], "question": raw["question"]["stem"],
            "choices": {"text": [c["text"] for c in choices], "label": [c["label"] for c in choices]},
            "answerKey": raw["answerKey"],
        }
    except (KeyError, TypeError):
        raise DataError(f"{path}:{line}: not an ARC question (id, question.stem, question.choices, answerKey); restore the original file") from None
    if doc["answerKey"] not in doc["choices"]["label"]:
        raise DataError(f"{path}:{line}: answerKey {doc['answerKey']!r} is none of the labels {doc['choices']['label']}; restore the original file")
    return doc


def _read_arc(paths: list[Path]) -> Split:
    test, dev = ([_arc_doc(p, i, raw) for i, raw in enumerate(read_jsonl(p), start=1)] for p in paths)
    return separate_pool(test, dev)


def _arc(subset: str) -> FewShotTask:
    folder = f"arc/ARC-{subset}/ARC-{subset}"
    return FewShotTask(
        name=f"arc_{subset.lower()}", files=(f"{folder}-Test.jsonl", f"{folder}-Dev.jsonl"), read_local=_read_arc,
        hub=HubSource("allenai/ai2_arc", f"ARC-{subset}", "test", pool="validation"), group=None,
        n_choices=lambda d: len(d["choices"]["text"]), gold=lambda d: d["choices"]["label"].index(d["answerKey"]),
        chance="uniform", metrics=("acc", "acc_norm"), split_name="test",
    )


# -- BoolQ, COPA (SuperGLUE) -------------------------------------------------------------------


def _boolq_key(doc: Doc) -> str:
    return doc["passage"]


def _read_boolq(paths: list[Path]) -> Split:
    """SuperGLUE BoolQ; its ``label`` is the string true/false, the hub's is 1/0 (lm-eval: ["no", "yes"])."""
    docs = _require(paths[0], read_jsonl(paths[0]), {"question", "passage", "idx", "label"})
    for i, doc in enumerate(docs, start=1):
        if str(doc["label"]).lower() not in ("true", "false"):
            raise DataError(f"{paths[0]}:{i}: label {doc['label']!r} is not true/false; restore the original file")
        doc["label"] = int(str(doc["label"]).lower() == "true")
    return held_out_pool(docs, _boolq_key)


def _read_copa(paths: list[Path]) -> Split:
    """SuperGLUE COPA: val.jsonl is scored, train.jsonl is the few-shot pool."""
    keys = {"premise", "choice1", "choice2", "question", "label"}
    val, train = (_require(p, read_jsonl(p), keys) for p in paths)
    return separate_pool(val, train)


# -- PIQA, WinoGrande: documents and labels in separate files ----------------------------------


def _read_piqa(paths: list[Path]) -> Split:
    docs = _require(paths[0], read_jsonl(paths[0]), {"goal", "sol1", "sol2"})
    for doc, label in zip(docs, read_labels(paths[1], len(docs), {"0", "1"})):
        doc["label"] = int(label)
    return held_out_pool(docs, lambda d: d["goal"])


def _winogrande_options(doc: Doc) -> str:
    """The two options: WinoGrande's twin sentences (one trigger word apart) share them, and the
    hub's rows, unlike the release file, carry no qID to pair twins by."""
    return f"{doc['option1']}|{doc['option2']}"


def _read_winogrande(paths: list[Path]) -> Split:
    docs = _require(paths[0], read_jsonl(paths[0]), {"qID", "sentence", "option1", "option2", "answer"})
    for line, (doc, label) in enumerate(zip(docs, read_labels(paths[1], len(docs), {"1", "2"})), start=1):
        if str(doc["answer"]) != label or doc["sentence"].count("_") != 1:
            raise DataError(f"{paths[0]}:{line}: answer {doc['answer']!r} differs from {paths[1].name} ({label}) or no single '_'; restore the original files")
    return held_out_pool(docs, _winogrande_options)


# -- HellaSwag: 6 lines per item ---------------------------------------------------------------

_LAST_SENTENCE = re.compile(r"^(.*[.!?]) ([^.!?]+)$")


def split_context(ctx: str) -> tuple[str, str]:
    """Recover (ctx_a, ctx_b) from the joined ``ctx`` the text layout keeps.

    lm-eval's ``process_docs`` capitalizes ``ctx_b``, the lower-case opening of the next sentence
    in ActivityNet items ("A man is sitting on a roof." + "he"); WikiHow items have none. The
    layout drops the boundary, so ``ctx_b`` is taken as the text after the last sentence end when
    the context does not itself end a sentence; lm-eval's own ``process_docs`` then applies.
    """
    match = _LAST_SENTENCE.match(ctx)
    if ctx.endswith((".", "!", "?")) or match is None:
        return ctx, ""
    return match.group(1), match.group(2)


def _read_hellaswag(paths: list[Path]) -> Split:
    """``activity_label: ctx``, the gold index, then 4 endings, one line each, per item (PROVENANCE.md)."""
    lines = paths[0].read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) % 6:
        raise DataError(f"{paths[0]}: {len(lines)} lines is not 6 per item (context, gold 0-3, 4 endings); restore the original file")
    docs = []
    for start in range(0, len(lines), 6):
        head, gold, *endings = lines[start : start + 6]
        label, sep, ctx = head.partition(": ")
        if not sep or gold not in ("0", "1", "2", "3"):
            raise DataError(f"{paths[0]}:{start + 1}: expected 'activity label: context' then a gold index 0-3; restore the original file")
        ctx_a, ctx_b = split_context(ctx)
        docs.append({"activity_label": label, "ctx_a": ctx_a, "ctx_b": ctx_b, "ctx": ctx, "endings": endings, "label": gold})
    return held_out_pool(docs, lambda d: d["ctx"])


# -- the table ---------------------------------------------------------------------------------

TASKS: dict[str, FewShotTask] = {
    t.name: t
    for t in (
        _arc("Challenge"),
        _arc("Easy"),
        FewShotTask("boolq", ("boolq/val.jsonl",), _read_boolq, HubSource("aps/super_glue", "boolq", "validation"),
                    _boolq_key, lambda d: 2, lambda d: int(d["label"]), "majority", ("acc",), "validation"),
        FewShotTask("copa", ("copa/val.jsonl", "copa/train.jsonl"), _read_copa,
                    HubSource("aps/super_glue", "copa", "validation", pool="train"),
                    None, lambda d: 2, lambda d: int(d["label"]), "uniform", ("acc",), "validation"),
        FewShotTask("piqa", ("piqa/valid.jsonl", "piqa/valid-labels.lst"), _read_piqa, HubSource("baber/piqa", None, "validation"),
                    lambda d: d["goal"], lambda d: 2, lambda d: int(d["label"]), "uniform", ("acc", "acc_norm"), "validation"),
        FewShotTask("winogrande", ("winogrande/dev.jsonl", "winogrande/dev-labels.lst"), _read_winogrande,
                    HubSource("allenai/winogrande", "winogrande_xl", "validation"),
                    _winogrande_options, lambda d: 2, lambda d: int(d["answer"]) - 1, "uniform", ("acc",), "validation"),
        FewShotTask("hellaswag", ("hellaswag/hellaswag_val_full.txt",), _read_hellaswag, HubSource("Rowan/hellaswag", None, "validation"),
                    lambda d: d["ctx"], lambda d: 4, lambda d: int(d["label"]), "uniform", ("acc", "acc_norm"), "validation"),
    )
}


def _read_hub(task: FewShotTask) -> Split:
    from datasets import load_dataset

    def rows(split: str) -> list[Doc]:
        return [dict(d) for d in load_dataset(task.hub.path, task.hub.name, split=split)]

    scored = rows(task.hub.scored)
    if task.hub.pool is not None:
        return separate_pool(scored, rows(task.hub.pool))
    return held_out_pool(scored, task.group)


def load(task: FewShotTask, data_dir: Path | None) -> tuple[Split, dict[str, str]]:
    """The task's documents from the release files, else from lm-eval's hub dataset (DataError offline)."""
    return local_or_hub(data_dir, task.source, task.read_local, lambda: _read_hub(task))
