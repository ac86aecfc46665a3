"""What every backend gives the API layer.

A backend computes the emulated product of finite data; the API layer
(:mod:`sgemm_cube.api`) owns everything that is the same for all of them:
dtype and shape checks, broadcasting, ``out=``, the range check of the split
and the patching of NaN/Inf outputs.  So a backend's ``matmul`` receives
3-D float32 operands ``a`` (B, M, K) and ``b`` (B, K, N) with any strides,
treats every non-finite input element as 0, writes all of ``out`` (B, M, N),
and returns :class:`SplitStats` gathered while it split the operands (or
``None`` to let the API layer compute them).  A backend whose module sets
``ACCEPTS_CHECK = True`` also takes ``check=``: a callable it runs on the
statistics after the split and before the products, so that the API layer's
range check (which reads the statistics back to the host) waits only for
the split and can stop the products before they start.
"""
from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["SplitStats"]


class SplitStats(NamedTuple):
    """Range statistics of the operands, a by-product of the split pass.

    Arrays are of the backend's kind (NumPy array or torch tensor, on the
    operands' device).

    Attributes
    ----------
    a_rowmax : array, shape (B, M), float32
        Largest finite ``|a[b, i, k]|`` over ``k`` (0 where a row has none).
    b_colmax : array, shape (B, N), float32
        Largest finite ``|b[b, k, j]|`` over ``k``.
    a_nonfinite, b_nonfinite : bool or 0-d bool array
        Whether the operand holds any NaN or infinity.
    """

    a_rowmax: Any
    b_colmax: Any
    a_nonfinite: Any
    b_nonfinite: Any
