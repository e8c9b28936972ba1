"""``python -m benchmarks``: the same command as ``harness bench`` (harness/cli/bench.py)."""

from harness.cli.bench import main

main()
