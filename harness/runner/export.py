"""``harness export RUN_ID --out DIR``: a finished run's compressed model as a folder that
:func:`harness.load_compressed`, lm-eval (``--model compressed``) and MTEB load without refitting.

The run's request is planned again from its record, so the fitted adapter comes from the fit cache
(:mod:`harness.runner.fitcache`) when the run left an entry there, and is fitted once more (and cached)
otherwise, for adapters that act before fine-tuning. The model is the one the adapter produced on
the suite's first task, before any fine-tuning (a fine-tuned classifier is not exported); an
``after_finetune`` adapter's fit exists only in the cache of the run that fine-tuned. Beside the
model (:mod:`harness.runner.saved`), the folder gets a model card (``README.md``): method and paper,
settings, compression report, the run's scores with their CIs, and how to load it.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import tempfile
from pathlib import Path

from transformers import set_seed

from harness.runner import fitcache, saved
from harness.adapter import ProgressFn, no_progress
from harness.config import as_dict
from harness.errors import ConfigError
from harness.runner.pipeline import Pipeline
from harness.runner.plan import Plan, RunRequest, plan
from harness.registry import ADAPTERS, SUITES
from harness.results import queries
from harness.results.records import RunRecord, RunSpec
from harness.results.store import Store
from harness.sidefiles import check_output
from harness.sources import corpora


def _text(value) -> str:
    return {True: "true", False: "false", None: "none"}.get(value, str(value)) if isinstance(value, (bool, type(None))) else str(value)


def request_of(spec: RunSpec) -> RunRequest:
    """The ``harness run`` request that made ``spec`` (settings that differ from the defaults, ``--pretrain``,
    ``--dtype``, ``--trust-remote-code``)."""
    settings = []
    for scope, cls, values in (("adapter", ADAPTERS.get(spec.adapter).config_class, spec.adapter_config),
                               ("suite", SUITES.get(spec.suite)().config_class, spec.suite_config)):
        defaults = as_dict(cls())
        settings += [f"{scope}.{k}={_text(v)}" for k, v in values.items() if defaults.get(k) != v]
    pretraining = spec.recipe.get("pretraining")
    return RunRequest(spec.suite, spec.adapter, spec.model, spec.profile, spec.seed, tuple(settings), device="cpu",
                      pretrain=pretraining["steps"] if pretraining else None, dtype=spec.recipe.get("dtype", "float32"),
                      trust_remote_code=bool(spec.recipe.get("trust_remote_code")))


def fitted_model(p: Plan, progress: ProgressFn = no_progress):
    """(Applied, FitInfo) of the planned run's adapter on its suite's first task."""
    task = p.suite.tasks(p.suite_config)[0]
    if p.adapter.stage == "after_finetune":
        folder = fitcache.root()
        hit = fitcache.FitCache(folder).get(fitcache.key(p.spec, p.adapter, task.head, task.name)) if folder else None
        if hit is None:
            raise ConfigError(
                f"adapter '{p.adapter.name}' acts after fine-tuning and its fit is not in the fit cache; "
                "rerun the run with --force and the cache on (HARNESS_FIT_CACHE unset), then export"
            )
        return hit[0], fitcache.FitInfo(True, hit[1])
    set_seed(p.spec.seed)
    with tempfile.TemporaryDirectory(prefix="harness-export-") as workdir:
        pipeline = Pipeline(p, p.spec, p.adapter, Path(workdir), progress)
        model, tokenizer = pipeline.load(task)
        data = p.suite.prepare(p.data_dir, p.suite_config, p.suite_budget) if corpora.TASK_TRAIN in p.adapter.corpora() else None
        return pipeline.fit(model, tokenizer, task, data)


def model_card(rec: RunRecord, applied, info: fitcache.FitInfo) -> str:
    """The exported folder's README.md."""
    spec = rec.spec
    paper = (inspect.getmodule(ADAPTERS.get(spec.adapter)).__doc__ or "").strip().split("\n\n")[0]
    settings = " ".join(f"{k}={v}" for k, v in spec.adapter_config.items()) or "(defaults)"
    r = applied.report
    lines = [
        f"# {spec.model} compressed with `{spec.adapter}`", "",
        f"Method: {paper}" if paper else f"Method: {spec.adapter}", "",
        f"- Settings: {settings}", f"- Base model: {spec.model} (revision {spec.model_revision})",
        f"- Run: {rec.run_id} (suite {spec.suite}, profile {spec.profile}, seed {spec.seed})",
        f"- Fit: {'reused from the fit cache' if info.reused else 'fitted for this export'}, {info.fit_seconds:.1f} s",
        f"- Embedding parameters: {r.embedding_params_before:,} -> {r.embedding_params_after:,} ({r.emb_param_fraction:.4f} kept)",
        f"- Embedding storage: {r.storage_bytes_before:,} -> {r.storage_bytes_after:,} bytes",
        f"- Vocabulary: {r.vocab_size_before} -> {r.vocab_size_after}", "",
        "## Scores of the run (95% bootstrap CIs)", "",
        "| task | language | metric | value | CI | %Base |", "|---|---|---|---|---|---|",
    ]
    for s in rec.scores:
        pct = "-" if s.pct_base is None else f"{s.pct_base:.1f}"
        lines.append(f"| {s.task} | {s.language or '-'} | {s.metric} | {s.value:.4f} | [{s.ci_low:.4f}, {s.ci_high:.4f}] | {pct} |")
    lines += [
        "", "The model is the adapter's output on the suite's first task before any fine-tuning.", "",
        "## Load", "", "```python", "import harness", "model, tokenizer = harness.load_compressed(\"DIR\")", "```", "",
        "lm-eval: `harness-lm-eval --model compressed --model_args pretrained=DIR --tasks ...` (lm-eval's CLI with the "
        "type registered), or `import harness.integrations.lm_eval` before `lm_eval.simple_evaluate(model=\"compressed\", ...)`; "
        "MTEB: `harness.integrations.mteb.load(\"DIR\")`.", "",
    ]
    return "\n".join(lines)


def export(run_id: str, out: Path, store: Store, progress: ProgressFn = no_progress) -> Path:
    """Write run ``run_id``'s (a whole id or a unique prefix) compressed model, tokenizer and model card
    to ``out``; ``out`` is checked before the store is read."""
    check_output(out, "--out", folder=True)
    run_id = queries.run_id(store, run_id)
    rec = store.load(run_id)
    if rec.status != "finished":
        raise ConfigError(f"run '{run_id}' is {rec.status}; export a finished run (harness list runs)")
    p = plan(request_of(rec.spec))
    if p.spec.config_hash != rec.spec.config_hash:
        raise ConfigError(f"run '{run_id}' was made with other data or settings than this checkout plans now; rerun it, then export")
    applied, info = fitted_model(p, progress)
    meta = {"run_id": run_id, "spec": dataclasses.asdict(rec.spec), "fit_cache": dataclasses.asdict(info)}
    saved.save(out, applied.model, applied.tokenizer, rec.spec.adapter, rec.spec.adapter_config,
               dataclasses.asdict(applied.report), applied.details, meta)
    (Path(out) / "README.md").write_text(model_card(rec, applied, info), encoding="utf-8")
    (Path(out) / "scores.json").write_text(json.dumps([dataclasses.asdict(s) for s in rec.scores], indent=1), encoding="utf-8")
    return Path(out)
