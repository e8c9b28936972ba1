"""Protocol: lm-eval tasks on a compressed model object, through lm-eval's own HFLM client.

* The model goes to lm-eval as ``CompressedLM(pretrained=<model object>, tokenizer=<tokenizer object>)``,
  the HFLM subclass registered as lm-eval's ``compressed`` model type (:mod:`harness.integrations.lm_eval`).
  HFLM calls ``tie_weights()``; adapters clear the tie flag when they replace the output head
  (``harness.adapter.untie``), so the compressed head survives.
* Tasks are lm-eval YAML files under ``suites/lm_eval_tasks/<folder>/``. They only look up
  fields; their ``dataset_kwargs.data_files`` name JSONL files that the suite writes into the
  run's workdir at run time. A YAML may ``include: lm_eval/tasks/...``, lm-eval's own task
  definition (prompt, metrics, ``utils.py``), and override only where its documents come from.
  :func:`render_tasks` copies the YAMLs there with those names turned into absolute paths
  (lm-eval resolves relative paths against the current directory, and includes against the
  including file), the datasets cache inside the workdir, and the suite's per-folder settings
  (``num_fewshot``).
* No request cache: lm-eval's cache key ignores the model identity (lm-eval issue 2715), so a
  shared cache would hand the baseline's answers to the compressed model.
* Per-document values come from lm-eval's logged samples, so suites bootstrap their own CIs
  (lm-eval gives ``bits_per_byte`` no stderr).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import yaml
from torch import nn

from harness.suite import SuiteContext

SCORING_FILES = ("lm_eval_tasks/*/*.yaml",)  # prompts, metrics, few-shot splits: the code fingerprint hashes them
TASKS_DIR = Path(__file__).with_name("lm_eval_tasks")
LM_EVAL_INCLUDE = "lm_eval/tasks/"  # an include naming a task file of the installed lm-eval


@dataclass(frozen=True)
class TaskOutput:
    """One lm-eval task's result: per-document values of each metric, in document order."""

    values: dict[str, np.ndarray]   # metric -> (n,) floats; bits_per_byte: (n, 2) log-likelihood, bytes
    num_fewshot: int                # the shots lm-eval actually used
    version: Any                    # the task's metadata version (lm-eval's, for included definitions)


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    """One JSON object per line (UTF-8), the layout lm-eval's ``json`` dataset reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def render_tasks(
    folders: list[str], workdir: Path, data_files: dict[str, Path], settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Copy ``lm_eval_tasks/<folder>/*.yaml`` into ``workdir`` with absolute paths.

    Each ``data_files`` value in a YAML is a file name; it becomes ``data_files[name]``, absolute.
    A task whose data files the suite did not write (a language or task not selected) is left out.
    An ``include: lm_eval/tasks/...`` becomes the absolute path of that file in the installed
    lm-eval. ``settings[folder]`` (e.g. ``{"num_fewshot": 5}``) is added to each task of the folder.
    Returns the folder to pass as ``TaskManager(include_path=...)``.
    """
    root = workdir / "lm_eval_tasks"
    for folder in folders:
        (root / folder).mkdir(parents=True, exist_ok=True)
        for source in sorted((TASKS_DIR / folder).glob("*.yaml")):
            config = yaml.safe_load(source.read_text(encoding="utf-8"))
            files = config.get("dataset_kwargs", {}).get("data_files", {})
            if any(name not in data_files for name in files.values()):
                continue
            if files:
                config["dataset_kwargs"]["data_files"] = {split: str(data_files[name].resolve()) for split, name in files.items()}
                config["dataset_kwargs"]["cache_dir"] = str((workdir / "datasets_cache").resolve())
            if str(config.get("include", "")).startswith(LM_EVAL_INCLUDE):
                config["include"] = str(_lm_eval_task_file(config["include"]))
            if "task" in config:
                config.update((settings or {}).get(folder, {}))
            text = yaml.safe_dump(config, allow_unicode=True, sort_keys=False)
            (root / folder / source.name).write_text(text, encoding="utf-8")
    return root


def _lm_eval_task_file(include: str) -> Path:
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).parent / include.removeprefix(LM_EVAL_INCLUDE)


def run_tasks(
    model: nn.Module, tokenizer: Any, tasks: list[str], include_path: Path, metrics: tuple[str, ...], ctx: SuiteContext,
    batch_size: int, max_length: int,
) -> dict[str, TaskOutput]:
    """Evaluate ``tasks`` with lm-eval; returns, per task, each of ``metrics`` for every document
    it reports (``acc_norm`` only where the task defines it).

    Values are in document order: a float per document for ``acc`` / ``acc_norm``, a row
    (log-likelihood, UTF-8 bytes) for ``bits_per_byte``. Rolling log-likelihoods need
    ``batch_size=1`` (a batch of 2048-token windows holds batch x 2048 x V fp32 logits).
    Few-shot examples are drawn with ``ctx.seed`` from each task's training split.
    """
    import lm_eval
    from harness.integrations.lm_eval import CompressedLM
    from lm_eval.tasks import TaskManager

    model.eval().to(ctx.device)
    lm = CompressedLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=max_length, device=ctx.device)
    manager = TaskManager(include_path=str(include_path), include_defaults=False)
    ctx.progress("lm-eval", 0, 1)
    out = lm_eval.simple_evaluate(
        model=lm, tasks=tasks, task_manager=manager, log_samples=True, bootstrap_iters=0,
        use_cache=None, cache_requests=False, random_seed=ctx.seed, numpy_random_seed=ctx.seed,
        torch_random_seed=ctx.seed, fewshot_random_seed=ctx.seed, verbosity="WARNING",
    )
    ctx.progress("lm-eval", 1, 1)
    return {task: _task_output(out, task, metrics) for task in tasks}


def _task_output(out: dict[str, Any], task: str, metrics: tuple[str, ...]) -> TaskOutput:
    samples = sorted(out["samples"][task], key=lambda s: s["doc_id"])
    values = {m: np.asarray([s[m] for s in samples], dtype=np.float64) for m in metrics if samples and m in samples[0]}
    return TaskOutput(values, int(out["n-shot"][task]), out["versions"][task])
