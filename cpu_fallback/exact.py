"""Exact arithmetic helpers: correctly rounded conversion of exact sums to FP32.

The arithmetic model rounds the exact dot product of a K chunk once to FP32.
When float64 cannot hold that sum exactly, the model falls back to Python
integers (every FP16 value is an integer multiple of 2**-24, so every product
is an integer multiple of 2**-48) and rounds with :func:`round_scaled_int`.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["round_scaled_int", "ROUNDINGS"]

_F32_MIN_QUANTUM_EXP = -149  # the FP32 subnormal step
_F32_MAX_EXP = 127


#: Rounding modes of :func:`round_scaled_int`: IEEE round to nearest even, and toward zero.
ROUNDINGS = ("rne", "trunc")


def round_scaled_int(n: int, e: int, rounding: str = "rne") -> np.float32:
    """Round the exact value ``n * 2**e`` to FP32: to the nearest, ties to even, or toward zero.

    Parameters
    ----------
    n : int
        Any Python integer (arbitrary size).
    e : int
        Power-of-two scale.
    rounding : {"rne", "trunc"}
        ``"rne"``: round to nearest even; ``"trunc"``: toward zero (the
        ``"truncate"`` accumulation model's chunk sums).

    Returns
    -------
    numpy.float32
        The correctly rounded value, with gradual underflow to subnormals, as
        IEEE 754 rounds in that mode: overflow to a signed infinity to nearest,
        to the largest finite FP32 of the sign toward zero.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}; choose one of {list(ROUNDINGS)}")
    n = int(n)
    if n == 0:
        return np.float32(0.0)
    sign = -1.0 if n < 0 else 1.0
    n = abs(n)
    top = n.bit_length() - 1 + e  # floor(log2(value))
    quantum = max(top - 23, _F32_MIN_QUANTUM_EXP)  # 24 significant bits, or the subnormal step
    shift = quantum - e
    if shift > 0:
        m = n >> shift
        rem = n - (m << shift)
        half = 1 << (shift - 1)
        if rounding == "rne" and (rem > half or (rem == half and m & 1)):
            m += 1
    else:
        m = n << -shift
    # m < 2**25 after a carry, so ldexp is exact in float64 and the value is an FP32 number.
    if m.bit_length() - 1 + quantum > _F32_MAX_EXP:
        if rounding == "trunc":
            return np.float32(sign * float(np.finfo(np.float32).max))
        return np.float32(sign * math.inf)
    return np.float32(sign * math.ldexp(m, quantum))
