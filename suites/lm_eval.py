"""Multiple choice through lm-eval: paper 003's downstream tasks few-shot, XNLI and SST-2 zero-shot.

Paper 003 (Vocab Diet, Section 6.1 and App. D) scores ARC, BoolQ, COPA, PIQA, WinoGrande and
HellaSwag (besides MMLU, TriviaQA and SQuAD, not on hand) with 5 in-context examples on up to
5,000 examples each. Each task here is lm-eval's own task definition (prompt, metrics, its
``utils.py``) included by a YAML in ``suites/lm_eval_tasks/paper003/`` that points it at JSONL
files the suite writes into the run's workdir: the scored documents and a few-shot pool that is
never scored (:mod:`harness.suites.lm_eval_data`). lm-eval scores every choice by
log-likelihood: ``acc`` (arg-max choice is gold) and, where lm-eval reports it, ``acc_norm``
(log-likelihood per byte of the choice). ``--set num_fewshot=N`` sets the shots (default: the
profile's); every score and the run's details record them.

XNLI (several languages, lm-eval's ``xnli`` prompt words) and SST-2 (lm-eval's ``glue/sst2``
prompt) stay zero-shot, as before. ``--set tasks=...`` picks what runs.

Paper 003 prints one "ARC" accuracy; its values (53.6 for Llama-3.1-8B, 59.2 Qwen2.5-7B, 60.5
OLMo-2-7B) are ARC-Challenge levels (ARC-Easy is 75-85 for these models), so ``arc_challenge``
is the ARC of its average. Its "Average" covers 9 tasks; ``paper003_avg6`` is the mean ``acc``
of the 6 on hand (ARC-Challenge, BoolQ, COPA, HellaSwag, PIQA, WinoGrande), not comparable to
the printed average, but to the same 6 of its rows. CIs are bootstrapped over documents.
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

from harness.errors import ConfigError, DataError
from harness.measure.metrics import bootstrap_ci
from harness.results.records import Score
from harness.sources.data import local_or_hub
from harness.suite import Suite, SuiteContext, SuiteData, SuiteResult

PAPER003 = tuple(lm_eval_data.TASKS)                  # arc_challenge arc_easy boolq copa piqa winogrande hellaswag
ZERO_SHOT = ("xnli", "sst2")
PAPER_AVERAGE = ("arc_challenge", "boolq", "copa", "hellaswag", "piqa", "winogrande")
AVERAGE_TASK = "paper003_avg6"
METRICS = ("acc", "acc_norm")
ZERO_SHOT_CHANCE = {"xnli": 1 / 3, "sst2": 1 / 2}     # 3 balanced NLI labels; 2 sentiment labels
# Quick sizes by measured cost (zero-shot SmolLM2-135M, CPU seconds of one thread per document: HellaSwag
# 1.9, BoolQ 1.5, ARC 0.7, PIQA 0.6, WinoGrande 0.25, COPA 0.17): about 340 s a model, so baseline + method
# fit in ~10 minutes on 2 cores; tasks with a margin over chance get the documents.
QUICK_EXAMPLES = {
    "arc_challenge": 50, "arc_easy": 50, "boolq": 30, "copa": 100, "piqa": 150, "winogrande": 100, "hellaswag": 60,
}
SST2_FILE = "glue/SST-2/dev.tsv"
SST2_HUB_ID = "nyu-mll/glue"


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

    def selected(self) -> tuple[str, ...]:
        if self.languages == "all":
            return xnli.LANGUAGES
        return tuple(lang.strip() for lang in self.languages.split(",") if lang.strip())


@dataclass(frozen=True)
class LmEvalBudget:
    examples: dict[str, int | None]  # scored documents per paper-003 task (None: all)
    num_fewshot: int                 # default shots for paper-003 tasks
    xnli_per_language: int | None  # XNLI test rows per language (the same rows in every language)
    sst2_examples: int | None      # SST-2 dev sentences
    batch_size: int                # lm-eval loglikelihood batch
    max_length: int = 2048


BUDGETS = {
    "smoke": LmEvalBudget(dict.fromkeys(PAPER003, 3), num_fewshot=1, xnli_per_language=3, sst2_examples=4, batch_size=8),
    "quick": LmEvalBudget(dict(QUICK_EXAMPLES), num_fewshot=0, xnli_per_language=50, sst2_examples=200, batch_size=16),
    # App. D: "5,000 examples (or the maximum available)", 5 in-context examples for every task
    "paper": LmEvalBudget(dict.fromkeys(PAPER003, 5000), num_fewshot=5, xnli_per_language=None, sst2_examples=None, batch_size=16),
}


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

    ds = load_dataset(SST2_HUB_ID, "sst2", split="validation")
    return Sentences(list(ds["sentence"]), np.array(ds["label"], dtype=np.int64))


class LmEval(Suite):
    name = "lm_eval"
    description = "lm-eval multiple choice: paper 003's ARC, BoolQ, COPA, PIQA, WinoGrande, HellaSwag few-shot; XNLI, SST-2 zero-shot"
    head = "causal_lm"
    kinds = ("decoder",)
    default_model = "smollm2"
    config_class = LmEvalConfig

    def budget(self, profile: str) -> LmEvalBudget:
        return BUDGETS[profile]

    def recipe(self, profile: str, config: LmEvalConfig) -> dict[str, Any]:
        return {**dataclasses.asdict(self.budget(profile)), "num_fewshot": _shots(self.budget(profile), config)}

    def prepare(self, data_dir: Path | None, config: LmEvalConfig) -> SuiteData:
        splits: dict[str, Any] = {}
        files: dict[str, str] = {}
        tasks = config.selected_tasks()
        if "xnli" in tasks:
            splits["xnli"], found = xnli.load("test", data_dir)
            files.update(found)
        if "sst2" in tasks:
            splits["sst2"], found = local_or_hub(data_dir, [SST2_FILE], lambda paths: read_sst2(paths[0]), SST2_HUB_ID, _read_sst2_hub)
            files.update(found)
        for name in tasks:
            if name in lm_eval_data.TASKS:
                splits[name], found = lm_eval_data.load(lm_eval_data.TASKS[name], data_dir)
                files.update(found)
        return SuiteData(splits, files)

    def evaluate(self, model: Any, tokenizer: Any, data: SuiteData, ctx: SuiteContext) -> SuiteResult:
        budget, config = self.budget(ctx.profile), ctx.config
        shots, tasks = _shots(budget, config), config.selected_tasks()
        files, scored = _write_data(data, ctx, budget)
        include = render_tasks(["xnli", "sst2", "paper003"], ctx.workdir, files, {"paper003": {"num_fewshot": shots}})
        names = [f"harness_xnli_{lang}" for lang in config.selected() if "xnli" in tasks]
        names += [f"harness_{t}" for t in tasks if t != "xnli"]
        out = run_tasks(model, tokenizer, names, include, METRICS, ctx, budget.batch_size, budget.max_length)
        rng = np.random.default_rng(ctx.seed)
        scores: list[Score] = []
        if "xnli" in tasks:
            groups = [out[f"harness_xnli_{lang}"].values["acc"] for lang in config.selected()]
            scores += [_score("xnli", lang, "test", "acc", [g], 0, rng) for lang, g in zip(config.selected(), groups)]
            scores.append(_score("xnli", "avg", "test", "acc", groups, 0, rng))
        if "sst2" in tasks:
            scores.append(_score("sst2", "en", "dev", "acc", [out["harness_sst2"].values["acc"]], 0, rng))
        for name in (t for t in tasks if t in lm_eval_data.TASKS):
            task, result = lm_eval_data.TASKS[name], out[f"harness_{name}"]
            scores += [_score(name, "en", task.split_name, m, [v], result.num_fewshot, rng) for m, v in result.values.items()]
        if set(PAPER_AVERAGE) <= set(tasks):
            groups = [out[f"harness_{t}"].values["acc"] for t in PAPER_AVERAGE]
            scores.append(_score(AVERAGE_TASK, "en", "mixed", "acc", groups, shots, rng))
        return SuiteResult(scores, _details(data, config, shots, scored, out))


def _shots(budget: LmEvalBudget, config: LmEvalConfig) -> int:
    return budget.num_fewshot if config.num_fewshot is None else config.num_fewshot


def _subset(n: int, keep: int | None, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of ``keep`` of ``n`` documents drawn with the run's seed (all when None)."""
    return np.arange(n) if keep is None or keep >= n else np.sort(rng.permutation(n)[:keep])


