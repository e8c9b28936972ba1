"""The results side: typed records, the DuckDB store, the papers' reported numbers. Imports no torch."""
