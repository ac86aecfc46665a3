"""The SGEMM-cube algorithm on the NumPy arithmetic model.

This file is the algorithm, start to end, for one 2-D product of finite
FP32 matrices (the public :func:`sgemm_cube.matmul` adds batching, ``out=``,
range checks and NaN/Inf handling around it)::

    A_hi, A_lo = split(A, sb)          # A ~= A_hi + A_lo * 2**-sb   (split.py)
    B_hi, B_lo = split(B, sb)
    HH = A_hi @ B_hi                   # FP16 products, FP32 accumulation
    LH = A_lo @ B_hi                   #   under an accumulation model
    HL = A_hi @ B_lo                   #   (accumulate.py)
    [LL = A_lo @ B_lo]                 # optional fourth term
    C  = (LH + HL [+ LL * 2**-sb]) * 2**-sb + HH

Two orders of combination (SGEMM-cube Fig. 7):

``"termwise"`` (Fig. 7b, the default)
    Each product has its own FP32 accumulator over the whole K; then the
    small terms are summed first: ``corr = fl(fl(LL * 2**-sb + LH) + HL)``
    (``corr = fl(LH + HL)`` without LL), ``C = fl(fl(corr * 2**-sb) + HH)``.
``"elementwise"`` (Fig. 7a)
    One FP32 accumulator takes every term chunk by chunk: for each K chunk
    ``c``, ``acc = fl(acc + HH_c)``, ``acc = fl(acc + fl(LH_c * 2**-sb))``,
    ``acc = fl(acc + fl(HL_c * 2**-sb))`` and, if kept,
    ``acc = fl(acc + fl(LL_c * 2**-2sb))``, where ``X_c`` is the chunk's exact
    dot product rounded once to FP32.

``fl`` is FP32 round-to-nearest-even; scaling by a power of two is exact
unless it underflows.  Every result of this module is checked bit for bit
against the scalar reference in :mod:`cpu_fallback.reference`, and for
accuracy against float64 with native FP32 measured beside it.
"""
from __future__ import annotations

import numpy as np

from .accumulate import accumulate_product, chunk_length, chunk_sums
from .split import split

__all__ = ["emulated_matmul", "ORDERS"]

ORDERS = ("termwise", "elementwise")


def _check_order(order: str) -> None:
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {list(ORDERS)}")


def emulated_matmul(a, b, *, sb: int = 12, order: str = "termwise", accumulate: str = "cube16",
                    keep_lo_lo: bool = False) -> np.ndarray:
    """FP32 product of two finite FP32 matrices with three FP16 products.

    Parameters
    ----------
    a : array_like, shape (M, K), float32
    b : array_like, shape (K, N), float32
        Finite values inside :func:`cpu_fallback.split_limits` ``(sb)`` for
        FP32 accuracy (this function does not check; ``sgemm_cube.matmul``
        does).
    sb : int
        Scaling exponent of the residuals (``sf = 2**sb``).
    order : {"termwise", "elementwise"}
        How the products are combined (module docstring).
    accumulate : {"cube16", "sequential"}
        FP32 accumulation model of each product
        (:mod:`cpu_fallback.accumulate`).
    keep_lo_lo : bool
        Also add ``A_lo @ B_lo * 2**-2sb`` (four products instead of three).

    Returns
    -------
    ndarray, shape (M, N), float32
    """
    _check_order(order)
    a = np.asarray(a)
    b = np.asarray(b)
    a_hi, a_lo = split(a, sb)
    b_hi, b_lo = split(b, sb)
    scale = np.float32(2.0 ** -sb)
    if order == "termwise":
        hh = accumulate_product(a_hi, b_hi, accumulate=accumulate)
        lh = accumulate_product(a_lo, b_hi, accumulate=accumulate)
        hl = accumulate_product(a_hi, b_lo, accumulate=accumulate)
        corr = lh
        if keep_lo_lo:
            ll = accumulate_product(a_lo, b_lo, accumulate=accumulate)
            corr = ll * scale + lh  # smallest term first
        corr = corr + hl
        return corr * scale + hh
    chunk = chunk_length(accumulate)
    terms = [chunk_sums(a_hi, b_hi, chunk), chunk_sums(a_lo, b_hi, chunk), chunk_sums(a_hi, b_lo, chunk)]
    scales = [np.float32(1.0), scale, scale]
    if keep_lo_lo:
        terms.append(chunk_sums(a_lo, b_lo, chunk))
        scales.append(np.float32(2.0 ** (-2 * sb)))
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for parts in zip(*terms):  # one K chunk of every term at a time
        for part, s in zip(parts, scales):
            acc += part.astype(np.float32) * s  # fl32(chunk sum), scaled exactly, then added
    return acc
