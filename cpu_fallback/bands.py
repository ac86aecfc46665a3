"""Listed lines on the cube: exponent bands (the NPU design of issue 32, item 4), in NumPy.

A *listed* line (:mod:`.guard`: class ``LOSES_BITS`` with ``fixup=True``) has entries too far below
its largest for the FP16 split to keep 22 bits of each.  Instead of recomputing its outputs in plain
FP32 on the vector unit, the NPU design cuts it into *exponent bands* and runs each band through the
split and the cube like any other line.  Lines that hold NaN or an infinity (class ``SPECIAL``) stay
on the vector unit's FP32 fix-up; so do finite lines beyond the split's top when ``scale=None`` (also
``SPECIAL``): only ``LOSES_BITS`` lines are *banded*.

The window (:func:`band_window`)
    The split keeps 22 bits of every value in ``[lower, 2**(top + 1))`` (``lower``, ``top``:
    :func:`.guard.line_range` for the arithmetic the lines are classified with).  That is
    ``W = top + 1 - log2(lower)`` binades: 30 for ``sb = 12`` where FP16 subnormals are kept, 19
    where they flush (the NPU backend's design until the chip says otherwise).

Band ``a`` of a banded line (``a = 0, 1, ...``)
    With ``e = floor(log2 big)`` (``big``: the line's largest finite magnitude), band ``a`` holds the
    entries whose magnitude lies in ``[2**(e + 1 - (a + 1) W), 2**(e + 1 - a W))``, scaled by
    ``2**t_a``, ``t_a = top - e + a W`` (:func:`band_exponents`), which maps exactly that range onto
    the window.  Each entry lies in exactly one band, and every entry of a band keeps 22 bits in the
    split.  The device derives ``t_a`` from the line's packed integers alone: a listed line's ``t`` is
    ``-e`` (:func:`.guard.meta_from_stats`), so ``t_a = t + top + a W``.  ``t_a`` is capped at
    ``top + 150``: every nonzero FP32 magnitude (at least ``2**-149``) then scales to ``2**(top + 1)``
    or more, so a band past the line's last is all zeros, and one exponent rule serves every pass.
    Band values (:func:`band_values`): ``x * 2**t_a`` rounded once to FP32 (:func:`.guard.scale_lines`),
    kept where ``lower <= |.| < 2**(top + 1)``, ``+0`` elsewhere (NaN and Inf included).
    A line of span ``s = e - floor(log2 small)`` binades has ``s // W + 1`` bands (:func:`band_counts`).

The passes (:func:`banded_outputs`)
    Every output of a banded row or column is a sum of *pass products*.  A pass pairs one *side* of
    A with one of B: a band of the banded rows, or A's ordinary split (its scaled lines), and the same
    for B.  Each pass product is the emulated product (the GEMM and combine, ``product``) of the two
    sides' values, unscaled with ``alpha`` by :func:`.guard.unscale` (one rounding) with the two
    sides' exponents.  Per output, the pass results are added in FP32, round to nearest (the vector
    unit), into an accumulator that starts at ``+0``, smallest bands first:

    * banded row, ordinary column: bands ``a = NA - 1, ..., 0`` of the row with B's split;
    * ordinary row, banded column: A's split with bands ``b = NB - 1, ..., 0`` of the column;
    * banded row and column: every pair, ``a`` descending outside, ``b`` descending inside (the row
      and the column are computed once, not twice);

    ``NA`` / ``NB``: the largest band count among the banded rows / columns of the batch.  A band past
    a line's last adds ``+0`` (its values are all zero), which leaves every sum but ``-0`` as it is.

Accuracy: each pass is an emulated product of lines that fit the split, within the emulated path's
bound of ``|A_a| |B_b|``; the passes holding a nonzero term are at most K per output (each pairs
bands that share a k), each adds one rounding, and ``sum |A_a| |B_b| = |A| |B|``: the outputs stay
within SGEMM's componentwise bound (tested on every adversarial generator under every arithmetic
alternative, ``tests/ascendc_kernels/test_guarantee_alternatives.py``) and, unlike the FP32 fix-up,
keep the emulation's accuracy.  Cost: a banded line of ``n`` bands costs ``n`` GEMM passes against
the other operand's ordinary lines, and ``n m`` against a banded line of ``m`` bands.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from .guard import LineClass, LineMeta, _floor_log2, line_range, scale_lines, unscale

__all__ = ["BandWindow", "band_window", "banded_lines", "band_counts", "band_counts_of", "band_exponents",
           "band_values", "banded_outputs"]


class BandWindow(NamedTuple):
    """The split's exact window ``[lower, 2**(top + 1))``, ``width = top + 1 - log2(lower)`` binades."""

    width: int
    top: int
    lower: float

    @property
    def upper(self) -> float:
        """``2**(top + 1)``: band values lie below it."""
        return 2.0 ** (self.top + 1)

    @property
    def zero_exponent(self) -> int:
        """The cap of :func:`band_exponents` (``top + 150``): it scales every nonzero FP32 magnitude to
        ``2**(top + 1)`` or more, so the band it stands for is empty."""
        return self.top + 150


def band_window(sb: int = 12, arithmetic=None, *, scheme: str = "fp16x3") -> BandWindow:
    """The band window of the FP16 split with residual exponent ``sb`` under ``arithmetic`` (module docstring)."""
    rng = line_range(scheme, sb, arithmetic)
    low = math.log2(rng.lower)
    if low != int(low) or rng.upper < 2.0 ** (rng.top + 1):
        raise ValueError(f"scheme {scheme!r} with sb={sb} has no power-of-two window: {rng}")
    return BandWindow(rng.top + 1 - int(low), rng.top, rng.lower)


