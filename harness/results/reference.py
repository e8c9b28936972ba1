"""The papers' reported numbers (``harness/results/paper_results.csv``, one row per printed number).

``read_paper_results`` maps each row onto the store's vocabulary so a paper's point can sit on
the leaderboard's Pareto plot beside measured ones:

- ``suite``: the harness suite name (``tydiqa`` -> ``qa``, ``mteb_classification`` -> ``mteb_clf``,
  ``word_similarity`` -> ``word_sim``, ``bytes_per_token`` -> ``tokenizer``); the paper's own name
  stays in ``paper_suite``.
- ``emb_param_fraction``: ``emb_param_pct / 100``. A row that does not print it takes it from
  another row of the same paper, base model, method and config (it is a property of the
  compressed model, not of the task), when exactly one value is printed there.
- ``setting``: the protocol in the harness's words, so a paper's point sits only beside runs of the
  same setting (``Score.setting``): ``cross-lingual-transfer`` (paper 001) is ``zero-shot`` (English
  training, as paper 000 names it), ``translate-train-all`` is ``multilingual``, and a row whose notes
  say "N-shot in-context" gets ``N-shot``; other settings stay as printed (``pretraining`` is not our
  ``post-hoc``). A suite with one protocol (:data:`PROTOCOLS`: fine-tuned classifiers and taggers,
  intrinsic measures) gives it to all its rows, whose printed setting is empty or a method variant
  (ADE's ``with-sat`` / ``without-sat``). The CSV's own value stays in ``paper_setting``.
- ``pct_base``: value / baseline x 100, the baseline being the same table's row for the same base
  model, suite, task, language, setting and metric (quality metrics only; inverted for BPB, lower
  is better, as the harness does); the printed %Base where no baseline row exists. The printed
  number stays in ``pct_base_printed`` (a few are typos; the CSV's notes say which).

Training regime and model family (:func:`annotate`, :func:`run_regime`, :func:`model_family`): a
paper's point sits beside a run only where the regime, the protocol (``setting``, or the shot count of
a prompted task) and the metric match (:func:`placement`); the family may differ and is shown. The
regime names what training the model had besides the method's own fit (k-means, a sense dictionary,
distilled anchors or a distilled student are the method):

==========  ======================================  ==================================================
paper       tables                                  regime (from the paper's text)
==========  ======================================  ==================================================
000 asg     all (1-4; 5 sizes)                      post hoc + fine-tuned: codebooks from the pretrained
                                                    embeddings, then each task fine-tuned (Sec. 2.2, 3.3)
001 ksub    all (1-4)                               pretrained with the method: RoBERTa- / XLM-R-medium
                                                    pretrained from scratch with k-sub-embeddings
                                                    (Sec. 4, Table 5), then fine-tuned on GLUE / XNLI
002 ade     all (1-6)                               post hoc + fine-tuned: anchors distilled from
                                                    DeBERTa-v3-base's embeddings, SAT trained per task
                                                    (Sec. 3); comparators fine-tuned
003 vocab.  3, 4, 12, 13 (downstream)               post hoc + recovery: two-stage distillation with
                                                    LoRA on FineWeb-Edu before scoring (Sec. 6, App. C.1)
003 vocab.  6 (nanoGPT BPB)                         pretrained with the method (Sec. 7)
003 vocab.  1, 2, 5, 7-11 (Patchscopes, bytes/token, post hoc, no training: the unchanged model with
            geometry)                               initialised transformation vectors; a tokenizer
004 multi.  1, 3, 11 (GLUE, DeBERTa-v3-large)       post hoc + fine-tuned: drop-in / SKD student on the
                                                    per-task fine-tuned teacher (Sec. 4.1, 4.2)
004 multi.  2, 4, 12 (MTEB), 10 (word sim.), 5-6    post hoc, no training: drop-in or SKD student scored
                                                    by MTEB's probe or by sense similarity (Sec. 4, App. E)
==========  ======================================  ==================================================

A paper's baseline and comparator rows take their table's regime (the reference of that experiment).
A run's regime is read from what it stored (:func:`run_regime`): its recipe's ``pretraining``
(``--pretrain``: a small encoder pretrained from scratch with the method's table, "pretrained
with the method (small scale)", or with 0 steps the control "not pretrained (from scratch)"), its
``recovery`` steps or Vocab Diet's own distillation (``distill`` stage1 / stage2, the
paper's post-hoc training), and whether its suite fine-tunes (a recipe with training ``epochs``). A
small-scale pretraining sits beside the paper's pretraining (:func:`scale_free`): the scale shows in
the family, which for a pretrained run is its small encoder (:func:`run_family`). Families (:data:`FAMILIES`) name an architecture and size class, e.g. ``me5-small`` (12
layers, 384 wide, XLM-R's 250k vocabulary) is a small encoder with XLM-R's vocabulary, not XLM-R base.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from importlib.resources import files
from pathlib import Path

import pandas as pd

from harness.errors import DataError
from harness.sidefiles import read_csv

SUITE_NAMES = {"tydiqa": "qa", "mteb_classification": "mteb_clf", "word_similarity": "word_sim", "bytes_per_token": "tokenizer"}
# metrics whose ratio to the baseline is a %Base; the others (counts, sizes, deltas) get none
HIGHER_IS_BETTER = frozenset({"accuracy", "f1", "em", "spearman", "mcc", "correlation", "score", "precision", "recall"})
LOWER_IS_BETTER = frozenset({"bpb"})
SETTINGS = {"cross-lingual-transfer": "zero-shot", "translate-train-all": "multilingual"}
# suites that run one protocol (their Score.setting), for the papers' rows that print none
PROTOCOLS = {"ag_news": "fine-tuned", "dbpedia14": "fine-tuned", "glue": "fine-tuned", "bc5cdr": "fine-tuned",
             "mteb_clf": "linear-probe", "word_sim": "intrinsic", "tokenizer": "intrinsic"}
_SHOTS = re.compile(r"\b(\d+)-shot\b")
PAPER_IDS = {"asg": "000", "ksub": "001", "ade": "002", "vocabdiet": "003", "multisense": "004"}

PRETRAINED = "pretrained with the method"
SMALL_SCALE = " (small scale)"
PRETRAINED_SMALL = PRETRAINED + SMALL_SCALE
NOT_PRETRAINED = "not pretrained (from scratch)"
FINE_TUNED = "post hoc + fine-tuned"
RECOVERY = "post hoc + recovery"
RECOVERY_FINE_TUNED = "post hoc + recovery + fine-tuned"
NO_TRAINING = "post hoc, no training"
# paper -> (its tables' regime, tables that differ); see the module docstring for the reasons
REGIMES: dict[str, tuple[str, dict[str, str]]] = {
    "asg": (FINE_TUNED, {}),
    "ksub": (PRETRAINED, {}),
    "ade": (FINE_TUNED, {}),
    "vocabdiet": (NO_TRAINING, {"Table 3": RECOVERY, "Table 4": RECOVERY, "Table 12": RECOVERY, "Table 13": RECOVERY, "Table 6": PRETRAINED}),
    "multisense": (NO_TRAINING, {"Table 1": FINE_TUNED, "Table 3": FINE_TUNED, "Table 11": FINE_TUNED}),
}
# adapter -> (setting, its off value): the adapter's own post-hoc training of the model, which is what
# its paper calls recovery (Vocab Diet's distillation stages with LoRA, paper 003 Section 6)
OWN_RECOVERY = {"vocabdiet": ("distill", "none")}
# family -> the model names (the harness's and the papers' base models or comparators) it covers
_FAMILY_MEMBERS = {
    "small BERT-style encoder (MiniLM, 6L x 384)": ("minilm",),
    "small encoder, XLM-R vocabulary (12L x 384)": ("me5-small",),
    "small Llama-style decoder (SmolLM2, 135M)": ("smollm2",),
    "BERT-base encoder (12L x 768)": ("bert", "bert-base", "mbert", "biobert"),
    "DistilBERT encoder (6L x 768)": ("distilbert",),
    "ELECTRA-base encoder (12L x 768)": ("electra",),
    "XLM-R base encoder (12L x 768)": ("xlm-r",),
    "medium encoder pretrained from scratch (8L x 512)": ("roberta-medium", "xlm-r-medium"),
    "DeBERTa-v3-base encoder (12L x 768)": ("deberta", "deberta-v3-base"),
    "DeBERTa-v3-large encoder (24L x 1024)": ("deberta-v3-large",),
    "DeBERTa-v3-xsmall encoder (6L x 384)": ("deberta-v3-xsmall",),
    "mT5-small encoder-decoder": ("mt5",),
    "Flan-T5-XXL encoder-decoder (11B)": ("flan-t5-xxl",),
    "Llama-3 8B decoder": ("llama-3.1-8b", "llama3-8b-instruct"),
    "7-9B decoder, other (Qwen2.5, OLMo-2, ALLaM, EuroLLM)": ("qwen2.5-7b", "olmo-2-7b", "allam-7b", "eurollm-9b"),
    "GPT-2-small decoder pretrained from scratch (124M)": ("nanogpt-124m",),
    "static word vectors": ("word2vec", "dict2vec", "drg2vec"),
}
FAMILIES = {name: family for family, names in _FAMILY_MEMBERS.items() for name in names}
COLUMNS = (
    "paper", "table", "method", "base_model", "config", "suite", "task", "language", "setting", "metric",
    "value", "pct_base", "emb_param_pct", "model_param_pct", "notes",
)


@dataclass(frozen=True)
class PaperResult:
    """One number a paper prints, in the store's vocabulary (fractions, not percentages)."""

    paper: str
    table: str
    method: str                  # "baseline" is the paper's unchanged model
    base_model: str | None
    config: str | None           # e.g. "k=512;m=48"
    suite: str                   # harness suite name
    paper_suite: str             # as the CSV names it
    task: str
    language: str | None         # None: the paper's overall number
    setting: str | None          # the harness's name of the protocol: "zero-shot", "multilingual", "5-shot" ...
    metric: str
    value: float                 # as printed (accuracy in %, not a fraction)
    pct_base: float | None
    pct_base_printed: float | None
    emb_param_fraction: float | None
    model_param_fraction: float | None
    notes: str | None
    paper_setting: str | None = None  # as the CSV names it ("translate-train-all", "cross-lingual-transfer" ...)

    @property
    def has_pareto_coordinates(self) -> bool:
        return self.pct_base is not None and self.emb_param_fraction is not None

    @property
    def regime(self) -> str | None:
        return paper_regime(self.paper, self.table)

    @property
    def family(self) -> str:
        return model_family(self.base_model or self.method)


