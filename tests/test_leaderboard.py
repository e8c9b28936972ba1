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
from harness.leaderboard.queries import headline_rows
from harness.leaderboard.frames import (
    AXES,
    budget_bins,
    key_settings,
    matching_papers,
    over_seeds,
    pareto_frontier,
    recovery_curves,
)
from harness.leaderboard.landing import fraction_label, views
from harness.leaderboard.main_job import MAIN_JOB, declared_default_model
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
    assert result.stderr.startswith("error: ") and "lacks column" in result.stderr and len(result.stderr.splitlines()) == 1


def test_leaderboard_on_a_taken_port_is_one_line_error(leaderboard_db):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["leaderboard", "--db", str(leaderboard_db), "--port", str(port)])
    assert result.exit_code == 2
    assert result.stderr == f"error: port {port} on 127.0.0.1 is in use; pass another with --port\n"


@pytest.mark.parametrize("kind", ["missing", "folder", "empty file", "not DuckDB"])
def test_leaderboard_refuses_a_database_as_results_and_list_runs_do(kind, tmp_path):
    """`harness leaderboard --db typo.duckdb` serves no empty page: a path `harness results` and
    `harness list runs` refuse is refused with their line and exit code 2, before any server starts."""
    db = tmp_path / "typo.duckdb"
    if kind == "folder":
        db.mkdir()
    elif kind == "empty file":
        db.touch()
    elif kind == "not DuckDB":
        db.write_text("results\n")
    answers = [CliRunner().invoke(app, [*command, "--db", str(db)]) for command in (["leaderboard", "--port", "1"], ["results"], ["list", "runs"])]
    assert [a.exit_code for a in answers] == [2, 2, 2]
    assert answers[0].stderr.startswith("error: ") and len(answers[0].stderr.splitlines()) == 1
    assert answers[0].stderr == answers[1].stderr == answers[2].stderr


def test_a_duckdb_file_without_runs_is_served_not_refused(tmp_path):
    """A store a writer has not filled yet (a DuckDB file without the harness's tables) is the first-run
    page, not an error: the check passes and the port check that follows it answers."""
    db = tmp_path / "results.duckdb"
    duckdb.connect(str(db)).close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["leaderboard", "--db", str(db), "--port", str(port)])
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
    assert not any(c.endswith(("ms", "MB", "tokens/s")) for t in timings for c in t.columns), "ratios only: no absolute figure"


def test_landing_opens_on_the_overview_table(leaderboard_db, monkeypatch):
    """The first element after the title is the overview: the ASG row with its xnli cell holding
    %Base and its paired interval as `harness results` gives them; the baseline has no row."""
    at = _render(leaderboard_db, monkeypatch)
    first = at.main.children[min(i for i, c in at.main.children.items() if c.type in ("arrow_data_frame", "plotly_chart", "dataframe"))]
    overview, shown = at.dataframe[0].value, _shown(at)
    assert first.type != "plotly_chart"
    assert list(overview.method) == ["asg"] and list(overview.settings) == ["k=256 m=24 shared=false output=true niter=25"]
    assert at.segmented_control(key="rows").options == ["minilm"] and at.segmented_control(key="rows").value == "minilm"
    assert list(overview["rank"]) == ["1 of 1"]
    avg = next(r for r in _results_json(leaderboard_db) if r["adapter"] == "asg" and r["language"] == "avg")
    assert overview.xnli[0] == pytest.approx(avg["pct_base"]), "a number: the column sorts as numbers"
    assert shown.xnli[0].startswith(f"{avg['pct_base']:.1f} [")  # drawn with its paired interval
    assert overview["params kept"][0] == pytest.approx(avg["emb_param_fraction"])
    stored = read_sql(leaderboard_db, "SELECT storage_fraction FROM compression JOIN runs USING (run_id) WHERE adapter = 'asg'")
    assert overview["bytes kept"][0] == pytest.approx(stored.storage_fraction.item()) and shown.budget[0].endswith("%")
    assert pd.isna(overview["avg %Base"][0]) and shown["avg %Base"][0] == "", "one suite: no average across suites"


def test_filters_live_in_the_url(leaderboard_db, monkeypatch):
    """A view is shared by its URL: ?method=none leaves no method row; ?papers=false hides the papers' points."""
    at = _render(leaderboard_db, monkeypatch, method="none")
    assert at.info[0].value == "No finished runs match the filters in the sidebar."
    traces = _charts(_render(leaderboard_db, monkeypatch, papers="false"))[0]["data"]
    assert not _paper_traces(traces) and FRONTIER_NAME in [t["name"] for t in traces]


