"""Benchmark harness for compressed and compositional token embeddings.

Data flows one way: model source -> adapter -> suite -> metrics -> store -> leaderboard.
"""

__version__ = "0.1.0"
