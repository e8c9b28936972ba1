"""harness.devices: one rule for --device, for every command that takes one."""

from __future__ import annotations

import pytest
import torch

from harness.devices import resolve
from harness.errors import ConfigError


@pytest.mark.parametrize("text", ["tpu", "CPU", "cuda:x", "cuda:-1", "cuda:²", "", "cpu ", "cuda:0:1", "privateuseone"])
def test_unknown_devices_are_refused_with_the_valid_ones(text):
    with pytest.raises(ConfigError, match=r"unknown device .*; use auto, cpu, cuda or cuda:N"):
        resolve(text)


def test_auto_and_cpu():
    assert resolve("cpu") == "cpu"
    assert resolve("auto") == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where no GPU is visible")
@pytest.mark.parametrize("text", ["cuda", "cuda:0"])
def test_cuda_without_a_gpu_is_refused(text):
    with pytest.raises(ConfigError, match="no CUDA GPU is visible"):
        resolve(text)


@pytest.mark.gpu
def test_a_visible_gpu_index_and_one_beyond():
    assert resolve("cuda:0") == "cuda:0"
    with pytest.raises(ConfigError, match="CUDA GPU"):
        resolve(f"cuda:{torch.cuda.device_count()}")
