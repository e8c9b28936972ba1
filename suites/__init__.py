"""Suites: data spec + protocol + metrics + budgets per profile (installed as ``harness.suites``)."""
