"""Multiple choice through lm-eval: paper 003's downstream tasks few-shot, XNLI and SST-2 zero-shot.

Paper 003 (Vocab Diet, Section 6.1 and App. D) scores ARC, BoolQ, COPA, PIQA, WinoGrande and
HellaSwag (besides MMLU, TriviaQA and SQuAD, not on hand) with 5 in-context examples on up to
5,000 examples each. Each task here is lm-eval's own task definition (prompt, metrics, its
``utils.py``) included by a YAML in ``suites/lm_eval_tasks/paper003/`` that points it at JSONL
files the suite writes into the run's workdir: the scored documents and a few-shot pool that is
never scored (:mod:`harness.suites.lm_eval_data`). lm-eval scores every choice by
log-likelihood: ``acc`` (the arg-max choice is gold) and, where lm-eval reports it, ``acc_norm``
(log-likelihood per byte of the choice). ``--set num_fewshot=N`` sets the shots (default: the
profile's); every score records them (``shots``) and its chance level (``chance``, the rule of
:mod:`harness.measure.chance`: the majority label share of the scored documents for XNLI, SST-2 and
BoolQ, a uniform guess among each item's options for the multiple-choice tasks).

XNLI (several languages, lm-eval's ``xnli`` prompt words) and SST-2 (lm-eval's ``glue/sst2``
prompt) stay zero-shot. ``--set tasks=...`` picks what runs: ``paper003`` (default), ``all``, or
a comma list. One scoring pass: the model is loaded once for every task. The details name the path
each compressed module took, with its calls (``kernel_paths``, :mod:`harness.methods.kernel_paths`).

Paper 003 prints one "ARC" accuracy; its values (53.6 for Llama-3.1-8B, 59.2 Qwen2.5-7B, 60.5
OLMo-2-7B) are ARC-Challenge levels (ARC-Easy is 75-85 for these models), so ``arc_challenge`` is
the ARC of its average. Its "Average" covers 9 tasks; ``paper003_avg6`` is the mean ``acc`` of the
6 on hand (ARC-Challenge, BoolQ, COPA, HellaSwag, PIQA, WinoGrande): comparable to the mean of
the same 6 rows of its tables, not to the printed average. CIs are bootstrapped over documents.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from harness.suites import lm_eval_data, xnli
from harness.suites.lm_eval_client import TaskOutput, render_tasks, run_tasks, write_jsonl
from harness.suites.lm_eval_data import Doc, chance_level

from harness.budgets import Budgets
from harness.errors import ConfigError, DataError
from harness.measure import chance
from harness.methods import kernel_paths
from harness.results.records import ItemOutputs, Score
from harness.sources.data import DataSource, local_or_hub
from harness.suite import Head, Suite, SuiteContext, SuiteData, SuiteResult, Task, parallel, score_items

PAPER003 = tuple(lm_eval_data.TASKS)                  # arc_challenge arc_easy boolq copa piqa winogrande hellaswag
ZERO_SHOT = ("xnli", "sst2")
PAPER_AVERAGE = ("arc_challenge", "boolq", "copa", "hellaswag", "piqa", "winogrande")
AVERAGE_TASK = "paper003_avg6"
METRICS = ("acc", "acc_norm")
SST2 = DataSource(("glue/SST-2/dev.tsv",), "nyu-mll/glue:sst2")


@dataclass(frozen=True)
class LmEvalConfig:
    tasks: str = "paper003"               # comma list of PAPER003 + xnli, sst2; or "paper003", or "all"
    languages: str = "de,en,es,fr,ru,zh"  # XNLI languages, comma-separated, or "all"
    num_fewshot: int | None = None        # in-context examples for paper-003 tasks; None: the profile's

    def __post_init__(self) -> None:
        known = PAPER003 + ZERO_SHOT
        unknown = [t for t in self.selected_tasks() if t not in known]
        if unknown or not self.selected_tasks():
            raise ConfigError(f"tasks={self.tasks}: unknown {unknown}; use a comma list of {','.join(known)}, paper003 or all")
        bad = [lang for lang in self.selected() if lang not in xnli.LANGUAGES]
        if bad or not self.selected():
            raise ConfigError(f"languages={self.languages}: unknown {bad}; use a comma list of {','.join(xnli.LANGUAGES)} or all")
        if self.num_fewshot is not None and (isinstance(self.num_fewshot, bool) or self.num_fewshot < 0):
            raise ConfigError(f"num_fewshot={self.num_fewshot} must be 0 or more")

    def selected_tasks(self) -> tuple[str, ...]:
        aliases = {"all": PAPER003 + ZERO_SHOT, "paper003": PAPER003}
        names = [n.strip() for n in self.tasks.split(",") if n.strip()]
        return tuple(dict.fromkeys(t for n in names for t in aliases.get(n, (n,))))

    def paper_tasks(self) -> tuple[str, ...]:
        return tuple(t for t in self.selected_tasks() if t in lm_eval_data.TASKS)

    def selected(self) -> tuple[str, ...]:
        if self.languages == "all":
            return xnli.LANGUAGES
        return tuple(lang.strip() for lang in self.languages.split(",") if lang.strip())


@dataclass(frozen=True)
class LmEvalBudget:
    examples: dict[str, int | None]  # scored documents per paper-003 task (None: all)
    num_fewshot: int                 # shots for paper-003 tasks unless --set num_fewshot
    xnli_per_language: int | None    # XNLI test rows per language (the same rows in every language)
    sst2_examples: int | None        # SST-2 dev sentences
    batch_size: int                  # lm-eval loglikelihood batch
    max_length: int = 2048


# Quick sizes by measured cost (zero-shot SmolLM2-135M, CPU seconds of one thread per document: HellaSwag
# 1.9, BoolQ 1.5, ARC 0.7, PIQA 0.6, WinoGrande 0.25, COPA 0.17): about 340 s a model, so baseline + method
# fit in ~10 minutes on 2 cores; the documents go where SmolLM2 has a margin over chance to show.
QUICK_EXAMPLES = {
    "arc_challenge": 50, "arc_easy": 50, "boolq": 30, "copa": 100, "piqa": 150, "winogrande": 100, "hellaswag": 60,
}
BUDGETS = Budgets(
    smoke=LmEvalBudget(dict.fromkeys(PAPER003, 3), num_fewshot=1, xnli_per_language=3, sst2_examples=4, batch_size=8),
    quick=LmEvalBudget(QUICK_EXAMPLES, num_fewshot=0, xnli_per_language=50, sst2_examples=200, batch_size=16),
    # App. D: "5 in-context examples for every task", "5,000 examples (or the maximum available)"
    paper=LmEvalBudget(dict.fromkeys(PAPER003, 5000), num_fewshot=5, xnli_per_language=None, sst2_examples=None, batch_size=16),
)


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


@dataclass(frozen=True)
class _Written:
    """The JSONL files one run writes, and the ids (and documents) of what they score."""

    files: dict[str, Path]
    ids: dict[str, list[str]]      # lm-eval task name -> item ids in document order
    scored: dict[str, list[Doc]]   # paper-003 task -> its scored documents
    chance: dict[str, float]       # lm-eval task name -> chance level of its scored documents (harness.measure.chance)


class LmEval(Suite):
    name = "lm_eval"
    description = "lm-eval multiple choice: paper 003's ARC, BoolQ, COPA, PIQA, WinoGrande, HellaSwag few-shot; XNLI, SST-2 zero-shot"
    head = Head("causal_lm")
    kinds = ("decoder", "encoder-decoder")  # an encoder-decoder through lm-eval's seq2seq model type
    default_model = "smollm2"
    config_class = LmEvalConfig
    budgets = BUDGETS

    def sources(self, config: LmEvalConfig, budget: LmEvalBudget) -> tuple[DataSource, ...]:
        tasks = config.selected_tasks()
        fixed = [s for name, s in (("xnli", xnli.SOURCES["test"]), ("sst2", SST2)) if name in tasks]
        return (*fixed, *(lm_eval_data.TASKS[t].source for t in config.paper_tasks()))

    def prepare(self, data_dir: Path | None, config: LmEvalConfig, budget: LmEvalBudget) -> SuiteData:
        splits: dict[str, Any] = {}
        files: dict[str, str] = {}
        tasks = config.selected_tasks()
        if "xnli" in tasks:
            splits["xnli"], found = xnli.load("test", data_dir)
            files.update(found)
        if "sst2" in tasks:
            splits["sst2"], found = local_or_hub(data_dir, SST2, lambda paths: read_sst2(paths[0]), _read_sst2_hub)
            files.update(found)
        for name in config.paper_tasks():
            splits[name], found = lm_eval_data.load(lm_eval_data.TASKS[name], data_dir)
            files.update(found)
        return SuiteData(splits, files)

    def score(self, task: Task, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        budget, config = ctx.budget, ctx.config
        shots = budget.num_fewshot if config.num_fewshot is None else config.num_fewshot
        written = _write_data(data, ctx)
        include = render_tasks(["xnli", "sst2", "paper003"], ctx.workdir, written.files, {"paper003": {"num_fewshot": shots}})
        out = run_tasks(model, tokenizer, list(written.ids), include, METRICS, ctx, budget.batch_size, budget.max_length)
        scores, items = _scores(config, out, written, np.random.default_rng(ctx.seed))
        return SuiteResult(scores, _details(data, config, written, out), items)


def _subset(n: int, keep: int | None, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of ``keep`` of ``n`` documents drawn with the run's seed (all when None)."""
    return np.arange(n) if keep is None or keep >= n else np.sort(rng.permutation(n)[:keep])


