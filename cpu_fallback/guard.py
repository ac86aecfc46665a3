"""Which rows of A and columns of B the split represents, how they are scaled, and what is fixed up (computed without the split).

This is the one definition of the accuracy guarantee's bookkeeping; the CUDA
split kernel computes the same integers bit for bit (tested), and the CPU
backend applies them with NumPy.

A *line* is a row of A or a column of B: the values one output's dot product
takes from that operand.  For each line the split pass reads

* ``big``   -- the largest finite magnitude (0 if none),
* ``small`` -- the smallest nonzero finite magnitude (``inf`` if none),
* ``bad``   -- whether the line holds a NaN or an infinity,

and derives two integers:

``t`` (scaling exponent)
    The line is multiplied by ``2**t`` before the split (exact: a power of
    two) and the product is multiplied by ``2**-(t_a + t_b)`` afterwards,
    rounded once.  ``scale="auto"`` (default) scales only lines that do not
    fit the split as they are, ``"rows"`` every line, ``"matrix"`` every line
    of a matrix by its largest entry, ``None`` none.  Scaled lines have their
    largest entry in ``[2**top, 2**(top + 1))``.
``cls`` (class, :class:`LineClass`)
    ``SPLIT`` (0): every nonzero entry of the (scaled) line lies in ``[lower, upper)``,
    where the split keeps 22 significant bits (FP16 schemes:
    ``split_limits(sb)``) or three BF16 slices hold it exactly;
    ``LOSES_BITS`` (1): some nonzero entry lies below ``lower`` and would lose bits;
    ``SPECIAL`` (2): the line holds NaN/Inf, or a finite entry at or above ``upper``.

The two integers of a line are its *line meta* (:class:`LineMeta`; the CUDA
kernels pack them into one int32, :func:`pack_meta`).

Every output in a line with ``cls >= fixup_min_class(fixup)`` (``LOSES_BITS`` with
``fixup=True``, the default; ``SPECIAL`` with ``fixup=False``) is computed from the
**unscaled** operands instead of the split: the line is a *fix-up line*, and
computing its outputs is *the fix-up* (:func:`fixup_dot` here; the CUDA fix-up
programs, ``backends/cuda/fixup_kernel.py``; the NPU's fix-up kernels).  These
are the one set of words for it across the package.  The fix-up uses
products and sums at least as wide as FP32's, NaN and infinities as IEEE
arithmetic gives them.  No scaling touches them, so no
entry of a line spanning FP32's whole range (2**-149 .. 2**127) is lost and
an infinity meets its partners' values as they are (``inf * 1e-30`` is
``inf``, not ``inf * 0``).  Where the hardware has FP64 (the CPU model, CUDA's
FP64 tensor cores) each fix-up output is the float64 sum of exact float64
products, rounded once: no partial sum overflows, and it overflows exactly
where the exact value does.  Where it has not (the Ascend AI cores), it is
native FP32 itself: recursive summation of the FP32 products in K order,
whose sums can overflow part-way as native's can.  A fix-up line's ``t``
is unused.  So the emulated outputs are exactly those whose every operand
entry keeps 22 bits, and the rest are at least as accurate as native:
every output satisfies SGEMM's error bound.

Overflow: scaled lines hold magnitudes below ``2**(top + 1)``, so the
emulated sums stay below ``K * 2**(2 * top + 2)`` and never overflow; the
one rounding of the unscaling then overflows exactly where the emulated
product (FP32-accurate) exceeds FP32's range, with the sign of that product
-- where a plain FP32 sum can overflow part-way, even to the other sign.
"""
from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from .schemes import get_scheme
from .split import split_limits

__all__ = ["SCALES", "LineClass", "LineRange", "line_range", "line_meta", "LineMeta", "LineStats", "line_stats",
           "meta_from_stats", "scale_lines", "unscale", "fixup_dot", "fixup_min_class",
           "fixup_lines", "pack_meta", "unpack_meta"]

#: Values of ``scale``: "auto" scales the lines that do not fit as they are.
SCALES = ("auto", "rows", "matrix", None)

# Three BF16 slices hold every FP32 value at or above 2**-110 exactly, but the products of the slices
# must stay normal in FP32 too (tensor cores lose subnormal products: measured 3x native's error on an
# H100 for lines near 1e-20 left unscaled): lines in [2**-50, 2**50) give products in [2**-100, 2**100)
# and sums below 2**128 for K < 2**27.
_BF16_LOWER = 2.0 ** -50
_BF16_UPPER = 2.0 ** 50


