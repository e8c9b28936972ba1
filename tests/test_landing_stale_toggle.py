"""The sidebar's stale-runs toggle (a Python bool) hides and shows stale runs without ``~`` on a bool,
which Python 3.12 deprecates (an error later; -1 and -2, right only by accident)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest


def _page():
    import json

    import pandas as pd
    import streamlit as st

    from harness.leaderboard.landing import filtered

    summary = pd.DataFrame({
        "run_id": ["base", "current", "stale"], "model": "minilm", "suite": "xnli", "adapter": ["none", "asg", "asg"],
        "setting": "", "profile": "smoke", "emb_param_fraction": [1.0, 0.1, 0.1],
        "storage_fraction": [1.0, 0.1, 0.1], "stale": [False, False, True],
    })
    shown = filtered(summary)
    st.text(json.dumps({"rows": shown.summary.run_id.tolist(), "hidden": shown.stale_hidden}))


@pytest.mark.filterwarnings("error:Bitwise inversion:DeprecationWarning")
def test_stale_runs_hidden_by_default_and_shown_when_toggled():
    at = AppTest.from_function(_page, default_timeout=30).run()
    assert not at.exception, at.exception
    assert json.loads(at.text[0].value) == {"rows": ["base", "current"], "hidden": 1}
    at.sidebar.toggle(key="stale").set_value(True).run()
    assert not at.exception, at.exception
    assert json.loads(at.text[0].value) == {"rows": ["base", "current", "stale"], "hidden": 0}
