"""The compressed model inside other tools: lm-eval's ``compressed`` model type and an MTEB encoder."""
