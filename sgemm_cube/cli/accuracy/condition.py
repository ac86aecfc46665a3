"""Error vs dot-product condition number (BF16x9 paper, Sec. 5 and Fig. 4).

The generator builds ``A`` and ``B`` backwards from the product it wants:
``C`` (M x N) has entries of magnitude uniform in ``[0.9/delta, 1.1/delta]``
with random signs, and one entry per column of magnitude in ``[0.9, 1.1]``;
``Q`` is a random orthonormal M x M matrix; ``B = Q^T C`` and ``A = D Q``
with a random diagonal ``D`` (row scaling changes no condition number).
Then ``A B = D C``, every row of ``Q`` and nearly every column of ``C`` has
norm near 1, and the dot product ``(i, j)`` has condition number
``kappa = ||A[i,:]|| ||B[:,j]|| / |(A B)[i,j]|`` (Eq. 2) near ``delta``,
except the one entry per column that is near 1.  For small ``delta`` the
``M - 1`` small entries lift each column norm above 1 (``sqrt(1 + M /
delta**2)``), so the achieved average is above ``delta``; the study records
the average it measured on the FP32 inputs.

The study computes, for every ``delta``, the average componentwise relative
error ``|C - C64| / |C64|`` over all outputs of all trials, for native FP32,
the paper's split (``scale=None, fixup=False``) and sgemm_cube with the
library's defaults (scaling + fix-up), and the share of outputs where each
of the latter is strictly more accurate than native FP32.

What the paper reports (GB200, 10000 pairs of 160 x 160 per point, Fig. 4):
the error of both grows in proportion to the condition number from 1e1 to
1e6; emulated BF16x9 is more accurate on average, and more accurate than
native FP32 on most outputs ("usually over 60%").
"""
from __future__ import annotations

import math

import numpy as np

from ...metrics import componentwise_relative_error, dot_condition_numbers
from .io import StudyData, study_meta
from .data import study_rng
from .methods import Engine, methods
from .progress import progress as _progress

__all__ = ["STUDY", "COLUMNS", "condition_matrices", "condition_study", "summarize"]

STUDY = "condition"
COLUMNS = ["delta", "kappa_mean", "kappa_median", "method", "kind", "sb", "mean_rel_error", "median_rel_error",
           "max_rel_error", "share_better", "share_equal", "status", "trials"]


