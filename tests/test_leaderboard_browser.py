"""`harness leaderboard` in a real browser: headless Chromium loads the page, screenshots it and
dumps the DOM. Skipped, with the reason, only where chromium is not installed."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from harness.leaderboard.app import TITLE
from harness.leaderboard.plots import FRONTIER_NAME

from harness.results.store import Store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(url: str, server: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, f"harness leaderboard exited with {server.returncode}"
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"{url}/_stcore/health did not answer ok within {timeout_s} s")


def _chromium(profile: Path, url: str, *action: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         *action, "--window-size=1280,900", "--virtual-time-budget=15000", url],
        capture_output=True, text=True, timeout=120,
    )


@pytest.fixture
def server(leaderboard_db):
    port = _free_port()
    harness = Path(sys.executable).with_name("harness")
    proc = subprocess.Popen(
        [str(harness), "leaderboard", "--db", str(leaderboard_db), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert url in proc.stdout.readline()  # the command prints its URL first
        _wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_page_shows_title_and_adapters_in_chromium(server, leaderboard_db, tmp_path):
    adapters = set(Store(leaderboard_db).query("SELECT DISTINCT adapter FROM runs WHERE adapter <> 'none'").adapter)
    profile, shot = tmp_path / "chromium-profile", tmp_path / "leaderboard.png"
    # The first loads after a server start render a skeleton or half a page (the script is still
    # running when headless Chromium stops); reload until the Pareto chart is drawn, at most 20 times (a loaded machine needs more).
    for _ in range(20):
        dom = _chromium(profile, server, "--dump-dom", f"--screenshot={shot}").stdout
        if FRONTIER_NAME in dom and any(f">{name}<" in dom for name in adapters):  # chart and its legend drawn
            break
    print(f"screenshot: {shot}")
    assert TITLE in dom
    assert FRONTIER_NAME in dom, "the Pareto chart was not drawn after 20 loads"
    assert any(f">{name}<" in dom for name in adapters), f"none of {adapters} appears on the page"
    assert shot.stat().st_size > 30_000  # a skeleton page is about 6 KB
