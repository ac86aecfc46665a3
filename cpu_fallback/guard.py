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
    fit the split as they are (BF16 schemes: every line), ``"rows"`` every line,
    ``"matrix"`` every line of a matrix by its largest entry, ``None`` none.
    Scaled lines have their largest entry in ``[2**top, 2**(top + 1))``.
``cls`` (class, :class:`LineClass`)
    ``SPLIT`` (0): every nonzero entry of the (scaled) line lies in ``[lower, upper)``,
    where the split keeps 22 significant bits (FP16 schemes:
    ``split_limits(sb, arithmetic=...)``: :func:`line_range`) or three BF16 slices hold it exactly
    (BF16 schemes: or further down, where the other operand's lines allow it, :func:`bf16_rule`);
    ``LOSES_BITS`` (1): some nonzero entry lies below ``lower`` and would lose bits (BF16 schemes:
    below the binade :func:`bf16_rule` gives, or a zero where it lists the lines holding one; FP16
    schemes beside a partner, :func:`fp16_rule`: none where the operand takes its wide lines, and a
    *loose* line where the partner takes them);
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
``inf``, not ``inf * 0``).  Where the hardware has FP64:

* the CPU model (:func:`fixup_dot`): each fix-up output is the exact dot
  product (times ``alpha``) rounded once to FP32, to nearest: the float64 sum
  of the exact float64 products where its error bound shows that sum rounds
  to the same value, an exact sum elsewhere (huge terms that cancel, sums
  within the error of a rounding boundary);
* CUDA's FP64 tensor cores (``backends/cuda/fixup_kernel.py``): the FP64 sum
  rounded once, within ``gamma_K * sum |x y|`` of the exact value before its
  rounding; where that error could decide whether the output overflows,
  the exact sum rounded once.

In both a finite exact result is never infinite, and one beyond FP32's
range is the infinity of its sign (issue 33: a float64 sum of huge
cancelling terms had given -inf for 2.0057e38 and 0.0 for 4.04e38).  Where
the hardware has no FP64 (the Ascend AI cores), a ``LOSES_BITS`` line runs on
the cube in exponent bands (:mod:`.bands`, which derives each band's exponent
from the line's ``t``, ``-floor(log2 big)``), and a ``SPECIAL`` line's fix-up is
native FP32 itself: recursive summation of the FP32 products in K order, whose
sums can overflow part-way as native's can.
So the emulated outputs are exactly those whose every operand entry keeps
22 bits (on the NPU, per band), and the rest are at least as accurate as
native: every output satisfies SGEMM's error bound.

Certified outputs (``scale="rows"``, FP16 schemes, with the fix-up, on hardware that keeps FP16
subnormals: :func:`certifies`): there every line is scaled to the top, so ``LOSES_BITS`` lines are
emulated instead of fixed up, and each output of one is checked after the product.  An entry below
``lower`` comes out of the split within ``2**-37`` (scaled), so over K terms the emulation loses at most
``E_K = K 2**-19 + K**2 2**-31`` more than its own ``(K + 14) 2**-24 S`` (``S = sum_k |a_k b_k|``, scaled):
the split's error against partner entries below ``2**15``, and the correction accumulator's truncation
of such products, each doubled.  Since ``|exact| <= S``, the emulated output ``c`` bounds ``S`` from
below, and the guarantee's ``3K 2**-24 S`` holds wherever ``|c| >= E_K (1 + (1 + (K + 14) 2**-24) /
((2K - 14) 2**-24))``.  :func:`certificate_threshold` is four times that, rounded up to a power of two
(128 up to K = 2048); an output of a ``LOSES_BITS`` line below it (:func:`uncertified`) is computed
again from the unscaled operands as a fix-up output is.  Positive data (log-normal, kernel matrices,
probabilities) has every output its own ``S``, far above the threshold; an output fails where its terms
cancel.  ``docs/speed.md`` ("Every wide line on fp16x3, each output certified") has the measurements.

