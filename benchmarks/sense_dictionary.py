"""Sense dictionary size and build time against the caps (paper 004): vectors per token and senses per token.

MiniLM runs once over a fixed slice of WikiText-2 train with the largest vector cap; each smaller
cap's sample is its prefix (``TokenVectors.capped``: the bottom-k sample is nested), so every row
uses the same text. For each vector cap the sampled vectors and a k-means dictionary are built; for
each sense cap k the dictionary is built from the largest sample.

A token seen n_t times keeps min(n_t, cap) vectors and gets min(n_t, k) k-means senses, so the sizes
are sum_t min(n_t, cap) D 2 bytes (sample, fp16) and sum_t min(n_t, k) D 2 + 8 (V + 1) bytes
(dictionary, fp16 senses + int64 offsets): linear in the cap over the tokens seen at least that
often, flattening as rarer tokens run out of occurrences. Reported per row: measured bytes, the
formula's bytes, the part from "frequent" tokens (seen at least the largest cap / k times; exactly
linear), seconds to cluster, and least-squares lines with R^2 for the whole and the frequent part.

With ``--mcl`` a Markov-clustering dictionary is built per vector cap too (each token's own number
of senses, not capped by k: :func:`harness.methods.senses.cluster.senses_wanted`), and its senses
per token are printed in paper 004 Table 6's bins (tokens with at most / more than 15 senses)
beside the paper's row for Llama-3-8B-Instruct (read from ``paper_results.csv``), with what MCL
found (tokens it gave one cluster, the median and largest cluster count). ``--mcl-scales 1,30``
adds, at the largest cap, dictionaries of the same vectors multiplied by each scale other than 1:
the MCL count follows the vectors' scale, not their geometry (docs/methods.md).

    python -m benchmarks.sense_dictionary [--tokens 40000] [--caps 25,50,100,200,400] [--ks 1,5,10,15,20,30]
        [--mcl] [--mcl-scales 1] [--out benchmarks/out/sense_dictionary.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

from harness.methods.senses.cluster import build
from harness.methods.senses.collect import TokenVectors, collect, fit_windows
from harness.methods.senses.dictionary import TABLE6_SENSES, table6_bins
from harness.results.reference import read_paper_results
from harness.sources import corpora, models
from harness.sources.data import data_root


def linear_fit(x: list[float], y: list[float]) -> dict[str, float]:
    """Slope, intercept and R^2 of the least-squares line y = a x + b (R^2 = 1 for a constant fitted exactly)."""
    a, b = np.polyfit(x, y, 1)
    residual = ((np.asarray(y) - (a * np.asarray(x) + b)) ** 2).sum()
    total = ((np.asarray(y) - np.mean(y)) ** 2).sum()
    return {"slope": float(a), "intercept": float(b), "r2": 1.0 - float(residual / total) if total else float(residual == 0)}


def dictionary_row(sampled: TokenVectors, vocab: int, k: int, clustering: str, frequent: np.ndarray) -> dict:
    """Sizes of one sample and its dictionary; ``frequent`` marks the tokens counted apart."""
    start = time.perf_counter()
    d = build(sampled, vocab, k, clustering)
    seconds = time.perf_counter() - start
    stats, dim = d.statistics(k), sampled.vectors.shape[1]
    kept = np.diff(sampled.offsets)
    return {
        "k": k, "clustering": clustering, "vectors": len(sampled.vectors), "vector_bytes": sampled.vectors.nbytes,
        "frequent_vector_bytes": int(kept[frequent].sum()) * dim * 2,
        "senses": stats["senses"], "dictionary_bytes": stats["dictionary_bytes"],
        "formula_dictionary_bytes": int(np.minimum(kept, k).sum()) * dim * 2 + 8 * (vocab + 1) if clustering == "kmeans" else None,
        "frequent_dictionary_bytes": int(d.counts()[torch.from_numpy(sampled.ids[frequent])].sum()) * dim * 2,
        "share_below_k": round(stats["share_below_k"], 4), "max_senses": max(stats["senses_per_token_histogram"]),
        "table6": stats["table6"], "mcl": stats.get("mcl"), "cluster_s": round(seconds, 2),
    }


def paper_table6() -> dict[str, float]:
    """Paper 004 Table 6's senses-per-token bins for Llama-3-8B-Instruct's MCL dictionary, as printed."""
    wanted = set(table6_bins(torch.zeros(0, dtype=torch.int64)))
    return {r.metric: r.value for r in read_paper_results() if r.paper == "multisense" and r.table == "Table 6" and r.metric in wanted}


def table6_lines(paper: dict[str, float], rows: list[dict]) -> list[str]:
    """Table 6's bins, the paper's row and one per MCL dictionary, as printed text, with what MCL
    found (tokens given one cluster of those it ran on; median and largest cluster count)."""
    t = TABLE6_SENSES
    out = [f"{'senses per token (paper 004 Table 6)':<44}{'valid tokens':>13}{f'<= {t} senses':>20}{f'> {t} senses':>20}"
           f"{'MCL: one cluster':>20}{'median, max c':>15}"]
    named = [(f"MiniLM, WikiText-2, cap={r['cap']}" + (f", vectors x{r['scale']:g}" if r.get("scale", 1) != 1 else ""), r) for r in rows]
    for name, row in [("Llama-3-8B-Instruct, MTEB (paper)", {"table6": paper}), *named]:
        bins, mcl = row["table6"], row.get("mcl")
        cells = [f"{int(bins[f'n_tokens_{side}{t}_senses']):,} ({bins[f'pct_tokens_{side}{t}_senses']:.2f}%)" for side in ("le", "gt")]
        found = (f"{mcl['tokens_one_cluster']:,} of {mcl['tokens_clustered']:,}", f"{mcl['clusters_median']:g}, {mcl['clusters_max']}") if mcl and mcl["tokens_clustered"] else ("", "")
        out.append(f"{name:<44}{int(bins['n_valid_tokens']):>13,}{cells[0]:>20}{cells[1]:>20}{found[0]:>20}{found[1]:>15}")
    return out


def scaled(sampled: TokenVectors, scale: float) -> TokenVectors:
    """The same sample with every vector multiplied by ``scale`` (same geometry, distances x scale)."""
    vectors = (sampled.vectors.astype(np.float32) * scale).astype(sampled.vectors.dtype)
    return TokenVectors(sampled.ids, sampled.offsets, vectors, sampled.seen, sampled.tokens_read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=40_000, help="fit tokens read from WikiText-2 train")
    parser.add_argument("--caps", default="25,50,100,200,400", help="vector caps per token")
    parser.add_argument("--ks", default="1,5,10,15,20,30", help="sense caps k (paper 004 Table 11's range)")
    parser.add_argument("--mcl", action="store_true", help="also build Markov-clustering dictionaries per vector cap")
    parser.add_argument("--mcl-scales", default="1", help="with --mcl: also cluster the largest cap's vectors multiplied by these scales")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/sense_dictionary.json"))
    args = parser.parse_args()
    caps, ks = [int(c) for c in args.caps.split(",")], [int(k) for k in args.ks.split(",")]

    ref = models.resolve("minilm")
    tokenizer, model = AutoTokenizer.from_pretrained(ref.location), AutoModel.from_pretrained(ref.location)
    corpus = corpora.load("wikitext2_train", data_root(os.environ.get("HARNESS_DATA_DIR")))
    windows = fit_windows(tokenizer, corpus.texts, 128, args.tokens, seed=0)
    vocab = model.get_input_embeddings().num_embeddings
    start = time.perf_counter()
    full = collect(model, windows, max(caps), vocab, pad_id=tokenizer.pad_token_id, batch_size=32, seed=0)
    collect_s = time.perf_counter() - start

    often_cap, often_k = full.seen >= max(caps), np.diff(full.offsets) >= max(ks)
    by_cap = [{"cap": c, **dictionary_row(full.capped(c), vocab, 15, "kmeans", often_cap)} for c in caps]
    by_k = [dictionary_row(full, vocab, k, "kmeans", often_k) for k in ks]
    result = {
        "model": "minilm", "fit_tokens": full.tokens_read, "tokens_with_vectors": len(full.ids),
        "tokens_seen_max_cap_times": int(often_cap.sum()), "tokens_with_max_k_vectors": int(often_k.sum()),
        "collect_s": round(collect_s, 1), "load_average": os.getloadavg()[0],
        "by_vector_cap": by_cap,
        "vector_bytes_vs_cap": linear_fit(caps, [r["vector_bytes"] for r in by_cap]),
        "frequent_vector_bytes_vs_cap": linear_fit(caps, [r["frequent_vector_bytes"] for r in by_cap]),
        "dictionary_bytes_vs_cap": linear_fit(caps, [r["dictionary_bytes"] for r in by_cap]),
        "by_sense_cap": by_k,
        "dictionary_bytes_vs_k": linear_fit(ks, [r["dictionary_bytes"] for r in by_k]),
        "frequent_dictionary_bytes_vs_k": linear_fit(ks, [r["frequent_dictionary_bytes"] for r in by_k]),
    }
    if args.mcl:  # k (Table 5's 15) only sets share_below_k: MCL picks each token's number itself
        mcl = [{"cap": c, **dictionary_row(full.capped(c), vocab, 15, "mcl", often_cap)} for c in caps]
        mcl += [{"cap": max(caps), "scale": s, **dictionary_row(scaled(full, s), vocab, 15, "mcl", often_cap)}
                for s in map(float, args.mcl_scales.split(",")) if s != 1]
        result |= {"mcl_by_vector_cap": mcl,
                   "mcl_dictionary_bytes_vs_cap": linear_fit(caps, [r["dictionary_bytes"] for r in mcl[:len(caps)]]),
                   "paper_table6": paper_table6()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    if args.mcl:
        print("\n".join(table6_lines(result["paper_table6"], result["mcl_by_vector_cap"])))


if __name__ == "__main__":
    main()
