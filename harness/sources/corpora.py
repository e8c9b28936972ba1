"""Fit corpora: unlabeled text that adapters read to cluster, distill or learn merges.

An adapter declares corpora by name (:meth:`harness.adapter.Adapter.corpora`); the runner checks them
with the suite's data (missing -> one-line DataError before any model loads), puts their sha256 in
the run's identity and provenance, and hands them to the adapter in ``FitContext.corpora``.

* ``wikitext2_train``: the articles of WikiText-2 train (``wikitext2/train.txt``, tokenized release),
  detokenized with lm-eval's WikiText detokenizer as the ``bpb`` suite does for valid/test.
* ``c4_sample``: the first :data:`C4_FIT_DOCUMENTS` documents of ``c4_sample/c4_sample.jsonl``; the
  rest of the file is held out as scored text (the ``bpb`` suite's raw-text corpus), never fit text.
* ``task_train``: the training texts of the suite task being run (paper 004 builds its sense
  dictionaries from the GLUE / MTEB training sets); the suite provides them
  (:meth:`harness.suite.Suite.train_texts`), so they are part of the suite's data identity. A
  sentence-pair task's texts are pairs (:data:`Text`), kept apart so that a method can encode them
  as the task's model sees them (two segments); a method that wants running text only reads
  :meth:`Corpus.plain`.
* any other name with a slash: a hub dataset id (its ``train`` split, column ``text``), online only.

Neither local corpus is a test set of any suite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError, DataError
from harness.sources.data import DataSource, json_lines, local_or_hub

C4_FIT_DOCUMENTS = 800
"""c4_sample documents [0, 800) are fit text; [800, 1000) are the bpb suite's held-out raw text."""

LOCAL = {
    "wikitext2_train": DataSource(("wikitext2/train.txt",), "Salesforce/wikitext:wikitext-2-v1"),
    "c4_sample": DataSource(("c4_sample/c4_sample.jsonl",)),
}
TASK_TRAIN = "task_train"
_ARTICLE = re.compile(r"^ = [^=].* = $")  # a top-level heading " = Title = " starts a WikiText article


Text = str | tuple[str, str]
"""One fit text: a document or sentence, or a sentence pair (first, second) that the task's model
reads as two segments (``[CLS] a [SEP] b [SEP]`` with token type ids 0 / 1 in BERT)."""


@dataclass(frozen=True)
class Corpus:
    """A named fit corpus: its texts and where they came from. Only ``task_train`` of a pair
    task holds pairs; the named corpora are documents."""

    name: str
    texts: tuple[Text, ...]
    files: dict[str, str]  # file -> sha256 prefix, or hub id -> "hub"

    def plain(self) -> tuple[str, ...]:
        """The texts as running text, a pair joined by a space: for methods that read words or
        tokens only, not the model's segment layout."""
        return tuple(t if isinstance(t, str) else " ".join(t) for t in self.texts)


def source(name: str) -> DataSource:
    """The data source behind a corpus name (validated: a known local name or a hub id)."""
    if name == TASK_TRAIN:
        return DataSource(())  # the suite's own data, already in the run's identity
    if name in LOCAL:
        return LOCAL[name]
    if "/" in name:
        return DataSource((), name)
    raise ConfigError(f"unknown fit corpus '{name}'; use {', '.join([*LOCAL, TASK_TRAIN])} or a hub dataset id (owner/name)")


def wikitext_articles(lines: list[str]) -> list[str]:
    """Group WikiText lines into articles (a top-level heading starts one), detokenized."""
    from lm_eval.tasks.wikitext.preprocess_wikitext import wikitext_detokenizer

    pages: list[list[str]] = []
    for line in lines:
        if _ARTICLE.match(line.rstrip("\n")) or not pages:
            pages.append([])
        pages[-1].append(line)
    texts = [wikitext_detokenizer({"page": "".join(page)}).strip() for page in pages]
    return [t for t in texts if t]


def read_jsonl_texts(path: Path) -> list[str]:
    """The ``text`` field of every line of a JSON-lines file (DataError naming file and line)."""
    return list(json_lines(path, field="text", fix="fix or remove the line"))


def c4_documents(path: Path) -> list[str]:
    texts = read_jsonl_texts(path)
    if len(texts) <= C4_FIT_DOCUMENTS:
        raise DataError(f"{path}: {len(texts)} documents; expected the 1,000-document c4_sample.jsonl")
    return texts


def _read_hub(hub_id: str) -> list[str]:
    from datasets import load_dataset

    name, _, config = hub_id.partition(":")
    return list(load_dataset(name, config or None, split="train")["text"])


def _read_local(name: str, paths: list[Path]) -> list[str]:
    if name == "wikitext2_train":
        return wikitext_articles(paths[0].read_text(encoding="utf-8").splitlines(keepends=True))
    return c4_documents(paths[0])[:C4_FIT_DOCUMENTS]


def load(name: str, data_dir: Path | None) -> Corpus:
    """Read corpus ``name`` from the data directory, or from the hub when it is a hub id."""
    src = source(name)
    if name == "wikitext2_train":  # the hub copy has one row per line, as the release file
        read_hub = lambda: wikitext_articles([line + "\n" for line in _read_hub(src.hub_id)])  # noqa: E731
    else:
        read_hub = lambda: [t for t in _read_hub(src.hub_id) if t.strip()]  # noqa: E731
    texts, files = local_or_hub(data_dir, src, lambda paths: _read_local(name, paths), read_hub)
    if not texts:
        raise DataError(f"fit corpus '{name}' has no text; check {', '.join(src.files) or name}")
    return Corpus(name, tuple(texts), files)