Overflow: emulated lines hold magnitudes below ``upper`` once scaled, so the
emulated sums stay below ``K * upper**2`` and never overflow; only the one
rounding of the unscaling can (:func:`unscale`).  The emulated product is
within :func:`emulated_error_bound` of the exact one (in the scaled domain),
and where huge products cancel that bound can exceed FP32's range: an exact 0
had come out infinite (issue 33: 6 of 64 outputs of a column of B holding only
~1e25 entries, against rows up to 3.4e38).  So an emulated output that
overflows stays infinite only where that bound shows that the exact product
overflows too; the others (:func:`undecided_overflow`) are computed again from
the unscaled operands as fix-up outputs are (:func:`fixup_dot` on the CPU, the
fix-up's FP64 sums and exact sums on CUDA).  So, as for the fix-up lines, a
finite exact result is never infinite and an infinite output is the infinity
of the exact product's sign; an exact result beyond FP32's range can still
come out finite, within the bound (a plain FP32 sum can overflow part-way,
even to the other sign).  The CPU backend and the CUDA kernels make this
check; the NPU's unscale kernels and :mod:`.bands` do not yet (there an exact
0 of such data can still come out infinite).
"""
from __future__ import annotations

import enum
import math
from typing import NamedTuple

import numpy as np

from .arithmetic import as_arithmetic
from .schemes import get_scheme
from .split import split_limits

__all__ = ["SCALES", "LineClass", "LineRange", "line_range", "line_meta", "LineMeta", "LineStats", "line_stats",
           "meta_from_stats", "BF16Summary", "BF16Rule", "bf16_summary", "bf16_rule", "FP16Summary", "FP16Rule",
           "fp16_summary", "fp16_rule", "fp16_rule_applies", "NO_BOTTOM", "scale_lines",
           "unscale", "fixup_dot", "fixup_min_class", "fixup_lines", "pack_meta", "unpack_meta", "choose_scheme",
           "emulated_error_bound", "undecided_overflow", "certifies", "certificate_threshold", "uncertified"]

#: Values of ``scale``: "auto" scales the lines that do not fit as they are.
SCALES = ("auto", "rows", "matrix", None)

#: The smallest magnitude that rounds to infinity in FP32 (halfway between the largest finite value and 2**128).
_FP32_OVERFLOW = 2.0 ** 128 * (1 - 2.0 ** -25)

# Three BF16 slices hold every FP32 value at or above 2**-103 exactly in normal BF16 numbers (the lowest
# slice holds the 24th bit, 2**-126 or more), and the products of the slices must stay normal in FP32 too
# (tensor cores lose subnormal products: measured 3x native's error on an H100 for lines near 1e-20 left
# unscaled).  Every product of an emulated row's entry and an emulated column's entry is kept at or above
# 2**_BF16_PAIR_FLOOR: lines in [2**-50, 2**50) give products in [2**-100, 2**100) and sums below 2**128 for
# K < 2**27.  Every BF16 line is scaled to the top of that range (2**49), so that 99 binades lie below it
# (issue 33: near 1, Vandermonde features and rows mixing 1 with 2**-57 were listed at 50 binades), and one
# operand's lines may reach further down, to 2**_BF16_FLOOR, where the other operand's emulated lines all
# stay high enough (:func:`bf16_rule`): a Laplacian kernel matrix's rows span 149, Vandermonde features 190.
_BF16_LOWER = 2.0 ** -50
_BF16_UPPER = 2.0 ** 50
_BF16_TOP = 49
_BF16_NARROW_LOW = -50  # log2(_BF16_LOWER): a narrow line's entries lie at or above it once scaled
_BF16_FLOOR = -103
_BF16_PAIR_FLOOR = -100
#: A line with no nonzero finite entry has no lowest binade: this stands for it (above every real one).
NO_BOTTOM = 1 << 20
#: :func:`bf16_rule` where an operand emulates every line: below every scaled FP32 value (``2**-1022``).
_EVERY_LINE = -1022
# The FP16 partner rule (:func:`fp16_rule`).  Scaled to the top (its largest entry in [2**14, 2**15) for
# sb = 12), an entry of a wide line below the split's ``lower`` still comes out of hi + lo 2**-sb within
# 2**-37 (half the spacing of FP16's subnormals, 2**-25, times 2**-12; CUDA keeps FP16 subnormals, and
# rounds to nearest), so against a partner line b with no zero and max|b| < 2**23 min|b| the extra error
# of an output is below K 2**-37 max|b| < K 2**-37 2**23 |b_k*| <= K 2**-28 (|a| @ |b|), k* the wide
# line's largest entry: a sixteenth of SGEMM's unit K 2**-24 (|a| @ |b|), inside the guarantee's 3K with
# the emulation's own K + 14 from K = 16 on.
#: A partner line is *tight* where floor(log2 max) - floor(log2 min) of its nonzero entries is at most this.
_FP16_TIGHT_SPAN = 22
#: The smallest K at which the FP16 partner rule applies (the guarantee's own limit for a named backend).
_FP16_RULE_MIN_K = 16


class LineRange(NamedTuple):
    """Where a scheme's split is exact enough: ``lower <= |x| < upper``; scaled lines' top binade ``2**top``."""

    lower: float
    upper: float
    top: int


def line_range(scheme: str, sb: int, arithmetic=None) -> LineRange:
    """The range of the split of ``scheme`` with residual exponent ``sb`` (unused by BF16 schemes).

    ``arithmetic`` (:mod:`sgemm_cube.cpu_fallback.arithmetic`; None: the default) is the hardware
    the FP16 split runs on: where it flushes FP16 subnormals (``subnormals="flush"``) the range's
    ``lower`` is ``2**max(8 - sb, -14)`` instead of ``2**(-3 - min(sb, 12))``
    (:func:`sgemm_cube.cpu_fallback.split_limits`): lines whose entries reach below it are
    fixed up.  ``upper`` and ``top`` are the same under every arithmetic.  The range for
    ``"flush"`` holds under ``"gradual"`` too (narrower): the NPU backend uses it unless told
    that the hardware keeps subnormals (:func:`sgemm_cube.backends.npu.arithmetic`).  The CPU
    and CUDA backends use the default.
    """
    if get_scheme(scheme).format.name == "bf16":
        return LineRange(_BF16_LOWER, _BF16_UPPER, _BF16_TOP)
    lim = split_limits(sb, arithmetic=arithmetic)
    return LineRange(lim.min_row_abs, lim.max_abs, min(14, 26 - sb))


class LineClass(enum.IntEnum):
    """What the split does with a line (the ``cls`` of :class:`LineMeta`; the kernels store the integers)."""

    SPLIT = 0       #: every nonzero entry keeps 22 bits in the split: the line is emulated
    LOSES_BITS = 1  #: some nonzero entry is below the split's range: fixed up when ``fixup=True``
    SPECIAL = 2     #: NaN, an infinity or an entry the split would overflow on: always fixed up


def fixup_min_class(fixup: bool, certify: bool = False) -> LineClass:
    """Smallest class whose lines are fixed up (computed from the unscaled operands, not the split); with
    ``certify`` (:func:`certifies`) ``LOSES_BITS`` lines are emulated and their outputs certified instead."""
    return LineClass.LOSES_BITS if fixup and not certify else LineClass.SPECIAL


def certifies(scheme: str, scale, fixup: bool = True, arithmetic=None) -> bool:
    """Whether ``LOSES_BITS`` lines are emulated and each of their outputs certified after the product
    (module docstring, "Certified outputs") rather than fixed up: FP16 schemes under ``scale="rows"``
    (every line at the top) with the fix-up on, in the default arithmetic (``arithmetic`` None: the CPU
    model's and CUDA's, which keep FP16 subnormals and accumulate as the bound assumes).  Not on the NPU,
    whose arithmetics (:mod:`sgemm_cube.cpu_fallback.arithmetic`) leave the subnormals and the cube's
    accumulation open."""
    return bool(fixup) and scale == "rows" and get_scheme(scheme).format.name == "fp16" and arithmetic is None


def certificate_threshold(k: int) -> float:
    """The smallest magnitude of a certified output of a ``LOSES_BITS`` line (scaled domain), for K terms:
    four times ``E_K (1 + (1 + (K + 14) 2**-24) / ((2K - 14) 2**-24))``, ``E_K = K 2**-19 + K**2 2**-31``,
    rounded up to a power of two (module docstring), so that the kernels hold it exactly as a float32."""
    u = 2.0 ** -24
    extra = k * 2.0 ** -19 + k * k * 2.0 ** -31
    bound = 4 * extra * (1 + (1 + (k + 14) * u) / (max(2 * k - 14, 1) * u))
    return math.ldexp(1.0, math.frexp(bound)[1])


def uncertified(c: np.ndarray, cls_a: np.ndarray, cls_b: np.ndarray, threshold: float) -> np.ndarray:
    """Which outputs of the emulated scaled sums ``c`` (..., M, N; float32, before :func:`unscale`) fail the
    certificate: a row (``cls_a``, (..., M)) or column (``cls_b``, (..., N)) of class ``LOSES_BITS`` and
    ``|c|`` below ``threshold`` (:func:`certificate_threshold`)."""
    wide = (cls_a == LineClass.LOSES_BITS)[..., :, None] | (cls_b == LineClass.LOSES_BITS)[..., None, :]
    return wide & ~(np.abs(c) >= np.float32(threshold))


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
    maximum, a minimum and two "or"s), so a long line can be read slab by slab
    in any order.
    """

    big: np.ndarray    # float64: largest finite magnitude, 0 if none
    small: np.ndarray  # float64: smallest nonzero finite magnitude, inf if none
    bad: np.ndarray    # bool: holds a NaN or an infinity
    zero: np.ndarray   # bool: holds a zero

    @classmethod
    def empty(cls, shape) -> "LineStats":
        """Statistics of lines with no entries yet (the identity of :meth:`merge`)."""
        return cls(np.zeros(shape), np.full(shape, np.inf), np.zeros(shape, bool), np.zeros(shape, bool))

    def merge(self, index, part: "LineStats") -> None:
        """Fold the statistics ``part`` of more entries of the lines ``self[index]`` into them, in place."""
        np.maximum(self.big[index], part.big, out=self.big[index])
        np.minimum(self.small[index], part.small, out=self.small[index])
        np.logical_or(self.bad[index], part.bad, out=self.bad[index])
        np.logical_or(self.zero[index], part.zero, out=self.zero[index])


