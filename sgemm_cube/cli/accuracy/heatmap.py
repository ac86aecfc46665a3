"""SNR over a grid of input exponents (BF16x9 paper Eq. 6, 7 and Fig. 5, 6).

One base sample ``A0`` (M x K) and ``B0`` (K x N) is drawn at offset
exponent 0 and scaled exactly to ``A0 * 2**ea`` and ``B0 * 2**eb`` for every
pair ``(ea, eb)`` of the grid.  For native FP32, the paper's split
(``scale=None, fixup=False``) and sgemm_cube with the library's defaults
(scaling + fix-up) the study records ``RMS = ||C - C64||_F / ||C64||_F``
(Eq. 6, the same quantity as SGEMM-cube's Eq. 12) and
``SNR = -20 log10(RMS)`` dB (Eq. 7): 0 dB is a result with no correct
digit, about 140 dB a relative error of 1e-7.

Where an input reaches the paper's split's limit (``|x| >= 2**(27 - sb)``
or 65520) its cell is missing (``status = "out_of_range"``), as the
paper's Rule 2 says; where the inputs are below the FP16 range the paper's
split loses bits and then everything, and the SNR shows it.  The library's
defaults scale such lines by powers of two and compute those the split
cannot hold in plain FP32: they keep FP32 accuracy over the whole range.

What the paper reports (GB200, A 512 x 1024, B 1024 x 2048, Fig. 5, 6): FP32
loses accuracy where the products reach FP32 subnormals; BF16x9 is at
least as accurate as FP32 over the whole region of interest.  SGEMM-cube's
FP16 split as the paper defines it covers a much narrower exponent range
than BF16x9's, which is what this heatmap makes visible.
"""
from __future__ import annotations

import numpy as np

from ...metrics import relative_error, snr_db
from .data import draw, scale_by_power_of_two, study_rng
from .io import StudyData, study_meta
from .methods import Engine, Method
from .progress import progress as _progress

__all__ = ["STUDY", "COLUMNS", "heatmap_study", "summarize"]

STUDY = "heatmap"
COLUMNS = ["exp_a", "exp_b", "method", "kind", "sb", "rel_error", "snr_db", "status"]


def heatmap_study(*, exp_range: tuple[int, int] = (-32, 16), exp_step: int = 2, m: int = 64, k: int = 256,
                  n: int = 64, sb: int = 12, order: str = "termwise", scheme: str = "fp16x3",
                  distribution: str = "symmetric",
                  seed: int = 0, backend: str = "cpu", accumulate: str | None = None,
                  progress: bool = True) -> StudyData:
    """Measure SNR in dB of native FP32, the paper's split and sgemm_cube's defaults over exponents of A and B.

    Parameters
    ----------
    exp_range : (int, int)
        First and last offset exponent (inclusive) of both axes.
    exp_step : int
        Grid step.
    m, k, n : int
        A is (m, k), B is (k, n) (the paper: 512, 1024, 2048).
    sb : int
        Scaling exponent of the paper's split.
    order : {"termwise", "elementwise"}
        Combination order of the paper's split.
    scheme : {"fp16x3", "auto"}
        ``"fp16x3"``: the SGEMM-cube split as is (``sb``, ``order``; no
        scaling, no FP32 fix-up: the paper's algorithm; out of range past
        ``2**(27 - sb)``) beside :func:`sgemm_cube.matmul` with its default
        options, which scale the lines that do not fit the split by powers
        of two and compute those it cannot hold in plain FP32 (the whole
        FP32 range).  ``"auto"``: the default options alone.
    distribution : {"symmetric", "nonnegative", "normal"}
        Distribution of the base samples.
    seed, backend, accumulate, progress
        As in :func:`~sgemm_cube.cli.accuracy.exponent_sweep.exponent_sweep_study`.

    Returns
    -------
    StudyData
        One row per (exp_a, exp_b, method) with ``rel_error`` (the RMS) and
        ``snr_db``; NaN where the method is out of range or not finite.
        Methods: ``"fp32"``, then ``f"{order}_sb{sb}"`` (``scheme="fp16x3"``),
        then ``"auto"``.
    """
    if scheme not in ("fp16x3", "auto"):
        raise ValueError(f"heatmap compares scheme 'fp16x3' or 'auto' with native FP32, not {scheme!r}")
    params = dict(exp_range=tuple(exp_range), exp_step=exp_step, m=m, k=k, n=n, sb=sb, order=order,
                  scheme=scheme, distribution=distribution, seed=seed, backend=backend, accumulate=accumulate)
    engine = Engine(backend, accumulate=accumulate)
    compared = [Method("fp32"), *([] if scheme == "auto" else [Method(order, sb)]), Method("auto")]
    exps = list(range(exp_range[0], exp_range[1] + 1, exp_step))
    rng = study_rng(seed, STUDY, distribution)
    a0, b0 = draw(rng, distribution, (m, k)), draw(rng, distribution, (k, n))
    rows = []
    grid = [(ea, eb) for ea in exps for eb in exps]
    for ea, eb in _progress(grid, desc=STUDY, enabled=progress):
        ops = engine.operands(scale_by_power_of_two(a0, ea), scale_by_power_of_two(b0, eb))
        for meth in compared:
            outcome = engine.run(meth, ops)
            ok = outcome.status == "ok"
            rows.append({"exp_a": ea, "exp_b": eb, **meth.columns(),
                         "rel_error": relative_error(outcome.c, ops.ref) if ok else float("nan"),
                         "snr_db": snr_db(outcome.c, ops.ref) if ok else float("nan"), "status": outcome.status})
    meta = study_meta(STUDY, params, device=engine.describe(), methods=compared,
                      metric="SNR = -20 log10(RMS) dB, RMS = ||C - C64||_F / ||C64||_F (BF16x9 Eq. 6, 7)")
    return StudyData(STUDY, COLUMNS, rows, meta)