def _write_data(data: SuiteData, ctx: SuiteContext, budget: LmEvalBudget) -> tuple[dict[str, Path], dict[str, list[Doc]]]:
    """The selected documents as JSONL files named as in the task YAMLs; also returns the scored
    documents of each paper-003 task (the pool file holds every pool document)."""
    rng, tasks, files, chosen = np.random.default_rng(ctx.seed), ctx.config.selected_tasks(), {}, {}
    if "xnli" in tasks:
        test = xnli.parallel_subset(data.splits["xnli"], budget.xnli_per_language, rng)
        for lang in ctx.config.selected():
            rows = np.flatnonzero(test.language == lang)
            docs = ({"premise": test.premise[i], "hypothesis": test.hypothesis[i], "label": int(test.label[i])} for i in rows)
            files[f"xnli_{lang}.jsonl"] = write_jsonl(ctx.workdir / f"xnli_{lang}.jsonl", docs)
    if "sst2" in tasks:
        sst2 = data.splits["sst2"]
        docs = ({"sentence": sst2.text[i], "label": int(sst2.label[i])} for i in _subset(len(sst2.label), budget.sst2_examples, rng))
        files["sst2.jsonl"] = write_jsonl(ctx.workdir / "sst2.jsonl", docs)
    for name in (t for t in tasks if t in lm_eval_data.TASKS):
        split = data.splits[name]
        chosen[name] = [split.scored[i] for i in _subset(len(split.scored), budget.examples[name], rng)]
        files[f"{name}.jsonl"] = write_jsonl(ctx.workdir / f"{name}.jsonl", chosen[name])
        files[f"{name}.pool.jsonl"] = write_jsonl(ctx.workdir / f"{name}.pool.jsonl", split.pool)
    return files, chosen


