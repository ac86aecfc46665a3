"""What the NPU backend's guarded product computes, in NumPy: the CPU model of ``npu.run``.

:func:`guarded_product` composes the models of every kernel ``npu.run`` launches, each tested bit for bit
against its executed kernel (``tests/ascendc_kernels/``): the lines' integers (:func:`.guard.line_meta`
with the split range of the design), the split of the scaled lines with NaN, Inf and entries at or above
``max_abs`` as 0, the kernels' schedule (:func:`.npu_schedule.simulate` under the chip's arithmetic), the
unscaling times alpha, the banded lines' band passes (:mod:`sgemm_cube.cpu_fallback.bands`) and the lines
with NaN/Inf by recursive FP32 summation (the vector unit's fix-up).  The executed path equals it bit for bit
(``tests/ascendc_kernels/test_guarantee_alternatives.py``), so a sweep of this model measures what the
kernels compute, about a hundred times faster.
"""
from __future__ import annotations

import numpy as np

from sgemm_cube.cpu_fallback import split_limits
from sgemm_cube.cpu_fallback.bands import band_window, banded_outputs
from sgemm_cube.cpu_fallback.guard import LineClass, LineMeta, fixup_min_class, line_meta, scale_lines, unscale

from . import npu_schedule

__all__ = ["guarded_product", "ordinary_split_input", "recursive_fp32", "CORES"]

#: AI cores per chip as the model runs them (the vector units: the same count on the 910A, twice on the 910B).
CORES = {"910a": 32, "910b": 20}


def recursive_fp32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (batched) by recursive FP32 summation in K order, every product and sum rounded to nearest,
    NaN and infinities as IEEE gives them: the vector unit's fix-up."""
    acc = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.float32)
    with np.errstate(all="ignore"):
        for p in range(a.shape[-1]):
            acc += a[..., :, p, None] * b[..., None, p, :]
    return acc


def ordinary_split_input(x: np.ndarray, t: np.ndarray, axis: int, sb: int) -> np.ndarray:
    """What the ordinary split reads: the lines scaled by ``2**t``, NaN/Inf and ``|x| >= max_abs`` as 0."""
    s = scale_lines(x, t, axis, keep_special=True)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(s) < np.float32(split_limits(sb).max_abs), s, np.float32(0)).astype(np.float32)


def guarded_product(a, b, *, soc: str, arithmetic, design, tiling: npu_schedule.Tiling, sb: int = 12,
                    keep_lo_lo: bool = False, scale="auto", fixup: bool = True, alpha: float = 1.0,
                    cores: int | None = None, bands: bool = True) -> np.ndarray:
    """``npu.run``'s result for one 2-D product of float32 ``a`` (M, K) and ``b`` (K, N) on ``soc``.

    ``arithmetic``: the hardware's open behaviours (:mod:`sgemm_cube.cpu_fallback.arithmetic`); ``design``:
    the arithmetic the split range is chosen for (``npu.arithmetic()``: WORST unless the chip's was
    recorded); ``tiling``: the one the kernels run (its K groups decide the bits); ``bands=False``: the former
    design, every listed line by recursive FP32 summation.
    """
    a3, b3 = np.asarray(a, np.float32)[None], np.asarray(b, np.float32)[None]
    scheme = "fp16x4" if keep_lo_lo else "fp16x3"
    ma, mb = (line_meta(x, axis, scheme=scheme, sb=sb, scale=scale, fixup=fixup, arithmetic=design)
              for x, axis in ((a3, -1), (b3, -2)))
    xa, xb = ordinary_split_input(a3[0], ma.t[0], -1, sb), ordinary_split_input(b3[0], mb.t[0], -2, sb)
    chip = npu_schedule.chip_arithmetic(soc, arithmetic)
    cap, cores = npu_schedule.capacity_from_profile(soc), cores or CORES[soc.lower()]

    def product(x, y):
        return npu_schedule.simulate(x, y, sb=sb, keep_lo_lo=keep_lo_lo, tiling=tiling, cap=cap, cores=cores,
                                     arithmetic=chip)

    c = unscale(product(xa, xb), ma.t[0], mb.t[0], alpha)
    lowest = fixup_min_class(fixup)
    if bands:  # the listed finite lines by exponent bands on the cube; the vector unit keeps the SPECIAL ones
        c = banded_outputs(a3[0], b3[0], c, ma=LineMeta(ma.t[0], ma.cls[0]), mb=LineMeta(mb.t[0], mb.cls[0]),
                           split_a=xa, split_b=xb, window=band_window(sb, design, scheme=scheme), alpha=alpha,
                           fixup=fixup, product=product)
        lowest = LineClass.SPECIAL
    rows, cols = ma.cls[0] >= lowest, mb.cls[0] >= lowest
    if rows.any() or cols.any():
        with np.errstate(all="ignore"):
            fp32 = unscale(recursive_fp32(a3[0], b3[0]), np.zeros(rows.shape, np.int32),
                           np.zeros(cols.shape, np.int32), alpha)
        c = np.where(rows[:, None] | cols[None, :], fp32, c)
    return c
