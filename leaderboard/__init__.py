"""Streamlit leaderboard over results.duckdb (installed as ``harness.leaderboard``)."""