def line_stats(x: np.ndarray, axis: int) -> LineStats:
    """:class:`LineStats` of the lines of float32 ``x`` that run along ``axis`` (-1: rows, -2: columns)."""
    x = np.asarray(x)
    finite = np.isfinite(x)
    mag = np.where(finite, np.abs(x), np.float32(0))
    # Maxima and minima are exact, so they are taken in float32 (half the memory of float64) and converted after.
    big = mag.max(axis=axis, initial=np.float32(0)).astype(np.float64)
    small = np.where(mag > 0, mag, np.float32(np.inf)).min(axis=axis, initial=np.float32(np.inf)).astype(np.float64)
    return LineStats(big, small, ~finite.all(axis=axis), (x == 0).any(axis=axis))


def line_meta(x: np.ndarray, axis: int, *, scheme: str = "fp16x3", sb: int = 12, scale="auto",
              fixup: bool = True, arithmetic=None, partner: np.ndarray | None = None,
              certify: bool = False) -> LineMeta:
    """Exponents and classes of the lines of a (B, M, K) (``axis=-1``) or (B, K, N) (``axis=-2``) float32 array.

    ``partner``: the other operand of the product ((B, K, N) for the rows of A, (B, M, K) for the columns of
    B), whose lines these are classified against (:func:`meta_from_stats`: BF16 schemes; FP16 schemes where
    :func:`fp16_rule_applies`).
    ``certify``: :func:`meta_from_stats`'s.
    """
    other, k = None, x.shape[axis]
    if partner is not None and (get_scheme(scheme).format.name == "bf16"
                                or fp16_rule_applies(scheme, scale, k, arithmetic)):
        other = line_stats(partner, -2 if axis == -1 else -1)
    return meta_from_stats(line_stats(x, axis), scheme=scheme, sb=sb, scale=scale, fixup=fixup,
                           arithmetic=arithmetic, partner=other, k=k, certify=certify)