def packaged_csv() -> Path:
    return Path(str(files("harness.results") / "paper_results.csv"))


def read_paper_results(path: Path | None = None) -> list[PaperResult]:
    """Parse the CSV (default: the packaged copy) and fill %Base and the embedding fraction."""
    path = path or packaged_csv()
    rows = [_parse(raw, path, line) for line, raw in read_csv(path, "paper-results CSV", COLUMNS)]
    return _derive_pct_base(_fill_emb_fraction(rows))


def _number(text: str, path: Path, line: int, column: str) -> float | None:
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{path}:{line}: {column}={text!r} is not a number") from None
    if not math.isfinite(value):
        raise DataError(f"{path}:{line}: {column}={text!r} is not a finite number; a paper prints none such")
    return value


def _parse(raw: dict[str, str], path: Path, line: int) -> PaperResult:
    value = _number(raw["value"], path, line, "value")
    if value is None:
        raise DataError(f"{path}:{line}: empty value")
    emb_pct = _number(raw["emb_param_pct"], path, line, "emb_param_pct")
    model_pct = _number(raw["model_param_pct"], path, line, "model_param_pct")
    printed = _number(raw["pct_base"], path, line, "pct_base")
    suite = SUITE_NAMES.get(raw["suite"], raw["suite"])
    return PaperResult(
        paper=raw["paper"], table=raw["table"], method=raw["method"], base_model=raw["base_model"] or None,
        config=raw["config"] or None, suite=suite, paper_suite=raw["suite"], task=raw["task"], language=raw["language"] or None,
        setting=PROTOCOLS.get(suite) or canonical_setting(raw["setting"], raw["notes"]), metric=raw["metric"],
        value=value, pct_base=printed, pct_base_printed=printed,
        emb_param_fraction=None if emb_pct is None else emb_pct / 100.0,
        model_param_fraction=None if model_pct is None else model_pct / 100.0,
        notes=raw["notes"] or None, paper_setting=raw["setting"] or None,
    )


