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
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from dataclasses import dataclass, replace
from importlib.resources import files
from pathlib import Path

from harness.errors import DataError

SUITE_NAMES = {"tydiqa": "qa", "mteb_classification": "mteb_clf", "word_similarity": "word_sim", "bytes_per_token": "tokenizer"}
# metrics whose ratio to the baseline is a %Base; the others (counts, sizes, deltas) get none
HIGHER_IS_BETTER = frozenset({"accuracy", "f1", "em", "spearman", "mcc", "correlation", "score", "precision", "recall"})
LOWER_IS_BETTER = frozenset({"bpb"})
SETTINGS = {"cross-lingual-transfer": "zero-shot", "translate-train-all": "multilingual"}
# suites that run one protocol (their Score.setting), for the papers' rows that print none
PROTOCOLS = {"ag_news": "fine-tuned", "dbpedia14": "fine-tuned", "glue": "fine-tuned", "bc5cdr": "fine-tuned",
             "mteb_clf": "linear-probe", "word_sim": "intrinsic", "tokenizer": "intrinsic"}
_SHOTS = re.compile(r"\b(\d+)-shot\b")
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


def packaged_csv() -> Path:
    return Path(str(files("harness.results") / "paper_results.csv"))


def read_paper_results(path: Path | None = None) -> list[PaperResult]:
    """Parse the CSV (default: the packaged copy) and fill %Base and the embedding fraction."""
    path = path or packaged_csv()
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise DataError(f"{path} lacks columns {', '.join(missing)}; expected {', '.join(COLUMNS)}")
            rows = [_parse(raw, path, line) for line, raw in enumerate(reader, start=2)]
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror}") from None
    return _derive_pct_base(_fill_emb_fraction(rows))


def _number(text: str, path: Path, line: int, column: str) -> float | None:
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise DataError(f"{path}:{line}: {column}={text!r} is not a number") from None


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
