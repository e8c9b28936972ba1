"""`harness leaderboard` in a real browser: headless Chromium, driven over
the DevTools protocol by the leaderboard benchmark's :class:`Browser`, opens the page on the session's
smoke runs, on a generated store of two models and five suites, and on the committed store; the
overview table and the Pareto chart's plot must be drawn (not Streamlit's skeleton) within the budget,
a %Base column sorts as numbers, the bytes axis puts int8 at a quarter of the base's bytes, the
Efficiency tab draws only ratios to the base timed in the same run, the overview ranks a row only
among rows of its model, suites and baselines, and the page opens on the main job's chart with its
intervals drawn as error bars. Skipped, with the reason, only where chromium is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest
from harness.benchmarks.leaderboard import Browser, free_port
from harness.leaderboard.app import TITLE
from harness.leaderboard.landing import WIDTHS
from typer.testing import CliRunner

from harness.cli import app
from harness.leaderboard.queries import headline_rows
from harness.results import summary
from harness.results.store import Store
from tests.conftest import read_sql

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BUDGET_S = 90  # navigation to the plot on a fresh server; about 5-10 s on two shared cores at load average 8
DOM_KB = 500   # the page size goal (docs/performance.md)
# the overview's grid (the first data frame) as rows of cell texts, read from its accessible table
OVERVIEW = ("Array.from(document.querySelector('[data-testid=\"stDataFrame\"] table')?.rows ?? [])"
            ".map(r => Array.from(r.cells).map(c => c.innerText.trim()))")
OVERVIEW_DRAWN = f"(rows => rows.length > 1 && rows)({OVERVIEW})"  # a header and at least one row, else false
LEGEND = "Array.from(document.querySelectorAll('.js-plotly-plot .legendtext')).map(e => e.textContent)"
POINTS = "document.querySelectorAll('.js-plotly-plot .scatterlayer .point').length"
TRACES = "JSON.stringify(document.querySelector('.js-plotly-plot')._fullData.map(t => [t.name, Array.from(t.x ?? [])]))"
GRID = "JSON.stringify(document.querySelector('[data-testid=\"stDataFrame\"] canvas').getBoundingClientRect())"
SKELETONS = "document.querySelectorAll('[data-testid=\"stSkeleton\"]').length"
MENU = "!!document.querySelector('[data-testid=\"stMainMenu\"]')"
DEPLOY = "!!document.querySelector('[data-testid=\"stAppDeployButton\"]')"  # Streamlit's "Deploy": nothing a reader can use


def _wait_healthy(url: str, server: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, f"harness leaderboard exited with {server.returncode}"
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"{url}/_stcore/health did not answer ok within {timeout_s} s")


def _serve(db: Path):
    port = free_port()
    harness = Path(sys.executable).with_name("harness")
    proc = subprocess.Popen(
        [str(harness), "leaderboard", "--db", str(db), "--port", str(port)],
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


@pytest.fixture
def server(leaderboard_db):
    yield from _serve(leaderboard_db)


def _copied(run: str, suffix: str, pct_base: float) -> list[str]:
    """SQL copying smoke run ``run`` as another configuration (m=``suffix``: a setting the fit does not resolve)
    whose headline %Base is ``pct_base``."""
    new = f"{run}-{suffix}"
    return [
        f"INSERT INTO runs SELECT * REPLACE ('{new}' AS run_id, config_hash || '{new}' AS config_hash, variant || '{new}' AS variant, "
        f"json_merge_patch(adapter_config, '{{\"m\": {suffix}}}') AS adapter_config) FROM runs WHERE run_id = '{run}'",
        f"INSERT INTO scores SELECT * REPLACE ('{new}' AS run_id, {pct_base} AS pct_base) FROM scores WHERE run_id = '{run}'",
        f"INSERT INTO comparisons SELECT * REPLACE ('{new}' AS run_id) FROM comparisons WHERE run_id = '{run}'",
        f"INSERT INTO compression SELECT * REPLACE ('{new}' AS run_id) FROM compression WHERE run_id = '{run}'",
    ]


@pytest.fixture(scope="module")
def sorting_db(leaderboard_db, tmp_path_factory) -> Path:
    """The smoke store with a real int8 smoke run (quant; the baseline reused) and two copies of the ASG
    run as other configurations at 102.6 and 83.7 %Base: as text, "102.6 [...]" sorts before "83.7"."""
    db = tmp_path_factory.mktemp("sorting") / "results.duckdb"
    shutil.copy(leaderboard_db, db)
    ran = CliRunner().invoke(app, ["run", "--suite", "xnli", "--adapter", "quant", "--model", "minilm", "--profile", "smoke", "--db", str(db)])
    assert ran.exit_code == 0, ran.output
    asg = read_sql(db, "SELECT run_id FROM runs WHERE adapter = 'asg'").run_id.item()
    with duckdb.connect(str(db)) as con:
        for sql in [*_copied(asg, "24", 102.6), *_copied(asg, "12", 83.7)]:
            con.execute(sql)
    return db


@pytest.fixture
def sorting_server(sorting_db):
    yield from _serve(sorting_db)


@pytest.fixture
def browser():
    chromium = Browser(CHROMIUM)
    yield chromium
    chromium.close()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_overview_table_and_pareto_plot_are_drawn_in_chromium(server, browser, leaderboard_db):
    """The first load after the server starts: the plot appears within the budget, the overview grid
    holds the ASG row with the %Base the summary stores, and the chart's legend names both adapters."""
    seconds, dom_bytes = browser.load(server, timeout_s=BUDGET_S)
    print(f"chart after {seconds:.1f} s, DOM {dom_bytes / 1024:.0f} KB")
    assert browser.evaluate("document.title") == TITLE
    assert browser.wait_until(f"{SKELETONS} === 0", timeout_s=BUDGET_S)  # no element left as a loading skeleton
    header, *rows = browser.wait_until(OVERVIEW_DRAWN, timeout_s=BUDGET_S)  # the grid may paint after the chart
    assert header[:2] == ["method", "rank"] and "xnli" in header
    asg = summary.read(Store(leaderboard_db)).set_index("adapter").loc["asg"]
    row = next(r for r in rows if r[0].startswith("asg"))
    assert float(row[header.index("xnli")]) == pytest.approx(asg.pct_base)  # the cell's number (drawn with its interval)
    assert row[header.index("rank")] == "1 of 1"
    assert {"asg", "none"} <= set(browser.evaluate(LEGEND))  # (no frontier: the smoke baseline is at chance)
    assert browser.evaluate(POINTS) >= 2
    assert dom_bytes < DOM_KB * 1024
    assert browser.evaluate(MENU) and not browser.evaluate(DEPLOY)  # the viewer's toolbar (menu: print, theme) only


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_a_percent_base_column_sorts_as_numbers_and_the_bytes_axis_puts_int8_at_a_quarter(sorting_server, browser, sorting_db):
    """clicking the xnli header sorts its cells by %Base (83.7 < asg's < 102.6; as text "102.6"
    came first); on the default compression axis, bytes stored, int8 keeps about 25% of the base's bytes
    (one byte a value plus a scale per row, against four), in the overview and on the chart's x."""
    browser.load(sorting_server, timeout_s=BUDGET_S)
    header, *rows = browser.wait_until(OVERVIEW_DRAWN, timeout_s=BUDGET_S)
    column = header.index("xnli")
    quant = next(r for r in rows if r[0].startswith("quant"))
    assert float(quant[header.index("bytes kept")]) == pytest.approx(0.25, abs=0.01)
    assert float(quant[header.index("params kept")]) == pytest.approx(1.0)
    traces = dict(json.loads(browser.evaluate(TRACES)))
    assert traces["quant"] == [pytest.approx(float(quant[header.index("bytes kept")]))]
    grid = json.loads(browser.evaluate(GRID))
    leading = list(WIDTHS.values())[:-1]
    assert header[: len(leading)] == list(WIDTHS)[:-1]
    x = grid["x"] + sum(leading) + (column - len(leading) + 0.5) * WIDTHS["suite"]
    browser.click(x, grid["y"] + 15)  # the xnli header (the grid is a canvas)
    ascending = browser.wait_until(
        f"(rows => rows[1][{column}] !== {json.dumps(rows[0][column])} && rows.slice(1).map(r => r[{column}]))({OVERVIEW})", timeout_s=30)
    values = [float(v) for v in ascending if v]
    assert len(values) == 4 and values == sorted(values) and values[0] == pytest.approx(83.7) and values[-1] == pytest.approx(102.6)


