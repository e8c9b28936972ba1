"""The runner: plan a request, run its pipeline (fit through the fit cache, train, score), store it; export and reload a fitted model."""