class BF16Summary(NamedTuple):
    """What a BF16 operand's lines tell its partner's (:func:`bf16_summary`): integers, every batch together."""

    narrow_bottom: int  # the lowest binade of its narrow lines (those within 99 binades of the top)
    wide: int           # how many of its lines reach below that
    very: int           # how many of those reach below 2**_BF16_FLOOR
    sparse: int         # how many of its narrow lines hold a zero
    lines: int          # how many lines it has


class BF16Rule(NamedTuple):
    """How a BF16 operand's lines are classified beside its partner's (:func:`bf16_rule`)."""

    lowest: int         # exponent: a line with a nonzero entry below 2**lowest (once scaled) is listed
    list_sparse: bool   # its lines holding a zero are listed too


def _exponents(stats: LineStats, rng: LineRange, scale) -> np.ndarray:
    """The scaling exponent ``t`` of each line under ``scale`` (before the fix-up lines take theirs)."""
    big, small = stats.big, stats.small
    e = _floor_log2(big)
    to_top = np.where(big > 0, rng.top - e, 0)
    if scale is None:
        return np.zeros_like(e)
    if scale == "rows":
        return to_top.astype(np.int32)
    if scale == "matrix":
        big_mat = big.max(axis=-1, keepdims=True, initial=0.0)
        return np.broadcast_to(np.where(big_mat > 0, rng.top - _floor_log2(big_mat), 0), e.shape).astype(np.int32)
    fits = (big < rng.upper) & ((small >= rng.lower) | (small == np.inf))  # auto: the lines that do not fit
    return np.where(fits, 0, to_top).astype(np.int32)


def _bf16_scale(scale):
    """BF16 schemes scale every line under ``scale="auto"`` (its largest entry to ``2**49``): the room below."""
    return "rows" if scale == "auto" else scale


def _bottoms(small: np.ndarray, t: np.ndarray) -> np.ndarray:
    """floor(log2(small * 2**t)) per line (int64), :data:`NO_BOTTOM` where it has no nonzero finite entry."""
    return np.where(small < np.inf, _floor_log2(np.where(small < np.inf, small, 1.0)).astype(np.int64) + t, NO_BOTTOM)


def bf16_summary(stats: LineStats, *, scale="auto") -> BF16Summary:
    """:class:`BF16Summary` of an operand's lines under a BF16 scheme: once scaled, a line whose nonzero
    entries all lie at or above ``2**-50`` is *narrow*, one reaching further down is *wide*.  The CUDA
    split computes the same integers (per block of lines, then summed and minimised)."""
    rng = line_range("bf16x6", 12)
    bottom = _bottoms(stats.small, _exponents(stats, rng, _bf16_scale(scale)))
    narrow = bottom >= _BF16_NARROW_LOW
    return BF16Summary(int(bottom[narrow].min(initial=NO_BOTTOM)), int(np.count_nonzero(~narrow)),
                       int(np.count_nonzero(bottom < _BF16_FLOOR)),
                       int(np.count_nonzero(narrow & (stats.small < np.inf) & stats.zero)), int(bottom.size))


def bf16_rule(own: BF16Summary, partner: BF16Summary, *, scale="auto") -> BF16Rule:
    """How far below its scaled top (``2**49``) a BF16 operand's emulated lines may reach, beside ``partner``.

    One operand may take the wide lines: the one with the larger fraction of them (none on a tie).  The
    other emulates its narrow lines only (entries at or above ``2**-50``, the range alone), and the one that
    takes them emulates:

    * every line, where every line is scaled to the top (``scale`` "auto" or "rows") and the other's
      narrow lines holding a zero are fewer (as a fraction) than its own lines reaching below
      ``2**_BF16_FLOOR``: those lines of the other are then listed too.  Each output of an emulated row
      and column has ``sum |a_k b_k| >= 2**49 * 2**-50`` (the row's largest entry against the column's
      entry there, nonzero), while the entries below ``2**_BF16_FLOOR`` and the products below
      ``2**_BF16_PAIR_FLOOR`` that the slices lose add at most ``K * 2**-53``: under ``2**-28`` of SGEMM's
      bound.  (Vandermonde features span 190 binades against normal columns.)
    * otherwise the lines at or above ``2**(_BF16_PAIR_FLOOR - partner.narrow_bottom)``, never below
      ``2**_BF16_FLOOR`` (the slices' own limit): every product of an emulated row's entry and an
      emulated column's entry stays normal (module comment).

    ``lowest`` is ``-1022`` (below every scaled FP32 value) for "every line".
    """
    narrow = BF16Rule(_BF16_NARROW_LOW, False)
    every = _bf16_scale(scale) == "rows"
    if own.wide * partner.lines > partner.wide * own.lines:  # exact: integers
        if every and partner.sparse * own.lines <= own.very * partner.lines:
            return BF16Rule(_EVERY_LINE, False)
        return BF16Rule(max(_BF16_FLOOR, _BF16_PAIR_FLOOR - partner.narrow_bottom), False)
    if partner.wide * own.lines > own.wide * partner.lines and every \
            and own.sparse * partner.lines <= partner.very * own.lines:
        return narrow._replace(list_sparse=True)
    return narrow


