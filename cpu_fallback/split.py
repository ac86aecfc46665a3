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

Under the other arithmetic (``arithmetic=``, :mod:`sgemm_cube.cpu_fallback.arithmetic`)
------------------------------------------------------------------------------------
The split runs the kernels' operations one for one (Cast, Cast back, Sub,
Muls, Cast), so only the FP32 -> FP16 conversions change; :func:`to_fp16`
models them.  Checked by ``tests/cpu_fallback/test_split.py``:

* ``cast="trunc"`` (toward zero): ``hi`` is ``x`` truncated, so the residual
  ``x - f32(hi)`` is still exact but reaches ``ulp16(x)`` (``2**(e-10)`` in
  binade ``e``: twice round-to-nearest's), and ``lo`` loses up to one ulp
  instead of half::

      |hi + lo * 2**-sb - x| < max(2**-21 * |x|, 2**(-24 - min(sb, 11)))

  (the floor: below ``2**-24`` ``hi`` truncates to 0 and ``lo`` holds ``x``
  truncated to 11 bits).  So 21 bits are kept from ``2**(-3 - min(sb, 11))``
  up: for ``sb >= 12`` the gradual range's lowest binade ``[2**-15, 2**-14)``
  keeps 20 (K >= 16 products still meet the guarantee there: per term at most
  ``2**-19`` of ``|a||b|``, against ``3 K 2**-24``; measured in
  ``tests/ascendc_kernels/test_guarantee_alternatives.py``).
  The top of the range needs no margin: a truncated conversion never exceeds
  65504, and below ``max_abs`` the residual times ``2**sb`` stays below
  ``2**16``, whose truncation is 65504 at most, a one-ulp loss like any other.
* ``overflow="saturate"``: a finite value past FP16's range converts to
  +-65504 instead of infinity; inside ``max_abs`` nothing reaches it, so the
  split is unchanged there.  Non-finite inputs keep their value in ``hi``.
* ``subnormals="flush"``: a conversion whose result is an FP16 subnormal
  writes a zero of the same sign, and ``f32(hi)`` reads one as zero.  Where
  ``|x| >= 2**-14`` ``hi`` is normal and only ``lo`` below ``2**-14`` is
  lost, an absolute error below ``2**(-14 - sb)``, so the split keeps 22 bits
  (21 with ``cast="trunc"``) only from ``2**max(8 - sb, -14)`` up:
  :func:`split_limits`'s ``min_row_abs`` under ``"flush"``, an 18-binade
  window for ``sb = 12`` instead of 30.  Below ``2**-14`` ``hi`` is flushed and
  ``lo`` alone holds ``x`` to 11 bits, or nothing.  The cube reads FP16
  subnormals as zero under the same field, but the split feeds it only
  values it wrote, which are already flushed: flushing Mmad's inputs is the
  same as flushing the split's outputs, which is where it is modelled.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .arithmetic import DEFAULT, as_arithmetic

__all__ = ["split", "split_limits", "SplitLimits", "FP16_OVERFLOW", "to_fp16", "from_fp16"]

#: Smallest FP32 magnitude that rounds to infinity in FP16 (65504 + half an ulp).
FP16_OVERFLOW = 65520.0
_FP16_MAX = np.float16(65504.0)
_FP16_TINY = np.float16(2.0 ** -14)  # smallest normal FP16


class SplitLimits(NamedTuple):
    """The range in which the split keeps FP32 accuracy for a given ``sb``.

    Attributes
    ----------
    max_abs : float
        Finite inputs must satisfy ``|x| < max_abs`` or the split overflows
        (``max_abs = min(65520, 2**(27 - sb))``, under every arithmetic).
    min_row_abs : float
        A row of A (column of B) whose largest magnitude is below this loses
        FP32 accuracy normwise: the split's absolute error floor
        ``2**(-25 - min(sb, 12))`` then exceeds ``2**-22`` of the row's size
        (``min_row_abs = 2**(-3 - min(sb, 12))``).  Where FP16 subnormals are
        flushed the floor is ``2**(-14 - sb)`` and ``hi`` must be normal:
        ``min_row_abs = 2**max(8 - sb, -14)``.
    """

    max_abs: float
    min_row_abs: float


def _check_sb(sb: int) -> int:
    if isinstance(sb, (bool, np.bool_)) or not isinstance(sb, (int, np.integer)):
        raise TypeError(f"sb must be an integer scaling exponent, got {sb!r}")
    if not 0 <= sb <= 24:
        raise ValueError(f"sb must be in [0, 24] (the paper uses 0, 6 or 12), got {sb}")
    return int(sb)


def split_limits(sb: int = 12, *, arithmetic=None) -> SplitLimits:
    """Return the input range the split represents to FP32 accuracy.

    Parameters
    ----------
    sb : int
        Scaling exponent of the residual, ``0 <= sb <= 24``.
    arithmetic : Arithmetic, str or None
        The hardware arithmetic (:mod:`sgemm_cube.cpu_fallback.arithmetic`);
        only ``subnormals`` changes the range (module docstring).

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
    if as_arithmetic(arithmetic).subnormals == "flush":
        low = 2.0 ** max(8 - sb, -14)
    else:
        low = 2.0 ** (-3 - min(sb, 12))
    return SplitLimits(min(FP16_OVERFLOW, 2.0 ** (27 - sb)), low)


def to_fp16(x, arithmetic=None) -> np.ndarray:
    """FP32 -> FP16 conversion (the kernels' ``Cast``) under an arithmetic's ``cast``, ``overflow`` and
    ``subnormals`` fields.

    ``cast``: ``"rint"`` rounds to nearest even, ``"trunc"`` toward zero.  ``overflow`` says what a
    finite value past FP16's range becomes: ``"inf"`` what IEEE gives for the rounding (an infinity
    when rounding to nearest, 65504 when truncating), ``"saturate"`` +-65504 always.  ``subnormals``:
    ``"flush"`` writes a result that is an FP16 subnormal (after rounding) as a zero of the same sign.
    NaN and infinities convert to themselves.
    """
    ar = as_arithmetic(arithmetic)
    x = np.asarray(x, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = x.astype(np.float16)  # round to nearest even, infinity past 65520
        if ar.cast == "trunc":
            away = np.abs(h.astype(np.float32)) > np.abs(x)  # rounded away from zero (FP16 is exact in FP32)
            h = np.where(away, np.nextafter(h, np.float16(0)), h)  # one step back; inf -> 65504
        if ar.overflow == "saturate":
            h = np.where(np.isinf(h) & np.isfinite(x), np.copysign(_FP16_MAX, h), h)
        if ar.subnormals == "flush":
            h = np.where(np.abs(h) < _FP16_TINY, np.copysign(np.float16(0), h), h)
    return h.astype(np.float16)


def from_fp16(h, arithmetic=None) -> np.ndarray:
    """FP16 -> FP32 (exact), FP16 subnormals read as zero of the same sign under ``subnormals="flush"``."""
    h = np.asarray(h, np.float16)
    x = h.astype(np.float32)
    if as_arithmetic(arithmetic).subnormals == "flush":
        x = np.where(np.abs(h) < _FP16_TINY, np.copysign(np.float32(0), x), x)
    return x


def split(x, sb: int = 12, *, arithmetic=None):
    """Split FP32 values into FP16 high and scaled low parts.

    Parameters
    ----------
    x : array_like of float32
        Any shape.  Other dtypes are refused (the split is defined on FP32).
    sb : int
        Scaling exponent: the residual is multiplied by ``2**sb`` before its
        conversion to FP16 (SGEMM-cube Eq. 7, ``sf = 2**sb``).
    arithmetic : Arithmetic, str or None
        The hardware's FP32 -> FP16 conversion (its ``cast``, ``overflow`` and
        ``subnormals`` fields, :func:`to_fp16`; the module docstring says what
        each changes).  None: :data:`~sgemm_cube.cpu_fallback.arithmetic.DEFAULT`,
        round to nearest even with gradual underflow, the rule below.

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
    ar = as_arithmetic(arithmetic)
    with np.errstate(over="ignore", invalid="ignore"):
        if ar[:3] == DEFAULT[:3]:  # cast, overflow, subnormals as the default: NumPy's own conversion
            hi = x.astype(np.float16)
            residual = x - hi.astype(np.float32)  # exact: x and hi share a binade
            # Scaling by 2**sb is exact in FP32 (no overflow: |residual| < 2**5).
            lo = (residual * np.float32(2.0 ** sb)).astype(np.float16)
        else:  # the same operations, the conversions under the arithmetic (FP32 Sub and Muls stay IEEE)
            hi = to_fp16(x, ar)
            residual = x - from_fp16(hi, ar)
            lo = to_fp16(residual * np.float32(2.0 ** sb), ar)
    nonfinite = ~np.isfinite(x)
    if nonfinite.any():
        lo[nonfinite] = 0  # inf - inf would be NaN: keep the special value in hi only
    return hi, lo
