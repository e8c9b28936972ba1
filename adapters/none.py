"""The unchanged base model: every %Base is relative to it."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from harness.adapter import Adapter, FitContext


@dataclass(frozen=True)
class NoneConfig:
    """No settings."""


class NoneAdapter(Adapter):
    name = "none"
    kinds = ("encoder", "decoder", "encoder-decoder")
    config_class = NoneConfig
    cacheable = False
    unchanged = True

    def compress(self, model: nn.Module, fit: FitContext) -> nn.Module:
        return model