def _write_data(data: SuiteData, ctx: SuiteContext) -> _Written:
    """The selected documents as JSONL files named as in the task YAMLs (a paper-003 task also gets
    its whole few-shot pool as ``<task>.pool.jsonl``)."""
    budget, config = ctx.budget, ctx.config
    rng, tasks, files, ids, scored, levels = np.random.default_rng(ctx.seed), config.selected_tasks(), {}, {}, {}, {}
    if "xnli" in tasks:
        test, rows = xnli.parallel_subset(data.splits["xnli"], budget.xnli_per_language, rng)
        for lang in config.selected():
            where = np.flatnonzero(test.language == lang)
            docs = ({"premise": test.premise[i], "hypothesis": test.hypothesis[i], "label": int(test.label[i])} for i in where)
            files[f"xnli_{lang}.jsonl"] = write_jsonl(ctx.workdir / f"xnli_{lang}.jsonl", docs)
            ids[f"harness_xnli_{lang}"] = [str(r) for r in rows[where]]
            levels[f"harness_xnli_{lang}"] = chance.majority(test.label[where])
    if "sst2" in tasks:
        sst2, keep = data.splits["sst2"], _subset(len(data.splits["sst2"].label), budget.sst2_examples, rng)
        files["sst2.jsonl"] = write_jsonl(ctx.workdir / "sst2.jsonl", ({"sentence": sst2.text[i], "label": int(sst2.label[i])} for i in keep))
        ids["harness_sst2"] = [str(i) for i in keep]
        levels["harness_sst2"] = chance.majority(sst2.label[keep])
    for name in config.paper_tasks():
        split, keep = data.splits[name], _subset(len(data.splits[name].scored), budget.examples[name], rng)
        scored[name] = [split.scored[i] for i in keep]
        files[f"{name}.jsonl"] = write_jsonl(ctx.workdir / f"{name}.jsonl", scored[name])
        files[f"{name}.pool.jsonl"] = write_jsonl(ctx.workdir / f"{name}.pool.jsonl", split.pool)
        ids[f"harness_{name}"] = [split.ids[i] for i in keep]
        levels[f"harness_{name}"] = chance_level(lm_eval_data.TASKS[name], scored[name])
    return _Written(files, ids, scored, levels)