class FP16Summary(NamedTuple):
    """What an FP16 operand's lines tell its partner's (:func:`fp16_summary`): integers, every batch together."""

    wide: int   # lines with a nonzero entry below the split's range once scaled (listed on their own)
    loose: int  # lines neither SPECIAL nor empty that hold a zero or span more than 23 binades
    lines: int  # how many lines it has


class FP16Rule(NamedTuple):
    """How an FP16 operand's lines are classified beside its partner's (:func:`fp16_rule`)."""

    takes_wide: bool  # its wide lines are emulated
    list_loose: bool  # its loose lines are listed (the partner takes its wide lines)


def fp16_rule_applies(scheme: str, scale, k: int | None, arithmetic=None) -> bool:
    """Whether an FP16 scheme's lines are classified beside the partner's (:func:`fp16_rule`): under
    ``scale`` "auto" or "rows" (a wide line scaled to the top), from K = 16, on hardware that keeps FP16
    subnormals and rounds to nearest (CUDA, the CPU; not the NPU's designed-for arithmetic)."""
    arith = as_arithmetic(arithmetic)
    return (get_scheme(scheme).format.name == "fp16" and scale in ("auto", "rows") and k is not None
            and k >= _FP16_RULE_MIN_K and arith.subnormals == "gradual" and arith.cast == "rint")


def _fp16_lines(stats: LineStats, rng: LineRange, scale):
    """(wide, loose) per line of an FP16 operand, before any partner rule (:class:`FP16Summary`)."""
    t = _exponents(stats, rng, scale)
    has = stats.small < np.inf
    special = (np.ldexp(stats.big, t) >= rng.upper) | stats.bad
    wide = has & ~special & (np.ldexp(np.where(has, stats.small, 1.0), t) < rng.lower)
    span = _floor_log2(stats.big) - _floor_log2(np.where(has, stats.small, 1.0))
    loose = has & ~special & (stats.zero | (span > _FP16_TIGHT_SPAN))
    return wide, loose


def _fp16_counts(wide: np.ndarray, loose: np.ndarray) -> FP16Summary:
    return FP16Summary(int(np.count_nonzero(wide)), int(np.count_nonzero(loose)), int(wide.size))


def fp16_summary(stats: LineStats, *, sb: int = 12, scale="auto") -> FP16Summary:
    """:class:`FP16Summary` of an operand's lines under an FP16 scheme (default arithmetic).  The CUDA
    split computes the same integers (per block of lines, then summed)."""
    return _fp16_counts(*_fp16_lines(stats, line_range("fp16x3", sb), scale))


def fp16_rule(own: FP16Summary, partner: FP16Summary) -> FP16Rule:
    """Whether an FP16 operand emulates its wide lines beside ``partner``, or lists its loose ones.

    A wide line (an entry below the split's ``lower`` once scaled) may be emulated against every *tight*
    line of the other operand, one with no zero and its nonzero entries within 23 binades (module
    comment at ``_FP16_TIGHT_SPAN``): its outputs stay within a sixteenth of SGEMM's bound of the
    emulation's own.  So one operand may take its wide lines while the other lists its loose lines (its
    wide lines among them).  Of the three choices, none, this operand or the partner, the one that lists
    the fewest outputs is taken (the listed fractions of both operands' lines, compared exactly as
    integers); none on a tie.  (Vandermonde features against random normal columns: every row emulated.)
    """
    own_cost = partner.loose * own.lines          # this operand takes: the partner's loose lines listed
    given_cost = own.loose * partner.lines        # the partner takes: this operand's loose lines listed
    none_cost = own.wide * partner.lines + partner.wide * own.lines
    return FP16Rule(own_cost < none_cost and own_cost < given_cost,
                    given_cost < none_cost and given_cost < own_cost)


