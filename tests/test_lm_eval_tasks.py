"""Paper 003's downstream tasks without a model: the release files read into lm-eval's hub layouts,
few-shot pools that are never scored, chance levels, and the prompts lm-eval builds from them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lm_eval.tasks
import numpy as np
import pytest
import yaml
from harness.suites import lm_eval_data as D
from harness.suites.lm_eval import PAPER003, LmEvalConfig
from harness.suites.lm_eval_client import LM_EVAL_INCLUDE, TASKS_DIR, render_tasks, write_jsonl

from harness.config import build_config
from harness.errors import ConfigError, DataError

SIZES = {  # (scored, pool) from the release files (PROVENANCE.md) and the held-out rule
    "arc_challenge": (1172, 299), "arc_easy": (2376, 570), "copa": (100, 400),
    "boolq": (3270, None), "piqa": (1838, None), "winogrande": (1267, None), "hellaswag": (10042, None),
}


@pytest.fixture(scope="module")
def splits(data_dir):
    return {name: D.load(task, data_dir)[0] for name, task in D.TASKS.items()}


@pytest.mark.parametrize("name", PAPER003)
def test_pool_is_disjoint_from_scored_documents_and_fixed(name, splits, data_dir):
    task, split = D.TASKS[name], splits[name]
    scored, pool = SIZES[name]
    if pool is None:  # held out of the one file on hand: whole groups, at least POOL_SIZE documents
        assert len(split.scored) + len(split.pool) == scored and D.POOL_SIZE <= len(split.pool) < D.POOL_SIZE + 10
        assert not {task.group(d) for d in split.scored} & {task.group(d) for d in split.pool}
    else:
        assert (len(split.scored), len(split.pool)) == (scored, pool)
    as_text = lambda docs: {json.dumps(d, sort_keys=True) for d in docs}  # noqa: E731
    assert not as_text(split.scored) & as_text(split.pool)
    assert D.load(task, data_dir)[0].pool == split.pool  # the same pool on every load


def test_documents_have_the_hub_layout_lm_eval_reads(splits):
    arc = splits["arc_challenge"].scored
    digit = next(d for d in arc if d["answerKey"].isdigit())  # some keys are 1-4, and so are their labels
    assert digit["choices"]["label"].index(digit["answerKey"]) in range(len(digit["choices"]["text"]))
    boolq = splits["boolq"].scored + splits["boolq"].pool
    assert sum(d["label"] for d in boolq) == 2033 and {d["label"] for d in boolq} == {0, 1}  # "true" -> 1 ("yes")
    piqa = splits["piqa"].scored + splits["piqa"].pool
    assert sum(d["label"] for d in piqa) == 928  # labels joined from valid-labels.lst
    first = splits["hellaswag"].scored[0]
    assert (first["activity_label"], first["ctx_a"], first["ctx_b"], first["label"]) == (
        "Roof shingle removal", "A man is sitting on a roof.", "he", "3")
    assert D.split_context("Step one. Step two.") == ("Step one. Step two.", "")  # WikiHow: no ctx_b


def test_chance_levels(splits):
    arc = splits["arc_challenge"].scored  # 1165 four-way, 4 three-way, 3 five-way questions
    assert D.chance_level(D.TASKS["arc_challenge"], arc) == pytest.approx((1165 / 4 + 4 / 3 + 3 / 5) / 1172)
    boolq = splits["boolq"].scored
    assert D.chance_level(D.TASKS["boolq"], boolq) == pytest.approx(np.mean([d["label"] for d in boolq]))  # "yes" is the majority
    assert D.chance_level(D.TASKS["hellaswag"], splits["hellaswag"].scored) == 0.25
    assert D.chance_level(D.TASKS["winogrande"], splits["winogrande"].scored) == 0.5


def test_hub_sources_are_the_datasets_lm_eval_uses():
    for name, task in D.TASKS.items():
        ours = yaml.safe_load((TASKS_DIR / "paper003" / f"{name}.yaml").read_text())
        theirs = _lm_eval_yaml(Path(lm_eval.tasks.__file__).parent / ours["include"].removeprefix(LM_EVAL_INCLUDE))
        assert (task.hub.path, task.hub.name) == (theirs["dataset_path"], theirs.get("dataset_name")), name
        assert set(task.metrics) == {m["metric"] for m in theirs["metric_list"]}, name


class _Loader(yaml.SafeLoader):
    """Reads lm-eval's own YAMLs, keeping their ``!function`` tags as plain strings."""


_Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def _lm_eval_yaml(path: Path) -> dict:
    cfg = yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    include = cfg.pop("include", None)
    return {**_lm_eval_yaml(path.parent / include), **cfg} if include else cfg


def test_lm_eval_builds_its_own_prompts_with_pool_examples(splits, tmp_path):
    from lm_eval.tasks import TaskManager

    files = {}
    for name in ("hellaswag", "winogrande", "copa"):
        files[f"{name}.jsonl"] = write_jsonl(tmp_path / f"{name}.jsonl", splits[name].scored[:2])
        files[f"{name}.pool.jsonl"] = write_jsonl(tmp_path / f"{name}.pool.jsonl", splits[name].pool)
    root = render_tasks(["paper003"], tmp_path, files, {"paper003": {"num_fewshot": 2}})
    assert sorted(p.stem for p in (root / "paper003").glob("*.yaml")) == ["copa", "hellaswag", "winogrande"]
    names = ["harness_hellaswag", "harness_winogrande", "harness_copa"]
    tasks = TaskManager(include_path=str(root), include_defaults=False).load(names)["tasks"]
    hellaswag, winogrande, copa = (tasks[n] for n in names)
    assert hellaswag.config.num_fewshot == 2
    doc = next(iter(hellaswag.validation_docs()))
    assert doc["query"] == "Roof shingle removal: A man is sitting on a roof. He"  # lm-eval's capitalized ctx_b
    hellaswag.set_fewshot_seed(0)
    shown = hellaswag.fewshot_context(doc, num_fewshot=2).split("\n\n")[:-1]
    pool = [d["query"] for d in hellaswag.fewshot_docs()]
    assert len(shown) == 2 and all(any(s.startswith(q + " ") for q in pool) for s in shown)
    doc = next(iter(winogrande.validation_docs()))  # partial scoring: each option fills the blank
    idx = doc["sentence"].index("_")
    assert winogrande.doc_to_choice(doc) == [doc["sentence"][:idx] + o for o in (doc["option1"], doc["option2"])]
    assert copa.doc_to_text(next(iter(copa.validation_docs()))).endswith((" because", " therefore"))


def test_missing_file_offline_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataError, match="piqa/valid-labels.lst") as err:
        D.load(D.TASKS["piqa"], tmp_path)
    assert "\n" not in str(err.value)


def test_malformed_files_raise_data_error(data_dir, tmp_path):
    (tmp_path / "winogrande").mkdir()
    shutil.copy(data_dir / "winogrande" / "dev.jsonl", tmp_path / "winogrande" / "dev.jsonl")
    labels = (data_dir / "winogrande" / "dev-labels.lst").read_text().split()
    (tmp_path / "winogrande" / "dev-labels.lst").write_text("\n".join(["2" if labels[0] == "1" else "1", *labels[1:]]) + "\n")
    with pytest.raises(DataError, match="dev.jsonl:1: answer"):
        D.load(D.TASKS["winogrande"], tmp_path)
    (tmp_path / "hellaswag").mkdir()
    lines = (data_dir / "hellaswag" / "hellaswag_val_full.txt").read_text().split("\n")[:11]
    (tmp_path / "hellaswag" / "hellaswag_val_full.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match="not 6 per item"):
        D.load(D.TASKS["hellaswag"], tmp_path)


def test_task_and_shot_settings():
    assert LmEvalConfig().selected_tasks() == PAPER003
    assert LmEvalConfig(tasks="all").selected_tasks() == (*PAPER003, "xnli", "sst2")
    assert LmEvalConfig(tasks="copa, xnli").selected_tasks() == ("copa", "xnli")
    with pytest.raises(ConfigError, match="mmlu"):
        LmEvalConfig(tasks="copa,mmlu")
    assert build_config(LmEvalConfig, {"num_fewshot": "none"}, "suite").num_fewshot is None
    assert build_config(LmEvalConfig, {"num_fewshot": "3"}, "suite").num_fewshot == 3
    with pytest.raises(ConfigError, match="0 or more"):
        LmEvalConfig(num_fewshot=-1)


def test_cli_names_the_missing_file_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    result = CliRunner().invoke(app, ["run", "--suite", "lm_eval", "--set", "tasks=copa", "--data-dir", str(tmp_path), "--db", str(tmp_path / "r.duckdb")])
    assert result.exit_code == 2 and "copa/val.jsonl" in result.output and len(result.output.strip().splitlines()) == 1
