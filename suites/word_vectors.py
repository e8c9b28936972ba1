"""A word's vectors in a model (paper 004 Appendix E), as the word-similarity suite reads them: in
contexts (:func:`word_vectors`: the mean of the word's tokens' last-layer vectors where it occurs in
running text), alone (:func:`alone_vectors`), and in the input embedding table
(:func:`static_vectors`). :func:`word_occurrences` gives every word at least one occurrence.
"""

from __future__ import annotations

import string
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from harness.methods.senses.collect import Batch, Sample, TokenVectors, backbone_of, last_hidden


def bare(token: str) -> str:
    """A whitespace token as a word to match: lower-cased, surrounding punctuation removed."""
    return token.strip(string.punctuation).lower()


def word_vectors(model: nn.Module, tokenizer: Any, texts: Sequence[str], words: Sequence[str], *, cap: int,
                 seed: int, window: int = 128, batch_size: int = 32, device: str = "cpu") -> TokenVectors:
    """Contextual vectors of whole words (paper 004 Appendix E): each occurrence of a target word in
    ``texts`` (whitespace words, matched lower-cased without surrounding punctuation) as the mean of
    its tokens' last-layer vectors, a uniform sample of at most ``cap`` occurrences per word; ids
    index ``words``. Texts are cut into chunks of ``window / 2`` words, each encoded as plain text
    (a token belongs to the word its last character falls in), so byte-level BPE tokenizers work
    too, and run in order of their token counts (batches of similar length: little padding), padded
    on the right (a decoder's positions start at its first token whatever its tokenizer's padding
    side). Chunks without a target word are not run."""
    index = {w.lower(): i for i, w in enumerate(words)}
    chunks = [chunk for text in texts for ws in [text.split()] for s in range(0, len(ws), window // 2)
              for chunk in [ws[s:s + window // 2]] if any(bare(w) in index for w in chunk)]
    tokens = [len(ids) for ids in tokenizer([" ".join(c) for c in chunks], truncation=True, max_length=window)["input_ids"]] if chunks else []
    chunks = [chunks[i] for i in np.argsort(tokens, kind="stable")]
    backbone = backbone_of(model).eval().to(device)
    sample = Sample(cap, len(words), seed)
    with torch.inference_mode():
        for start in range(0, len(chunks), batch_size):
            batch = chunks[start:start + batch_size]
            enc = tokenizer([" ".join(c) for c in batch], truncation=True, max_length=window, padding=True,
                            padding_side="right", return_offsets_mapping=True, return_tensors="pt")
            hidden = last_hidden(backbone, Batch(enc["input_ids"].to(device), enc["attention_mask"].to(device), None)).float().cpu()
            for row, chunk in enumerate(batch):
                starts = np.cumsum([0] + [len(w) + 1 for w in chunk[:-1]])
                positions: dict[int, list[int]] = {}
                for pos, (first, last) in enumerate(enc["offset_mapping"][row].tolist()):
                    w = int(np.searchsorted(starts, last - 1, side="right")) - 1 if last > first else -1
                    if w >= 0 and bare(chunk[w]) in index:
                        positions.setdefault(w, []).append(pos)
                if positions:
                    ids = np.array([index[bare(chunk[w])] for w in positions])
                    sample.add(ids, torch.stack([hidden[row, p].mean(0) for p in positions.values()]).numpy())
    return sample.result(0)


def word_occurrences(found: TokenVectors, alone: np.ndarray) -> list[np.ndarray]:
    """Each word's context occurrences (paper 004 Appendix E): its sampled vectors of
    :func:`word_vectors` as one (n_w, D) float32 matrix per word, or, for a word without occurrences,
    its vector encoded alone (``alone``, (W, D) from :func:`alone_vectors`, same model and layer) as
    its one occurrence, so every word has one."""
    out = [alone[w][None].astype(np.float32) for w in range(len(alone))]
    for i, word in enumerate(found.ids):
        out[word] = found.of(i).astype(np.float32)
    return out


@torch.inference_mode()
def alone_vectors(model: nn.Module, tokenizer: Any, words: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """(W, D) mean of each word's sub-token vectors in the last hidden layer, the word encoded alone
    (with the model's special tokens, which are left out of the mean; padded on the right, as
    :func:`word_vectors`)."""
    backbone, out = backbone_of(model), []
    for start in range(0, len(words), batch_size):
        enc = tokenizer(list(words[start:start + batch_size]), padding=True, padding_side="right",
                        return_special_tokens_mask=True, return_tensors="pt")
        keep = (enc["attention_mask"] * (1 - enc["special_tokens_mask"])).unsqueeze(-1).float()
        hidden = last_hidden(backbone, Batch(enc["input_ids"].to(backbone.device), enc["attention_mask"].to(backbone.device), None))
        out.append(((hidden.float().cpu() * keep).sum(1) / keep.sum(1).clamp(min=1.0)).numpy())
    return np.concatenate(out)


@torch.inference_mode()
def static_vectors(model: Any, tokenizer: Any, words: list[str]) -> np.ndarray:
    """(W, D) mean of each word's sub-token rows of the input embedding table (as the model embeds them)."""
    pieces = [tokenizer(w, add_special_tokens=False)["input_ids"] for w in words]
    ids = torch.tensor([i for p in pieces for i in p])
    owner = torch.repeat_interleave(torch.arange(len(words)), torch.tensor([len(p) for p in pieces]))
    rows = model.get_input_embeddings()(ids.to(model.device)).float().cpu()
    sums = torch.zeros(len(words), rows.shape[1]).index_add_(0, owner, rows)
    return (sums / torch.bincount(owner, minlength=len(words))[:, None]).numpy()
