"""``streamlit run`` on the leaderboard with its cold start overlapped: while the server
starts and the browser connects, a thread imports what the page draws with (pandas, Plotly, DuckDB,
the page's modules) and reads the landing page's summary into the cache every session shares. The
first page view then finds them done, or waits for them (Python's import locks, Streamlit's per-entry
compute lock) instead of doing them twice. What only the significance groups need (scipy) is left to
them, so that it never holds the interpreter while a first page view draws its chart.

``python -m harness.leaderboard.serve APP [streamlit run options]``, with ``HARNESS_DB`` set
(``harness leaderboard`` runs this)."""

from __future__ import annotations

import contextlib
import sys
import threading

from harness.errors import HarnessError
from harness.results.store import default_path


def warm() -> None:
    """Import the page's modules and fill the landing page's cache entry (errors are the page's to show)."""
    from harness.leaderboard import app, reads  # noqa: F401  (pandas, plotly, duckdb, streamlit's elements)

    path = default_path()
    if path.exists() and path.stat().st_size:
        with contextlib.suppress(HarnessError):
            reads.cached("landing", str(path), reads.stamp(path))


def main() -> None:
    from streamlit.web import cli

    threading.Thread(target=warm, name="leaderboard-warm", daemon=True).start()
    sys.argv = ["streamlit", "run", *sys.argv[1:]]
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