def _paper_traces(traces: list[dict]) -> list[dict]:
    return [t for t in traces if t.get("legendgroup") == PAPERS_NAME]


def test_pareto_has_one_trace_per_adapter_and_the_papers(leaderboard_db, monkeypatch):
    """A trace per adapter, error bars the paired 95% interval of %Base; the papers' points a trace per
    paper, method and base model, named in the legend (labels there cannot overlap), hollow, a shape per
    base model."""
    at = _render(leaderboard_db, monkeypatch, axis="parameters")
    pareto = _charts(at)[0]
    papers = _paper_traces(pareto["data"])
    names = [t["name"] for t in pareto["data"] if t not in papers]
    adapters = sorted(read_sql(leaderboard_db, "SELECT DISTINCT adapter FROM runs").adapter)
    assert names == [FRONTIER_NAME, *adapters]
    assert pareto["layout"]["xaxis"]["type"] == "log"
    # paper 000 Table 1, XNLI accuracy, only the zero-shot setting of these train=en runs: 2 models x (asg, sg)
    assert sorted(t["name"] for t in papers) == ["asg · mbert (asg paper)", "asg · xlm-r (asg paper)", "sg · mbert (asg paper)", "sg · xlm-r (asg paper)"]
    assert all(t["mode"] == "markers" and t["marker"]["symbol"].endswith("-open") for t in papers)
    assert len({t["marker"]["symbol"] for t in papers}) == 2, "a shape per base model"
    asg = pareto["data"][names.index("asg")]
    avg = [r for r in _results_json(leaderboard_db) if r["adapter"] == "asg" and r["language"] == "avg"]
    assert _values(asg["x"]) == pytest.approx([avg[0]["emb_param_fraction"]])
    assert _values(asg["y"]) == pytest.approx([avg[0]["pct_base"]])
    bars = asg["error_y"]
    assert _values(bars["array"]) == pytest.approx([avg[0]["pct_base_ci_high"] - avg[0]["pct_base"]])
    assert _values(bars["arrayminus"]) == pytest.approx([avg[0]["pct_base"] - avg[0]["pct_base_ci_low"]])
    assert bars.get("visible", True) and _values(bars["array"])[0] > 0

    at.toggle(key="papers").set_value(False).run()
    assert not _paper_traces(_charts(at)[0]["data"])


def test_the_compression_axis_is_bytes_stored_unless_parameters_are_chosen(leaderboard_db, monkeypatch):
    """by default the chart's x is the embedding's bytes stored as a share of the base's (the
    papers print parameter shares only: their points show on the parameters axis); ?axis=parameters switches."""
    stored = read_sql(leaderboard_db, "SELECT storage_fraction, emb_param_fraction FROM compression JOIN runs USING (run_id) WHERE adapter = 'asg'")
    for query, column, papers in (({}, "storage_fraction", False), ({"axis": "parameters"}, "emb_param_fraction", True)):
        pareto = _charts(_render(leaderboard_db, monkeypatch, **query))[0]
        names = [t["name"] for t in pareto["data"]]
        assert _values(pareto["data"][names.index("asg")]["x"]) == pytest.approx([stored[column].item()])
        assert bool(_paper_traces(pareto["data"])) == papers
        assert ("bytes" in pareto["layout"]["xaxis"]["title"]["text"]) != papers
    assert stored.storage_fraction.item() != pytest.approx(stored.emb_param_fraction.item())  # ASG's ConceptID map costs bytes


