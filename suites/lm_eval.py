"""Zero-shot multiple choice through lm-eval: XNLI in several languages and SST-2.

Tasks are lm-eval YAML files in ``suites/lm_eval_tasks/`` (XNLI: one per language, with the
prompt words of lm-eval's own ``xnli`` task; SST-2: lm-eval's ``glue/sst2`` prompt). The suite
writes the selected examples as JSONL into the run's workdir, the YAMLs point there, and
lm-eval scores every choice by log-likelihood (``acc``: the arg-max choice is the gold one).
No training; CIs are bootstrapped over examples (per language, and for the macro average).

Data on hand: XNLI test (15 languages, parallel rows) and GLUE SST-2 dev.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from harness.suites import xnli
from harness.suites.lm_eval_client import render_tasks, run_tasks, write_jsonl

from harness.budgets import Budgets
from harness.errors import ConfigError, DataError
from harness.measure.metrics import bootstrap_ci
from harness.results.records import Score
from harness.sources.data import DataSource, local_or_hub
from harness.suite import Head, Suite, SuiteContext, SuiteData, SuiteResult, Task

SST2 = DataSource(("glue/SST-2/dev.tsv",), "nyu-mll/glue:sst2")


@dataclass(frozen=True)
class LmEvalConfig:
    languages: str = "de,en,es,fr,ru,zh"  # XNLI languages, comma-separated, or "all"

    def __post_init__(self) -> None:
        unknown = [lang for lang in self.selected() if lang not in xnli.LANGUAGES]
        if unknown or not self.selected():
            raise ConfigError(f"languages={self.languages}: unknown {unknown}; use a comma list of {','.join(xnli.LANGUAGES)} or all")

    def selected(self) -> tuple[str, ...]:
        if self.languages == "all":
            return xnli.LANGUAGES
        return tuple(lang.strip() for lang in self.languages.split(",") if lang.strip())


@dataclass(frozen=True)
class ZeroShotBudget:
    xnli_per_language: int | None  # XNLI test rows per language (the same rows in every language)
    sst2_examples: int | None      # SST-2 dev sentences
    batch_size: int                # lm-eval loglikelihood batch
    max_length: int = 2048


@dataclass(frozen=True)
class Sentences:
    text: list[str]
    label: np.ndarray  # (n,) int64


def read_sst2(path: Path) -> Sentences:
    """GLUE SST-2 TSV: header ``sentence<TAB>label``, labels 0 (negative) / 1 (positive)."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or rows[0] != ["sentence", "label"] or any(len(r) != 2 or r[1] not in ("0", "1") for r in rows[1:]):
        raise DataError(f"{path}: expected the GLUE SST-2 TSV (header sentence, label; labels 0/1); restore the original file")
    return Sentences([r[0] for r in rows[1:]], np.array([int(r[1]) for r in rows[1:]], dtype=np.int64))


def _read_sst2_hub() -> Sentences:
    from datasets import load_dataset

    ds = load_dataset("nyu-mll/glue", "sst2", split="validation")
    return Sentences(list(ds["sentence"]), np.array(ds["label"], dtype=np.int64))


BUDGETS = Budgets(
    smoke=ZeroShotBudget(xnli_per_language=3, sst2_examples=4, batch_size=8),
    quick=ZeroShotBudget(xnli_per_language=50, sst2_examples=200, batch_size=16),
    paper=ZeroShotBudget(xnli_per_language=None, sst2_examples=None, batch_size=16),
)


class LmEvalZeroShot(Suite):
    name = "lm_eval"
    description = "lm-eval zero-shot multiple choice: XNLI (several languages, lm-eval's prompts) and SST-2"
    head = Head("causal_lm")
    kinds = ("decoder",)
    default_model = "smollm2"
    config_class = LmEvalConfig
    budgets = BUDGETS

    def sources(self, config: LmEvalConfig) -> tuple[DataSource, ...]:
        return (xnli.SOURCES["test"], SST2)

    def prepare(self, data_dir: Path | None, config: LmEvalConfig) -> SuiteData:
        test, xnli_files = xnli.load("test", data_dir)
        sst2, sst2_files = local_or_hub(data_dir, SST2, lambda paths: read_sst2(paths[0]), _read_sst2_hub)
        return SuiteData({"xnli": test, "sst2": sst2}, {**xnli_files, **sst2_files})

    def _write_data(self, data: SuiteData, ctx: SuiteContext, budget: ZeroShotBudget) -> dict[str, Path]:
        """The selected examples as JSONL files named as in the task YAMLs."""
        rng = np.random.default_rng(ctx.seed)
        test, _ = xnli.parallel_subset(data.splits["xnli"], budget.xnli_per_language, rng)
        files = {}
        for lang in ctx.config.selected():
            rows = np.flatnonzero(test.language == lang)
            docs = ({"premise": test.premise[i], "hypothesis": test.hypothesis[i], "label": int(test.label[i])} for i in rows)
            files[f"xnli_{lang}.jsonl"] = write_jsonl(ctx.workdir / f"xnli_{lang}.jsonl", docs)
        sst2: Sentences = data.splits["sst2"]
        keep = np.arange(len(sst2.label)) if budget.sst2_examples is None else np.sort(rng.permutation(len(sst2.label))[: budget.sst2_examples])
        docs = ({"sentence": sst2.text[i], "label": int(sst2.label[i])} for i in keep)
        files["sst2.jsonl"] = write_jsonl(ctx.workdir / "sst2.jsonl", docs)
        return files

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        budget, languages = ctx.budget, ctx.config.selected()
        include = render_tasks(["xnli", "sst2"], ctx.workdir, self._write_data(data, ctx, budget))
        tasks = [f"harness_xnli_{lang}" for lang in languages] + ["harness_sst2"]
        correct = run_tasks(model, tokenizer, tasks, include, "acc", ctx, budget.batch_size, budget.max_length)
        rng = np.random.default_rng(ctx.seed)
        groups = [correct[f"harness_xnli_{lang}"] for lang in languages]
        scores = [_accuracy("xnli", lang, "test", [g], rng) for lang, g in zip(languages, groups)]
        scores.append(_accuracy("xnli", "avg", "test", groups, rng))
        scores.append(_accuracy("sst2", "en", "dev", [correct["harness_sst2"]], rng))
        details = {
            "xnli_languages": list(languages),
            "xnli_examples_per_language": len(groups[0]),
            "sst2_examples": len(correct["harness_sst2"]),
            "prompts": "lm-eval 0.4 xnli (premise, QUESTION? LABEL, hypothesis) and glue/sst2",
        }
        return SuiteResult(scores, details)


def _accuracy(task: str, language: str, split: str, groups: list[np.ndarray], rng: np.random.Generator) -> Score:
    value = float(np.mean([g.mean() for g in groups]))
    low, high = bootstrap_ci(groups, rng)
    return Score(task, language, split, "acc", value, low, high, n=sum(len(g) for g in groups))
