"""Measurement: metrics and statistics (pure functions) and efficiency (latency, memory)."""
