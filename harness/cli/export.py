"""``harness export`` (a run's compressed model as a loadable folder) and ``harness cache`` (the fit cache)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.cli.common import DbOption, RichProgress, quiet_transformers, user_errors
from harness.errors import ConfigError, printable

cache_app = typer.Typer(help="The fit cache: fitted adapters reused by every suite and rerun with the same key.", no_args_is_help=True)


def export(
    run_id: Annotated[str, typer.Argument(help="A finished run (harness list runs), or a unique prefix of its id.")],
    out: Annotated[Path, typer.Option("--out", help="Folder to write (created).")],
    db: DbOption = None,
) -> None:
    """Write a run's compressed model (safetensors + config + tokenizer + model card) for harness.load_compressed, lm-eval and MTEB."""
    from harness.results.store import Store
    from harness.runner import saved
    from harness.runner.export import export as run_export

    quiet_transformers()
    with user_errors(), RichProgress() as progress:
        folder = run_export(run_id, out, Store(db), progress)
    typer.echo(f"exported {saved.read(folder).meta['run_id']} to {printable(str(folder))}")  # the whole id, whatever prefix found it


def _cache():
    from harness.runner import fitcache

    folder = fitcache.root()
    if folder is None:
        raise ConfigError("the fit cache is off (HARNESS_FIT_CACHE=off); unset it to use the cache")
    return fitcache.FitCache(folder)


@cache_app.command("list")
def cache_list() -> None:
    """One line per cached fit: digest, model, adapter and settings, seed, fit seconds, size."""
    with user_errors():
        cache = _cache()
        entries = cache.entries()
    typer.echo(f"{len(entries)} cached fits in {printable(str(cache.folder))}")
    for e in entries:
        settings = " ".join(f"{k}={v}" for k, v in e.key["adapter_config"].items())
        typer.echo(f"{e.digest}  {e.key['model']}  {e.key['adapter']} {settings}  seed={e.key['seed']}  "
                   f"fit {e.fit_seconds:.1f}s  {e.size_bytes / 2**20:.1f} MiB  {e.created}")


@cache_app.command("clear")
def cache_clear(digest: Annotated[Optional[list[str]], typer.Argument(help="Entries to delete, by digest or a unique prefix (default: all).")] = None) -> None:
    """Delete cached fits (all, or the given digests); only folders the cache wrote are ever removed."""
    with user_errors():
        cache = _cache()
        removed = cache.clear(digest or None)
    for name in removed:
        typer.echo(f"removed {name}")
    typer.echo(f"removed {len(removed)} cached fits from {printable(str(cache.folder))}")
