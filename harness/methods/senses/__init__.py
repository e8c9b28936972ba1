"""Sense dictionaries (paper 004): contextual vectors per token, clustered into senses, and the
drop-in that swaps each last-layer vector for its closest sense. Shared by the adapters
``multisense`` (the drop-in, Sections 3.1-3.2) and ``skd`` (the sense-based student, Section 3.3).

1. :mod:`~harness.methods.senses.collect` cuts the fit corpus into model inputs, runs the model
   over them and keeps, per token id, a uniform sample of at most ``cap`` last-layer vectors.
2. :mod:`~harness.methods.senses.cluster` clusters each token's vectors into its senses (k-means,
   or Markov clustering to pick the number per token, Appendix C) and builds the dictionary.
3. :mod:`~harness.methods.senses.dictionary` holds the ``SenseDictionary`` module: its
   ``attach`` installs the drop-in on a model; SKD's labels and loss score against it.

:mod:`~harness.methods.senses.fit` runs the three steps with the adapters' settings and budget.
"""