def test_the_overview_ranks_a_row_only_within_its_group_and_budget(sweep_db):
    """a rank compares a row only with rows of the same model covering the same suites with
    the same settings and baselines (a group), inside one budget on the chosen axis (most compressed
    first), by mean %Base; groups follow each other, most suites first, each listed in one piece. A table
    that keeps every parameter in a quarter of the bytes (int8) sits in the 25-50% budget on the bytes
    axis and with the unchanged model's on the parameters axis, and the significance budgets follow."""
    rows = headline_rows(Store(sweep_db))
    sg = rows[rows.adapter.eq("sg")].iloc[0]  # one configuration, on every suite, relabelled as an int8 table
    same = rows.model.eq(sg.model) & rows.profile.eq(sg.profile)
    int8 = same & rows.adapter.eq("sg") & rows.config.eq(sg.config)
    rows.loc[int8, ["emb_param_fraction", "storage_fraction"]] = [1.0, 0.25]
    for axis in AXES.values():
        view = overview.build(rows, axis=axis)
        covered = view.display[view.suites].notna().sum(axis=1)
        assert covered[view.groups.ne(view.groups.shift())].is_monotonic_decreasing, "groups of more suites first"
        for group, part in view.display.groupby(view.groups, sort=False):
            assert part.index.to_series().diff().fillna(1).eq(1).all(), "a group is listed in one piece"
            assert part.model.nunique() == 1 and part.profile.nunique() == 1, "no rank across models or profiles"
            pattern = part[view.suites].notna()
            assert (pattern == pattern.iloc[0]).all().all(), "a group covers the same suites"
            bins = budget_bins(part[{"bytes": "bytes kept", "parameters": "params kept"}[axis.key]])
            assert bins.is_monotonic_increasing and bins.notna().all()
            for _, budget in part.groupby(bins):
                means = budget[view.suites].mean(axis=1)
                assert means.is_monotonic_decreasing
                assert list(budget["rank"]) == [f"{i} of {len(budget)}" for i in range(1, len(budget) + 1)]
        label = view.display.budget[view.display["params kept"].eq(1.0)].unique()
        assert list(label) == (["25–50%"] if axis.key == "bytes" else ["100–200%"])
        chart = same & rows.suite.eq(sg.suite)
        pairs = significance.plan(rows[chart], axis.column).set_index("variant")
        assert set(pairs.budget[rows.variant[int8 & chart].unique()]) == ({-2.0} if axis.key == "bytes" else {0.0})


def test_rows_of_other_suites_models_or_baselines_are_never_ranked_together():
    """k-sub rows of one budget on GLUE (pretrained, against a pretrained baseline),
    XNLI on me5-small and BPB on SmolLM2 each stand alone (rank 1 of 1, no average across suites); two
    rows on the same suite, model and baseline are ranked by %Base."""
    def row(model, suite, config, pct, baseline):
        return {"run_id": f"{model}-{suite}-{config}", "model": model, "adapter": "ksub", "config": json.dumps({"allocation": config}),
                "suite": suite, "suite_config": "{}", "profile": "quick", "seed": 0, "variant": f"v-{model}-{suite}-{config}",
                "task": suite, "language": "avg", "metric": "m", "setting": "", "value": pct / 100, "ci_low": 0.0, "ci_high": 1.0, "pct_base": pct,
                "pct_base_ci_low": pct - 1, "pct_base_ci_high": pct + 1, "chance_adjusted_pct_base": pct, "p_value": None, "flip_rate": None,
                "unpaired_reason": None, "emb_param_fraction": 0.003, "storage_fraction": 0.003, "storage_bytes": 1e5,
                "baseline_run_id": baseline, "baseline_variant": baseline, "finished_at": pd.Timestamp("2026-01-01"), "disclosure": "",
                "at_chance": False, "unpaired": False, "stale": False}
    rows = pd.DataFrame([row("minilm", "glue", "random", 95.8, "pretrained"), row("me5-small", "xnli", "random", 67.8, "b-xnli"),
                         row("me5-small", "xnli", "clustered", 65.8, "b-xnli"), row("smollm2", "bpb", "random", 33.8, "b-bpb")])
    view = overview.build(rows)
    ranks = dict(zip(view.display.model + " " + view.display.method, view.display["rank"]))
    assert ranks == {"minilm ksub allocation=random": "1 of 1", "me5-small ksub allocation=random": "1 of 2",
                     "me5-small ksub allocation=clustered": "2 of 2", "smollm2 ksub allocation=random": "1 of 1"}
    assert view.display["avg %Base"].isna().all()


