"""Relative error vs matrix size (SGEMM-cube Fig. 9).

Two sweeps at offset exponent ``exponent`` (0 in the paper): ``"mn"``
varies M = N with K fixed (the paper: K = 64 x 44 = 2816), ``"k"`` varies K
with M = N fixed.  Every point draws fresh inputs; the relative Frobenius
error against float64 (Eq. 12) is averaged over ``trials`` samples, for
FP16 only, native FP32, the paper's split (``scale=None, fixup=False``) and
sgemm_cube with the library's defaults (scaling + fix-up; at offset
exponent 0 the data fit the split and both run the same arithmetic).

What the paper reports (Ascend 910A, Fig. 9): with K fixed the error hardly
changes with M = N (the accumulation depth is K); as K grows, termwise
sgemm_cube stays more accurate than FP32 SGEMM (OpenBLAS) and than the
elementwise variant.
"""
from __future__ import annotations

import numpy as np

from ...metrics import relative_error
from .data import draw, scale_by_power_of_two, study_rng
from .io import StudyData, error_cells, study_meta, worse_than_native_line
from .methods import Engine, methods
from .progress import progress as _progress

__all__ = ["STUDY", "COLUMNS", "size_sweep_study", "summarize"]

STUDY = "size-sweep"
COLUMNS = ["sweep", "distribution", "m", "n", "k", "method", "kind", "sb", "rel_error", "status", "trials"]


def size_sweep_study(*, mn_sizes=(32, 64, 128, 256), k_fixed: int = 2816, k_sizes=(128, 512, 2048, 8192),
                     mn_fixed: int = 64, sb: int = 12, orders=("elementwise", "termwise"),
                     distributions=("symmetric", "nonnegative"), exponent: int = 0, trials: int = 1,
                     seed: int = 0, backend: str = "cpu", accumulate: str | None = None,
                     progress: bool = True) -> StudyData:
    """Measure relative error vs M = N (K fixed) and vs K (M = N fixed).

    Parameters
    ----------
    mn_sizes : sequence of int
        M = N values of the first sweep.
    k_fixed : int
        K of the first sweep.
    k_sizes : sequence of int
        K values of the second sweep.
    mn_fixed : int
        M = N of the second sweep.
    sb : int
        Scaling exponent of the paper's split.
    orders : sequence of {"termwise", "elementwise"}
        Combination orders of the paper's split.
    distributions : sequence of {"symmetric", "nonnegative", "normal"}
        Input distributions (one row of panels each).
    exponent : int
        Offset exponent of the inputs (values in ``[-2**e, 2**e]`` / ``[0, 2**e]``).
    trials, seed, backend, accumulate, progress
        As in :func:`~sgemm_cube.cli.accuracy.exponent_sweep.exponent_sweep_study`.

    Returns
    -------
    StudyData
        One row per (sweep, distribution, size, method).
    """
    params = dict(mn_sizes=tuple(mn_sizes), k_fixed=k_fixed, k_sizes=tuple(k_sizes), mn_fixed=mn_fixed, sb=sb,
                  orders=tuple(orders), distributions=tuple(distributions), exponent=exponent, trials=trials,
                  seed=seed, backend=backend, accumulate=accumulate)
    engine = Engine(backend, accumulate=accumulate)
    compared = methods(sbs=(sb,), orders=orders)
    shapes = [("mn", s, s, k_fixed) for s in mn_sizes] + [("k", mn_fixed, mn_fixed, kk) for kk in k_sizes]
    points = [(sweep, dist, m, n, k) for sweep, m, n, k in shapes for dist in distributions]
    rows = []
    for sweep, dist, m, n, k in _progress(points, desc=STUDY, enabled=progress):
        errors = {meth.key: [] for meth in compared}
        status = {meth.key: "ok" for meth in compared}
        for trial in range(trials):
            rng = study_rng(seed, STUDY, sweep, dist, m, n, k, trial)
            a = scale_by_power_of_two(draw(rng, dist, (m, k)), exponent)
            b = scale_by_power_of_two(draw(rng, dist, (k, n)), exponent)
            ops = engine.operands(a, b)
            for meth in compared:
                outcome = engine.run(meth, ops)
                ok = outcome.status == "ok"
                errors[meth.key].append(relative_error(outcome.c, ops.ref) if ok else np.nan)
                if not ok:
                    status[meth.key] = outcome.status
        for meth in compared:
            errs = np.array(errors[meth.key])
            rows.append({"sweep": sweep, "distribution": dist, "m": m, "n": n, "k": k, **meth.columns(),
                         "rel_error": float(errs.mean()), "status": status[meth.key],
                         "trials": int(np.isfinite(errs).sum())})
    meta = study_meta(STUDY, params, device=engine.describe(), methods=compared,
                      metric="relative Frobenius error vs float64 (SGEMM-cube Eq. 12), mean over trials")
    return StudyData(STUDY, COLUMNS, rows, meta)


def summarize(data: StudyData) -> str:
    """Markdown tables of the error per size and method, one per sweep and distribution; every cell where an
    sgemm_cube method's error exceeds native FP32's on the same data is marked and listed under its table."""
    keys = data.values("method")
    out = []
    for sweep, axis, fixed in (("mn", "m", "k"), ("k", "k", "m")):
        for dist in data.values("distribution"):
            sel = [r for r in data.rows if r["sweep"] == sweep and r["distribution"] == dist]
            if not sel:
                continue
            sizes = data.values(axis, sweep=sweep, distribution=dist)
            name = "M=N" if sweep == "mn" else "K"
            out.append(f"Relative error vs {name} ({fixed.upper()} = {sel[0][fixed]}), {dist} inputs:\n")
            out.append(f"| method | " + " | ".join(f"{name}={s}" for s in sizes) + " |")
            out.append("|---" * (len(sizes) + 1) + "|")
            def errors(key):
                return [next((r["rel_error"] for r in sel if r[axis] == s and r["method"] == key), float("nan"))
                        for s in sizes]
            native = errors("fp32") if "fp32" in keys else [float("nan")] * len(sizes)
            flagged = {}
            for key in keys:
                cells, flagged[data.label(key)] = error_cells(key, errors(key), native)
                out.append(f"| {data.label(key)} | " + " | ".join(cells) + " |")
            out.append("")
            if "fp32" in keys:
                out += [worse_than_native_line(flagged, name, sizes), ""]
    return "\n".join(out)