def canonical_setting(printed: str, notes: str) -> str | None:
    """The CSV's setting in the harness's vocabulary (see the module docstring)."""
    if printed:
        return SETTINGS.get(printed, printed)
    shots = _SHOTS.search(notes or "")
    return f"{shots.group(1)}-shot" if shots else None


def _fill_emb_fraction(rows: list[PaperResult]) -> list[PaperResult]:
    printed: dict[tuple, set[float]] = defaultdict(set)
    for r in rows:
        if r.emb_param_fraction is not None:
            printed[(r.paper, r.base_model, r.method, r.config)].add(r.emb_param_fraction)

    def filled(r: PaperResult) -> PaperResult:
        known = printed.get((r.paper, r.base_model, r.method, r.config), set())
        if r.emb_param_fraction is None and len(known) == 1:
            return replace(r, emb_param_fraction=next(iter(known)))
        return r

    return [filled(r) for r in rows]


def _baseline_key(r: PaperResult) -> tuple:
    return (r.paper, r.table, r.base_model, r.paper_suite, r.task, r.language, r.paper_setting, r.metric)


def _derive_pct_base(rows: list[PaperResult]) -> list[PaperResult]:
    base = {_baseline_key(r): r.value for r in rows if r.method == "baseline"}

    def derived(r: PaperResult) -> PaperResult:
        b = base.get(_baseline_key(r))
        if b is None:
            return r
        if r.metric in HIGHER_IS_BETTER and b > 0:
            return replace(r, pct_base=100.0 * r.value / b)
        if r.metric in LOWER_IS_BETTER and r.value > 0:
            return replace(r, pct_base=100.0 * b / r.value)
        return r

    return [derived(r) for r in rows]


