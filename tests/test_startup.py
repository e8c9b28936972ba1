"""The CLI answers refusals it can make from names before it imports torch and the models' libraries.

Each command runs in a fresh interpreter (the refusal's imports are the point), through a small
wrapper that calls the ``harness`` entry point and then lists which heavy modules got imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import CUDA

HEAVY = ("torch", "transformers", "peft", "lm_eval", "mteb", "faiss", "scipy")
WRAPPER = f"""
import json, sys
from harness.cli import main
try:
    main()
finally:
    print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)
"""


def _harness(*args: str) -> tuple[int, list[str], list[str]]:
    """Exit code, stderr lines before the wrapper's, and the heavy modules the command imported."""
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    return proc.returncode, lines[:-1], json.loads(lines[-1])


@pytest.mark.parametrize(("args", "message"), [
    (["--suite", "xnl", "--adapter", "asg"], "error: unknown suite 'xnl'; did you mean 'xnli'?"),
    (["--suite", "xnli", "--adapter", "product_quant"], "error: unknown adapter 'product_quant'"),
    (["--suite", "xnli", "--adapter", "asg", "--set", "nosuch"], "error: --set 'nosuch' is not key=value"),
    (["--suite", "xnli", "--adapter", "asg", "--profile", "fast"], "error: unknown profile 'fast'"),
])
def test_a_refusal_from_names_imports_no_torch(args, message):
    code, errors, heavy = _harness("run", *args)
    assert code == 2, errors
    assert len(errors) == 1 and errors[0].startswith(message), errors
    assert heavy == []


@pytest.mark.skipif(CUDA, reason="torch sees a CUDA device here: --device cuda is not refused")
def test_device_cuda_without_a_gpu_is_refused_before_torch_loads():
    """Where torch sees no CUDA device, no GPU driver is loaded either, and the CLI says so without torch."""
    code, errors, heavy = _harness("run", "--suite", "xnli", "--adapter", "asg", "--device", "cuda")
    assert code == 2, errors
    assert errors == ["error: --device cuda but no GPU driver is loaded (no NVIDIA or ROCm driver, no libcuda); use --device cpu or auto"]
    assert heavy == []
