"""``harness leaderboard``: the Streamlit app over the results database, on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import sys
from importlib.resources import files
from typing import Annotated

import typer

from harness.cli.common import DbOption, user_errors
from harness.errors import ConfigError


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise ConfigError(f"port {port} on 127.0.0.1 is in use; pass another with --port") from None


def streamlit_command(port: int) -> list[str]:
    """``streamlit run`` on the app (:mod:`harness.leaderboard.serve`: its cold start overlapped with the
    browser's), loopback only, headless, no usage statistics, the viewer's toolbar only."""
    app = str(files("harness.leaderboard") / "app.py")
    return [
        sys.executable, "-m", "harness.leaderboard.serve", app, "--server.headless", "true",
        "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "viewer",  # no Deploy, Rerun or Clear cache: a reader of the board can use none of them
    ]


def leaderboard(
    db: DbOption = None,
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port on 127.0.0.1.")] = 8501,
) -> None:
    """Start the leaderboard (read-only) and print its URL; Ctrl+C stops it. A database `harness results`
    refuses (none at the path, a folder, not DuckDB, another schema) is refused alike."""
    from harness.leaderboard import queries
    from harness.results.store import default_path

    path = default_path(db)
    with user_errors():
        queries.check(path)
        _check_port_free(port)
    typer.echo(f"leaderboard on http://127.0.0.1:{port} (database {path}, read-only); Ctrl+C stops it")
    sys.stdout.flush()
    command = streamlit_command(port)
    os.execve(command[0], command, {**os.environ, "HARNESS_DB": str(path)})  # signals reach streamlit itself