class LineRange(NamedTuple):
    """Where a scheme's split is exact enough: ``lower <= |x| < upper``; scaled lines' top binade ``2**top``."""

    lower: float
    upper: float
    top: int


def line_range(scheme: str, sb: int) -> LineRange:
    """The range of the split of ``scheme`` with residual exponent ``sb`` (unused by BF16 schemes)."""
    if get_scheme(scheme).format.name == "bf16":
        return LineRange(_BF16_LOWER, _BF16_UPPER, 0)
    lim = split_limits(sb)
    return LineRange(lim.min_row_abs, lim.max_abs, min(14, 26 - sb))


class LineClass(enum.IntEnum):
    """What the split does with a line (the ``cls`` of :class:`LineMeta`; the kernels store the integers)."""

    SPLIT = 0       #: every nonzero entry keeps 22 bits in the split: the line is emulated
    LOSES_BITS = 1  #: some nonzero entry is below the split's range: fixed up when ``fixup=True``
    SPECIAL = 2     #: NaN, an infinity or an entry the split would overflow on: always fixed up


def fixup_min_class(fixup: bool) -> LineClass:
    """Smallest class whose lines are fixed up (computed from the unscaled operands, not the split)."""
    return LineClass.LOSES_BITS if fixup else LineClass.SPECIAL


class LineMeta(NamedTuple):
    """Per-line meta, arrays of shape (B, L) (int32): see the module docstring."""

    t: np.ndarray
    cls: np.ndarray


def _floor_log2(x: np.ndarray) -> np.ndarray:
    """floor(log2 x) for positive float64 x (exact, subnormal FP32 values included); 0 where x == 0."""
    _, e = np.frexp(x)
    return np.where(x > 0, e - 1, 0).astype(np.int32)


class LineStats(NamedTuple):
    """What the split pass reads of each line (module docstring), arrays of shape (B, L).

    Statistics of pieces of the lines combine exactly (:meth:`merge`: a
    maximum, a minimum and an "or"), so a long line can be read slab by slab
    in any order.
    """

    big: np.ndarray    # float64: largest finite magnitude, 0 if none
    small: np.ndarray  # float64: smallest nonzero finite magnitude, inf if none
    bad: np.ndarray    # bool: holds a NaN or an infinity

    @classmethod
    def empty(cls, shape) -> "LineStats":
        """Statistics of lines with no entries yet (the identity of :meth:`merge`)."""
        return cls(np.zeros(shape), np.full(shape, np.inf), np.zeros(shape, bool))

    def merge(self, index, part: "LineStats") -> None:
        """Fold the statistics ``part`` of more entries of the lines ``self[index]`` into them, in place."""
        np.maximum(self.big[index], part.big, out=self.big[index])
        np.minimum(self.small[index], part.small, out=self.small[index])
        np.logical_or(self.bad[index], part.bad, out=self.bad[index])


def line_stats(x: np.ndarray, axis: int) -> LineStats:
    """:class:`LineStats` of the lines of float32 ``x`` that run along ``axis`` (-1: rows, -2: columns)."""
    x = np.asarray(x)
    finite = np.isfinite(x)
    mag = np.where(finite, np.abs(x), np.float32(0))
    # Maxima and minima are exact, so they are taken in float32 (half the memory of float64) and converted after.
    big = mag.max(axis=axis, initial=np.float32(0)).astype(np.float64)
    small = np.where(mag > 0, mag, np.float32(np.inf)).min(axis=axis, initial=np.float32(np.inf)).astype(np.float64)
    return LineStats(big, small, ~finite.all(axis=axis))


def line_meta(x: np.ndarray, axis: int, *, scheme: str = "fp16x3", sb: int = 12, scale="auto",
              fixup: bool = True) -> LineMeta:
    """Exponents and classes of the lines of a (B, M, K) (``axis=-1``) or (B, K, N) (``axis=-2``) float32 array."""
    return meta_from_stats(line_stats(x, axis), scheme=scheme, sb=sb, scale=scale, fixup=fixup)


