"""Exact arithmetic helpers: correctly rounded conversion of exact sums to FP32.

The arithmetic model rounds the exact dot product of a K chunk once to FP32.
When float64 cannot hold that sum exactly, the model falls back to Python
integers (every FP16 value is an integer multiple of 2**-24, so every product
is an integer multiple of 2**-48) and rounds with :func:`round_scaled_int`.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["round_scaled_int"]

_F32_MIN_QUANTUM_EXP = -149  # the FP32 subnormal step
_F32_MAX_EXP = 127


def round_scaled_int(n: int, e: int) -> np.float32:
    """Round the exact value ``n * 2**e`` to the nearest FP32, ties to even.

    Parameters
    ----------
    n : int
        Any Python integer (arbitrary size).
    e : int
        Power-of-two scale.

    Returns
    -------
    numpy.float32
        The correctly rounded value, with gradual underflow to subnormals and
        overflow to a signed infinity, as IEEE 754 round-to-nearest-even does.
    """
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
        if rem > half or (rem == half and m & 1):
            m += 1
    else:
        m = n << -shift
    # m < 2**25 after a carry, so ldexp is exact in float64 and the value is an FP32 number.
    if m.bit_length() - 1 + quantum > _F32_MAX_EXP:
        return np.float32(sign * math.inf)
    return np.float32(sign * math.ldexp(m, quantum))
