"""Leaderboard page speed in headless Chromium: navigation to the Pareto chart's plot in
the DOM, cold (a fresh server) and warm (its cache filled), and the landing page's DOM size.

``python -m harness.benchmarks.leaderboard --db results.duckdb [--db /tmp/gen10k.duckdb] [--loads 5]``
(``python -m harness.benchmarks.leaderboard_store /tmp/gen10k.duckdb`` writes a 10,000-run store).
Chromium is driven over the DevTools protocol (the ``websockets`` client, which Streamlit's server brings):
each load navigates, then polls every 50 ms for ``.js-plotly-plot .main-svg``. A cold load is the
first after a server start (navigating as soon as its health check answers), one server per cold load;
warm loads follow on the last server. Chromium has loaded the page once before (a discarded load): "cold"
is the server's, not the browser's (without it the first database measured paid Chromium's empty HTTP
and code caches: 6.9 s against 3.5 s measured second, 2026-11-25). Pages open with every run shown (:data:`SHOWN`: stale runs too,
the heaviest view, and on a store whose runs all predate code fingerprints the only one with a chart).
Each row gives the machine's 1-minute load average before and after it: on a shared machine the
seconds move with it, so each load also records the CPU seconds the server and Chromium (each with its
child processes) used from navigation to the chart (``/proc/PID/stat``): the work itself, which
contention stretches but does not change.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from websockets.asyncio.client import connect

SHOWN = "/?stale=true"  # the page's query: stale runs included
CHART = "!!document.querySelector('.js-plotly-plot .main-svg')"
DOM_BYTES = "new Blob([document.documentElement.outerHTML]).size"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, timeout_s: float = 90) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return urllib.request.urlopen(url, timeout=2).read().decode()
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout_s} s")


class Browser:
    """Headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, chromium: str):
        self.port, self.profile = free_port(), tempfile.mkdtemp(prefix="bench-chromium-")
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             f"--remote-debugging-port={self.port}", f"--user-data-dir={self.profile}", "--window-size=1600,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        pages = json.loads(wait_for(f"http://127.0.0.1:{self.port}/json/list"))
        self.ws_url = next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")
        self.ids = 0

    async def _call(self, ws, method: str, **params):
        self.ids += 1
        await ws.send(json.dumps({"id": self.ids, "method": method, "params": params}))
        while True:
            reply = json.loads(await ws.recv())
            if reply.get("id") == self.ids:
                return reply.get("result", {})

    async def _load(self, url: str, timeout_s: float, screenshot: Path | None) -> tuple[float, int]:
        async with connect(self.ws_url, max_size=64 << 20) as ws:
            timed = await self._time(ws, url, timeout_s)
            if screenshot is not None:
                await asyncio.sleep(1.0)  # the chart's first frame is drawn; let the page settle
                shot = await self._call(ws, "Page.captureScreenshot", format="png")
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            return timed

    async def _time(self, ws, url: str, timeout_s: float) -> tuple[float, int]:
        await self._call(ws, "Page.navigate", url="about:blank")
        start = time.perf_counter()
        await self._call(ws, "Page.navigate", url=url)
        while time.perf_counter() - start < timeout_s:
            found = await self._call(ws, "Runtime.evaluate", expression=CHART)
            if found.get("result", {}).get("value"):
                elapsed = time.perf_counter() - start
                size = await self._call(ws, "Runtime.evaluate", expression=DOM_BYTES)
                return elapsed, int(size["result"]["value"])
            await asyncio.sleep(0.05)
        raise TimeoutError(f"no chart at {url} within {timeout_s} s")

    async def _evaluate(self, expression: str):
        async with connect(self.ws_url, max_size=64 << 20) as ws:
            reply = await self._call(ws, "Runtime.evaluate", expression=expression, returnByValue=True)
        return reply.get("result", {}).get("value")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression on the page now (JSON values; None for undefined)."""
        return asyncio.run(self._evaluate(expression))

    def wait_until(self, expression: str, timeout_s: float = 30):
        """The first truthy value of a JavaScript expression, polled until ``timeout_s``: parts of the
        page drawn after the chart (the overview's grid paints on its own schedule) are read once there."""
        deadline = time.monotonic() + timeout_s
        while not (value := self.evaluate(expression)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression!r} was still {value!r} after {timeout_s} s")
            time.sleep(0.1)
        return value

    async def _click(self, x: float, y: float) -> None:
        async with connect(self.ws_url, max_size=64 << 20) as ws:
            for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
                await self._call(ws, "Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def click(self, x: float, y: float) -> None:
        """A left click at (x, y) in the page's CSS pixels (a grid's header is canvas, not DOM)."""
        asyncio.run(self._click(x, y))

    async def _screenshot(self, path: Path) -> None:
        async with connect(self.ws_url, max_size=64 << 20) as ws:
            await asyncio.sleep(1.0)  # let the last frame settle
            shot = await self._call(ws, "Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))

    def screenshot(self, path: Path) -> None:
        """A PNG of the window as it is now."""
        asyncio.run(self._screenshot(path))

    def load(self, url: str, timeout_s: float = 60, screenshot: Path | None = None) -> tuple[float, int]:
        """Seconds from navigation to the chart in the DOM, and the DOM's bytes then; ``screenshot``:
        a PNG of the page once the chart is drawn."""
        return asyncio.run(self._load(url, timeout_s, screenshot))

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.profile, ignore_errors=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process and its descendants have used so far (Linux): each live
    process's own and its reaped children's (``cutime``, ``cstime``), so a renderer that exits
    meanwhile still counts (Chromium replaces its renderer when a page moves to a new server;
    counting live processes only, as before, took that renderer's whole past off the load measured)."""
    total, todo = 0.0, [pid]
    while todo:
        proc = Path(f"/proc/{todo.pop()}")
        try:
            fields = (proc / "stat").read_text().rpartition(")")[2].split()
            todo += [int(c) for task in (proc / "task").iterdir() for c in (task / "children").read_text().split()]
        except FileNotFoundError:  # exited meanwhile
            continue
        total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime
    return total


def timed_load(browser: Browser, proc: subprocess.Popen, url: str) -> tuple[float, int, float, float]:
    """Seconds to the chart, the DOM's bytes, and the CPU seconds the server and Chromium used meanwhile."""
    server, chromium = cpu_seconds(proc.pid), cpu_seconds(browser.proc.pid)
    seconds, size = browser.load(url)
    return seconds, size, cpu_seconds(proc.pid) - server, cpu_seconds(browser.proc.pid) - chromium


def serve(db: Path, query: str = SHOWN) -> tuple[subprocess.Popen, str]:
    """``harness leaderboard`` on ``db`` (a free port), once healthy; the page's URL with ``query``."""
    port = free_port()
    harness = Path(sys.executable).with_name("harness")
    proc = subprocess.Popen([str(harness), "leaderboard", "--db", str(db), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_for(f"{url}/_stcore/health")
    return proc, url + query


def _median(loads: list[tuple], i: int) -> float:
    return statistics.median(r[i] for r in loads)


def measure(db: Path, browser: Browser, loads: int) -> dict:
    """Median seconds to the chart over ``loads`` cold loads (a fresh server each) and ``loads`` warm
    loads (the last server, its cache filled), and the DOM's bytes at the chart."""
    cold, warm, load_before = [], [], os.getloadavg()[0]
    for _ in range(loads):
        proc, url = serve(db)
        try:
            cold.append(timed_load(browser, proc, url))
        finally:
            if len(cold) < loads:
                proc.terminate()
                proc.wait(timeout=30)
    try:
        warm += [timed_load(browser, proc, url) for _ in range(loads)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"db": str(db), "cold_s": _median(cold, 0), "warm_s": _median(warm, 0), "dom_kb": max(r[1] for r in cold + warm) / 1024,
            "cold_cpu_s": _median(cold, 2), "warm_cpu_s": _median(warm, 2), "cold_browser_cpu_s": _median(cold, 3),
            "warm_browser_cpu_s": _median(warm, 3), "cold_all": [r[0] for r in cold],
            "warm_all": [r[0] for r in warm], "load": [load_before, os.getloadavg()[0]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, action="append", required=True, help="a results database (repeat for several)")
    parser.add_argument("--loads", type=int, default=5, help="loads per measurement (medians)")
    parser.add_argument("--screenshot", type=Path, help="also write a PNG of the first database's page (docs/leaderboard.png)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("error: chromium is not installed (apt-get install -y chromium)")
    browser = Browser(chromium)
    try:
        proc, url = serve(args.db[0])  # Chromium's first page: fills its HTTP and code caches (else the first database pays)
        browser.load(url, screenshot=args.screenshot)
        proc.terminate()
        proc.wait(timeout=30)
        rows = [measure(db, browser, args.loads) for db in args.db]
    finally:
        browser.close()
    print("| database | cold s | warm s | server CPU s cold / warm | Chromium CPU s cold / warm | DOM KB (max) | load average (before, after) |\n"
          "|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['db']} | {r['cold_s']:.2f} | {r['warm_s']:.2f} | {r['cold_cpu_s']:.2f} / {r['warm_cpu_s']:.2f} "
              f"| {r['cold_browser_cpu_s']:.2f} / {r['warm_browser_cpu_s']:.2f} | {r['dom_kb']:.0f} | {r['load'][0]:.1f}, {r['load'][1]:.1f} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
