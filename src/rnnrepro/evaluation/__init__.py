"""Analyses of trained language models, run over a training cell's ``model.pt`` (no training).

- ``dynamic``: dynamic evaluation (Krause et al. 2018), :mod:`rnnrepro.evaluation.dynamic`
- ``entropy``: next-token entropies over a split, :mod:`rnnrepro.evaluation.entropy`
- ``saliency``: gradient saliency of input words and top-5 next words, :mod:`rnnrepro.evaluation.saliency`

A study declares named evaluations (``evaluations:`` in its study file) and the artifacts that read
them; :mod:`rnnrepro.evaluation.plan` (torch-free, used by the Snakefile) resolves them, ``python -m
rnnrepro.evaluation`` runs one over one cell and :mod:`rnnrepro.evaluation.results` reads the outputs
in the notebooks. Interface: docs/evaluation.md.
"""
