"""Choosing how to compute a product: scheme, scaling exponent, power-of-two scaling.

The FP16 split only represents values whose exponents fit FP16 (Rules 1 and
2 of the SGEMM-cube paper).  Real data do not ask first, so this module
reads the operands' exponent ranges (one cheap pass) and decides:

* ``scale``: exact power-of-two scaling, per row of A and per column of B
  (``"rows"``) or per matrix (``"matrix"``), chosen from the largest
  magnitude present and undone on C.  Multiplying by ``2**t`` is exact, so
  data at 1e-30 or 1e30 split as well as data near 1.
* ``sb="auto"``: the largest ``sb <= 12`` whose range (Eq. 6) holds the data.
* ``scheme="auto"``: the fastest scheme that keeps FP32-level accuracy for
  these data (as cuMpSGEMM's AUTO mode and the BF16x9 library's hybrid do):

  1. ``bf16x9`` with scaling when a row of A or a column of B spans more than
     29 binades (largest over smallest nonzero magnitude): the FP16 split
     would keep fewer than 22 bits of its small entries, which matter when
     they meet large entries of the other operand; three BF16 slices hold
     any FP32 value exactly (down to ``2**-110`` of its row's largest);
  2. ``fp16x3`` as is, when every row and column lies in the split's range
     for sb=12 (the paper's algorithm, untouched);
  3. ``fp16x3`` with per-row/column scaling otherwise (after scaling the
     largest entry of each row sits just under ``2**15`` and every entry
     above ``2**-15`` keeps 22 bits);
  4. native FP32 when the backend has no kernel for the scheme chosen.

:func:`explain` returns the decision and the reason, without computing.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cpu_fallback import SCHEMES, get_scheme, split_limits

from ._xp import Ops

__all__ = ["Plan", "explain", "make_plan", "plan_with_ranges", "finite_absmax", "scale_exponents", "SCALES",
           "FP16_ROW_SPAN"]

SCALES = (None, "rows", "matrix")

#: Binades a row may span for fp16x3 with per-row scaling to keep 22 bits everywhere:
#: the largest entry lands in [2**14, 2**15) and 22 bits hold down to 2**-15.
FP16_ROW_SPAN = 29


class Plan(NamedTuple):
    """How :func:`sgemm_cube.matmul` computes a product.

    Attributes
    ----------
    scheme : str
        ``"fp16x3"``, ``"fp16x4"``, ``"bf16x9"``, ``"bf16x6"`` or ``"native"``.
    sb : int
        Scaling exponent of the FP16 residuals.
    scale : str or None
        ``None``, ``"rows"`` (A per row, B per column) or ``"matrix"``.
    backend : str
        The backend that runs it.
    reason : str
        Why, in one sentence.
    """

    scheme: str
    sb: int
    scale: str | None
    backend: str
    reason: str


class _Ranges(NamedTuple):
    """Largest and smallest nonzero finite magnitude per row of A and per column of B (NumPy)."""

    a_max: np.ndarray
    a_min: np.ndarray
    b_max: np.ndarray
    b_min: np.ndarray


def finite_absmax(ops, x, axis) -> np.ndarray:
    """Largest finite magnitude along ``axis``, on the host; one pass unless NaN/Inf are present."""
    if not ops.np and x.device.type == "cuda":
        from .backends.cuda.range_kernel import row_ranges

        return ops.to_numpy(row_ranges(x, axis)[0]).astype(np.float64)
    mag = abs(x)
    big = ops.to_numpy(ops.amax(mag, axis)).astype(np.float64)
    if not np.isfinite(big).all():
        big = ops.to_numpy(ops.amax(ops.where(ops.special_mask(x), ops.full_like(mag, 0), mag), axis))
    return big.astype(np.float64)


def _ranges(a3, b3) -> _Ranges:
    # Few passes over the data: on a GPU this runs before every scheme="auto" product.
    ops = Ops(a3)
    if _on_cuda(a3):  # one read per operand with the CUDA backend's reduction kernel
        from .backends.cuda.range_kernel import row_ranges

        out = [ops.to_numpy(t).astype(np.float64) for x, axis in ((a3, -1), (b3, -2)) for t in row_ranges(x, axis)]
        return _Ranges(*out)
    out = []
    for x, axis in ((a3, -1), (b3, -2)):
        mag = abs(x)
        # NaN > 0 is False and +inf never lowers a minimum: no special-value mask needed here.
        small = ops.amin(ops.where(mag > 0, mag, ops.full_like(mag, np.inf)), axis)
        out += [finite_absmax(ops, x, axis), ops.to_numpy(small).astype(np.float64)]
    return _Ranges(*out)


def _on_cuda(x) -> bool:
    return not isinstance(x, np.ndarray) and x.device.type == "cuda"


def _span_binades(big: np.ndarray, small: np.ndarray) -> float:
    rows = big > 0
    if not rows.any():
        return 0.0
    return float(np.max(np.log2(big[rows]) - np.log2(small[rows])))


def _fits(r: _Ranges, sb: int) -> bool:
    lim = split_limits(sb)
    biggest = max(r.a_max.max(initial=0), r.b_max.max(initial=0))
    tiny = [m[(m > 0) & (m < lim.min_row_abs)] for m in (r.a_max, r.b_max)]
    return biggest < lim.max_abs and not any(t.size for t in tiny)


def _auto_sb(r: _Ranges) -> int | None:
    """Largest sb <= 12 whose split range holds the data, or None."""
    for sb in range(12, -1, -1):
        if _fits(r, sb):
            return sb
    return None


def make_plan(a3, b3, *, sb, scheme: str, scale, backend: str, backend_schemes) -> Plan:
    """Resolve ``"auto"`` choices for 3-D operands (see the module docstring)."""
    return plan_with_ranges(a3, b3, sb=sb, scheme=scheme, scale=scale, backend=backend,
                            backend_schemes=backend_schemes)[0]


def plan_with_ranges(a3, b3, *, sb, scheme: str, scale, backend: str, backend_schemes):
    """:func:`make_plan`, also returning the operands' row/column maxima (B, M), (B, N) when it read
    them (``scheme="auto"`` or ``sb="auto"``; else None), so that scaling need not read them again."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {list(SCALES)}")
    if scheme != "auto":
        get_scheme(scheme)
    if not (sb == "auto" or isinstance(sb, (int, np.integer)) and not isinstance(sb, bool)):
        raise TypeError(f"sb must be an integer or 'auto', got {sb!r}")
    needs_ranges = scheme == "auto" or sb == "auto"
    r = _ranges(a3, b3) if needs_ranges else None
    maxima = (r.a_max, r.b_max) if r is not None else None

    if scheme != "auto":
        if sb == "auto":
            if scale is not None or SCHEMES[scheme].format.name == "bf16":
                sb = 12
            else:
                sb = _auto_sb(r)
                if sb is None:
                    raise ValueError("no sb in [0, 12] represents these data with the FP16 split "
                                     "(magnitudes too large or rows too small): pass scale='rows' or scheme='auto'")
        return Plan(scheme, int(sb), scale, backend, "as requested"), maxima

    sb = 12 if sb == "auto" else int(sb)
    span = max(_span_binades(r.a_max, r.a_min), _span_binades(r.b_max, r.b_min))
    if span > FP16_ROW_SPAN:
        choice = Plan("bf16x9", sb, scale or "rows", backend,
                      f"a row of a or column of b spans {span:.0f} binades, more than the {FP16_ROW_SPAN} in which "
                      f"the FP16 split keeps 22 bits for every entry: three BF16 slices represent every FP32 value")
    elif _fits(r, sb) and scale is None:
        choice = Plan("fp16x3", sb, None, backend,
                      f"every row of a and column of b lies in the FP16 split's range for sb={sb} "
                      f"and spans at most {span:.0f} binades")
    else:
        choice = Plan("fp16x3", sb, scale or "rows", backend,
                      f"rows of a and columns of b span at most {span:.0f} binades (<= {FP16_ROW_SPAN}): "
                      f"fp16x3 after exact power-of-two scaling keeps 22 bits for every entry")
    if choice.scheme not in backend_schemes:
        return Plan("native", choice.sb, None, "native",
                    f"{choice.reason}; but the {backend!r} backend has no {choice.scheme} kernel, "
                    f"so native FP32 runs instead"), maxima
    return choice, maxima