def meta_from_stats(stats: LineStats, *, scheme: str = "fp16x3", sb: int = 12, scale="auto",
                    fixup: bool = True, arithmetic=None, partner: LineStats | None = None,
                    k: int | None = None, certify: bool = False) -> LineMeta:
    """:class:`LineMeta` of lines from their :class:`LineStats` (shape (B, L)); see the module docstring.

    ``arithmetic``: the hardware arithmetic whose split range (:func:`line_range`) classifies the lines.
    ``partner``: the statistics of the other operand's lines (BF16 schemes: :func:`bf16_rule`; without
    them a BF16 line is emulated only within 99 binades of its top; FP16 schemes: :func:`fp16_rule`
    where :func:`fp16_rule_applies` for ``k``, the product's K).  BF16 schemes scale every line
    under ``scale="auto"``.  ``certify``: the product certifies its outputs (:func:`certifies`, which the CPU
    and CUDA backends pass): ``LOSES_BITS`` lines are emulated and keep their ``t``.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {list(SCALES)}")
    rng = line_range(scheme, sb, arithmetic)
    big, small, bad = stats.big, stats.small, stats.bad
    lower, loses = rng.lower, False
    if get_scheme(scheme).format.name == "bf16":
        if partner is not None:
            rule = bf16_rule(bf16_summary(stats, scale=scale), bf16_summary(partner, scale=scale), scale=scale)
            lower = 2.0 ** rule.lowest
            if rule.list_sparse:
                loses = (small < np.inf) & stats.zero
        scale = _bf16_scale(scale)
    elif partner is not None and fp16_rule_applies(scheme, scale, k, arithmetic):
        wide, loose = _fp16_lines(stats, rng, scale)
        rule = fp16_rule(_fp16_counts(wide, loose), fp16_summary(partner, sb=sb, scale=scale))
        if rule.takes_wide:
            lower = 0.0
        if rule.list_loose:
            loses = loose
    t = _exponents(stats, rng, scale)
    cls = np.where((np.ldexp(small, t) < lower) | loses, LineClass.LOSES_BITS, LineClass.SPLIT)
    cls = np.where((np.ldexp(big, t) >= rng.upper) | bad, LineClass.SPECIAL, cls).astype(np.int32)
    to_one = np.where(big > 0, -_floor_log2(big), 0)  # fix-up lines: largest entry into [1, 2)
    lowest = fixup_min_class(fixup, certify)
    t = np.where(cls >= lowest, to_one, t).astype(np.int32)
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


def emulated_error_bound(k: int, rng: LineRange) -> float:
    """A bound on ``|emulated - exact|`` of one output of the scaled operands (before :func:`unscale`).

    Every entry of an emulated line lies below ``rng.upper`` once scaled (a larger one makes the line
    ``SPECIAL``), so ``|A| @ |B|`` is below ``k * rng.upper**2``; the emulation's error is within
    ``max(3k, k + 14) * 2**-24`` of that (the guarantee, README).  Returned doubled and rounded up to a
    power of two, so that the checks that use it hold through their own roundings and every backend
    holds the same number exactly (the CUDA kernels take it as a float32 argument).
    """
    bound = 2.0 * max(3 * k, k + 14) * 2.0 ** -24 * k * float(rng.upper) ** 2
    return math.ldexp(1.0, math.frexp(bound)[1])  # 2**e >= bound


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


def undecided_overflow(c: np.ndarray, ta: np.ndarray, tb: np.ndarray, alpha: float, error_bound: float) -> np.ndarray:
    """Where :func:`unscale` overflows but the exact value may not: the outputs to compute again.

    ``c`` (emulated sums of scaled lines) is within ``error_bound`` (:func:`emulated_error_bound`) of the
    exact sum, so an output whose unscaled value reaches FP32's overflow threshold certainly overflows
    where ``|c| - error_bound`` does too; the others are returned (module docstring, "Overflow").  A
    non-finite ``alpha`` is left to IEEE arithmetic (nothing returned).
    """
    a32 = abs(np.float64(np.float32(alpha)))
    if not np.isfinite(a32):
        return np.zeros(c.shape, bool)
    with np.errstate(over="ignore", invalid="ignore"):
        factor = np.ldexp(a32, -(ta[..., :, None] + tb[..., None, :]))
        mag = np.abs(c.astype(np.float64))
        return (mag * factor >= _FP32_OVERFLOW) & ((mag - error_bound) * factor < _FP32_OVERFLOW)


def fixup_dot(x: np.ndarray, y: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """``alpha * (x @ y)`` for the fix-up outputs, from the unscaled float32 operands (module docstring).

    Each output is the exact value ``alpha * sum_k x[i, k] y[k, j]`` (``alpha``
    taken as float32) rounded once to float32, to nearest, ties to even: a
    finite exact value never comes out infinite, and one beyond FP32's range
    is the infinity of its sign.  NaN and infinities in the operands come out
    as IEEE arithmetic gives them (``inf * 0`` and ``inf - inf`` are NaN), and
    so does a non-finite ``alpha``.

    How: the products of float32 values are exact in float64, so
    ``numpy.matmul`` of the float64 operands is within ``gamma_K * T`` of the
    exact sum (``T = |x| @ |y|``, ``gamma_K = K 2**-53 / (1 - K 2**-53)``, any
    summation order).  A second ``numpy.matmul`` gives ``T``, and an output is
    kept when that whole error interval rounds to one float32 value (it lies
    strictly between two neighbouring rounding boundaries of FP32, the
    overflow threshold among them).  The others -- a sum whose huge terms
    cancel, an exact value within the error of a rounding boundary -- are
    recomputed from their exact products (:func:`_exact_fp32_dots`): error-free
    extractions in NumPy decide almost all of them, ``math.fsum`` the rest (an
    exact zero of nonzero terms, a sum on a rounding boundary).  Cost: two
    float64 ``numpy.matmul`` and a few passes over the outputs, about 3x the
    former float64 sum alone at 1024^3 (0.02 -> 0.06 s on two cores), plus
    about 25 us per recomputed output at K = 1024 (a few hundred in 10**6 on
    wide-range data; every output where huge terms cancel or the rows are
    nearly orthogonal to the columns).
    """
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 2 or y.ndim != 2:  # batches (broadcast): one product each
        batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
        xb, yb = np.broadcast_to(x, batch + x.shape[-2:]), np.broadcast_to(y, batch + y.shape[-2:])
        out = np.empty(batch + (x.shape[-2], y.shape[-1]), np.float32)
        for idx in np.ndindex(*batch):
            out[idx] = fixup_dot(xb[idx], yb[idx], alpha)
        return out
    a64 = float(np.float32(alpha))
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.matmul(x64, y64)
        if a64 != 1:
            v *= a64
        out = v.astype(np.float32)
    k = x.shape[-1]
    if out.size == 0 or k == 0 or a64 == 0 or not math.isfinite(a64):
        return out  # exact already (no term, or alpha 0), or IEEE special values throughout
    np.abs(x64, out=x64)
    np.abs(y64, out=y64)
    # |sum - exact| <= gamma_K T (any order, every operation rounded to nearest), and T <= T-hat / (1 -
    # gamma_K) for the computed T-hat (nonnegative terms): at most K 2**-53 (1 + 2**-20) T-hat while K <=
    # 2**30; 2**-51 |v| for the rounding of alpha * sum and the roundings of _rounds_alike's own sums
    c = abs(a64) * _gamma(k) * (1 + 2.0 ** -50)
    rows = max(1, _FIXUP_CHUNK // max(1, out.shape[1]))
    flagged_i, flagged_j = [], []
    with np.errstate(over="ignore", invalid="ignore"):
        for r0 in range(0, out.shape[0], rows):
            vv = v[r0:r0 + rows]
            err = np.matmul(x64[r0:r0 + rows], y64)
            err *= c
            mag = np.abs(vv)
            mag *= 2.0 ** -51
            err += mag
            i, j = np.nonzero(~_rounds_alike(vv, err))
            finite = np.isfinite(vv[i, j])  # NaN/Inf (from the operands): IEEE's, as they are
            flagged_i.append(i[finite] + r0)
            flagged_j.append(j[finite])
    i, j = np.concatenate(flagged_i), np.concatenate(flagged_j)
    if i.size:
        out[i, j] = _exact_fp32_dots(x, y, a64, i, j)
    return out


#: Outputs per block of the fix-up's check (its float64 temporaries: a few arrays of this many; fewer
#: rows per BLAS call were measurably slower).
_FIXUP_CHUNK = 1 << 21


def _gamma(n: int) -> float:
    """A bound of ``gamma_n / (1 - gamma_n)``, ``gamma_n = n 2**-53 / (1 - n 2**-53)``: the relative error
    of a float64 sum of ``n`` terms (in any order), its computed magnitude sum as the yardstick."""
    return n * 2.0 ** -53 * (1 + 2.0 ** -20) if n <= 2 ** 30 else n * 2.0 ** -51


def _rounds_alike(v: np.ndarray, wide: np.ndarray) -> np.ndarray:
    """Whether float64 ``v - wide`` and ``v + wide`` round to one float32 value (NaN: no).

    ``wide`` must exceed the error bound ``e`` of ``v`` by ``2**-50 e + 2**-52 |v|`` (more than the
    roundings of these two sums): then they enclose ``[v - e, v + e]``, and rounding being monotone,
    every real there rounds to that value (both ends infinite with one sign: the interval lies beyond
    FP32's overflow threshold).
    """
    return (v - wide).astype(np.float32) == (v + wide).astype(np.float32)


def _exact_fp32_dots(x: np.ndarray, y: np.ndarray, a64: float, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """``alpha * sum_k x[i, k] y[k, j]`` rounded once to float32, exactly, for finite x[i, :] and y[:, j].

    The products are exact in float64; with ``alpha != 1`` each is split in two halves of at most 26
    bits (Veltkamp) whose products with alpha's 24 bits are exact too.  Their sums are rounded by
    :func:`_round_sums_fp32`, in blocks of outputs (about 16 MiB of terms each).
    """
    out = np.empty(i.size, np.float32)
    k = x.shape[1]
    cols, j = np.unique(j, return_inverse=True)
    yt = np.ascontiguousarray(y[:, cols].T)  # the columns met, as rows
    step = max(1, (16 << 20) // (16 * max(1, k)))
    for s0 in range(0, i.size, step):
        ii, jj = i[s0:s0 + step], j[s0:s0 + step]
        terms = x[ii, :].astype(np.float64)
        terms *= yt[jj, :]
        if a64 != 1:
            big = terms * 134217729.0  # 2**27 + 1
            hi = big - (big - terms)
            terms = np.concatenate([hi * a64, (terms - hi) * a64], axis=1)
        out[s0:s0 + ii.size] = _round_sums_fp32(terms)
    return out


#: Error-free extractions (:func:`_round_sums_fp32`) before the outputs left are summed by ``math.fsum``.
_EXTRACTIONS = 2


def _round_sums_fp32(t: np.ndarray) -> np.ndarray:
    """The exact sum of each row of float64 ``t`` (n, L) rounded once to float32.

    Each pass is one error-free extraction (Rump, Ogita and Oishi, "Accurate floating-point summation",
    Part I, ExtractVector): with ``sigma`` a power of two at least ``2**M max|t|`` (``2**M >= L + 2``),
    ``q = (sigma + t) - sigma`` and ``r = t - q`` are exact, the ``q`` are multiples of ``2**-53 sigma``
    below ``sigma`` in every partial sum, so ``tau = sum(q)`` is exact in any order; ``fl(tau +
    fl(sum(r)))`` is within ``gamma_L sum|r| + 2**-53 |.|`` of the row's sum, and ``sum|r| <= L 2**-53
    sigma``.  Rows whose interval rounds to one float32 value (:func:`_rounds_alike`) are done; the
    others go round again with ``[tau, r]``, and after :data:`_EXTRACTIONS` passes (an exact zero of
    nonzero terms, a sum on a rounding boundary) through :func:`_round_sum_fp32`.
    """
    out = np.empty(t.shape[0], np.float32)
    todo = np.arange(t.shape[0])
    with np.errstate(over="ignore"):  # a sum beyond FP32's range rounds to the infinity meant
        for _ in range(_EXTRACTIONS):
            n = t.shape[1]
            _, e = np.frexp(np.abs(t).max(axis=1))  # max|t| < 2**e
            sigma = np.ldexp(1.0, e + int(n + 2).bit_length())[:, None]
            q = sigma + t
            q -= sigma
            r = t - q
            tau = q.sum(axis=1)
            v = tau + r.sum(axis=1)
            wide = np.abs(r).sum(axis=1) * (_gamma(n) * (1 + 2.0 ** -50)) + np.abs(v) * 2.0 ** -51
            ok = _rounds_alike(v, wide)
            out[todo[ok]] = v[ok].astype(np.float32)
            if ok.all():
                return out
            todo, t = todo[~ok], np.concatenate([tau[~ok, None], r[~ok]], axis=1)
        for n, row in zip(todo, t.tolist()):
            out[n] = _round_sum_fp32([x for x in row if x], math.fsum)
    return out


def _round_sum_fp32(terms: list, fsum) -> np.float32:
    """The exact sum of float64 ``terms`` rounded once to float32 (to nearest, ties to even).

    ``fsum`` rounds the exact sum ``V`` once to float64 (``f``), and ``float32(f)`` is float32's
    rounding of ``V`` unless ``f`` is itself a rounding boundary of FP32 (the halfway point of two
    neighbours, or the overflow threshold): then the sign of ``V - f`` (``fsum`` of the terms and
    ``-f``, exact in sign) picks the side.
    """
    f = fsum(terms)
    r = np.float32(f)
    rf = float(r)
    if rf == f:
        return r
    if math.isinf(rf):
        other, boundary = np.float32(np.copysign(np.finfo(np.float32).max, rf)), math.copysign(_FP32_OVERFLOW, rf)
    else:
        other = np.nextafter(r, np.float32(np.inf if f > rf else -np.inf))
        boundary = (rf + float(other)) / 2
    if f != boundary:
        return r
    d = fsum(terms + [-f])  # exact sum minus f, rounded: its sign is exact
    if d == 0:
        return r  # a tie: float32(f) rounded it to even
    return other if (d > 0) == (f > rf) else r


def fixup_lines(ma: LineMeta, mb: LineMeta, fixup: bool, certify: bool = False):
    """Yield ``(i, rows, cols)``: batch ``i``'s fix-up rows of A and columns of B (batches with any);
    ``certify``: :func:`certifies` for the product."""
    lowest = fixup_min_class(fixup, certify)
    for i in range(ma.cls.shape[0]):
        rows = np.flatnonzero(ma.cls[i] >= lowest)
        cols = np.flatnonzero(mb.cls[i] >= lowest)
        if rows.size or cols.size:
            yield i, rows, cols


def choose_scheme(a: np.ndarray, b: np.ndarray, *, margin: float, sb: int = 12, scale="auto", fixup: bool = True,
                  schemes: tuple = ("fp16x3", "bf16x6")) -> str:
    """The scheme that ``scheme="auto"`` runs on CUDA for (B, M, K) ``a`` and (B, K, N) ``b`` (a broadcast
    operand with B = 1): the second of ``schemes`` where the outputs the first recomputes in FP32 (those of
    a listed row of A or column of B, :func:`fixup_lines`) exceed those the second recomputes by more than
    ``margin``, a fraction of the outputs; the first otherwise.  With fa, fb the listed fractions of A's rows
    and B's columns (every batch), the recomputed fraction is fa + fb - fa * fb, in float32 as the GPU's
    ``split_kernel.scheme_choice_kernel`` computes it (the same rule, tested against it).  Under
    :func:`certifies` the first's ``LOSES_BITS`` lines are emulated, not listed."""

    def recomputed(scheme: str) -> np.float32:
        certify = certifies(scheme, scale, fixup)
        lowest = fixup_min_class(fixup, certify)
        fa, fb = (np.float32(np.count_nonzero(line_meta(x, axis, scheme=scheme, sb=sb, scale=scale, partner=other,
                                                        certify=certify).cls >= lowest))
                  / np.float32(x.size // x.shape[axis]) for x, axis, other in ((a, -1, b), (b, -2, a)))
        return fa + fb - fa * fb

    return schemes[1] if recomputed(schemes[0]) - recomputed(schemes[1]) > np.float32(margin) else schemes[0]


# The CUDA kernels keep the two integers in one int32 per line: bits 0-1 cls, bits 2-12 t + 1024.
def pack_meta(meta: LineMeta) -> np.ndarray:
    """One int32 per line holding (cls, t), as the CUDA split kernel writes it."""
    return (meta.cls | ((meta.t + 1024) << 2)).astype(np.int32)


def unpack_meta(packed: np.ndarray) -> LineMeta:
    """Inverse of :func:`pack_meta`."""
    p = np.asarray(packed).astype(np.int32)
    return LineMeta(((p >> 2) & 2047) - 1024, p & 3)
