"""A slow scalar reference of the arithmetic model, in plain Python loops.

It follows the definitions of :mod:`sgemm_cube.cpu_fallback.split`,
:mod:`sgemm_cube.cpu_fallback.accumulate` and :mod:`sgemm_cube.cpu_fallback.gemm` one scalar at a
time with independent means: FP16 rounding through :mod:`struct` (IEEE
binary16, round half to even), chunk sums as exact :class:`fractions.Fraction`
values rounded to FP32 by comparing neighbours exactly, and FP32 additions
as NumPy ``float32`` scalar operations.  The fast model must agree with it
bit for bit; use it on small shapes only (it is ~1e5 times slower).

The other arithmetic (``arithmetic=``, :mod:`sgemm_cube.cpu_fallback.arithmetic`) by the same
independent means: FP16 truncation as the floor of the exactly scaled magnitude, saturation and
flushing by comparison, the split's FP32 subtraction and scaling as exact rationals rounded to
FP32, and the ``"truncate"`` accumulation's chunk sums and adds as exact rationals rounded toward
zero by comparing neighbours.
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

from .accumulate import K_GROUP
from .arithmetic import DEFAULT, as_arithmetic
from .schemes import get_scheme

__all__ = ["reference_split", "reference_slices", "reference_matmul"]

_F32 = np.float32
_FP16_MAX = 65504.0
_FP16_TINY = 2.0 ** -14
_F32_MAX = float(np.finfo(np.float32).max)


def _fp16(v: float) -> float:
    """Round a double to binary16 (ties to even); +-inf past the range."""
    try:
        return struct.unpack("<e", struct.pack("<e", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _fp16_under(v: float, ar) -> float:
    """Convert a double holding an FP32 value to binary16 under the arithmetic's cast, overflow and
    subnormals (:func:`sgemm_cube.cpu_fallback.split.to_fp16`'s rule, by independent means)."""
    if not math.isfinite(v):
        return v
    if ar.cast == "rint":
        r = _fp16(v)
    elif v == 0:
        r = v
    else:  # toward zero: the floor of |v| in units of the result's quantum (exact scalings by powers of two)
        q = max(math.frexp(v)[1] - 11, -24)
        r = math.copysign(math.floor(abs(v) / 2.0 ** q) * 2.0 ** q, v)
        if abs(r) > _FP16_MAX:
            r = math.copysign(_FP16_MAX, v)  # IEEE's round toward zero never reaches infinity
    if ar.overflow == "saturate" and math.isinf(r):
        r = math.copysign(_FP16_MAX, v)
    if ar.subnormals == "flush" and abs(r) < _FP16_TINY:
        r = math.copysign(0.0, r)
    return r


def reference_split(x: float, sb: int, arithmetic=None) -> tuple[float, float]:
    """Scalar split of one FP32 value: ``(hi, lo)`` as Python floats (``arithmetic``: the conversions'
    rules, :mod:`sgemm_cube.cpu_fallback.arithmetic`)."""
    ar = as_arithmetic(arithmetic)
    x = float(_F32(x))
    if not math.isfinite(x):
        return x, 0.0
    if ar[:3] == DEFAULT[:3]:
        hi = _fp16(x)
        if not math.isfinite(hi):
            return hi, -hi  # as the vector split: residual x - inf = -inf
        return hi, _fp16((x - hi) * 2.0 ** sb)  # both operations exact in double
    hi = _fp16_under(x, ar)
    if math.isinf(hi):
        return hi, -hi
    read = 0.0 if ar.subnormals == "flush" and abs(hi) < _FP16_TINY else hi  # f32(hi)
    residual = _round_to_f32(Fraction(x) - Fraction(read))                    # FP32 Sub
    scaled = _round_to_f32(Fraction(float(residual)) * Fraction(2) ** sb)    # FP32 Muls
    return hi, _fp16_under(float(scaled), ar)


_BF16_MAX = float.fromhex("0x1.fep127")


def _bf16(v: float) -> float:
    """Round a double to 8 significant bits (ties to even), BF16's subnormal step 2**-133;
    a result past the largest BF16 is truncated instead (the split's rule)."""
    if v == 0 or not math.isfinite(v):
        return v
    q = max(math.frexp(v)[1] - 8, -133)  # the unit of the result
    r = round(v / 2.0 ** q) * 2.0 ** q   # round() on a float ties to even; the division is exact
    if abs(r) > _BF16_MAX:
        r = math.copysign(math.floor(abs(v) / 2.0 ** q) * 2.0 ** q, v)
    return r


def reference_slices(x: float, scheme: str, sb: int, arithmetic=None) -> list[float]:
    """Scalar slices of one FP32 value under a scheme (as Python floats)."""
    if get_scheme(scheme).format.name == "fp16":
        return list(reference_split(x, sb, arithmetic))
    x = float(_F32(x))
    if not math.isfinite(x):
        return [x, 0.0, 0.0]
    out = []
    for _ in range(3):
        out.append(_bf16(x))
        x -= out[-1]  # exact in double
    return out


def _round_to_f32(value: Fraction, rounding: str = "rne") -> np.float32:
    """Correctly rounded FP32 of an exact rational: ties to even (``"rne"``) or toward zero (``"trunc"``)."""
    with np.errstate(over="ignore"):
        guess = _F32(float(value))  # within one FP32 ulp: double rounding can miss by one
    if not np.isfinite(guess):
        return _F32(math.copysign(_F32_MAX, value)) if rounding == "trunc" else guess
    below = np.nextafter(guess, _F32(-np.inf))
    above = np.nextafter(guess, _F32(np.inf))
    if rounding == "trunc":  # the largest magnitude not beyond the value, on its side of zero
        inside = [c for c in (below, guess, above)
                  if np.isfinite(c) and abs(Fraction(float(c))) <= abs(value) and Fraction(float(c)) * value >= 0]
        return _F32(max(inside, key=lambda c: abs(float(c))))
    best = None
    for cand in (below, guess, above):
        if not np.isfinite(cand):
            continue
        dist = abs(Fraction(float(cand)) - value)
        mantissa_even = int(np.frombuffer(_F32(cand).tobytes(), np.uint32)[0]) % 2 == 0
        key = (dist, not mantissa_even)
        if best is None or key < best[0]:
            best = (key, cand)
    return _F32(best[1])


def _chunk_sum(xs, ys, rounding="rne") -> np.float32:
    return _round_to_f32(sum((Fraction(x) * Fraction(y) for x, y in zip(xs, ys)), Fraction(0)), rounding)


def _add(x, y, rounding) -> np.float32:
    """FP32 ``x + y``: NumPy's float32 add (to nearest even), or the exact sum rounded toward zero."""
    if rounding == "rne":
        return _F32(x + y)
    return _round_to_f32(Fraction(float(x)) + Fraction(float(y)), "trunc")


def _scaled(x, factor, rounding) -> np.float32:
    if rounding == "rne":
        return _F32(x * _F32(factor))
    return _round_to_f32(Fraction(float(x)) * Fraction(factor), "trunc")


def reference_matmul(a, b, *, sb=12, order="termwise", accumulate=None, keep_lo_lo=False, scheme="fp16x3",
                     arithmetic=None, k_group=K_GROUP):
    """Scalar-loop version of :func:`sgemm_cube.cpu_fallback.emulated_matmul` (same arguments)."""
    ar = as_arithmetic(arithmetic)
    atomic = "trunc" if ar.atomic == "trunc" else "rne"
    accumulate = accumulate or ar.accumulate
    chunk = {"cube16": 16, "sequential": 1, "truncate": 16}[accumulate]
    rounding = "trunc" if accumulate == "truncate" else "rne"
    sch = get_scheme("fp16x4" if keep_lo_lo else scheme)
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    m, k = a.shape
    n = b.shape[1]
    sa = [[reference_slices(a[i, p], sch.name, sb, ar) for p in range(k)] for i in range(m)]
    sbm = [[reference_slices(b[p, j], sch.name, sb, ar) for j in range(n)] for p in range(k)]
    step = _F32(2.0 ** -sb) if sch.scaled else _F32(1)
    out = np.empty((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            chunks = {}  # (pa, pb) -> the chunk sums of that product, in K order
            for pa, pb in sch.products:
                chunks[pa, pb] = [_chunk_sum([sa[i][p][pa] for p in range(k0, min(k, k0 + chunk))],
                                             [sbm[p][j][pb] for p in range(k0, min(k, k0 + chunk))], rounding)
                                  for k0 in range(0, k, chunk)]
            if order == "termwise":
                totals = {}
                per_group = max(len(chunks[sch.products[0]]), 1) if k_group is None else k_group // chunk
                for key, sums in chunks.items():
                    total = None
                    for g0 in range(0, max(len(sums), 1), per_group):  # the K groups
                        acc = _F32(0)
                        for s in sums[g0:g0 + per_group]:
                            acc = _add(acc, s, rounding)  # the cube's accumulator: the model's rounding
                        # the second level: the first group's sum stored, later ones added (the atomic add)
                        total = acc if total is None else _add(total, acc, atomic)
                    totals[key] = total  # the combination below: the vector unit's, to nearest
                top = max(pa + pb for pa, pb in sch.products)
                total = None
                for level in range(top, -1, -1):
                    if total is not None:
                        total = _F32(total * step)
                    for key in sch.products:
                        if sum(key) == level:
                            total = totals[key] if total is None else _F32(total + totals[key])
                out[i, j] = total
            else:
                acc = _F32(0)
                for c in range((k + chunk - 1) // chunk):
                    for key in sch.products:
                        acc = _add(acc, _scaled(chunks[key][c], float(step) ** sum(key), rounding), rounding)
                out[i, j] = acc
    return out