def meta_from_stats(stats: LineStats, *, scheme: str = "fp16x3", sb: int = 12, scale="auto",
                    fixup: bool = True) -> LineMeta:
    """:class:`LineMeta` of lines from their :class:`LineStats` (shape (B, L)); see the module docstring."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {list(SCALES)}")
    rng = line_range(scheme, sb)
    big, small, bad = stats
    e = _floor_log2(big)
    to_top = np.where(big > 0, rng.top - e, 0)
    if scale is None:
        t = np.zeros_like(e)
    elif scale == "rows":
        t = to_top
    elif scale == "matrix":
        big_mat = big.max(axis=-1, keepdims=True, initial=0.0)
        t = np.broadcast_to(np.where(big_mat > 0, rng.top - _floor_log2(big_mat), 0), e.shape)
    else:  # auto: only the lines that do not fit as they are
        fits = (big < rng.upper) & ((small >= rng.lower) | (small == np.inf))
        t = np.where(fits, 0, to_top)
    t = t.astype(np.int32)
    cls = np.where(np.ldexp(small, t) < rng.lower, LineClass.LOSES_BITS, LineClass.SPLIT)
    cls = np.where((np.ldexp(big, t) >= rng.upper) | bad, LineClass.SPECIAL, cls).astype(np.int32)
    to_one = np.where(big > 0, -_floor_log2(big), 0)  # fix-up lines: largest entry into [1, 2)
    t = np.where(cls >= fixup_min_class(fixup), to_one, t).astype(np.int32)
    return LineMeta(t, cls)


def scale_lines(x: np.ndarray, t: np.ndarray, axis: int, *, keep_special: bool = False) -> np.ndarray:
    """``x * 2**t`` per line, rounded once to float32 (exact unless it underflows).

    NaN/Inf become 0 (the split's input), or stay as they are with ``keep_special``.
    """
    if keep_special:
        xs = x
    else:
        xs = np.where(np.isfinite(x), x, np.float32(0))
        if not np.any(t):
            return xs  # no line scaled: the float64 round trip below would give these values back
    te = np.expand_dims(t, axis)
    with np.errstate(invalid="ignore"):
        return np.ldexp(xs.astype(np.float64), te).astype(np.float32)


def unscale(c: np.ndarray, ta: np.ndarray, tb: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """``alpha * c * 2**-(ta_i + tb_j)`` rounded once to float32.

    ``alpha`` is taken as float32 (as PyTorch takes a float32 operator's
    scalar): its 24 bits times ``c``'s 24 bits, times a power of two, are
    exact in float64, so the float32 rounding is the only one.  NaN times 0
    and infinity times 0 are NaN, as in IEEE arithmetic.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        c64 = np.ldexp(c.astype(np.float64), -(ta[..., :, None] + tb[..., None, :]))
        if alpha != 1:
            c64 *= np.float64(np.float32(alpha))
        return c64.astype(np.float32)


def fixup_dot(x: np.ndarray, y: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """``alpha * (x @ y)`` for the fix-up outputs, from the unscaled float32 operands (module docstring).

    The products of float32 values are exact in float64 and cannot overflow
    or underflow there; they are summed in float64 (``numpy.matmul``) and
    the sum times ``alpha`` (taken as float32) is rounded once to float32.
    NaN and infinities come out as IEEE arithmetic gives them (``inf * 0``
    and ``inf - inf`` are NaN).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        c64 = np.matmul(x.astype(np.float64), y.astype(np.float64))
        if alpha != 1:
            c64 *= np.float64(np.float32(alpha))
        return c64.astype(np.float32)


def fixup_lines(ma: LineMeta, mb: LineMeta, fixup: bool):
    """Yield ``(i, rows, cols)``: batch ``i``'s rows of A and columns of B computed in FP32 (batches with any)."""
    lowest = fixup_min_class(fixup)
    for i in range(ma.cls.shape[0]):
        rows = np.flatnonzero(ma.cls[i] >= lowest)
        cols = np.flatnonzero(mb.cls[i] >= lowest)
        if rows.size or cols.size:
            yield i, rows, cols


# The CUDA kernels keep the two integers in one int32 per line: bits 0-1 cls, bits 2-12 t + 1024.
def pack_meta(meta: LineMeta) -> np.ndarray:
    """One int32 per line holding (cls, t), as the CUDA split kernel writes it."""
    return (meta.cls | ((meta.t + 1024) << 2)).astype(np.int32)


def unpack_meta(packed: np.ndarray) -> LineMeta:
    """Inverse of :func:`pack_meta`."""
    p = np.asarray(packed).astype(np.int32)
    return LineMeta(((p >> 2) & 2047) - 1024, p & 3)
