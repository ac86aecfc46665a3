"""The FP32 -> (FP16 hi, FP16 lo) split of SGEMM-cube (Eq. 2, 6, 7 of the paper).

This is the one definition of the split.  The Triton and AscendC kernels
implement the same rule in their own languages and are tested against this
function bit for bit.

For an FP32 value ``x`` and a scaling exponent ``sb``::

    hi = fp16(x)                          # round to nearest even
    lo = fp16((x - f32(hi)) * 2**sb)      # the residual is exact in FP32

so that ``x ~= hi + lo * 2**-sb``.

Guarantees (checked by ``tests/cpu_fallback/test_split.py``)
-----------------------------------------------
* The residual ``x - f32(hi)`` is computed exactly (it has at most 13
  significant bits and lies within half an FP16 ulp of ``x``); the only
  roundings are the two conversions to FP16.
* For every finite ``|x| < max_abs``::

      |hi + lo * 2**-sb - x| <= max(2**-22 * |x|, 2**(-25 - min(sb, 12)))

  so wherever ``|x| >= 2**(-3 - min(sb, 12))`` the split keeps at least 22
  significant bits (Eq. 6: ``sb = 12`` covers the whole FP16 normal range).
  Below that the loss is gradual, an absolute error of half the smallest FP16
  subnormal scaled back (``2**(-25 - sb)``), or half an FP16 ulp of a residual
  below ``2**-25`` once ``sb > 12``; values under the floor become 0.
  Subnormal FP32 inputs therefore split to (0, 0) or a tiny ``lo``; they never
  produce NaN or infinity.
* Above: ``hi`` overflows to infinity for ``|x| >= 65520`` and ``lo`` can
  overflow once ``|x| >= 2**(27 - sb)`` (the residual reaches ``2**(e-11)`` in
  binade ``e``).  :func:`split_limits` gives the bound ``max_abs`` below which
  neither happens; :func:`sgemm_cube.matmul` scales lines into it by powers of
  two, or computes the lines that do not fit in plain FP32 (:mod:`sgemm_cube.cpu_fallback.guard`).
* Non-finite inputs: NaN and +-Inf give ``hi`` = the same special value and
  ``lo = 0`` (never the NaN that ``inf - inf`` would give).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["split", "split_limits", "SplitLimits", "FP16_OVERFLOW"]

#: Smallest FP32 magnitude that rounds to infinity in FP16 (65504 + half an ulp).
FP16_OVERFLOW = 65520.0


class SplitLimits(NamedTuple):
    """The range in which the split keeps FP32 accuracy for a given ``sb``.

    Attributes
    ----------
    max_abs : float
        Finite inputs must satisfy ``|x| < max_abs`` or the split overflows
        (``max_abs = min(65520, 2**(27 - sb))``).
    min_row_abs : float
        A row of A (column of B) whose largest magnitude is below this loses
        FP32 accuracy normwise: the split's absolute error floor
        ``2**(-25 - min(sb, 12))`` then exceeds ``2**-22`` of the row's size
        (``min_row_abs = 2**(-3 - min(sb, 12))``).
    """

    max_abs: float
    min_row_abs: float


def _check_sb(sb: int) -> int:
    if isinstance(sb, (bool, np.bool_)) or not isinstance(sb, (int, np.integer)):
        raise TypeError(f"sb must be an integer scaling exponent, got {sb!r}")
    if not 0 <= sb <= 24:
        raise ValueError(f"sb must be in [0, 24] (the paper uses 0, 6 or 12), got {sb}")
    return int(sb)


def split_limits(sb: int = 12) -> SplitLimits:
    """Return the input range the split represents to FP32 accuracy.

    Parameters
    ----------
    sb : int
        Scaling exponent of the residual, ``0 <= sb <= 24``.

    Returns
    -------
    SplitLimits
        ``max_abs`` (exclusive upper bound on finite ``|x|``) and
        ``min_row_abs`` (smallest largest-magnitude of a row that keeps FP32
        accuracy normwise).

    Examples
    --------
    >>> split_limits(12)
    SplitLimits(max_abs=32768.0, min_row_abs=3.0517578125e-05)
    """
    sb = _check_sb(sb)
    return SplitLimits(min(FP16_OVERFLOW, 2.0 ** (27 - sb)), 2.0 ** (-3 - min(sb, 12)))


def split(x, sb: int = 12):
    """Split FP32 values into FP16 high and scaled low parts.

    Parameters
    ----------
    x : array_like of float32
        Any shape.  Other dtypes are refused (the split is defined on FP32).
    sb : int
        Scaling exponent: the residual is multiplied by ``2**sb`` before its
        conversion to FP16 (SGEMM-cube Eq. 7, ``sf = 2**sb``).

    Returns
    -------
    hi, lo : ndarray of float16, same shape as ``x``
        ``hi = fp16(x)``, ``lo = fp16((x - f32(hi)) * 2**sb)``, both rounded to
        nearest even.  ``hi + lo * 2**-sb`` approximates ``x`` (see the module
        docstring for the guarantees).  NaN/Inf give ``hi = x`` and ``lo = 0``.
        Finite values outside :func:`split_limits` give infinite parts: callers
        keep the data inside it (``sgemm_cube.matmul`` does, :mod:`sgemm_cube.cpu_fallback.guard`).
    """
    sb = _check_sb(sb)
    x = np.asarray(x)
    if x.dtype != np.float32:
        raise TypeError(f"split is defined on float32 input, got {x.dtype}")
    with np.errstate(over="ignore", invalid="ignore"):
        hi = x.astype(np.float16)
        residual = x - hi.astype(np.float32)  # exact: x and hi share a binade
        # Scaling by 2**sb is exact in FP32 (no overflow: |residual| < 2**5).
        lo = (residual * np.float32(2.0 ** sb)).astype(np.float16)
    nonfinite = ~np.isfinite(x)
    if nonfinite.any():
        lo[nonfinite] = 0  # inf - inf would be NaN: keep the special value in hi only
    return hi, lo
