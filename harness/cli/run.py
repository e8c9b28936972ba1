"""``harness run``: one method on one suite, with its baseline run or reused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, List, Optional

import typer

from harness.budgets import PROFILES
from harness.cli.common import DbOption, RichProgress, WideOption, err_console, quiet_transformers, user_errors
from harness.config import coerce, parse_assignments, route_settings
from harness.devices import refuse_without_torch
from harness.errors import ConfigError, printable
from harness.registry import ADAPTERS, SUITES
from harness.runner.request import RunRequest, check_data, check_model_name, check_seed, remembering, stored_outcomes

if TYPE_CHECKING:
    from harness.results.store import Store


def run(
    suite: Annotated[str, typer.Option("--suite", "-s", help="Suite to run (see `harness list suites`).")],
    adapter: Annotated[str, typer.Option("--adapter", "-a", help="Method (see `harness list adapters`).")] = "none",
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Packaged alias, local directory or hub id; default: the suite's.")] = None,
    profile: Annotated[str, typer.Option(help="smoke (tests), quick (2-core CPU), paper (the papers' recipe).")] = "quick",
    seed: Annotated[int, typer.Option(help="Seed for sampling, k-means and training.")] = 0,
    seeds: Annotated[Optional[str], typer.Option("--seeds", help="Several seeds, comma-separated (e.g. 0,1,2): each runs with its own baseline; replaces --seed.")] = None,
    settings: Annotated[Optional[List[str]], typer.Option("--set", help="Adapter or suite setting key=value (repeatable), e.g. --set k=1024.")] = None,
    db: DbOption = None,
    data_dir: Annotated[Optional[str], typer.Option("--data-dir", help="Dataset folder (default: $HARNESS_DATA_DIR).")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    force: Annotated[bool, typer.Option("--force", help="Re-run even if an identical finished run is stored.")] = False,
    lift_cap: Annotated[bool, typer.Option("--lift-cap", help="Run even if the recovery estimate is above the cap (12 h a run).")] = False,
    recover: Annotated[int, typer.Option("--recover", help="Recovery training steps after the adapter's fit: the compressed model trained toward the unchanged one on the fit corpora (0: off).")] = 0,
    recover_lora: Annotated[bool, typer.Option("--recover-lora", help="Recovery also trains LoRA on the top quarter of the layers.")] = False,
    pretrain: Annotated[Optional[int], typer.Option("--pretrain", help="Masked-LM steps of a small encoder built from scratch with the method's table, before the suite (paper 001's regime, small scale; the baseline is the full table pretrained alike); 0: not pretrained (the control). Default: off.")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="Precision the model loads in: float32 (default), bfloat16 or float16; part of the run's identity.")] = "float32",
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", help="Run code shipped with the model (its config's auto_map); off by default, recorded with the run.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check the whole request and print what would run: each run reused from the store or made; loads no model weights, trains and stores nothing.")] = False,
    wide: WideOption = False,
) -> None:
    """Run ADAPTER on SUITE; the unchanged baseline is run (or reused) too, so %Base is known."""
    with user_errors(), remembering():  # what earlier plans remembered is read once, for the checks and the reuse
        requests = [RunRequest(suite, adapter, model, profile, s, tuple(settings or ()), data_dir, device, force, recover, recover_lora,
                               pretrain, dtype, trust_remote_code)
                    for s in (parse_seeds(seeds) if seeds is not None else (seed,))]
        refuse_early(requests[0])
        from harness.cli.run_tables import chance_warnings, print_tables
        from harness.results.store import Store

        store = Store(db)
        runs = [] if dry_run else [stored_outcomes(request, store) for request in requests]
    if dry_run or None in runs:  # something to plan: the runner, and with it torch and the models' libraries
        from harness.runner.run import execute

        quiet_transformers()
        with user_errors(), RichProgress() as progress:
            if dry_run:
                lines = [line for request in requests for line in would_run(request, store)]
            else:
                runs = [execute(request, store, progress, say=lambda line: err_console.print(line, highlight=False), lift_cap=lift_cap)
                        for request in requests]
    if dry_run:
        for line in lines:
            typer.echo(printable(line))
        return
    print_tables(runs, store, wide)
    for line in chance_warnings([outcomes[-1].record for outcomes in runs]):
        err_console.print(line, highlight=False, markup=False)


def refuse_early(request: RunRequest) -> None:
    """What can be refused from names and cached metadata, before the runner imports torch and the
    models' libraries: a suite or adapter no package registers (entry points), an unknown profile, a
    seed out of range, a malformed ``--set``, one neither the adapter nor the suite has or a value not
    of its type (their settings as cached by the registry), a ``--device`` outside the rule or ``cuda``
    where no GPU driver is loaded (:mod:`harness.devices`), a model name nothing can resolve, and data
    files missing for a request planned before (:mod:`harness.runner.request`). The plan checks the
    rest (values' ranges, a model's metadata, the data's content, and CUDA through torch)."""
    if request.profile not in PROFILES:
        raise ConfigError(f"unknown profile '{request.profile}'; use one of {', '.join(PROFILES)}")
    check_seed(request.seed)
    SUITES.check(request.suite)
    ADAPTERS.check(request.adapter)
    pairs = parse_assignments(list(request.settings))
    known = (ADAPTERS.settings(request.adapter), SUITES.settings(request.suite)) if pairs else ({}, {})
    for values, types in zip(route_settings(pairs, list(known[0]), list(known[1]), request.adapter, request.suite), known):
        for key, raw in values.items():
            if key in types:  # a prefixed key the other side lacks is the plan's to refuse, naming that side
                coerce(key, raw, types[key])
    refuse_without_torch(request.device)
    check_model_name(request)
    check_data(request)


def would_run(request: RunRequest, store: Store) -> list[str]:
    """What ``harness run`` would do for ``request``, read-only: the request planned (everything checked
    that a run checks before its first model loads), then one line per run, baseline first, each
    reused from the store (a finished run with its identity) or made."""
    from harness.runner.plan import plan

    p = plan(request)
    lines = []
    for spec in [p.spec.baseline(), *([p.spec] if p.spec.adapter != "none" else [])]:
        what = f"{spec.adapter} on {spec.suite} ({spec.model}, {spec.profile}, seed {spec.seed}, config {spec.config_hash})"
        done = None if p.force and spec == p.spec else store.find_finished(spec)
        lines.append(f"reuse {what}: run {done.run_id}" if done else f"make  {what}" + (" (--force)" if p.force and spec == p.spec else ""))
    if p.spec.recipe.get("recovery") and lines[-1].startswith("make"):
        lines.append("  a recovery step is timed first: a recovery estimated above the cap for a run is refused (--lift-cap runs it)")
    return lines


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0,1,2"`` -> ``(0, 1, 2)``; anything else (a seed out of range too) is a ConfigError, before any seed runs."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"--seeds {text!r} is not a comma-separated list of integers; write e.g. --seeds 0,1,2") from None
    if not values or len(set(values)) != len(values):
        raise ConfigError(f"--seeds {text!r} needs distinct integers, e.g. --seeds 0,1,2")
    for value in values:
        check_seed(value, "--seeds")
    return values
