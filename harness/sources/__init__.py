"""Model and data sources: packaged models (MiniLM, SmolLM2, me5-small), hub ids, dataset files."""
