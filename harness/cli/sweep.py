"""``harness sweep``: a grid of runs, validated first, resumable, locally or on Ray; ``--status`` reads progress."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, List, Optional

import typer

from harness.cli.common import DbOption, RichProgress, err_console, error_line, quiet_transformers, user_errors
from harness.errors import ConfigError, printable

if TYPE_CHECKING:
    from harness.results.store import Store


def sweep(
    file: Annotated[Optional[str], typer.Argument(help="A sweep YAML file (suites, models, seeds, adapters with grids).")] = None,
    adapter: Annotated[Optional[str], typer.Option("--adapter", "-a", help="Without FILE: the adapter to sweep.")] = None,
    grid: Annotated[Optional[List[str]], typer.Option("--grid", help="Without FILE: key=v1,v2,... (repeatable; the product is swept).")] = None,
    suite: Annotated[Optional[str], typer.Option("--suite", "-s", help="Without FILE: suite or comma-separated suites.")] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Without FILE: model(s), comma-separated; default: each suite's.")] = None,
    seeds: Annotated[str, typer.Option(help="Without FILE: comma-separated seeds.")] = "0",
    profile: Annotated[str, typer.Option(help="Without FILE: smoke, quick or paper.")] = "quick",
    settings: Annotated[Optional[List[str]], typer.Option("--set", help="Without FILE: a setting for every point, key=value (repeatable).")] = None,
    db: DbOption = None,
    data_dir: Annotated[Optional[str], typer.Option("--data-dir", help="Dataset folder (default: $HARNESS_DATA_DIR).")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    backend: Annotated[str, typer.Option(help="local (this machine) or ray.")] = "local",
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="local: points at once, each in its own process (1: in this process).")] = 1,
    address: Annotated[Optional[str], typer.Option(help="ray: a cluster address ('auto' for the running one); default: a local Ray instance.")] = None,
    cpus: Annotated[int, typer.Option(help="ray: CPUs per point.")] = 1,
    status: Annotated[bool, typer.Option("--status", help="Print the sweep's progress from the database and records, run nothing.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check every point and print what would run: each point reused from the store or made; runs nothing.")] = False,
    lift_cap: Annotated[bool, typer.Option("--lift-cap", help="Run points whose recovery estimate is above the cap (12 h a run).")] = False,
) -> None:
    """Run every point of a grid (baselines once each), skipping points already stored; a bad point stops it before any runs."""
    from harness.results.store import Store
    from harness.sweep import grid as grids
    from harness.sweep.points import InvalidPoints, plan_points, recovery_estimates

    quiet_transformers()
    with user_errors():
        if file is not None and (adapter or grid or suite):
            raise ConfigError("give a sweep FILE or --adapter/--grid/--suite, not both")
        if file is None and not (adapter and suite):
            raise ConfigError("give a sweep FILE, or --adapter and --suite (with --grid key=v1,v2)")
        if backend not in ("local", "ray"):
            raise ConfigError(f"unknown backend '{backend}'; use local or ray")
        if jobs < 1 or cpus < 1:
            raise ConfigError("--jobs and --cpus must be at least 1")
        spec = grids.from_yaml(file, data_dir, device) if file else grids.from_options(
            adapter, grid or [], suite, model, seeds, profile, settings or [], data_dir, device,
        )
        try:
            points = plan_points(spec)
            store = Store(db)
            if status or dry_run:
                _print_status(points, store, dry_run)
                return
            recovery_estimates(points, store, lift_cap, lambda line: err_console.print(line, highlight=False, soft_wrap=True))
        except InvalidPoints as err:
            for line in err.problems:
                error_line(line)
            raise typer.Exit(code=2) from None
        progress = _run(points, store, backend, jobs, address, cpus, device)
    if progress.failed:
        err_console.print(f"{len(progress.failed)} point(s) failed; fix them and run the same sweep again to resume")
        raise typer.Exit(code=1)
    typer.echo(f"results in {printable(str(store.path))}")


def _run(points, store: Store, backend: str, jobs: int, address: str | None, cpus: int, device: str):
    from harness.sweep.backends import LocalProcesses, RayTasks, Sequential
    from harness.sweep.driver import run_sweep

    with RichProgress() as bars:  # drawn by points run in this process; those in workers report start and end only
        if backend == "ray":
            runner = RayTasks(address, cpus, device, store.records_dir)
        elif jobs > 1:
            runner = LocalProcesses(jobs, store.records_dir)
        else:
            runner = Sequential(store, bars)
        return run_sweep(points, store, runner, lambda line: err_console.print(line, highlight=False, soft_wrap=True))


def _print_status(points, store: Store, dry_run: bool) -> None:
    """The sweep's progress (``--status``), or what a run of it would do (``--dry-run``): each point
    reused (a finished run stored) or made."""
    from harness.sweep.status import report, states

    rows = states(points, store)
    lines = [f"reuse {r.point.label}: run {r.run_id}" if r.state == "finished" else f"make  {r.point.label}" for r in rows] if dry_run else report(rows)
    for line in lines:
        typer.echo(printable(line))