def _score(task: str, language: str, split: str, metric: str, groups: list[np.ndarray], shots: int, rng: np.random.Generator) -> Score:
    value = float(np.mean([g.mean() for g in groups]))
    low, high = bootstrap_ci(groups, rng)
    return Score(task, language, split, metric, value, low, high, n=sum(len(g) for g in groups), shots=shots)


def _details(data: SuiteData, config: LmEvalConfig, shots: int, scored: dict[str, list[Doc]], out: dict[str, TaskOutput]) -> dict[str, Any]:
    """Sizes, shots, chance levels (for chance-adjusted %Base) and lm-eval task versions of the run."""
    tasks = config.selected_tasks()
    details: dict[str, Any] = {
        "tasks": list(tasks),
        "num_fewshot": {name.removeprefix("harness_"): o.num_fewshot for name, o in out.items()},
        "examples": {t: len(docs) for t, docs in scored.items()},
        "fewshot_pool": {t: len(data.splits[t].pool) for t in scored},
        "chance": {t: chance_level(lm_eval_data.TASKS[t], docs) for t, docs in scored.items()},
        "lm_eval_versions": {name.removeprefix("harness_"): o.version for name, o in out.items()},
        "paper_average": f"{AVERAGE_TASK}: mean acc of {', '.join(PAPER_AVERAGE)} (paper 003 averages 9 tasks, 3 not on hand)",
        "requested_num_fewshot": shots,
    }
    if "xnli" in tasks:
        details.update(xnli_languages=list(config.selected()), xnli_examples_per_language=len(out[f"harness_xnli_{config.selected()[0]}"].values["acc"]))
        details["chance"]["xnli"] = ZERO_SHOT_CHANCE["xnli"]
    if "sst2" in tasks:
        details.update(sst2_examples=len(out["harness_sst2"].values["acc"]))
        details["chance"]["sst2"] = ZERO_SHOT_CHANCE["sst2"]
    return details
