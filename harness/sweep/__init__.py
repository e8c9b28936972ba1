"""Sweeps: many points (adapters x settings x suites x models x seeds) run locally or on Ray, resumable."""