def paper_regime(paper: str, table: str) -> str | None:
    """The training regime of a paper's table (:data:`REGIMES`); None for a paper not listed."""
    default, tables = REGIMES.get(paper, (None, {}))
    return tables.get(table, default)


def model_family(name: str | None) -> str:
    """The family of a harness model or a paper's base model (:data:`FAMILIES`); else the name itself."""
    return FAMILIES.get((name or "").lower(), name or "unknown")


def recovery_of(recipe: Mapping | str | None) -> dict:
    """A run's recovery training as its recipe stored it (``recipe["recovery"]``); ``{}`` when it had none."""
    recipe = json.loads(recipe) if isinstance(recipe, str) else (recipe if isinstance(recipe, Mapping) else {})  # NULL: NaN
    recovery = (recipe or {}).get("recovery") or {}
    return recovery if recovery.get("steps") else {}


def pretraining_of(recipe: Mapping | str | None) -> dict:
    """A run's pretraining as its recipe stored it (``recipe["pretraining"]``, ``--pretrain``); ``{}`` when it had none."""
    recipe = json.loads(recipe) if isinstance(recipe, str) else (recipe if isinstance(recipe, Mapping) else {})  # NULL: NaN
    return (recipe or {}).get("pretraining") or {}


def scale_free(regime: str) -> str:
    """The regime a paper's row is compared in: a small-scale pretraining sits beside the paper's."""
    return regime.removesuffix(SMALL_SCALE)


def run_regime(recipe: Mapping | str | None, adapter: str | None = None, config: Mapping | str | None = None) -> str:
    """A run's regime from what it stored: pretraining from scratch (the recipe's ``pretraining``:
    with steps, :data:`PRETRAINED_SMALL`; 0 steps, :data:`NOT_PRETRAINED`, + fine-tuned where the suite
    fine-tunes), else recovery training (the recipe's ``recovery.steps`` > 0, or an adapter's
    own post-hoc training, :data:`OWN_RECOVERY`) and task fine-tuning (training ``epochs`` > 0 in the
    recipe, as the fine-tuning suites record), or neither."""
    recipe = json.loads(recipe) if isinstance(recipe, str) else (recipe or {})
    config = json.loads(config) if isinstance(config, str) else (config or {})
    pretraining = pretraining_of(recipe)
    if pretraining:
        return PRETRAINED_SMALL if pretraining["steps"] else NOT_PRETRAINED + (" + fine-tuned" if (recipe.get("epochs") or 0) > 0 else "")
    key, off = OWN_RECOVERY.get(adapter or "", (None, None))
    recovered = bool(recovery_of(recipe)) or (key is not None and config.get(key, off) != off)
    tuned = (recipe.get("epochs") or 0) > 0
    return {(True, True): RECOVERY_FINE_TUNED, (True, False): RECOVERY, (False, True): FINE_TUNED}.get((recovered, tuned), NO_TRAINING)


