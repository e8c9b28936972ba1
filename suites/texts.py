"""Scored text sets shared by the ``bpb`` and ``tokenizer`` suites.

* ``wikitext2``: the articles of WikiText-2 valid or test (the tokenized release on hand), detokenized
  with lm-eval's WikiText detokenizer; ``<unk>`` stays in the text and is counted.
* ``c4``: the held-out documents of ``c4_sample/c4_sample.jsonl`` (from document 800 on; the first
  800 are adapters' fit text, :mod:`harness.sources.corpora`): raw web text, no tokenization artefacts.
* a user corpus (``--set corpus=PATH``): a plain-text file whose documents are separated by blank
  lines, or JSON lines with a ``text`` field (``.jsonl``); its sha256 is part of the run's identity.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.errors import DataError
from harness.sources import corpora
from harness.sources.data import DataSource, local_or_hub

WIKITEXT = {split: DataSource((f"wikitext2/{split}.txt",), "Salesforce/wikitext:wikitext-2-v1") for split in ("valid", "test")}
C4 = corpora.LOCAL["c4_sample"]
UNK = "<unk>"


def user_source(path: str) -> DataSource:
    return DataSource((str(Path(path).expanduser().resolve()),))


def read_wikitext(path: Path) -> list[str]:
    docs = corpora.wikitext_articles(path.read_text(encoding="utf-8").splitlines(keepends=True))
    if len(docs) < 2:
        raise DataError(
            f"{path}: found {len(docs)} article(s); expected the WikiText-2 release file with ' = Title = ' headings "
            "(for any other text use --set corpus=PATH)"
        )
    return docs


def _wikitext_hub(split: str) -> list[str]:
    from datasets import load_dataset

    rows = load_dataset("Salesforce/wikitext", "wikitext-2-v1", split="validation" if split == "valid" else "test")
    return corpora.wikitext_articles([line + "\n" for line in rows["text"]])


def wikitext(split: str, data_dir: Path | None) -> tuple[list[str], dict[str, str]]:
    """WikiText-2 ``valid`` or ``test`` articles, from the data directory or the hub."""
    return local_or_hub(data_dir, WIKITEXT[split], lambda paths: read_wikitext(paths[0]), lambda: _wikitext_hub(split))


def c4_heldout(data_dir: Path | None) -> tuple[list[str], dict[str, str]]:
    """The c4_sample documents that are never fit text."""
    return local_or_hub(data_dir, C4, lambda paths: corpora.c4_documents(paths[0])[corpora.C4_FIT_DOCUMENTS:], lambda: [])


def read_user_corpus(path: Path) -> list[str]:
    """Documents of a plain-text file (separated by blank lines) or of a JSON-lines file (``text``)."""
    if path.suffix == ".jsonl":
        docs = corpora.read_jsonl_texts(path)
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise DataError(f"{path}: not UTF-8 text (byte {err.start}); convert it to UTF-8") from None
        docs = [block.strip() for block in text.replace("\r\n", "\n").split("\n\n")]
    docs = [d for d in docs if d.strip()]
    if not docs:
        raise DataError(f"{path}: no text found; give a plain-text file (documents separated by blank lines) or JSONL with a 'text' field")
    return docs


def user_corpus(path: str, data_dir: Path | None) -> tuple[list[str], dict[str, str]]:
    return local_or_hub(data_dir, user_source(path), lambda paths: read_user_corpus(paths[0]), lambda: [])


def prefix(text: str, max_bytes: int | None) -> str:
    """The text cut to at most ``max_bytes`` UTF-8 bytes, at a whitespace boundary."""
    if max_bytes is None or len(text.encode("utf-8")) <= max_bytes:
        return text
    head = text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
    cut = max(head.rfind(" "), head.rfind("\n"))
    return head[:cut] if cut > 0 else head


def sample(docs: list[str], documents: int | None, max_bytes: int | None, rng: np.random.Generator) -> tuple[list[str], list[int]]:
    """A seeded sample of ``documents`` documents (all when None), each cut to ``max_bytes``; with their indices."""
    keep = range(len(docs)) if documents is None else np.sort(rng.permutation(len(docs))[:documents])
    keep = [int(i) for i in keep]
    return [prefix(docs[i], max_bytes) for i in keep], keep
