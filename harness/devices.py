"""The one rule for a device string, for every command that takes ``--device`` (run, sweep, bench).

``auto`` is ``cuda`` where torch sees a CUDA GPU, else ``cpu``; ``cpu``; ``cuda``; ``cuda:N`` for a
visible GPU N. Anything else (``tpu``, ``cuda:x``, ``CPU``) is refused here with one line, before
torch would parse it (torch's own error lists a dozen backends this harness never runs on).
"""

from __future__ import annotations

import re

from harness.errors import ConfigError

_CUDA_INDEX = re.compile(r"cuda:([0-9]{1,4})")


def resolve(requested: str) -> str:
    """``requested`` as the device the run uses (``auto`` decided here); a ConfigError otherwise."""
    import torch

    index = _CUDA_INDEX.fullmatch(requested)
    if requested not in ("auto", "cpu", "cuda") and index is None:
        raise ConfigError(f"unknown device '{requested}'; use auto, cpu, cuda or cuda:N (N a GPU's index)")
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {requested} but no CUDA GPU is visible; use --device cpu or auto")
    if index is not None and int(index.group(1)) >= torch.cuda.device_count():
        raise ConfigError(f"--device {requested}: this machine sees {torch.cuda.device_count()} CUDA GPU(s), cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return requested