def scale_exponents(big, *, scheme: str, sb: int):
    """Integer shifts ``t`` that move each largest magnitude ``big`` to the top binade of the split.

    FP16 schemes: into ``[2**T, 2**(T+1))`` with ``T = min(14, 26 - sb)``
    (just under ``split_limits(sb).max_abs``).  BF16 schemes: into ``[1, 2)``.
    Rows that are all zero get ``t = 0``.
    """
    top = min(14, 26 - sb) if get_scheme(scheme).format.name == "fp16" else 0
    big = np.asarray(big, dtype=np.float64)
    _, e = np.frexp(big)  # big = f * 2**e, f in [0.5, 1): floor(log2 big) = e - 1
    return np.where(big > 0, top - (e - 1), 0).astype(np.int32)


def explain(a, b, sb=12, *, scheme: str = "auto", scale=None, backend: str = "auto") -> Plan:
    """Say how :func:`sgemm_cube.matmul` would compute ``a @ b``, and why, without computing it.

    Parameters are those of :func:`sgemm_cube.matmul`.  Returns a
    :class:`Plan` (scheme, sb, scale, backend, reason).
    """
    from .api import _prepare

    prep = _prepare(a, b, backend)
    return make_plan(prep.a3, prep.b3, sb=sb, scheme=scheme, scale=scale, backend=prep.backend,
                     backend_schemes=prep.backend_schemes)
