"""MTEB: an exported compressed model (``harness export``) as an MTEB encoder.

    import mteb, harness.integrations.mteb
    encoder = harness.integrations.mteb.load("DIR")                 # or harness.integrations.mteb.meta("DIR").load_model()
    mteb.evaluate(encoder, mteb.get_tasks(tasks=["Banking77Classification"]))

The encoder mean-pools the last hidden states of the model's backbone (the export's task head, if
any, is not used), as :class:`harness.suites.mteb_encoder.CompressedEncoder` does inside
``harness run --suite mteb_clf``. Its ``ModelMeta`` is named ``harness/<model>-<adapter>``, at a
revision that is the sha256 prefix of the saved weights, and reports the compressed backbone's
counts: ``n_parameters`` and ``n_embedding_parameters`` after compression (so mteb's leaderboard
tooling places it by what it stores), with ``loader`` set so ``meta.load_model()`` rebuilds it.
"""

from __future__ import annotations

from pathlib import Path

from mteb.models.model_meta import ModelMeta
from torch import nn

from harness.runner import saved
from harness.suites.mteb_encoder import CompressedEncoder, model_meta


def backbone(model: nn.Module) -> nn.Module:
    """The module that returns ``last_hidden_state``: the transformers base model, or the model itself."""
    inner = getattr(model, getattr(model, "base_model_prefix", ""), None)
    return inner if isinstance(inner, nn.Module) else model


def _name(description: saved.Saved) -> str:
    model = description.meta.get("spec", description.meta.get("key", {})).get("model", "model")
    return f"{model}-{description.adapter}"


def load(directory: str | Path, revision: str | None = None, device: str = "cpu", max_length: int = 128, **_) -> CompressedEncoder:
    """The saved model in ``directory`` as an MTEB encoder (also ``ModelMeta.loader``)."""
    directory = Path(directory)
    model, tokenizer, description = saved.load(directory)
    encoder = backbone(model)
    weights = saved.checksums(directory)[saved.WEIGHTS][:16]
    meta = model_meta(_name(description), weights, encoder, max_tokens=max_length).model_copy(
        update={"loader": _loader, "loader_kwargs": {"directory": str(directory), "max_length": max_length}}
    )
    return CompressedEncoder(encoder, tokenizer, meta, device, max_length)


def _loader(name: str, revision: str | None = None, **kwargs) -> CompressedEncoder:
    return load(**kwargs)


def meta(directory: str | Path, max_length: int = 128) -> ModelMeta:
    """The ``ModelMeta`` of the saved model in ``directory`` (``meta.load_model()`` loads it)."""
    return load(directory, max_length=max_length).mteb_model_meta
