"""Performance measurements (not part of the test run): ``python -m benchmarks`` or ``harness bench``.

Installed as ``harness.benchmarks``. Modules: timing (ABAB pairs, cold and hot calls, CUDA events), heads
(output heads vs the dense projection), decode (greedy tokens/s), memory (saved models loaded from disk in fresh
processes: resident memory, bytes read), models (packaged and random-weight decoders), report (rows,
markdown, JSON), run (all sections).
"""