def test_labels_tell_configurations_apart_and_read_as_typed():
    configs = [{"K": 3, "allocation": "clustered", "recover": 1000}, {"K": 3, "allocation": "clustered", "recover": 1000, "recover_lora": True},
               {"K": 3, "allocation": "random", "recover": 100}]
    rows = pd.DataFrame({"adapter": ["ksub"] * 3, "config": [json.dumps(c) for c in configs]})
    assert list(key_settings(rows)) == ["ksub allocation=clustered recover=1000", "ksub allocation=clustered recover=1000 +LoRA",
                                        "ksub allocation=random recover=100"]
    assert summary.settings_label(json.dumps(configs[1])) == "K=3 allocation=clustered recover=1000 +LoRA"


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
    timed = read_sql(leaderboard_db, "SELECT e.phase, e.p50_ms FROM efficiency e JOIN runs r USING (run_id) WHERE r.adapter = 'asg'")
    p50 = timed.set_index("phase").p50_ms
    latency = table.set_index("adapter")["latency × base"]
    assert latency["asg"] == pytest.approx(p50["forward"] / p50["base:forward"]), "against the base timed in the same run"
    assert pd.isna(latency["none"])
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


@pytest.mark.parametrize("kind", ["no tables", "papers only"])
def test_first_run_message(kind, tmp_path, monkeypatch):
    db = tmp_path / "results.duckdb"
    if kind == "no tables":
        duckdb.connect(str(db)).close()
    else:
        assert CliRunner().invoke(app, ["reference", "load", "--db", str(db)]).exit_code == 0
    at = _render(db, monkeypatch)
    message = at.info[0].value
    assert "No runs in" in message and f"harness run --suite {MAIN_JOB.suite} --adapter {MAIN_JOB.adapter}" in message
    assert not at.get("plotly_chart")


