"""CPU backend: the NumPy arithmetic model of :mod:`cpu_fallback`.

Runs on NumPy arrays and on torch CPU tensors (shared memory, no copy).
It is exact to its documented model (``accumulate="cube16"`` or
``"sequential"``), which makes it the reference the hardware backends are
tested against, and fast enough for accuracy studies (about 23-28x a float32
``numpy.matmul`` at 1024^3 on two cores).
"""
from __future__ import annotations

import numpy as np

from cpu_fallback import emulated_matmul

__all__ = ["is_available", "unavailable_reason", "matmul", "DEFAULT_ACCUMULATE", "SCHEMES"]

#: Split schemes this backend implements (all of them: it is the definition).
SCHEMES = ("fp16x3", "fp16x4", "bf16x9", "bf16x6")

#: Accumulation model used when the caller passes ``accumulate=None``.
DEFAULT_ACCUMULATE = "cube16"


def is_available() -> bool:
    return True


def unavailable_reason() -> str:
    return ""


def matmul(a, b, *, sb: int, order: str, keep_lo_lo: bool, out, accumulate: str | None = None,
           scheme: str = "fp16x3") -> None:
    """Emulated product of (B, M, K) and (B, K, N) float32 NumPy arrays into ``out`` (B, M, N).

    Non-finite inputs are treated as 0 (the API layer patches the outputs
    they touch).  Returns None: the API layer computes the range statistics
    before the product, so out-of-range data are refused before any work.
    """
    accumulate = accumulate or DEFAULT_ACCUMULATE
    for i in range(a.shape[0]):
        ai, bi = a[i], b[i]
        if not np.isfinite(ai).all():
            ai = np.where(np.isfinite(ai), ai, np.float32(0))
        if not np.isfinite(bi).all():
            bi = np.where(np.isfinite(bi), bi, np.float32(0))
        out[i] = emulated_matmul(ai, bi, sb=sb, order=order, accumulate=accumulate, keep_lo_lo=keep_lo_lo,
                                 scheme=scheme)