def _scores(config: LmEvalConfig, out: dict[str, TaskOutput], written: _Written, rng: np.random.Generator) -> tuple[list[Score], list[ItemOutputs]]:
    """Per task and metric: the mean with a bootstrap CI, its shots and chance; the XNLI macro average
    and paper 003's average (``acc`` of PAPER_AVERAGE) across tasks; the per-document values."""
    rows: list[tuple[str, str, str, str]] = []  # task, language, split, lm-eval task
    if "xnli" in config.selected_tasks():
        rows += [("xnli", lang, "test", f"harness_xnli_{lang}") for lang in config.selected()]
    if "sst2" in config.selected_tasks():
        rows.append(("sst2", "en", "dev", "harness_sst2"))
    rows += [(name, "en", lm_eval_data.TASKS[name].split_name, f"harness_{name}") for name in config.paper_tasks()]
    scores, items = [], []
    for task, language, split, key in rows:
        for metric, values in out[key].values.items():
            items.append(ItemOutputs(task, language, split, metric, tuple(written.ids[key]), tuple(values.tolist())))
            scores.append(_score([items[-1]], out[key].num_fewshot, written.chance[key], rng))
    if "xnli" in config.selected_tasks():
        languages = parallel([i for i in items if i.task == "xnli" and i.metric == "acc"])  # one row in every language: one cluster
        items = [i for i in items if not (i.task == "xnli" and i.metric == "acc")] + languages
        scores.append(_score(languages, 0, float(np.mean([s.chance for s in scores if s.task == "xnli" and s.metric == "acc"])), rng))
    if set(PAPER_AVERAGE) <= set(config.selected_tasks()):
        parts = [dataclasses.replace(i, task=AVERAGE_TASK, language=i.task, split="mixed")
                 for i in items if i.task in PAPER_AVERAGE and i.metric == "acc"]  # tasks resampled independently
        items += parts
        level = float(np.mean([s.chance for s in scores if s.task in PAPER_AVERAGE and s.metric == "acc"]))
        scores.append(_score(parts, out[f"harness_{PAPER_AVERAGE[0]}"].num_fewshot, level, rng))
    return scores, items


