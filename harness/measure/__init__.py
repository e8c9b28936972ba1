"""Where a score is computed: metrics and paired statistics (pure functions), the comparison of a
run with its baseline, and efficiency (latency, memory)."""