def condition_matrices(delta: float, m: int, n: int | None = None, *, rng: np.random.Generator,
                       row_scale: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """FP32 ``A`` (m x m) and ``B`` (m x n) whose dot products have condition number near ``delta``.

    Parameters
    ----------
    delta : float
        Requested condition number, ``>= 1``.
    m : int
        Rows of A, and the inner dimension K = m (A is square orthonormal up to row scaling).
    n : int, optional
        Columns of B (default ``m``).
    rng : numpy.random.Generator
        Source of randomness.
    row_scale : float
        Rows of A are scaled by factors drawn log-uniformly in
        ``[1/row_scale, row_scale]`` ("diagonally scale for further
        randomness"); 1 disables it.

    Returns
    -------
    a : ndarray, shape (m, m), float32
    b : ndarray, shape (m, n), float32
        Measure what they achieve with
        :func:`sgemm_cube.metrics.dot_condition_numbers`.
    """
    if not delta >= 1:
        raise ValueError(f"delta must be >= 1, got {delta}")
    n = m if n is None else n
    mag = rng.uniform(0.9, 1.1, (m, n)) / delta
    mag[rng.integers(0, m, n), np.arange(n)] = rng.uniform(0.9, 1.1, n)  # one entry near 1 per column
    c = mag * rng.choice([-1.0, 1.0], (m, n))
    q, r = np.linalg.qr(rng.standard_normal((m, m)))
    q *= np.sign(np.diag(r))  # sign fix: Q is uniformly (Haar) distributed
    b = q.T @ c
    a = np.exp2(rng.uniform(-1.0, 1.0, m) * math.log2(row_scale))[:, None] * q
    return a.astype(np.float32), b.astype(np.float32)


def condition_study(*, delta_range: tuple[float, float] = (1e1, 1e6), delta_count: int = 11, size: int = 160,
                    trials: int = 20, sb: int = 12, orders=("elementwise", "termwise"), seed: int = 0,
                    backend: str = "cpu", accumulate: str | None = None, progress: bool = True) -> StudyData:
    """Measure average componentwise error vs dot-product condition number.

    Parameters
    ----------
    delta_range : (float, float)
        Smallest and largest requested condition number.
    delta_count : int
        Number of values, spaced evenly in ``log10(delta)``.
    size : int
        M = K = N of every product (the paper: 160).
    trials : int
        Independent (A, B) pairs per ``delta`` (the paper: 10000).
    sb : int
        Scaling exponent of the paper's split.
    orders : sequence of {"termwise", "elementwise"}
        Combination orders of the paper's split.
    seed, backend, accumulate, progress
        As in :func:`~sgemm_cube.cli.accuracy.exponent_sweep.exponent_sweep_study`.

    Returns
    -------
    StudyData
        One row per (delta, method): the achieved mean and median condition
        number, mean / median / max componentwise relative error over all
        outputs of all trials, and for the emulations the share of outputs
        strictly more accurate than native FP32 (``share_better``) and
        exactly as accurate (``share_equal``).
    """
    params = dict(delta_range=tuple(float(d) for d in delta_range), delta_count=delta_count, size=size,
                  trials=trials, sb=sb, orders=tuple(orders), seed=seed, backend=backend, accumulate=accumulate)
    engine = Engine(backend, accumulate=accumulate)
    compared = methods(sbs=(sb,), orders=orders, fp16=False)
    deltas = np.logspace(math.log10(delta_range[0]), math.log10(delta_range[1]), delta_count)
    rows = []
    for index, delta in enumerate(_progress(deltas, desc=STUDY, enabled=progress)):
        kappas, errs, status = [], {meth.key: [] for meth in compared}, {meth.key: "ok" for meth in compared}
        for trial in range(trials):
            a, b = condition_matrices(float(delta), size, rng=study_rng(seed, STUDY, index, trial))
            kappas.append(dot_condition_numbers(a, b).ravel())
            ops = engine.operands(a, b)
            for meth in compared:
                outcome = engine.run(meth, ops)
                if outcome.status != "ok":
                    status[meth.key] = outcome.status
                    errs[meth.key].append(np.full(a.shape[0] * b.shape[1], np.nan))
                else:
                    errs[meth.key].append(componentwise_relative_error(outcome.c, ops.ref).ravel())
        kappa = np.concatenate(kappas)
        native = np.concatenate(errs["fp32"])
        for meth in compared:
            e = np.concatenate(errs[meth.key])
            baseline = meth.kind == "fp32"
            rows.append({"delta": float(delta), "kappa_mean": float(kappa.mean()),
                         "kappa_median": float(np.median(kappa)), **meth.columns(), "mean_rel_error": float(e.mean()),
                         "median_rel_error": float(np.median(e)), "max_rel_error": float(e.max()),
                         "share_better": float("nan") if baseline else float(np.mean(e < native)),
                         "share_equal": float("nan") if baseline else float(np.mean(e == native)),
                         "status": status[meth.key], "trials": trials})
    meta = study_meta(STUDY, params, device=engine.describe(), methods=compared,
                      metric="componentwise relative error |C - C64| / |C64|, averaged over all outputs and trials")
    return StudyData(STUDY, COLUMNS, rows, meta)


def summarize(data: StudyData) -> str:
    """Markdown table: error per condition number and method, and share of outputs better than FP32."""
    keys = data.values("method")
    deltas = data.values("delta")
    sgemm = [k for k in keys if k != "fp32"]
    head = ["requested delta", "achieved mean kappa"] + [f"{data.label(k)} mean error" for k in keys] \
        + [f"{data.label(k)} better than FP32" for k in sgemm]
    out = [f"Average componentwise relative error vs dot-product condition number "
           f"({data.meta['params']['trials']} pairs of {data.meta['params']['size']}^2 per point):\n",
           "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for d in deltas:
        rows = {r["method"]: r for r in data.rows if r["delta"] == d}
        cells = [f"{d:.3g}", f"{rows['fp32']['kappa_mean']:.3g}"]
        cells += [f"{rows[k]['mean_rel_error']:.2e}" for k in keys]
        cells += [f"{100 * rows[k]['share_better']:.0f}%" for k in sgemm]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)
