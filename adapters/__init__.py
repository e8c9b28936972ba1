"""Built-in compressed-embedding methods, one file per paper (installed as ``harness.adapters``)."""
