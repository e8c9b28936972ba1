"""Start-up of the ``harness`` command: how long it takes to answer before any model loads.

Times, as whole processes in alternating rounds (so that each round's commands share whatever else
the machine runs), ``harness --help``, five refusals (exit 2: ``harness run --suite xnl --adapter
asg``, a typo; ``--set nosuch=1``, a key neither the adapter nor the suite has, and ``--set k=abc``,
a value not of its type, both answered from the registry's cached settings; ``--model MiniLM``, a
name nothing resolves; ``--data-dir`` an empty folder, answered from the data sources the plan of
the same request remembered), ``python -c "import torch"``, and with ``--reused-db`` the README's
main job against a store where both of its runs are current (every run reused): on a fresh
``$HARNESS_CACHE_DIR`` each round (it plans, so imports torch), and planned before (the spec its
plan remembered finds both runs, without torch). One warm-up pass of the refusals and of the
planned-before main job fills those caches, as a first refusal or run does. Prints the median and range of each,
and each command against ``import torch`` in the same rounds (a refusal's target: at most one half);
``--json`` writes the rows for docs/performance.md's table. Each figure
comes as wall time and as CPU time (user + system), which a busy machine moves far less.

    python -m benchmarks.startup [--rounds 7] [--reused-db PATH --profile smoke] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.benchmarks.report import BenchReport, Row
from harness.benchmarks.timing import environment, load_average, provenance

HARNESS = str(Path(sys.executable).with_name("harness"))


GOALS = {
    "harness --help": "at most 1.5 s, quiet",
    **{f"refusal ({what})": "at most 2 s, quiet" for what in ("unknown suite", "unknown setting", "bad value", "unknown model", "missing data")},
    **{f"main job, both runs reused, {how}": "at most 8 s, quiet" for how in ("fresh cache", "planned before")},
}
"""The absolute goals on the quiet 2-core machine, named beside each row (the ratio's target is the refusals')."""


def commands(reused_db: str | None, profile: str, empty_dir: str) -> dict[str, tuple[list[str], int, bool]]:
    """Name -> (argv, the exit status it must give, whether it runs on a fresh ``$HARNESS_CACHE_DIR``)."""
    run = [HARNESS, "run", "--suite", "xnli", "--adapter", "asg"]
    out = {
        "harness --help": ([HARNESS, "--help"], 0, False),
        "refusal (unknown suite)": ([HARNESS, "run", "--suite", "xnl", "--adapter", "asg"], 2, False),
        "refusal (unknown setting)": ([*run, "--set", "nosuch=1"], 2, False),
        "refusal (bad value)": ([*run, "--set", "k=abc"], 2, False),
        "refusal (unknown model)": ([*run, "--model", "MiniLM"], 2, False),
        "refusal (missing data)": ([*run, "--data-dir", empty_dir], 2, False),
        "import torch": ([sys.executable, "-c", "import torch"], 0, False),
    }
    if reused_db:
        main_job = [*run, "--profile", profile, "--db", reused_db]
        out["main job, both runs reused, fresh cache"] = (main_job, 0, True)
        out["main job, both runs reused, planned before"] = (main_job, 0, False)
    return out


def timed(argv: list[str], status: int, fresh: bool = False) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``argv`` (``fresh``: with a new empty
    ``$HARNESS_CACHE_DIR``); the CPU time moves far less than the wall time when other processes share the cores."""
    with tempfile.TemporaryDirectory(prefix="startup-cache-") as cache:
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", **({"HARNESS_CACHE_DIR": cache} if fresh else {})}
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != status:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}, not {status}: {proc.stderr.strip()[-500:]}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--reused-db", help="a store holding the main job's two runs, current under this code")
    parser.add_argument("--profile", default="quick", help="the profile those runs were made with")
    parser.add_argument("--json", type=Path, help="also write the rows as bench JSON (docs/performance.md's table: python -m benchmarks.tables)")
    args = parser.parse_args()
    report = BenchReport({**provenance(), **environment("cpu"), "command": " ".join(["python -m benchmarks.startup", *sys.argv[1:]]),
                          "load_start": load_average()})
    with tempfile.TemporaryDirectory(prefix="startup-empty-") as empty:
        walls, cpus = measure(commands(args.reused_db, args.profile, empty), args.rounds)
    report.rows = rows(walls, cpus, load_average())
    report.environment["load_end"] = load_average()
    print(report.markdown())
    if args.json:
        report.write_json(args.json)


def rows(walls: dict[str, list[float]], cpus: dict[str, list[float]], load: float) -> list[Row]:
    """Each command against ``import torch`` in the same rounds: the ratio is torch's median over the
    command's (a refusal's target: at least 2, at most half of torch's time), the range over rounds."""
    torch = "import torch"
    base = statistics.median(walls[torch])
    out = []
    for name, values in walls.items():
        if name == torch:
            continue
        per_round = [t / v for t, v in zip(walls[torch], values)]
        note = (f"CPU {statistics.median(cpus[name]):.2f} s vs {statistics.median(cpus[torch]):.2f} s; "
                f"wall {min(values):.2f}-{max(values):.2f} s; goal {GOALS[name]}" if name in GOALS else "")
        out.append(Row("startup", name, "s", base, statistics.median(values), base / statistics.median(values), min(per_round),
                       max(per_round), len(values), target=2.0 if name.startswith("refusal") else None, note=note, load=load))
    return out


def measure(todo: dict[str, tuple[list[str], int, bool]], rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of each command, ``rounds`` times in alternation, after one warm-up pass of
    the refusals and the planned-before main job (settings read from the classes, a plan's data
    sources and spec remembered, once)."""
    walls: dict[str, list[float]] = {name: [] for name in todo}
    cpus: dict[str, list[float]] = {name: [] for name in todo}
    for name in todo:
        if name.startswith("refusal") or name.endswith("planned before"):
            timed(*todo[name])
    for _ in range(rounds):
        for name, command in todo.items():
            wall, cpu = timed(*command)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return walls, cpus


if __name__ == "__main__":
    main()
