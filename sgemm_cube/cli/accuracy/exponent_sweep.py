"""Relative error vs offset exponent of the inputs (SGEMM-cube Fig. 8).

For each distribution, one base sample ``A0`` (M x K) and ``B0`` (K x N) at
offset exponent 0 is drawn and scaled exactly to ``A = A0 * 2**e``,
``B = B0 * 2**e`` for every ``e`` of the sweep, so that the exponent is the
only thing that changes along a curve (native FP32, whose rounding is
scale-invariant, gives a flat line until FP32 itself under- or overflows).
Each product's relative Frobenius error against float64 (Eq. 12) is
averaged over ``trials`` base samples.

The curves: FP16 only, native FP32, the paper's split for every ``sb`` and
order (``scale=None, fixup=False``, as the paper defines it: out of range
from ``2**(27 - sb)``), and sgemm_cube with the library's defaults (sb=12,
scaling + fix-up), which holds FP32 accuracy over the whole sweep.

Distributions (Sec. 4 of the paper): (a) ``"symmetric"``, uniform in
``[-2**e, 2**e]``, where cancellation lowers ``||C||`` and raises the error;
(b) ``"nonnegative"``, uniform in ``[0, 2**e]``.

What the paper reports (Ascend 910A, Fig. 8): FP16 only is the worst
(about 1e-4); with ``sb = 0`` both orders trail FP32 SGEMM; ``sb = 12``
gains 1-2 orders of magnitude at small exponents, ``sb = 6`` is not
enough; with ``sb = 12`` elementwise is comparable to FP32 SGEMM and
termwise is better in the small-exponent region.
"""
from __future__ import annotations

import numpy as np

from ...metrics import relative_error
from .data import draw, scale_by_power_of_two, study_rng
from .io import StudyData, error_cells, study_meta, worse_than_native_line
from .methods import Engine, methods
from .progress import progress as _progress

__all__ = ["STUDY", "COLUMNS", "exponent_sweep_study", "summarize", "findings"]

STUDY = "exponent-sweep"
COLUMNS = ["distribution", "exponent", "method", "kind", "sb", "rel_error", "status", "trials"]


def exponent_sweep_study(*, exp_range: tuple[int, int] = (-24, 18), exp_step: int = 1, m: int = 128,
                         k: int = 512, n: int = 128, sb=(0, 6, 12), orders=("elementwise", "termwise"),
                         distributions=("symmetric", "nonnegative"), trials: int = 1, seed: int = 0,
                         backend: str = "cpu", accumulate: str | None = None,
                         progress: bool = True) -> StudyData:
    """Measure relative error vs offset exponent: FP16 only, native FP32, the paper's split, sgemm_cube's defaults.

    Parameters
    ----------
    exp_range : (int, int)
        First and last offset exponent ``e`` (inclusive); inputs lie in
        ``[-2**e, 2**e]`` or ``[0, 2**e]``.
    exp_step : int
        Step between exponents.
    m, k, n : int
        Shape of the product: A is (m, k), B is (k, n).
    sb : sequence of int
        Scaling exponents of the paper's split (the paper: 0, 6, 12).
    orders : sequence of {"termwise", "elementwise"}
        Combination orders of the paper's split.
    distributions : sequence of {"symmetric", "nonnegative", "normal"}
        Input distributions (one panel each).
    trials : int
        Independent base samples averaged per point.
    seed : int
        Seed of all random data.
    backend : {"cpu", "cuda"}
        Where the products run (see :class:`~sgemm_cube.cli.accuracy.methods.Engine`).
    accumulate : {"cube16", "sequential"} or None
        CPU model's accumulation.
    progress : bool
        Show a progress bar.

    Returns
    -------
    StudyData
        One row per (distribution, exponent, method) with the mean
        ``rel_error`` (NaN where a trial was out of the method's range or
        gave non-finite values; ``status`` says which).
    """
    params = dict(exp_range=tuple(exp_range), exp_step=exp_step, m=m, k=k, n=n, sb=tuple(sb), orders=tuple(orders),
                  distributions=tuple(distributions), trials=trials, seed=seed, backend=backend,
                  accumulate=accumulate)
    engine = Engine(backend, accumulate=accumulate)
    compared = methods(sbs=sb, orders=orders)
    exponents = list(range(exp_range[0], exp_range[1] + 1, exp_step))
    errors = {}  # (distribution, exponent, method key) -> list of errors, NaN where not ok
    status = {}
    points = [(d, t, e) for d in distributions for t in range(trials) for e in exponents]
    sample = None
    for dist, trial, e in _progress(points, desc=STUDY, enabled=progress):
        if sample is None or sample[0] != (dist, trial):  # the points of one base sample are consecutive
            rng = study_rng(seed, STUDY, dist, trial)
            sample = ((dist, trial), draw(rng, dist, (m, k)), draw(rng, dist, (k, n)))
        _, a0, b0 = sample
        ops = engine.operands(scale_by_power_of_two(a0, e), scale_by_power_of_two(b0, e))
        for meth in compared:
            outcome = engine.run(meth, ops)
            key = (dist, e, meth.key)
            ok = outcome.status == "ok"
            errors.setdefault(key, []).append(relative_error(outcome.c, ops.ref) if ok else np.nan)
            if not ok or key not in status:
                status[key] = outcome.status
    rows = []
    for dist in distributions:
        for e in exponents:
            for meth in compared:
                errs = np.array(errors[(dist, e, meth.key)])
                rows.append({"distribution": dist, "exponent": e, **meth.columns(),
                             "rel_error": float(errs.mean()), "status": status[(dist, e, meth.key)],
                             "trials": int(np.isfinite(errs).sum())})
    meta = study_meta(STUDY, params, device=engine.describe(), methods=compared,
                      metric="relative Frobenius error vs float64 (SGEMM-cube Eq. 12), mean over trials")
    return StudyData(STUDY, COLUMNS, rows, meta)


