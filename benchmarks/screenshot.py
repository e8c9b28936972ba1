"""The README's picture of the leaderboard's landing view (docs/leaderboard.png), from a store:

``python -m harness.benchmarks.screenshot --db results.duckdb --out docs/leaderboard.png``

Starts ``harness leaderboard`` on the store, opens the page as a reader first sees it (no query: the
default filters and chart, stale runs hidden; ``--stale`` shows them, for a store made by other code
than the installed one until it is re-made) in headless Chromium (:class:`harness.benchmarks.leaderboard.Browser`),
waits until the overview grid and the chart are drawn and the page's script has finished, and writes a
PNG of the window."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from harness.benchmarks.leaderboard import Browser, serve

DRAWN = ("!!document.querySelector('.js-plotly-plot .main-svg') && "
         "!!document.querySelector('[data-testid=stDataFrame] canvas') && "
         "document.querySelectorAll('[data-testid=stSkeleton]').length === 0 && "
         "!document.querySelector('[data-testid=stStatusWidget]')")  # the script has finished (the chart's significance groups)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="the results database to show")
    parser.add_argument("--out", type=Path, default=Path("docs/leaderboard.png"), help="the PNG to write")
    parser.add_argument("--stale", action="store_true", help="include stale runs (?stale=true)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("error: chromium is not installed (apt-get install -y chromium)")
    if not args.db.is_file():
        sys.exit(f"error: no results database at {args.db}; pass --db PATH")
    browser = Browser(chromium)
    proc, url = serve(args.db, query="/?stale=true" if args.stale else "/")
    try:
        browser.load(url, timeout_s=120)
        browser.wait_until(DRAWN, timeout_s=120)
        browser.screenshot(args.out)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
