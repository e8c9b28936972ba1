"""The leaderboard app (AppTest) over databases from real smoke runs, and `harness reference load`."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys

import duckdb
import numpy as np
import pandas as pd
import pytest
from harness.benchmarks import leaderboard_store
from harness.leaderboard import overview, significance
from harness.leaderboard.frames import (
    AXES,
    budget_bins,
    config_label,
    key_settings,
    matching_papers,
    over_seeds,
    pareto_frontier,
    recovery_curves,
)
from harness.leaderboard.landing import fraction_label, views
from harness.leaderboard.overview import SYMBOLS
from harness.leaderboard.pages import NO_MATCH
from harness.leaderboard.plots import AT_CHANCE_SYMBOL, FRONTIER_NAME, GROUP_GLYPHS, GROUP_SYMBOLS, PAPERS_NAME, log_ticks
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from harness.cli import app
from harness.results import summary
from harness.results.records import ItemOutputs
from harness.results.reference import read_paper_results
from harness.results.store import Store
from tests.conftest import REPO, read_sql

APP = str(REPO / "leaderboard" / "app.py")


def _render(db, monkeypatch, **query) -> AppTest:
    """The app on ``db``, its URL's query parameters ``query`` (``tab="Table"``, ``method="none"``)."""
    monkeypatch.setenv("HARNESS_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def _shown(at: AppTest, i: int = 0) -> pd.DataFrame:
    """Data frame ``i`` as the page draws it (pandas Styler's display values: the overview's suite cells
    are numbers, drawn with their interval and markers)."""
    from streamlit import dataframe_util

    return dataframe_util.convert_arrow_bytes_to_pandas_df(at.dataframe[i].proto.arrow_data.styler.display_values)


def _charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def _values(array) -> list:
    """A plotly array as a list (plotly sends numeric arrays as base64 ``bdata``)."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def _results_json(db) -> list[dict]:
    result = CliRunner().invoke(app, ["results", "--db", str(db), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_reference_load_is_idempotent(tmp_path):
    db = tmp_path / "papers.duckdb"
    for _ in range(2):
        result = CliRunner().invoke(app, ["reference", "load", "--db", str(db)])
        assert result.exit_code == 0, result.output
    rows = read_sql(db, "SELECT * FROM paper_results")
    assert len(rows) == len(read_paper_results()) == 1342
    # paper 000 Table 1, XLM-R zero-shot: printed %Base 67.39 is a typo; 68.05 / 71.94 is what we plot
    row = rows[(rows.paper == "asg") & (rows.base_model == "xlm-r") & (rows.setting == "zero-shot") & (rows.metric == "accuracy") & (rows.method == "asg")]
    assert row.pct_base_printed.item() == pytest.approx(67.39)
    assert row.pct_base.item() == pytest.approx(68.05 / 71.94 * 100)
    assert row.emb_param_fraction.item() == pytest.approx(0.004)
    assert set(rows.suite) >= {"xnli", "qa", "mteb_clf", "word_sim"}


def test_reference_load_bad_csv_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("paper,value\nasg,1\n")
    result = CliRunner().invoke(app, ["reference", "load", "--db", str(tmp_path / "x.duckdb"), "--csv", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "lacks columns" in result.stderr and len(result.stderr.splitlines()) == 1


def test_leaderboard_on_a_taken_port_is_one_line_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["leaderboard", "--db", str(tmp_path / "r.duckdb"), "--port", str(port)])
    assert result.exit_code == 2
    assert result.stderr == f"error: port {port} on 127.0.0.1 is in use; pass another with --port\n"


def test_app_renders_all_tabs(leaderboard_db, monkeypatch):
    at = _render(leaderboard_db, monkeypatch)
    assert at.title[0].value == "Compressed-embedding leaderboard"
    assert [t.label for t in at.tabs] == ["Pareto", "Recovery", "Table", "Languages", "Efficiency", "Run detail"]
    assert len(_charts(at)) == 1, "only the open tab draws"
    heatmap = _charts(_render(leaderboard_db, monkeypatch, tab="Languages"))[0]
    assert heatmap["data"][0]["type"] == "heatmap"
    assert heatmap["data"][0]["x"][-1] == "avg" and len(heatmap["data"][0]["x"]) == 16
    detail = _render(leaderboard_db, monkeypatch, tab="Run detail")
    assert any("asg" in option for option in detail.selectbox[1].options)
    timings = [df.value for df in _render(leaderboard_db, monkeypatch, tab="Efficiency").dataframe if "latency × base" in df.value.columns]
    assert timings and all(set(t["timed on"]) == {"cpu"} for t in timings), "each timing says the device it was timed on"


def test_landing_opens_on_the_overview_table(leaderboard_db, monkeypatch):
    """The first element after the title is the overview: the ASG row with its xnli cell holding
    %Base and its paired interval as `harness results` gives them; the baseline has no row."""
    at = _render(leaderboard_db, monkeypatch)
    first = at.main.children[min(i for i, c in at.main.children.items() if c.type in ("arrow_data_frame", "plotly_chart", "dataframe"))]
    overview, shown = at.dataframe[0].value, _shown(at)
    assert first.type != "plotly_chart"
    assert list(overview.method) == ["asg"] and list(overview.model) == ["minilm"] and list(overview.suites) == [1]
    avg = next(r for r in _results_json(leaderboard_db) if r["adapter"] == "asg" and r["language"] == "avg")
    assert overview.xnli[0] == pytest.approx(avg["pct_base"]), "a number: the column sorts as numbers"
    assert shown.xnli[0].startswith(f"{avg['pct_base']:.1f} [")  # drawn with its paired interval
    assert overview["params kept"][0] == pytest.approx(avg["emb_param_fraction"])
    stored = read_sql(leaderboard_db, "SELECT storage_fraction FROM compression JOIN runs USING (run_id) WHERE adapter = 'asg'")
    assert overview["bytes kept"][0] == pytest.approx(stored.storage_fraction.item()) and shown.budget[0].endswith("%")
    assert pd.isna(overview["avg %Base"][0]) and shown["avg %Base"][0] == "", "no other row covers the same suites: an empty cell"


def test_filters_live_in_the_url(leaderboard_db, monkeypatch):
    """A view is shared by its URL: ?method=none leaves no method row; ?papers=false hides the papers' points."""
    at = _render(leaderboard_db, monkeypatch, method="none")
    assert at.info[0].value == "No finished runs match the filters in the sidebar."
    names = [t["name"] for t in _charts(_render(leaderboard_db, monkeypatch, papers="false"))[0]["data"]]
    assert PAPERS_NAME not in names and FRONTIER_NAME in names


def test_pareto_has_one_trace_per_adapter_and_the_papers(leaderboard_db, monkeypatch):
    at = _render(leaderboard_db, monkeypatch, axis="parameters")
    pareto = _charts(at)[0]
    names = [t["name"] for t in pareto["data"]]
    adapters = sorted(read_sql(leaderboard_db, "SELECT DISTINCT adapter FROM runs").adapter)
    assert names == [FRONTIER_NAME, *adapters, PAPERS_NAME]
    assert pareto["layout"]["xaxis"]["type"] == "log"
    papers = pareto["data"][-1]
    assert papers["marker"]["symbol"] == "circle-open"
    # paper 000 Table 1, XNLI accuracy, only the zero-shot setting of these train=en runs: 2 models x (asg, sg)
    assert sorted(papers["text"]) == ["asg paper · mbert"] * 2 + ["asg paper · xlm-r"] * 2
    asg = pareto["data"][names.index("asg")]
    avg = [r for r in _results_json(leaderboard_db) if r["adapter"] == "asg" and r["language"] == "avg"]
    assert _values(asg["x"]) == pytest.approx([avg[0]["emb_param_fraction"]])
    assert _values(asg["y"]) == pytest.approx([avg[0]["pct_base"]])

    at.toggle(key="papers").set_value(False).run()
    assert PAPERS_NAME not in [t["name"] for t in _charts(at)[0]["data"]]


def test_the_compression_axis_is_bytes_stored_unless_parameters_are_chosen(leaderboard_db, monkeypatch):
    """Issue 45.2: by default the chart's x is the embedding's bytes stored as a share of the base's (the
    papers print parameter shares only: their points show on the parameters axis); ?axis=parameters switches."""
    stored = read_sql(leaderboard_db, "SELECT storage_fraction, emb_param_fraction FROM compression JOIN runs USING (run_id) WHERE adapter = 'asg'")
    for query, column, papers in (({}, "storage_fraction", False), ({"axis": "parameters"}, "emb_param_fraction", True)):
        pareto = _charts(_render(leaderboard_db, monkeypatch, **query))[0]
        names = [t["name"] for t in pareto["data"]]
        assert _values(pareto["data"][names.index("asg")]["x"]) == pytest.approx([stored[column].item()])
        assert (PAPERS_NAME in names) == papers
        assert ("bytes" in pareto["layout"]["xaxis"]["title"]["text"]) != papers
    assert stored.storage_fraction.item() != pytest.approx(stored.emb_param_fraction.item())  # ASG's ConceptID map costs bytes


def test_the_overview_ranks_a_configuration_within_its_compression_budget(sweep_db):
    """Rows grouped by budget on the chosen axis (most compressed first), ranked by mean %Base within
    it; a table that keeps every parameter in a quarter of the bytes (int8) sits in the 25-50% budget on
    the bytes axis and with the unchanged model's on the parameters axis, and the significance budgets follow."""
    rows = summary.read(Store(sweep_db))
    sg = rows[rows.adapter.eq("sg")].iloc[0]  # one configuration, on every suite, relabelled as an int8 table
    same = rows.model.eq(sg.model) & rows.profile.eq(sg.profile)
    int8 = same & rows.adapter.eq("sg") & rows.config.eq(sg.config)
    rows.loc[int8, ["emb_param_fraction", "storage_fraction"]] = [1.0, 0.25]
    for axis in AXES.values():
        view = overview.build(rows, axis=axis)
        bins = budget_bins(view.display[{"bytes": "bytes kept", "parameters": "params kept"}[axis.key]])
        assert bins.is_monotonic_increasing and bins.notna().all()
        for _, part in view.display.groupby(bins):
            assert part[view.suites].mean(axis=1).is_monotonic_decreasing
        label = view.display.budget[view.display["params kept"].eq(1.0)].unique()
        assert list(label) == (["25–50%"] if axis.key == "bytes" else ["100–200%"])
        chart = same & rows.suite.eq(sg.suite)
        pairs = significance.plan(rows[chart], axis.column).set_index("variant")
        assert set(pairs.budget[rows.variant[int8 & chart].unique()]) == ({-2.0} if axis.key == "bytes" else {0.0})


def test_labels_tell_configurations_apart_and_read_as_typed():
    configs = [{"K": 3, "allocation": "clustered", "recover": 1000}, {"K": 3, "allocation": "clustered", "recover": 1000, "recover_lora": True},
               {"K": 3, "allocation": "random", "recover": 100}]
    rows = pd.DataFrame({"adapter": ["ksub"] * 3, "config": [json.dumps(c) for c in configs]})
    assert list(key_settings(rows)) == ["ksub allocation=clustered recover=1000", "ksub allocation=clustered recover=1000 +LoRA",
                                        "ksub allocation=random recover=100"]
    assert config_label(json.dumps(configs[1])) == "K=3 allocation=clustered recover=1000 +LoRA"


def test_table_equals_harness_results_json(leaderboard_db, monkeypatch):
    at = _render(leaderboard_db, monkeypatch, tab="Table")
    table = next(df.value for df in at.dataframe if "%Base" in df.value.columns)
    expected = {r["run_id"]: r for r in _results_json(leaderboard_db) if r["language"] == "avg"}
    assert sorted(table.run_id) == sorted(expected)
    for row in table.to_dict("records"):
        want = expected[row["run_id"]]
        assert (row["adapter"], row["model"], row["profile"], row["metric"]) == (want["adapter"], want["model"], want["profile"], want["metric"])
        got = [row["score"], row["CI low"], row["CI high"], row["%Base"], row["params kept"], row["storage MB"] * 1e6]
        assert got == pytest.approx([want[k] for k in ("value", "ci_low", "ci_high", "pct_base", "emb_param_fraction", "storage_bytes")])
    assert table.set_index("adapter")["latency × base"]["none"] == pytest.approx(1.0)
    assert at.get("download_button")


def test_downloads_hold_the_table_and_run_detail_shows_the_export_command(leaderboard_db, monkeypatch):
    import io

    from harness.leaderboard.frames import parquet_bytes

    at = _render(leaderboard_db, monkeypatch, tab="Table")
    table = next(df.value for df in at.dataframe if "%Base" in df.value.columns)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download CSV", "Download Parquet"]
    back = pd.read_parquet(io.BytesIO(parquet_bytes(table)))
    pd.testing.assert_frame_equal(back, table.reset_index(drop=True))
    at = _render(leaderboard_db, monkeypatch, tab="Run detail")
    shown = at.selectbox[1].value
    commands = [c.value for c in at.code]
    assert [f"harness export {shown.split(' · ')[0]} --out exported/{shown.split(' · ')[0]}"] == commands


@pytest.mark.parametrize("kind", ["missing", "empty file", "papers only"])
def test_first_run_message(kind, tmp_path, monkeypatch):
    db = tmp_path / "results.duckdb"
    if kind == "empty file":
        db.touch()
    elif kind == "papers only":
        assert CliRunner().invoke(app, ["reference", "load", "--db", str(db)]).exit_code == 0
    at = _render(db, monkeypatch)
    message = at.info[0].value
    assert "No runs in" in message and "harness run --suite xnli --adapter asg" in message
    assert not at.get("plotly_chart")


def test_busy_database_shows_a_note_not_a_crash(leaderboard_db, monkeypatch):
    at = _render(leaderboard_db, monkeypatch)
    hold = "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(120)"
    writer = subprocess.Popen([sys.executable, "-c", hold, str(leaderboard_db)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "held"
        os.utime(leaderboard_db)  # as a writer's commit would: the cached answers are stale now
        at.run()
        assert not at.exception
        assert "database is busy" in at.warning[0].value and "showing what was read at" in at.warning[0].value
        assert _charts(at), "the last snapshot stays on screen"
        fresh = AppTest.from_file(APP, default_timeout=60).run()  # a new session has nothing to fall back on
        assert not fresh.exception and "nothing read yet" in fresh.warning[0].value
    finally:
        writer.kill()
        writer.wait()


def test_pareto_frontier_is_the_staircase_of_undominated_points():
    points = pd.DataFrame({"emb_param_fraction": [1.0, 0.01, 0.02, 0.001, 0.05], "pct_base": [100.0, 97.0, 96.0, 95.0, 99.0]})
    frontier = pareto_frontier(points)
    assert list(zip(frontier.emb_param_fraction, frontier.pct_base)) == [(0.001, 95.0), (0.01, 97.0), (0.05, 99.0), (1.0, 100.0)]


def test_runs_without_a_setting_share_one_chart_whether_stored_as_null_or_empty():
    """Older runs stored no setting as NULL, newer as "": both select the same rows (one chart, labelled
    "no setting" beside the same view with a setting)."""
    view = {"suite": "bpb", "model": "smollm2", "profile": "quick", "task": "wikitext2", "metric": "bits_per_byte", "shots": None}
    summary = pd.DataFrame([{**view, "setting": s} for s in (None, "", "post-hoc")])
    assert list(views(summary, ["bpb"]).label) == [
        "bpb · smollm2 · quick · wikitext2 bits_per_byte · no setting", "bpb · smollm2 · quick · wikitext2 bits_per_byte · post-hoc"]


def test_log_ticks_are_1_2_5_per_decade_within_the_range():
    ticks = log_ticks(0.0003, 1.6)
    assert ticks == pytest.approx([0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0])
    assert all(0.0003 <= t <= 1.6 for t in ticks)


def test_paper_points_match_a_prompted_task_only_at_the_same_shot_count():
    """Paper 003's rows (packaged CSV) say "5-shot" in their notes: a 5-shot ARC-Challenge run meets its
    ARC points (lm-eval ``acc`` = the paper's ``accuracy``), a 0-shot run meets none; an unprompted
    task (shots None) matches as before."""
    papers = pd.DataFrame([dataclasses.asdict(r) for r in read_paper_results()])
    five = matching_papers(papers, "lm_eval", "arc_challenge", "acc", 5)
    assert len(five) and set(five.paper) == {"vocabdiet"} and set(five.task) == {"ARC"} and set(five.metric) == {"accuracy"}
    assert matching_papers(papers, "lm_eval", "arc_challenge", "acc", 0).empty
    assert matching_papers(papers, "lm_eval", "arc_easy", "acc", 5).empty
    assert len(matching_papers(papers, "lm_eval", "boolq", "acc", 5)) == len(papers[papers.suite.eq("lm_eval") & papers.task.eq("BoolQ") & papers.metric.eq("accuracy")])
    unprompted = papers[papers.suite.eq("xnli")].iloc[0]
    assert len(matching_papers(papers, "xnli", unprompted.task, unprompted.metric, None)) == len(matching_papers(papers, "xnli", unprompted.task, unprompted.metric, float("nan")))


def test_one_protocol_suites_meet_all_their_papers_rows_in_their_setting():
    """The suites' Score.setting is the protocol reference.PROTOCOLS gives every paper row of theirs
    (printed empty, or ADE's with-sat / without-sat method variants, kept in paper_setting), so
    declaring the setting hides none of their paper points; wikiann's points keep their own two."""
    from harness.suites import glue, topic_classification, wikiann, word_sim

    from harness.results.reference import PROTOCOLS

    assert PROTOCOLS["ag_news"] == PROTOCOLS["dbpedia14"] == topic_classification.SETTING
    assert PROTOCOLS["glue"] == glue.SETTING and PROTOCOLS["word_sim"] == word_sim.SETTING
    papers = pd.DataFrame([dataclasses.asdict(r) for r in read_paper_results()])
    ag_news = papers[papers.suite.eq("ag_news") & papers.metric.eq("f1")]
    assert set(ag_news.setting) == {"fine-tuned"} and {"with-sat", "without-sat"} <= set(ag_news.paper_setting.dropna())
    assert len(matching_papers(papers, "ag_news", "ag_news", "f1", setting="fine-tuned")) == len(ag_news)
    suite = wikiann.WikiANN()
    zero_shot = matching_papers(papers, "wikiann", "wikiann", "f1", setting=suite.setting(wikiann.WikiannConfig()))
    assert len(zero_shot) and set(zero_shot.setting) == {"zero-shot"}
    assert set(matching_papers(papers, "wikiann", "wikiann", "f1", setting=suite.setting(wikiann.WikiannConfig("all"))).setting) == {"multilingual"}


def _outputs(values) -> list[ItemOutputs]:
    """One language's 0/1 correctness on items 0..n-1."""
    return [ItemOutputs("xnli", "en", "test", "accuracy", tuple(str(i) for i in range(len(values))), tuple(map(float, values)))]


def test_significance_groups_identical_outputs_together_and_clearly_different_apart():
    """At one budget (fractions within a factor of two): a copy of the best run's per-item outputs is
    tied with it; a run wrong on 30% more items is below it; a run on another baseline is not compared."""
    rng = np.random.default_rng(0)
    best = (rng.random(400) < 0.8).astype(float)
    worse = np.where(rng.random(400) < 0.3, 0.0, best)
    runs = pd.DataFrame({
        "run_id": ["best", "copy", "worse", "elsewhere"], "variant": ["a", "b", "c", "d"],
        "baseline_run_id": ["base", "base", "base", "other"], "emb_param_fraction": [0.010, 0.012, 0.015, 0.011],
        "pct_base": [100 * best.mean() / 0.8, 100 * best.mean() / 0.8 - 1e-9, 100 * worse.mean() / 0.8, 90.0],
        "finished_at": pd.to_datetime(["2026-01-01"] * 4),
    })
    items = {"best": _outputs(best), "copy": _outputs(best), "worse": _outputs(worse), "elsewhere": _outputs(best)}
    pairs = significance.plan(runs)
    groups = significance.groups(pairs, items, np.random.default_rng(1), "xnli", "en", "accuracy")
    assert groups.to_dict() == {"a": significance.BEST, "b": significance.TIED, "c": significance.BELOW, "d": significance.APART}


def test_holm_adjusts_step_down_and_keeps_order():
    assert significance.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert significance.holm([0.5]) == pytest.approx([0.5])


def _copy(db, tmp_path, *updates: str):
    """A copy of ``db`` with SQL ``updates`` applied (what a store holds after other code, or an older
    comparison, wrote it)."""
    copy = tmp_path / "results.duckdb"
    shutil.copy(db, copy)
    with duckdb.connect(str(copy)) as con:
        for sql in updates:
            con.execute(sql)
    return copy


def test_stale_runs_are_hidden_unless_asked_and_marked_when_shown(leaderboard_db, tmp_path, monkeypatch):
    """A run whose code fingerprint is not the installed code's is stale, as `harness results` says:
    hidden by default (the page says how many and how to show them), marked § with ?stale=true."""
    db = _copy(leaderboard_db, tmp_path, "UPDATE runs SET code = '0000000000000000' WHERE adapter = 'asg'")
    stale = set(summary.read(Store(db)).query("stale").run_id)
    assert stale == set(Store(db).stale_run_ids()) and len(stale) == 1
    hidden = _render(db, monkeypatch)
    assert hidden.info[0].value.startswith(NO_MATCH) and "1 stale runs" in hidden.info[0].value
    shown = _shown(_render(db, monkeypatch, stale="true"))
    assert list(shown.method) == ["asg"] and shown.xnli[0].endswith(SYMBOLS["stale"])
    current = _shown(_render(leaderboard_db, monkeypatch))
    assert SYMBOLS["stale"] not in current.xnli[0]


def test_a_cell_without_a_paired_interval_says_why(leaderboard_db, tmp_path, monkeypatch):
    """A comparison stored without pairs carries its reason (`unpaired`): the cell shows %Base and a
    numbered † instead of an interval, the legend gives the reason, the Table tab prints it in full."""
    reason = "this run stored no per-item outputs for this score"
    db = _copy(leaderboard_db, tmp_path, "UPDATE comparisons SET pct_base_ci_low = NULL, pct_base_ci_high = NULL, "
               f"n_paired = 0, unpaired = '{reason}' WHERE run_id IN (SELECT run_id FROM runs WHERE adapter = 'asg')")
    at = _render(db, monkeypatch)
    cell = _shown(at).xnli[0]
    assert "[" not in cell and cell.endswith(f"{SYMBOLS['unpaired']}1")
    assert any(f"{SYMBOLS['unpaired']}1 {reason}" in c.value for c in at.caption)
    table = next(df.value for df in _render(db, monkeypatch, tab="Table").dataframe if "%Base" in df.value.columns)
    assert table.set_index("adapter")["no paired interval because"]["asg"] == reason
    assert pd.isna(table.set_index("adapter")["no paired interval because"]["none"])


def _recovered(run: str, steps: int, lora: bool) -> list[str]:
    """SQL copying smoke run ``run`` (runs, scores, comparisons, compression) as if trained ``steps``
    recovery steps (the recipe ``harness run --recover`` stores), its %Base moved up by ``steps / 100``."""
    new = f"{run}-r{steps}{'-lora' if lora else ''}"
    recipe = json.dumps({"recovery": {"steps": steps, "lora": lora, "corpora": ["wikitext2_train"]}})
    return [
        f"INSERT INTO runs SELECT * REPLACE ('{new}' AS run_id, config_hash || '{new}' AS config_hash, variant || '{new}' AS variant, "
        f"'{recipe}'::JSON AS recipe, finished_at + INTERVAL {steps} SECOND AS finished_at) FROM runs WHERE run_id = '{run}'",
        f"INSERT INTO scores SELECT * REPLACE ('{new}' AS run_id, pct_base + {steps / 100} AS pct_base) FROM scores WHERE run_id = '{run}'",
        f"INSERT INTO comparisons SELECT * REPLACE ('{new}' AS run_id) FROM comparisons WHERE run_id = '{run}'",
        f"INSERT INTO compression SELECT * REPLACE ('{new}' AS run_id) FROM compression WHERE run_id = '{run}'",
    ]


def test_a_sweep_over_recovery_steps_draws_a_curve_per_configuration(leaderboard_db, tmp_path, monkeypatch):
    """Issue 32: the smoke ASG run at 0 (post hoc), 300 and 100 recovery steps, and at 100 with LoRA, gives
    two lines (the +LoRA one from the same post-hoc point), each by steps, in the Recovery tab (the landing
    view draws the Pareto chart only), the hover naming each run. The smoke store alone (no sweep) gives
    no curve: the tab says how to make one."""
    asg = read_sql(leaderboard_db, "SELECT run_id FROM runs WHERE adapter = 'asg'").run_id.item()
    db = _copy(leaderboard_db, tmp_path, *_recovered(asg, 300, False), *_recovered(asg, 100, False), *_recovered(asg, 100, True))
    rows = summary.read(Store(db))
    curves = recovery_curves(over_seeds(rows[rows.language.eq("avg")]))
    lines = {line: list(part.steps) for line, part in curves.groupby("line", sort=False)}
    assert lines == {"asg": [0, 100, 300], "asg + LoRA": [0, 100]}
    by_run = rows.set_index("run_id").pct_base
    assert list(curves.pct_base) == [by_run[r] for r in curves.run_id]
    assert list(curves.run_id[curves.line.eq("asg")]) == [asg, f"{asg}-r100", f"{asg}-r300"]
    assert json.loads(curves.config[0]) == json.loads(rows.set_index("run_id").config[asg]), "the configuration without recover"
    assert len(_charts(_render(db, monkeypatch))) == 1
    (drawn,) = _charts(_render(db, monkeypatch, tab="Recovery"))
    assert [t["name"] for t in drawn["data"]] == ["asg", "asg + LoRA"]
    assert [_values(t["x"]) for t in drawn["data"]] == [[0, 100, 300], [0, 100]]
    assert [t["line"]["dash"] for t in drawn["data"]] == ["solid", "dash"]
    assert [c[0] for c in drawn["data"][0]["customdata"]] == [asg, f"{asg}-r100", f"{asg}-r300"]
    at_chance = list(curves.at_chance[curves.line.eq("asg")])  # the smoke baseline is at chance: an x, said in the hover
    assert any(at_chance) and drawn["data"][0]["marker"]["symbol"] == [AT_CHANCE_SYMBOL if a else "circle" for a in at_chance]
    assert "not above chance" in drawn["data"][0]["customdata"][0][4] and drawn["data"][0]["showlegend"]
    plain = summary.read(Store(leaderboard_db))
    assert recovery_curves(over_seeds(plain[plain.language.eq("avg")])).empty
    empty = _render(leaderboard_db, monkeypatch, tab="Recovery")
    assert not _charts(empty) and "No sweep over recovery training in this view" in empty.info[0].value


@pytest.fixture(scope="module")
def sweep_db(tmp_path_factory):
    """The benchmark's generated store at 300 runs (10 methods, 5 suites, 2 models, 3 seeds, their
    baselines), seed 2's runs relabelled profile ``smoke`` (another configuration: its own variant)
    and two suites' scores setting ``fine-tuned``, so every sidebar filter has values to choose between."""
    db = tmp_path_factory.mktemp("sweep") / "results.duckdb"
    leaderboard_store.generate(db, runs=300)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE runs SET profile = 'smoke', variant = variant || '-smoke' WHERE seed = 2")
        con.execute("UPDATE scores SET setting = 'fine-tuned' WHERE task IN ('ag_news', 'word_sim')")
    return db


def _overview(db, monkeypatch, **query) -> pd.DataFrame:
    """The overview's cells as drawn (text)."""
    return _shown(_render(db, monkeypatch, **query))


SUITES = ["ag_news", "qa", "wikiann", "word_sim", "xnli"]


@pytest.mark.parametrize(("query", "kept"), [
    ({"model": "minilm"}, lambda o: set(o.model) == {"minilm"}),
    ({"suite": ["qa", "xnli"]}, lambda o: {c for c in o.columns if c in SUITES} == {"qa", "xnli"}),
    ({"setting": "fine-tuned"}, lambda o: {c for c in o.columns if c in SUITES} == {"ag_news", "word_sim"}),
    ({"profile": "smoke"}, lambda o: set(o.profile) == {"smoke"} and not o.xnli.str.contains("±").any()),
    ({"method": "sg"}, lambda o: set(o.method.str.split().str[0]) == {"sg"}),
])
def test_each_sidebar_filter_keeps_what_its_url_names(sweep_db, monkeypatch, query, kept):
    everything = _overview(sweep_db, monkeypatch)
    assert set(everything.model) == {"minilm", "me5-small"} and set(everything.profile) == {"quick", "smoke"}
    assert {c for c in everything.columns if c in SUITES} == set(SUITES) and set(everything.method.str.split().str[0]) == {"asg", "sg"}
    assert kept(_overview(sweep_db, monkeypatch, **query))


def test_seed_toggle_shows_one_row_per_seed_with_its_runs_own_percent(sweep_db, monkeypatch):
    """Seeds are averaged by default (± their sd); ?seeds=false gives a row per seed holding that
    seed's own stored %Base."""
    averaged = _overview(sweep_db, monkeypatch, profile="quick")
    assert "seed" not in averaged and averaged.xnli.str.contains("±").all()
    by_seed = _overview(sweep_db, monkeypatch, profile="quick", seeds="false")
    assert len(by_seed) == 2 * len(averaged) and sorted(set(by_seed.seed)) == ["0", "1"]  # as drawn: text
    assert not by_seed.xnli.str.contains("±").any()
    row = by_seed.query("xnli != ''").iloc[0]
    seed = int(row.seed)
    stored = summary.read(Store(sweep_db)).query("suite == 'xnli' and model == @row.model and seed == @seed")
    stored = stored[stored.adapter.eq(row.method.split()[0]) & stored.config.map(config_label).eq(row.settings)]
    assert row.xnli.startswith(f"{stored.pct_base.item():.1f} [")


def test_compression_range_in_the_url_keeps_runs_inside_it(sweep_db, monkeypatch):
    """?fraction=LOW&fraction=HIGH (two of the slider's stops, as it labels them) shows only the rows inside."""
    fractions = summary.read(Store(sweep_db)).emb_param_fraction
    low, high = log_ticks(fractions.min(), fractions.max())[1:4:2]  # slider stops (1-2-5 ticks)
    narrowed = _render(sweep_db, monkeypatch, axis="parameters", fraction=[fraction_label(low), fraction_label(high)]).dataframe[0].value
    assert len(narrowed) and narrowed["params kept"].between(low, high).all()
    assert len(narrowed) < len(_overview(sweep_db, monkeypatch, axis="parameters"))


def test_table_tab_shows_the_charts_significance_groups(sweep_db, monkeypatch):
    """Issue 34: groups in the table and the chart: each configuration's group in the Table tab is the
    marker shape its point has in the Pareto chart, and the generated sweep has more than one group."""
    table = next(df.value for df in _render(sweep_db, monkeypatch, tab="Table").dataframe if "%Base" in df.value.columns)
    charted = {}
    for trace in _charts(_render(sweep_db, monkeypatch))[0]["data"]:
        if trace.get("customdata") and isinstance(trace["marker"].get("symbol"), list):
            charted |= {c[5]: s for c, s in zip(trace["customdata"], trace["marker"]["symbol"])}
    glyphs = {GROUP_SYMBOLS[g]: GROUP_GLYPHS[g] for g in GROUP_SYMBOLS}
    shown = table[table.run_id.isin(charted)]
    assert len(shown) == len(charted) > 2
    assert [s.split()[0] for s in shown.significance] == [glyphs[charted[r]] for r in shown.run_id]
    assert len(set(shown.significance)) > 1