def _geomean(values) -> float:
    values = np.asarray([v for v in values if np.isfinite(v) and v > 0])
    return float(np.exp(np.log(values).mean())) if values.size else float("nan")


def summarize(data: StudyData) -> str:
    """Markdown: errors at a few exponents per method, cells where sgemm_cube's error exceeds native FP32's
    marked (and every such exponent of the sweep listed), and the paper's findings checked on this data."""
    exps = sorted({r["exponent"] for r in data.rows})
    shown = [e for e in (-20, -14, -8, 0, 8, 14) if e in exps] or exps[:: max(1, len(exps) // 6)]
    keys = data.values("method")
    out = []
    for dist in data.values("distribution"):
        out.append(f"Relative error, {dist} inputs (mean over {data.meta['params']['trials']} trial(s)):\n")
        out.append("| method | " + " | ".join(f"e={e}" for e in shown) + " |")
        out.append("|---" * (len(shown) + 1) + "|")
        def errors(key, exponents):
            return [data.column("rel_error", distribution=dist, exponent=e, method=key)[0] for e in exponents]
        flagged = {}
        for key in keys:
            native = errors("fp32", shown) if "fp32" in keys else [float("nan")] * len(shown)
            cells, _ = error_cells(key, errors(key, shown), native)
            out.append(f"| {data.label(key)} | " + " | ".join(cells) + " |")
            if "fp32" in keys:  # every exponent of the sweep, not only the columns shown
                _, flagged[data.label(key)] = error_cells(key, errors(key, exps), errors("fp32", exps))
        out.append("")
        if "fp32" in keys:
            out += [worse_than_native_line(flagged, "e", exps), ""]
        out += [f"- {line}" for line in findings(data, dist)] + [""]
    return "\n".join(out)


def findings(data: StudyData, distribution: str, *, small=(-12, -1)) -> list[str]:
    """The paper's Fig. 8 claims, evaluated on ``data`` over the small-exponent region ``small``,
    and the library's defaults against native FP32 over the whole sweep."""
    every = sorted({r["exponent"] for r in data.rows})
    exps = [e for e in every if small[0] <= e <= small[1]]

    def curve(key, exponents=exps):
        return np.array([data.column("rel_error", distribution=distribution, exponent=e, method=key)[0]
                         for e in exponents])

    keys = set(data.column("method", distribution=distribution))
    lines = []
    if not exps:
        lines.append(f"no exponent of the sweep in the small-exponent region [{small[0]}, {small[1]}]")
    else:
        fp32 = curve("fp32")
        if "termwise_sb12" in keys:
            tw = curve("termwise_sb12")
            lines.append(f"paper's split termwise sb=12 / native FP32 over e in [{small[0]}, {small[1]}]: "
                         f"geometric mean {_geomean(tw / fp32):.2f}, worst {_worst(tw / fp32):.2f} (paper: below 1)")
            if "termwise_sb0" in keys:
                gain = curve("termwise_sb0") / tw
                lines.append(f"paper's split termwise sb=0 / sb=12 there: {gain[0]:.0f}x at e={exps[0]}, geometric "
                             f"mean {_geomean(gain):.0f}x (paper: sb=12 gains 1-2 orders of magnitude at small "
                             f"exponents)")
        if "elementwise_sb12" in keys:
            lines.append(f"paper's split elementwise sb=12 / native FP32 there: geometric mean "
                         f"{_geomean(curve('elementwise_sb12') / fp32):.2f} (paper: comparable)")
        if "fp16" in keys:
            lines.append(f"FP16 only over the same exponents: geometric mean error {_geomean(curve('fp16')):.1e} "
                         f"(paper: about 1e-4, the worst)")
    if "auto" in keys:  # the library's defaults have no range limit: over the whole sweep
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = curve("auto", every) / curve("fp32", every)
        lines.append(f"{data.label('auto')} / native FP32 over every exponent of the sweep: geometric mean "
                     f"{_geomean(ratio):.2f}, worst {_worst(ratio):.2f}")
    return lines


def _worst(ratios) -> float:
    ratios = np.asarray(ratios, dtype=float)
    finite = ratios[np.isfinite(ratios)]
    return float(finite.max()) if finite.size else float("nan")