def run_family(model: str | None, recipe: Mapping | str | None) -> str:
    """A run's model family: its model's (:func:`model_family`), or for a pretrained run the small
    encoder it pretrained from scratch with the model's vocabulary."""
    arch = pretraining_of(recipe).get("architecture")
    if not arch:
        return model_family(model)
    return f"small encoder from scratch ({arch['layers']}L x {arch['hidden']}, {model}'s vocabulary)"


def annotate(papers: pd.DataFrame) -> pd.DataFrame:
    """Paper rows (as stored, or :class:`PaperResult` dicts) with their ``regime`` and ``family``."""
    return papers.assign(
        regime=[paper_regime(p, t) for p, t in zip(papers.paper, papers.table)],
        family=[model_family(b if isinstance(b, str) and b else m) for b, m in zip(papers.base_model, papers.method)],
    )


# A paper's name for what a suite scores under another name: lm-eval's ``acc`` is the papers'
# ``accuracy``; paper 003's "ARC" is ARC-Challenge (its values are Challenge levels, see suites/lm_eval.py).
METRIC_ALIASES = {"acc": "accuracy"}
TASK_ALIASES = {("lm_eval", "arc"): "arcchallenge"}
_SHOT_WORDS = re.compile(r"\b(\d+)-shot\b|\b(zero)-shot\b", re.IGNORECASE)


def task_key(task: str) -> str:
    """Case and punctuation folded, so a paper's ``XNLI`` / ``SST-2`` meet the suite's ``xnli`` / ``sst2``."""
    return re.sub(r"[^a-z0-9]", "", task.lower())


def paper_shots(setting: str | None, notes: str | None) -> int | None:
    """In-context examples a paper's row was scored with, read from its setting, else its notes
    ("5-shot in-context", "zero-shot"); None where neither says."""
    for text in (setting, notes):
        found = _SHOT_WORDS.search(text) if isinstance(text, str) else None
        if found:
            return 0 if found.group(2) else int(found.group(1))
    return None


def placement(
    papers: pd.DataFrame, suite: str, task: str, metric: str, shots: float | None = None, setting: str | None = None,
    regimes: Collection[str] | None = None,
) -> pd.DataFrame:
    """The papers' rows of a run's suite and task (case and punctuation folded, with the aliases
    above), annotated, each with ``reason``: why it does not sit beside the run, ``""`` where it does.
    They differ by regime (where ``regimes``, the runs' regimes, are given), by protocol (for a
    prompted task, ``shots`` set, the number of in-context examples, so a 0-shot run never sits
    beside a 5-shot point; otherwise the suite's declared ``setting``, where it declares one), or by
    metric (lm-eval's ``acc`` is the papers' ``accuracy``)."""
    keys = papers.task.map(task_key)
    keys = keys.where(~papers.suite.eq(suite), keys.map(lambda k: TASK_ALIASES.get((suite, k), k)))
    rows = papers[papers.suite.eq(suite) & keys.eq(task_key(task))]
    rows = rows if "regime" in rows else annotate(rows)
    return rows.assign(reason=[difference(p, metric, shots, setting, regimes) for p in rows.itertuples(index=False)] if len(rows) else pd.Series(dtype=str))


def difference(p, metric: str | None, shots: float | None, setting: str | None, regimes: Collection[str] | None) -> str:
    """Why paper row ``p`` (with ``regime``, ``setting``, ``notes``, ``metric``) does not sit beside a
    run with these facts (``""``: it does); see :func:`placement`. ``metric`` None: not compared."""
    why = []
    if regimes and p.regime not in {scale_free(r) for r in regimes}:
        why.append(f"regime: {p.regime} vs {' / '.join(sorted(regimes))}")
    printed = paper_shots(p.setting, p.notes)
    if shots is not None and not pd.isna(shots):
        if printed != int(shots):
            why.append(f"setting: {'unstated' if printed is None else f'{printed}-shot'} vs {int(shots)}-shot")
    elif setting and (p.setting if isinstance(p.setting, str) else "") != setting:
        why.append(f"setting: {p.setting if isinstance(p.setting, str) else 'unstated'} vs {setting}")
    if metric is not None and p.metric not in {metric, METRIC_ALIASES.get(metric, metric)}:
        why.append(f"metric: {p.metric} vs {metric}")
    return "; ".join(why)