def _score(items: list[ItemOutputs], shots: int, level: float | None, rng: np.random.Generator) -> Score:
    return dataclasses.replace(score_items(items, rng, chance=level, setting=f"{shots}-shot"), shots=shots)


def _details(data: SuiteData, config: LmEvalConfig, written: _Written, out: dict[str, TaskOutput]) -> dict[str, Any]:
    """Sizes, shots, chance levels (for chance-adjusted %Base) and lm-eval task versions of the run."""
    short = {name: name.removeprefix("harness_") for name in out}
    details: dict[str, Any] = {
        "tasks": list(config.selected_tasks()),
        "num_fewshot": {short[n]: o.num_fewshot for n, o in out.items()},
        "examples": {short[n]: len(written.ids[n]) for n in out},
        "fewshot_pool": {t: len(data.splits[t].pool) for t in config.paper_tasks()},
        "chance": {short[n]: written.chance[n] for n in out},
        "lm_eval_versions": {short[n]: o.version for n, o in out.items()},
    }
    if set(PAPER_AVERAGE) <= set(config.selected_tasks()):
        details["paper_average"] = f"{AVERAGE_TASK}: mean acc of {', '.join(PAPER_AVERAGE)} (paper 003 averages 9 tasks; MMLU, TriviaQA, SQuAD not on hand)"
    if "xnli" in config.selected_tasks():
        details["xnli_languages"] = list(config.selected())
    return details