@pytest.mark.parametrize("kind", ["missing", "empty file"])
def test_a_path_every_reader_refuses_is_refused_on_the_page_too(kind, tmp_path, monkeypatch):
    """Served without the command (``streamlit run`` with HARNESS_DB), the page says what `harness results` says."""
    db = tmp_path / "results.duckdb"
    if kind == "empty file":
        db.touch()
    monkeypatch.setenv("HARNESS_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=60).run()
    refused = CliRunner().invoke(app, ["results", "--db", str(db)])
    assert refused.exit_code == 2 and at.error[0].value == refused.stderr.removeprefix("error: ").strip()
    assert not at.get("plotly_chart") and not at.info


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
    tied with it; a run wrong on 30% more items is below it; a run on another baseline is never ranked
    against them: the best of its own baseline's."""
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
    assert groups.to_dict() == {"a": significance.BEST, "b": significance.TIED, "c": significance.BELOW, "d": significance.BEST}


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


def test_the_stale_count_is_the_one_list_runs_gives(leaderboard_db, tmp_path, monkeypatch):
    """one stale count everywhere: a failed run made by other code counts as `harness list runs`
    counts it, though it has no row to hide."""
    db = _copy(leaderboard_db, tmp_path, "UPDATE runs SET code = '0000000000000000' WHERE adapter = 'asg'",
               "INSERT INTO runs SELECT * REPLACE ('failed-asg' AS run_id, config_hash || '-failed' AS config_hash, 'failed' AS status, "
               "'boom' AS error) FROM runs WHERE adapter = 'asg'")
    listed = CliRunner().invoke(app, ["list", "runs", "--db", str(db)])
    assert listed.exit_code == 0 and "2 stale runs (made by other code) are hidden" in listed.stdout
    at = _render(db, monkeypatch)
    assert "2 stale runs" in at.info[0].value
    assert any("2 stale" in c.value for c in at.sidebar.caption)


def test_a_budget_changed_after_a_score_was_seen_is_shown_beside_every_cell_resting_on_it(leaderboard_db, tmp_path, monkeypatch):
    """a disclosure in the baseline's recipe (what ``Budgets.disclosed`` writes) marks the method's
    overview cell ¶1 with the sentence in the legend, fills the Table tab's column for both rows, and is
    named in the chart's hover."""
    note = "QNLI trains on all its pairs, changed after the sense drop-in was seen at chance"
    db = _copy(leaderboard_db, tmp_path, f"UPDATE runs SET recipe = json_merge_patch(recipe, '{json.dumps({'disclosed': note})}') WHERE adapter = 'none'")
    at = _render(db, monkeypatch)
    assert _shown(at).xnli[0].endswith(f"{SYMBOLS['disclosed']}1")
    assert any(f"{SYMBOLS['disclosed']}1 {note}" in c.value for c in at.caption)
    table = next(df.value for df in _render(db, monkeypatch, tab="Table").dataframe if "%Base" in df.value.columns)
    assert set(table["budget disclosed"]) == {note}
    asg = next(t for t in _charts(at)[0]["data"] if t["name"] == "asg")
    assert note in asg["customdata"][0][9]
    plain = _render(leaderboard_db, monkeypatch)
    assert SYMBOLS["disclosed"] not in _shown(plain).xnli[0]


def test_a_budget_change_in_the_method_s_adapter_budget_is_shown_too(leaderboard_db, tmp_path, monkeypatch):
    """``Budgets.disclosed`` in an adapter's budget table lands in the run's ``adapter_budget``, not its
    recipe: the overview marks that run's cell all the same."""
    note = "ASG fits on 2,000 texts, changed after its score was seen"
    db = _copy(leaderboard_db, tmp_path, f"UPDATE runs SET adapter_budget = json_merge_patch(adapter_budget, '{json.dumps({'disclosed': note})}') WHERE adapter = 'asg'")
    at = _render(db, monkeypatch)
    assert _shown(at).xnli[0].endswith(f"{SYMBOLS['disclosed']}1")
    assert any(f"{SYMBOLS['disclosed']}1 {note}" in c.value for c in at.caption)


def test_the_efficiency_tab_shows_only_ratios_to_the_base_timed_in_the_same_run(leaderboard_db, tmp_path, monkeypatch):
    """the smoke ASG run timed the unchanged model beside its own (phase ``base:forward``): the
    tab draws that ratio, never the baseline run's absolute timing beside it; a run that timed no base of
    its own gets no ratio at all (the query would divide by the baseline run's, another process)."""
    timed = read_sql(leaderboard_db, "SELECT e.phase, e.p50_ms, e.throughput FROM efficiency e JOIN runs r USING (run_id) WHERE r.adapter = 'asg'")
    p50, throughput = timed.set_index("phase").p50_ms, timed.set_index("phase").throughput
    at = _render(leaderboard_db, monkeypatch, tab="Efficiency")
    (figure,) = _charts(at)
    assert [t["name"] for t in figure["data"]] == ["p50 latency × base", "throughput × base", "peak memory × base"]
    assert [_values(t["x"]) for t in figure["data"][:2]] == [[pytest.approx(p50["forward"] / p50["base:forward"])],
                                                              [pytest.approx(throughput["forward"] / throughput["base:forward"])]]
    assert all(len(_values(t["x"])) == 1 for t in figure["data"]), "the baseline run is the base: no bar of its own"
    alone = _copy(leaderboard_db, tmp_path, "DELETE FROM efficiency WHERE phase LIKE 'base:%'")
    for query in ({}, {"method": "asg"}):  # the baseline run filtered out still tells which base figures are its own
        at = _render(alone, monkeypatch, tab="Efficiency", **query)
        assert not _charts(at) and "timed the unchanged model in its own process" in at.info[0].value
    table = next(df.value for df in _render(alone, monkeypatch, tab="Table").dataframe if "%Base" in df.value.columns)
    assert table["latency × base"].isna().all()


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
    """the smoke ASG run at 0 (post hoc), 300 and 100 recovery steps, and at 100 with LoRA, gives
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


def _overview(db, monkeypatch, rows: str | None = None, **query) -> pd.DataFrame:
    """The overview's cells as drawn (text), of model ``rows`` (the main job's by default) on every suite."""
    at = _render(db, monkeypatch, **({"rows": rows} if rows else {}), **query)
    model = at.segmented_control(key="rows").value
    at.multiselect(key=f"columns-{model}").set_value([]).run()  # none picked: every suite
    return _shown(at)


SUITES = ["ag_news", "qa", "wikiann", "word_sim", "xnli"]


@pytest.mark.parametrize(("query", "kept"), [
    ({"model": "minilm"}, lambda at, o: at.segmented_control(key="rows").value == "minilm" and len(at.segmented_control(key="rows").options) == 1),
    ({"suite": ["qa", "xnli"]}, lambda at, o: {c for c in o.columns if c in SUITES} == {"qa", "xnli"}),
    ({"setting": "fine-tuned"}, lambda at, o: {c for c in o.columns if c in SUITES} == {"ag_news", "word_sim"}),
    ({"profile": "smoke"}, lambda at, o: set(o.profile) == {"smoke"} and not o.xnli.str.contains("±").any()),
    ({"method": "sg"}, lambda at, o: set(o.method.str.split().str[0]) == {"sg"}),
])
def test_each_sidebar_filter_keeps_what_its_url_names(sweep_db, monkeypatch, query, kept):
    at = _render(sweep_db, monkeypatch)
    assert at.segmented_control(key="rows").value == "me5-small", "the main job's model first"
    everything = _overview(sweep_db, monkeypatch)
    assert set(everything.profile) == {"quick", "smoke"}
    assert {c for c in everything.columns if c in SUITES} == set(SUITES) and set(everything.method.str.split().str[0]) == {"asg", "sg"}
    at = _render(sweep_db, monkeypatch, **query)
    model = at.segmented_control(key="rows").value
    assert kept(at, _shown(at.multiselect(key=f"columns-{model}").set_value([]).run()))


def test_the_suite_columns_are_the_most_covered_unless_picked(sweep_db, monkeypatch):
    """the overview shows three suite columns (they fit a 1,280 px window): the main job's
    suite, then the model's most covered; the picker (in the URL) shows others."""
    at = _render(sweep_db, monkeypatch)
    rows = headline_rows(Store(sweep_db)).query("model == 'me5-small' and adapter != 'none'")
    counts = rows.drop_duplicates(["suite", "adapter", "config", "profile"]).suite.value_counts()
    shown = [c for c in _shown(at).columns if c in SUITES]
    assert len(shown) == 3 and shown[0] == MAIN_JOB.suite and counts[shown[1:]].min() >= counts.drop(shown).max()
    picked = _shown(_render(sweep_db, monkeypatch, **{"columns-me5-small": ["word_sim", "qa"]}))
    assert [c for c in picked.columns if c in SUITES] == ["word_sim", "qa"]


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
    stored = summary.read(Store(sweep_db)).query("suite == 'xnli' and model == 'me5-small' and seed == @seed")
    stored = stored[stored.adapter.eq(row.method.split()[0]) & stored.config.map(summary.settings_label).eq(row.settings)]
    assert row.xnli.startswith(f"{stored.pct_base.item():.1f} [")