EFFICIENCY = ("JSON.stringify(Array.from(document.querySelectorAll('.js-plotly-plot')).map(p => ({titles: Array.from(p.querySelectorAll("
              "'.annotation-text')).map(e => e.textContent), traces: p._fullData.map(t => [t.name, Array.from(t.x ?? [])])})))")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_the_efficiency_tab_shows_only_in_run_ratios(server, browser, leaderboard_db):
    """the Efficiency tab's figures are the ASG run's p50 latency, throughput and peak memory
    over the unchanged model's timed in the same process (its ``base:forward`` phase); no millisecond,
    token or megabyte figure is drawn, and the baseline run (another process) has no bar beside it."""
    browser.load(f"{server}/?tab=Efficiency", timeout_s=BUDGET_S)
    (figure,) = json.loads(browser.wait_until(f"(f => JSON.parse(f).length && f)({EFFICIENCY})", timeout_s=BUDGET_S))
    timed = read_sql(leaderboard_db, "SELECT e.* FROM efficiency e JOIN runs r USING (run_id) WHERE r.adapter = 'asg'").set_index("phase")
    ratios = {"p50 latency × base": "p50_ms", "throughput × base": "throughput", "peak memory × base": "peak_mem_mb"}
    assert figure["titles"] == list(ratios)
    drawn = dict(figure["traces"])
    assert drawn == {name: [pytest.approx(timed[c]["forward"] / timed[c]["base:forward"])] for name, c in ratios.items()}
    page = browser.evaluate("document.body.innerText")
    assert " ms" not in page.split("Efficiency", 1)[1].replace("milliseconds", ""), "no absolute timing on the tab"