def grid(data: StudyData, method: str, value: str = "snr_db"):
    """``(exponents, Z)`` with ``Z[i, j]`` the value at ``exp_a = exponents[j]``, ``exp_b = exponents[i]``."""
    exps = sorted({r["exp_a"] for r in data.rows} | {r["exp_b"] for r in data.rows})
    index = {e: i for i, e in enumerate(exps)}
    z = np.full((len(exps), len(exps)), np.nan)
    for r in data.rows:
        if r["method"] == method:
            z[index[r["exp_b"]], index[r["exp_a"]]] = r[value]
    return exps, z


def summarize(data: StudyData) -> str:
    """Markdown: SNR ranges of every method and where each emulation matches native FP32."""
    emulations = [key for key in data.values("method") if key != "fp32"]
    p = data.meta["params"]
    exps, native = grid(data, "fp32")
    out = [f"SNR in dB over exponents {exps[0]}..{exps[-1]} (step {p['exp_step']}) of A and B "
           f"({p['m']}x{p['k']} times {p['k']}x{p['n']}, {p['distribution']} inputs):\n"]
    for key in ["fp32", *emulations]:
        z = grid(data, key)[1]
        finite = z[np.isfinite(z)]
        missing = int(np.isnan(z).sum())
        out.append(f"- {data.label(key)}: {finite.min() + 0.0:.1f} to {finite.max():.1f} dB "
                   f"(median {np.median(finite):.1f}); {missing} of {z.size} cells missing"
                   if finite.size else f"- {data.label(key)}: no finite cell")
    # Where native FP32 is accurate (within 20 dB of its best), is each emulation as accurate?
    accurate = np.isfinite(native) & (native >= np.nanmax(native) - 20.0) if np.isfinite(native).any() else native > 0
    out.append(f"- cells where native FP32 is accurate (within 20 dB of its best): {int(accurate.sum())}")
    for key in emulations:
        emulated = grid(data, key)[1]
        good = accurate & np.isfinite(emulated) & (emulated >= native - 1.0)
        line = f"  - {data.label(key)} at least as accurate (within 1 dB) in {int(good.sum())} of them"
        if good.any():
            ea = [exps[j] for j in np.nonzero(good.any(axis=0))[0]]
            eb = [exps[i] for i in np.nonzero(good.any(axis=1))[0]]
            line += (f" (exp_a {min(ea)}..{max(ea)}, exp_b {min(eb)}..{max(eb)}); SNR gain over native FP32 "
                     f"there: mean {np.mean(emulated[good] - native[good]):+.1f} dB, "
                     f"min {np.min(emulated[good] - native[good]):+.1f} dB")
        out.append(line)
    out.append("")
    return "\n".join(out)
