"""Accuracy studies of the source papers, as data files and plots (``sgemm-cube accuracy``).

One module per study, each returning a :class:`~.io.StudyData` table:

* :func:`exponent_sweep_study` -- error vs offset exponent (SGEMM-cube Fig. 8);
* :func:`size_sweep_study` -- error vs M = N and vs K (SGEMM-cube Fig. 9);
* :func:`condition_study` -- error vs dot-product condition number, with the
  generator :func:`condition_matrices` (BF16x9 Fig. 4);
* :func:`heatmap_study` -- SNR over a grid of exponents of A and B (BF16x9
  Fig. 5, 6);
* :func:`run_all` -- all of them, with plots and a Markdown summary.

Around them: :mod:`.methods` (the compared products on a backend),
:mod:`.data` (distributions, seeds), :mod:`.io` (CSV/JSON with provenance),
:mod:`.plotting` (matplotlib, imported only when plotting),
:mod:`.cli` (the command line).
"""
from .condition import condition_matrices, condition_study
from .exponent_sweep import exponent_sweep_study
from .heatmap import heatmap_study
from .io import StudyData, load, save
from .report import run_all
from .size_sweep import size_sweep_study

__all__ = ["exponent_sweep_study", "size_sweep_study", "condition_study", "condition_matrices", "heatmap_study",
           "run_all", "StudyData", "load", "save"]
