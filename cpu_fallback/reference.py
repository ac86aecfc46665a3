"""A slow scalar reference of the arithmetic model, in plain Python loops.

It follows the definitions of :mod:`sgemm_cube.cpu_fallback.split`,
:mod:`sgemm_cube.cpu_fallback.accumulate` and :mod:`sgemm_cube.cpu_fallback.gemm` one scalar at a
time with independent means: FP16 rounding through :mod:`struct` (IEEE
binary16, round half to even), chunk sums as exact :class:`fractions.Fraction`
values rounded to FP32 by comparing neighbours exactly, and FP32 additions
as NumPy ``float32`` scalar operations.  The fast model must agree with it
bit for bit; use it on small shapes only (it is ~1e5 times slower).
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

from .schemes import get_scheme

__all__ = ["reference_split", "reference_slices", "reference_matmul"]

_F32 = np.float32


def _fp16(v: float) -> float:
    """Round a double to binary16 (ties to even); +-inf past the range."""
    try:
        return struct.unpack("<e", struct.pack("<e", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def reference_split(x: float, sb: int) -> tuple[float, float]:
    """Scalar split of one FP32 value: ``(hi, lo)`` as Python floats."""
    x = float(_F32(x))
    if not math.isfinite(x):
        return x, 0.0
    hi = _fp16(x)
    if not math.isfinite(hi):
        return hi, -hi  # as the vector split: residual x - inf = -inf
    return hi, _fp16((x - hi) * 2.0 ** sb)  # both operations exact in double


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


def reference_slices(x: float, scheme: str, sb: int) -> list[float]:
    """Scalar slices of one FP32 value under a scheme (as Python floats)."""
    if get_scheme(scheme).format.name == "fp16":
        return list(reference_split(x, sb))
    x = float(_F32(x))
    if not math.isfinite(x):
        return [x, 0.0, 0.0]
    out = []
    for _ in range(3):
        out.append(_bf16(x))
        x -= out[-1]  # exact in double
    return out


def _round_to_f32(value: Fraction) -> np.float32:
    """Correctly rounded FP32 of an exact rational (ties to even)."""
    with np.errstate(over="ignore"):
        guess = _F32(float(value))  # within one FP32 ulp: double rounding can miss by one
    if not np.isfinite(guess):
        return guess
    below = np.nextafter(guess, _F32(-np.inf))
    above = np.nextafter(guess, _F32(np.inf))
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


def _chunk_sum(xs, ys) -> np.float32:
    return _round_to_f32(sum((Fraction(x) * Fraction(y) for x, y in zip(xs, ys)), Fraction(0)))


def reference_matmul(a, b, *, sb=12, order="termwise", accumulate="cube16", keep_lo_lo=False, scheme="fp16x3"):
    """Scalar-loop version of :func:`sgemm_cube.cpu_fallback.emulated_matmul` (same arguments)."""
    chunk = {"cube16": 16, "sequential": 1}[accumulate]
    sch = get_scheme("fp16x4" if keep_lo_lo else scheme)
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    m, k = a.shape
    n = b.shape[1]
    sa = [[reference_slices(a[i, p], sch.name, sb) for p in range(k)] for i in range(m)]
    sbm = [[reference_slices(b[p, j], sch.name, sb) for j in range(n)] for p in range(k)]
    step = _F32(2.0 ** -sb) if sch.scaled else _F32(1)
    out = np.empty((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            chunks = {}  # (pa, pb) -> the chunk sums of that product, in K order
            for pa, pb in sch.products:
                chunks[pa, pb] = [_chunk_sum([sa[i][p][pa] for p in range(k0, min(k, k0 + chunk))],
                                             [sbm[p][j][pb] for p in range(k0, min(k, k0 + chunk))])
                                  for k0 in range(0, k, chunk)]
            if order == "termwise":
                totals = {}
                for key, sums in chunks.items():
                    acc = _F32(0)
                    for s in sums:
                        acc = _F32(acc + s)
                    totals[key] = acc
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
                        acc = _F32(acc + _F32(chunks[key][c] * _F32(float(step) ** sum(key))))
                out[i, j] = acc
    return out
