"""The lm-eval model type ``compressed``: a compressed model scored by lm-eval's own HFLM.

Registered with lm-eval's ``register_model`` when this module is imported::

    import lm_eval, harness.integrations.lm_eval
    lm_eval.simple_evaluate(model="compressed", model_args="pretrained=DIR", tasks=[...])      # an export
    lm_eval.simple_evaluate(model="compressed", model_args="base=smollm2,adapter=asg,k=1024", tasks=[...])
    harness-lm-eval --model compressed --model_args pretrained=DIR --tasks ...                # lm-eval's CLI

lm-eval 0.4 discovers no model plugins, so its own ``lm_eval`` command does not see the type;
``harness-lm-eval`` is that command with the type registered and the device defaulting to the one
that exists (``--device auto``; lm-eval's own default is ``cuda:0``). ``base=...,adapter=...`` plans the
fit as ``harness run --suite lm_eval`` would (further keys that name an adapter setting go to the
adapter, the rest to HFLM; ``profile`` and ``seed`` pick the fit budget) and takes it from the fit
cache when it is there. ``harness run --suite lm_eval`` evaluates through this same class, with the
model object it compressed (``pretrained=<model>``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM
from torch import nn

from harness.errors import ConfigError, HarnessError


def fit(base: str, adapter: str, settings: dict[str, Any], profile: str = "smoke", seed: int = 0, device: str = "auto"):
    """(model, tokenizer): ``adapter`` fitted on ``base`` as a ``harness run --suite lm_eval`` would."""
    from harness.runner.export import fitted_model
    from harness.runner.plan import RunRequest, plan

    text = {True: "true", False: "false", None: "none"}
    values = tuple(f"adapter.{k}={text.get(v, v) if isinstance(v, (bool, type(None))) else v}" for k, v in settings.items())
    applied, _ = fitted_model(plan(RunRequest("lm_eval", adapter, base, profile, seed, values, device=device)))
    return applied.model, applied.tokenizer


@register_model("compressed")
class CompressedLM(HFLM):
    """HFLM over a compressed model: ``pretrained`` is an exported folder or a model object, or
    ``base`` + ``adapter`` (+ its settings) fit one. An encoder-decoder runs as lm-eval's ``seq2seq`` type. ``device`` is resolved as ``harness run
    --device`` resolves it: ``auto`` (the default) is cuda when a GPU is visible, else cpu."""

    def __init__(self, pretrained: str | nn.Module | None = None, tokenizer: Any = None, base: str | None = None,
                 adapter: str | None = None, profile: str = "smoke", seed: int = 0, device: str = "auto", **kwargs):
        from harness import load_compressed
        from harness.config import config_fields
        from harness.registry import ADAPTERS
        from harness import devices

        device = devices.resolve(device)
        if isinstance(pretrained, nn.Module):
            model = pretrained
        elif pretrained is not None:
            model, tokenizer = load_compressed(pretrained)
        elif base is not None and adapter is not None:
            fields = config_fields(ADAPTERS.get(adapter).config_class)
            settings = {k: kwargs.pop(k) for k in list(kwargs) if k in fields}
            model, tokenizer = fit(base, adapter, settings, profile, seed, device)
        else:
            raise ConfigError("model_args need pretrained=DIR (a `harness export` folder) or base=MODEL,adapter=NAME[,setting=value...]")
        if getattr(model.config, "is_encoder_decoder", False):  # T5, mT5: lm-eval's seq2seq type, whatever the model type's name
            kwargs.setdefault("backend", "seq2seq")
        super().__init__(pretrained=model.eval().to(device), tokenizer=tokenizer, device=device, **kwargs)


def _device_given(args: argparse.Namespace) -> bool:
    """Whether the command line or its YAML config (``--config``) names a device."""
    from lm_eval.config.evaluate_config import EvaluatorConfig

    if getattr(args, "device", None) is not None:
        return True
    return bool(getattr(args, "config", None)) and "device" in EvaluatorConfig.load_yaml_config(args.config)


def cli() -> None:
    """``harness-lm-eval``: lm-eval's command line (``lm_eval.__main__.cli_evaluate``) with the
    ``compressed`` model type registered and ``--device auto`` as the default, where lm-eval's own
    is ``cuda:0``: the command runs as written on a machine without a GPU. A harness error (a bad
    ``model_args``, ``--device cuda`` without a GPU) is one line and exit code 2."""
    from lm_eval._cli import HarnessCLI
    from lm_eval.utils import setup_logging

    setup_logging()
    parser = HarnessCLI()
    args = parser.parse_args()
    if args.command == "run" and not _device_given(args):
        args.device = "auto"
    try:
        parser.execute(args)
    except HarnessError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