def test_compression_range_in_the_url_keeps_runs_inside_it(sweep_db, monkeypatch):
    """?fraction=LOW&fraction=HIGH (two of the slider's stops, as it labels them) shows only the rows inside."""
    fractions = summary.read(Store(sweep_db)).emb_param_fraction
    low, high = log_ticks(fractions.min(), fractions.max())[1:4:2]  # slider stops (1-2-5 ticks)
    narrowed = _render(sweep_db, monkeypatch, axis="parameters", fraction=[fraction_label(low), fraction_label(high)]).dataframe[0].value
    assert len(narrowed) and narrowed["params kept"].between(low, high).all()
    assert len(narrowed) < len(_overview(sweep_db, monkeypatch, axis="parameters"))


def test_the_page_opens_on_the_main_jobs_chart(sweep_db, monkeypatch):
    """the chart picker opens on the README's main job, `harness run --suite xnli --adapter asg`:
    xnli on the suite's default model (me5-small where its package is installed), whatever the overview's
    column order; ?chart= names another."""
    at = _render(sweep_db, monkeypatch)
    assert at.selectbox(key="chart").value.startswith(f"{MAIN_JOB.suite} · {MAIN_JOB.model} · ")
    other = next(o for o in at.selectbox(key="chart").options if not o.startswith("xnli"))
    assert _render(sweep_db, monkeypatch, chart=other).selectbox(key="chart").value == other


def test_the_main_job_is_the_readmes_and_its_model_the_suites_default():
    """The main job is the README's command, and its model is what `harness run` picks for the suite: the
    suite class's declared default (read from its source, so the page never imports torch), as
    :func:`harness.sources.models.preferred` resolves it; likewise for every suite that declares one."""
    from harness.registry import SUITES as registry
    from harness.sources.models import preferred
    from tests.test_readme_excerpts import excerpts

    assert [argv for argv, _ in excerpts()] == [["run", "--suite", MAIN_JOB.suite, "--adapter", MAIN_JOB.adapter]]
    declared = {name: declared_default_model(name) for name in registry.names()}
    assert declared[MAIN_JOB.suite] is not None and sum(v is not None for v in declared.values()) >= 10
    for name, model in declared.items():
        if model is not None:
            assert model == preferred(registry.get(name).default_model), name


def test_table_tab_shows_the_charts_significance_groups(sweep_db, monkeypatch):
    """groups in the table and the chart: each configuration's group in the Table tab is the
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