@pytest.fixture(scope="module")
def generated_db(tmp_path_factory) -> Path:
    """The benchmark's generated store at 120 runs (ASG at four k, two models, five suites, their
    baselines), with k=512 run on xnli only and k=64 not on qa: three groups of coverage."""
    from harness.benchmarks import leaderboard_store

    db = tmp_path_factory.mktemp("generated") / "results.duckdb"
    leaderboard_store.generate(db, runs=120)
    with duckdb.connect(str(db)) as con:
        con.execute("""DELETE FROM runs WHERE adapter = 'asg' AND (adapter_config->>'k' = '512' AND suite <> 'xnli'
                       OR adapter_config->>'k' = '64' AND suite = 'qa')""")
    return db


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_the_landing_view_never_ranks_a_row_above_a_row_of_another_suite_or_model(generated_db, browser):
    """As drawn: for each model the grid holds that model's configurations only, and every
    run of ranks (1 of n ... n of n) is rows covering the same suites; its order is by mean %Base."""
    expected = headline_rows(Store(generated_db)).query("adapter != 'none'")
    served = _serve(generated_db)
    url = next(served)
    try:
        for model in sorted(expected.model.unique()):
            every = "&".join(f"columns-{model}={s}" for s in sorted(expected.suite.unique()))
            browser.load(f"{url}/?rows={model}&{every}", timeout_s=BUDGET_S)
            header, *rows = browser.wait_until(OVERVIEW_DRAWN, timeout_s=BUDGET_S)
            suites = [c for c in header if c in set(expected.suite)]
            assert len(suites) == 5
            ours = expected[expected.model.eq(model)]
            assert {r[0].split()[0] for r in rows} <= set(ours.adapter) and len(rows) == ours.drop_duplicates(["adapter", "config"]).shape[0]
            covered = [tuple(bool(r[header.index(s)]) for s in suites) for r in rows]
            ranks = [tuple(map(int, r[header.index("rank")].split(" of "))) for r in rows]
            for i, (k, n) in enumerate(ranks):
                first = i - (k - 1)
                assert all(covered[j] == covered[i] for j in range(first, first + n)), (model, rows[i])
                if k > 1:
                    assert _mean(rows[i - 1], header, suites) >= _mean(rows[i], header, suites)
            assert len(set(covered)) == 3, "the store's three groups, none ranked against another"
    finally:
        served.close()


def _mean(row: list[str], header: list[str], suites: list[str]) -> float:
    """A grid row's mean %Base over the suite cells it fills (the cells' numbers)."""
    values = [float(row[header.index(s)]) for s in suites if row[header.index(s)]]
    return sum(values) / len(values)


COMMITTED = Path(__file__).resolve().parents[1] / "results.duckdb"
CHART = "document.querySelector('[data-testid=\"stSelectbox\"] input')?.value"  # the chart picker's choice
ERROR_BARS = "Array.from(document.querySelectorAll('.js-plotly-plot .errorbar path')).filter(p => p.getBBox().height > 2).length"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
@pytest.mark.skipif(not COMMITTED.exists(), reason="no committed results.duckdb in this checkout")
def test_the_committed_store_opens_on_the_main_jobs_chart_with_its_intervals_drawn(browser, tmp_path):
    """on the committed store (stale runs shown: its runs are re-made at the end of a wave), the
    chart picker opens on XNLI · me5-small, the main job's suite and model, and its Pareto points carry
    visible error bars (their paired 95% intervals), not only hover text."""
    db = tmp_path / "results.duckdb"
    shutil.copy(COMMITTED, db)
    served = _serve(db)
    url = next(served)
    try:
        browser.load(f"{url}/?stale=true", timeout_s=BUDGET_S)
        assert browser.wait_until(CHART, timeout_s=BUDGET_S).startswith("xnli · me5-small")
        assert browser.wait_until(ERROR_BARS, timeout_s=BUDGET_S) >= 3
    finally:
        served.close()
