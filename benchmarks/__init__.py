"""Performance measurements (not part of the test run); see benchmarks/README.md."""
