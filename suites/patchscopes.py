"""Composed decoding, paper 003's Patchscopes tables (Section 5, Tables 1 and 7).

For a seeded sample of the vocabulary's decomposable forms (the Vocab Diet map of the run's
tokenizer: English inflections and capitalized variants, ``harness.methods.vocab.decomposition``
with UniMorph and lemminflect as the word list), the model reads the form's input vector back
(``harness.methods.vocab.patchscopes``): put at X in ``X, X, X, X,``, the first continued word is
``exact`` (the form: Table 1's *embed*), ``base`` (its base word), ``diff_inflection`` (another
form of the same base) or ``other`` (Table 7); ``detok_rate``: the form is read back from its
hidden state after any of the first 10 layers (Table 1's *detok*). Rates with bootstrap CIs, for
all sampled forms and per transformation (a form counts for each of its transformations).

The unchanged model reads each form's own row (the reference); a Vocab Diet model reads the
composed vector base + transformations for the forms it removed and decodes through its composed
head, so %Base tells how much of the decoding survives the composition. Details record how many
sampled forms the model composes (``composed``). Per-item outputs: per form (keyed by its token)
1.0 where its decoded word had the rate's outcome; no chance level is defined.

No training. Data: ``unimorph/eng.tsv`` (lemma, form, features).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.budgets import Budgets
from harness.results.records import ItemOutputs
from harness.sources.data import DataSource, local_or_hub
from harness.sources.heads import Head
from harness.suite import Suite, SuiteContext, SuiteData, SuiteResult, Task, score_items
from harness.methods.vocab import decomposition, patchscopes

UNIMORPH = DataSource(("unimorph/eng.tsv",))


@dataclass(frozen=True)
class PatchscopesConfig:
    """No settings: the forms come from the run's tokenizer and UniMorph."""


@dataclass(frozen=True)
class PatchscopesBudget:
    forms: int | None  # forms sampled; None = all


class Patchscopes(Suite):
    name = "patchscopes"
    description = "Does the model decode a form's (composed) vector to the form? Exact / base / other rates (paper 003 Tables 1, 7)"
    head = Head("causal_lm")
    kinds = ("decoder",)
    default_model = "smollm2"
    config_class = PatchscopesConfig
    budgets = Budgets(smoke=PatchscopesBudget(24), quick=PatchscopesBudget(600), paper=PatchscopesBudget(None))

    def sources(self, config: PatchscopesConfig, budget: PatchscopesBudget) -> tuple[DataSource, ...]:
        return (UNIMORPH,)

    def prepare(self, data_dir: Path | None, config: PatchscopesConfig, budget: PatchscopesBudget) -> SuiteData:
        table, files = local_or_hub(data_dir, UNIMORPH, lambda paths: decomposition.read_unimorph(paths[0]), lambda: None)
        return SuiteData({"unimorph": table}, files)

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        marker = decomposition.leading_space_marker(tokenizer)
        decomp = decomposition.build(tokenizer.get_vocab(), marker, data.splits["unimorph"],
                                     special_ids=tokenizer.all_special_ids)
        rng = np.random.default_rng(ctx.seed)
        ids = sorted(decomp.forms)
        limit = ctx.budget.forms
        ids = sorted(rng.permutation(ids)[:limit].tolist()) if limit else ids
        words = {i: t.removeprefix(marker) for i, t in zip(ids, tokenizer.convert_ids_to_tokens(ids))}
        siblings = _siblings(tokenizer, decomp, marker)
        with torch.no_grad():
            vectors = model.get_input_embeddings()(torch.tensor(ids, dtype=torch.long, device=ctx.device))
        reading = patchscopes.read_back(model, tokenizer, vectors, [words[i] for i in ids])
        texts = reading.texts
        groups: dict[str, list[tuple[str, str, bool]]] = defaultdict(list)  # group -> (form token, outcome, detok)
        for i, text, detok, token in zip(ids, texts, reading.detok, tokenizer.convert_ids_to_tokens(ids)):
            base, kinds = decomp.forms[i]
            result = patchscopes.outcome(patchscopes.first_word(text), words[i], siblings[base][base], siblings[base].values())
            for group in ["all"] + [decomp.transformations[k] for k in kinds]:
                groups[group].append((token, result, detok))
        items = [item for group, outcomes in groups.items() for item in _rates(group, outcomes)]
        scores = [score_items([i], rng, higher_is_better=i.metric in ("exact_rate", "detok_rate")) for i in items]
        composed = getattr(model.get_input_embeddings(), "composed", None)
        details = {"forms": len(ids), "composed": int(composed()[ids].sum()) if composed else 0,
                   "examples": [[words[i], t] for i, t in list(zip(ids, texts))[:20]]}
        return SuiteResult(scores, details, items)


def _siblings(tokenizer: Any, decomp: decomposition.Decomposition, marker: str) -> dict[int, dict[int, str]]:
    """base id -> {id: word} over the base and all its forms (marker stripped)."""
    out: dict[int, dict[int, str]] = defaultdict(dict)
    members = [(b, f) for f, (b, _) in decomp.forms.items()] + [(b, b) for b, _ in decomp.forms.values()]
    for base, token in members:
        out[base][token] = tokenizer.convert_ids_to_tokens(token).removeprefix(marker)
    return out


def _rates(group: str, outcomes: list[tuple[str, str, bool]]) -> list[ItemOutputs]:
    """Per form (keyed by its token): 1.0 where the embedding's reading had this outcome (``exact_rate`` is
    paper Table 1's *embed*), one ItemOutputs per outcome, and ``detok_rate``: read back by any early layer."""
    forms, results = tuple(f for f, _, _ in outcomes), tuple(r for _, r, _ in outcomes)
    detok = tuple(float(d) for _, _, d in outcomes)
    return [
        ItemOutputs(group, "en", "-", f"{kind}_rate", forms, tuple(float(r == kind) for r in results), predictions=results)
        for kind in patchscopes.OUTCOMES
    ] + [ItemOutputs(group, "en", "-", "detok_rate", forms, detok, predictions=results)]
