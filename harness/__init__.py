"""Benchmark harness for compressed and compositional token embeddings.

Data flows one way: model source -> adapter -> suite -> metrics -> store -> leaderboard.
"""

__version__ = "0.1.0"


def load_compressed(directory):
    """A model saved by ``harness export`` (or a fit-cache entry), rebuilt by its adapter's
    registered class without refitting: ``(model, tokenizer)``, the model in eval mode."""
    from harness.runner.saved import load

    model, tokenizer, _ = load(directory)
    return model, tokenizer
