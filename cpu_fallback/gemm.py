"""The SGEMM-cube algorithm on the NumPy arithmetic model.

This file is the algorithm, start to end, for one 2-D product of finite
FP32 matrices (the public :func:`sgemm_cube.matmul` adds batching, ``out=``,
range checks, scaling and NaN/Inf handling around it).  For the default
scheme ``fp16x3``::

    A_hi, A_lo = split(A, sb)          # A ~= A_hi + A_lo * 2**-sb   (split.py)
    B_hi, B_lo = split(B, sb)
    HH = A_hi @ B_hi                   # FP16 products, FP32 accumulation
    LH = A_lo @ B_hi                   #   under an accumulation model
    HL = A_hi @ B_lo                   #   (accumulate.py)
    C  = (LH + HL) * 2**-sb + HH

Other schemes (``schemes.py``: ``fp16x4`` adds ``LL = A_lo @ B_lo``;
``bf16x9`` / ``bf16x6`` use three BF16 slices) follow the same pattern:
product ``(i, j)`` of slice ``i`` of A and slice ``j`` of B has *level*
``i + j`` and carries a factor ``2**(-sb * (i + j))`` for FP16 (1 for BF16).

Two orders of combination (SGEMM-cube Fig. 7):

``"termwise"`` (Fig. 7b, the default)
    Each product has its own FP32 accumulator over the whole K.  Then the
    levels are summed from the smallest up: ``total`` starts as the first
    product of the top level; each further product of the level is added;
    going down a level, ``total = fl(total * 2**-sb)`` and the level's
    products are added in turn.  For fp16x3 that is
    ``C = fl(fl(fl(LH + HL) * 2**-sb) + HH)``; for fp16x4
    ``corr = fl(fl(fl(LL * 2**-sb) + LH) + HL)``, ``C = fl(fl(corr * 2**-sb) + HH)``.
``"elementwise"`` (Fig. 7a)
    One FP32 accumulator takes every product chunk by chunk: for each K
    chunk, for each product in level order (HH, LH, HL[, LL]),
    ``acc = fl(acc + fl(P_c) * 2**(-sb * level))``, where ``P_c`` is the
    chunk's exact dot product.

``fl`` is FP32 round-to-nearest-even; a power-of-two scaling is exact
unless it underflows.  Every result of this module is checked bit for bit
against the scalar reference in :mod:`cpu_fallback.reference`, and for
accuracy against float64 with native FP32 measured beside it.
"""
from __future__ import annotations

import numpy as np

from .accumulate import accumulate_product, chunk_length, panel_sums
from .schemes import get_scheme, split_slices

__all__ = ["emulated_matmul", "ORDERS"]

ORDERS = ("termwise", "elementwise")


def _check_order(order: str) -> None:
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {list(ORDERS)}")


def emulated_matmul(a, b, *, sb: int = 12, order: str = "termwise", accumulate: str = "cube16",
                    keep_lo_lo: bool = False, scheme: str = "fp16x3") -> np.ndarray:
    """FP32 product of two finite FP32 matrices from low-precision products.

    Parameters
    ----------
    a : array_like, shape (M, K), float32
    b : array_like, shape (K, N), float32
        Finite values; for FP16 schemes inside
        :func:`cpu_fallback.split_limits` ``(sb)`` for FP32 accuracy (this
        function does not check; ``sgemm_cube.matmul`` does).
    sb : int
        Scaling exponent of the FP16 residuals (``sf = 2**sb``); unused by
        the BF16 schemes.
    order : {"termwise", "elementwise"}
        How the products are combined (module docstring).
    accumulate : {"cube16", "sequential"}
        FP32 accumulation model of each product (:mod:`cpu_fallback.accumulate`).
    keep_lo_lo : bool
        Shorthand for ``scheme="fp16x4"`` (add ``A_lo @ B_lo * 2**-2sb``).
    scheme : {"fp16x3", "fp16x4", "bf16x9", "bf16x6"}
        The split scheme (:mod:`cpu_fallback.schemes`).

    Returns
    -------
    ndarray, shape (M, N), float32
    """
    _check_order(order)
    if keep_lo_lo:
        if scheme not in ("fp16x3", "fp16x4"):
            raise ValueError(f"keep_lo_lo applies to the fp16x3 scheme, not {scheme!r}")
        scheme = "fp16x4"
    sch = get_scheme(scheme)
    a_slices = split_slices(np.asarray(a), sch, sb)
    b_slices = split_slices(np.asarray(b), sch, sb)
    step = np.float32(sch.level_scale(sb))
    shape = (a_slices[0].shape[0], b_slices[0].shape[1])
    if order == "termwise":
        total = None
        for level in reversed(sch.levels):
            if total is not None:
                total = total * step
            for i, j in level:
                term = accumulate_product(a_slices[i], b_slices[j], accumulate=accumulate)
                total = term if total is None else total + term
        return total
    acc = np.zeros(shape, np.float32)
    if 0 in a_slices[0].shape or 0 in b_slices[0].shape:
        return acc
    pairs = [(a_slices[i], b_slices[j]) for i, j in sch.products]
    scales = [np.float32(sch.level_scale(sb) ** (i + j)) for i, j in sch.products]
    for rows, cols, sums in panel_sums(pairs, chunk_length(accumulate)):
        tile = acc[rows, cols]
        for c in range(sums[0].shape[0]):  # one K chunk of every product at a time
            for s, scale in zip(sums, scales):
                tile += s[c].astype(np.float32) * scale  # fl32(chunk sum), scaled exactly, then added
    return acc