def banded_lines(meta: LineMeta, fixup: bool = True) -> np.ndarray:
    """Which lines are banded: class ``LOSES_BITS`` with ``fixup`` on (shape of ``meta.cls``)."""
    return (meta.cls == LineClass.LOSES_BITS) & bool(fixup)


def band_counts(x: np.ndarray, axis: int, window: BandWindow) -> np.ndarray:
    """Bands of each line of float32 ``x`` along ``axis`` (:func:`band_counts_of` of its statistics)."""
    finite = np.isfinite(x)
    mag = np.where(finite, np.abs(x), np.float32(0))
    big = mag.max(axis=axis, initial=np.float32(0))
    small = np.where(mag > 0, mag, np.float32(np.inf)).min(axis=axis, initial=np.float32(np.inf))
    return band_counts_of(big, np.where(np.isinf(small), 0, small), window)


def band_counts_of(big: np.ndarray, small: np.ndarray, window: BandWindow) -> np.ndarray:
    """Bands of lines whose largest and smallest nonzero finite magnitudes are ``big`` and ``small``:
    ``(floor(log2 big) - floor(log2 small)) // W + 1``, 0 for a line with no nonzero finite entry (big 0)."""
    big, small = np.asarray(big, np.float64), np.asarray(small, np.float64)
    span = _floor_log2(big) - _floor_log2(small)
    return np.where(big > 0, span // window.width + 1, 0).astype(np.int32)


def band_exponents(t: np.ndarray, band: int, window: BandWindow, banded: np.ndarray | None = None) -> np.ndarray:
    """``t_a`` of band ``band`` for lines whose packed ``t`` is ``-floor(log2 big)`` (listed lines):
    ``min(t + top + band W, top + 150)``; lines not ``banded`` (if given) get the cap (an empty band)."""
    t_a = np.minimum(np.asarray(t, np.int64) + window.top + band * window.width, window.zero_exponent)
    if banded is not None:
        t_a = np.where(banded, t_a, window.zero_exponent)
    return t_a.astype(np.int32)


def band_values(x: np.ndarray, t_a: np.ndarray, axis: int, window: BandWindow) -> np.ndarray:
    """The entries of band ``t_a`` (:func:`band_exponents`) of the lines of ``x`` along ``axis``, scaled
    into the window: ``x * 2**t_a`` rounded once to FP32, kept in ``[lower, 2**(top + 1))``, else ``+0``."""
    with np.errstate(over="ignore"):  # x * 2**t_a rounded once; past FP32's range: inf, not kept
        v = scale_lines(x, t_a, axis)  # NaN/Inf -> 0
    mag = np.abs(v)
    keep = (mag >= np.float32(window.lower)) & (mag < np.float32(window.upper))
    return np.where(keep, v, np.float32(0)).astype(np.float32)


def banded_outputs(a: np.ndarray, b: np.ndarray, c: np.ndarray, *, ma: LineMeta, mb: LineMeta,
                   split_a: np.ndarray, split_b: np.ndarray, window: BandWindow, alpha: float = 1.0,
                   fixup: bool = True, product: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """``c`` with the outputs of the banded lines of one 2-D product replaced by their band passes.

    Parameters
    ----------
    a, b : ndarray (M, K), (K, N) float32
        The operands as the user gave them (unscaled).
    c : ndarray (M, N) float32
        The ordinary pass's result (unscaled, times alpha); a copy is returned.
    ma, mb : LineMeta
        The lines' integers, arrays of shape (M,) and (N,).
    split_a, split_b : ndarray
        What the ordinary split reads: each line scaled by ``2**t``, values the split cannot hold as 0.
    window : BandWindow
    alpha : float
        Taken as float32, in every pass's unscaling.
    fixup : bool
        Whether ``LOSES_BITS`` lines are listed (no line is banded otherwise).
    product : callable
        The emulated product of two such value matrices, the GEMM and combine as the device runs them
        (the caller's tiling and arithmetic), returning FP32 (rows, cols).
    """
    rows, cols = banded_lines(ma, fixup), banded_lines(mb, fixup)
    c = np.array(c, np.float32, copy=True)
    if not rows.any() and not cols.any():
        return c
    ri, ci = np.flatnonzero(rows), np.flatnonzero(cols)
    ro, co = np.flatnonzero(~rows), np.flatnonzero(~cols)
    na = int(band_counts(a[ri], -1, window).max(initial=0))
    nb = int(band_counts(b[:, ci], -2, window).max(initial=0))

    def band(x, t, lines, along, k):  # band k of the lines of x running along axis `along`
        t_a = band_exponents(t[lines], k, window)
        return band_values(np.take(x, lines, axis=-1 - (along == -1)), t_a, along, window), t_a

    def passes(outer, inner):
        acc = None
        for xa, ta in outer:
            for xb, tb in inner():
                u = unscale(product(xa, xb), ta, tb, alpha)
                acc = u + np.float32(0) if acc is None else acc + u  # the first: +0 + u
        return acc

    a_bands = [band(a, ma.t, ri, -1, k) for k in reversed(range(na))]
    b_bands = lambda: (band(b, mb.t, ci, -2, k) for k in reversed(range(nb)))  # noqa: E731
    if ri.size and co.size:
        c[np.ix_(ri, co)] = passes(a_bands, lambda: [(split_b[:, co], mb.t[co])])
    if ci.size and ro.size:
        c[np.ix_(ro, ci)] = passes([(split_a[ro], ma.t[ro])], b_bands)
    if ri.size and ci.size:
        c[np.ix_(ri, ci)] = passes(a_bands, b_bands)
    return c
