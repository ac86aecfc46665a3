"""NaN and infinity: give every output the special value native SGEMM gives.

Splitting an infinity breaks IEEE propagation: ``inf - fp16(inf)`` is NaN,
and ``inf * lo`` with ``lo = 0`` is a spurious NaN (BF16x9 paper, section 4,
Fig. 2 and 3).  So the backends compute on finite data (every NaN/Inf input
treated as 0) and this module patches the outputs afterwards, as the BF16x9
library's patching framework does.  Only rows of A and columns of B that
hold a special value can produce one, so the patch works on those alone.

For output (i, j) native FP32 gives, from the terms ``a[i, k] * b[k, j]``:

* NaN if any term is NaN (a NaN operand, or ``inf * 0``), or if terms of
  +inf and -inf meet;
* +inf (-inf) if some term is +inf (-inf) and none is NaN or of the other sign.

Each condition is a count of terms, and counts are matrix products of 0/1
indicator matrices (exact in FP32 for K < 2**24).  Finite data whose exact
sum overflows FP32 is not a special input and is not handled here.
"""
from __future__ import annotations

import numpy as np

from ._xp import Ops

__all__ = ["patch_special_values"]


def _pattern(ops, a, b, block):
    """Return the patched block for operands a (R, K) and b (K, C)."""
    a_nan, b_nan = a != a, b != b
    a_pinf, a_ninf = a == np.inf, a == -np.inf
    b_pinf, b_ninf = b == np.inf, b == -np.inf
    a_pos, a_neg, b_pos, b_neg = a > 0, a < 0, b > 0, b < 0  # infinities included
    f = ops.f32
    nan_terms = (f(a_nan).sum(-1)[:, None] + f(b_nan).sum(0)[None, :]
                 + f(a_pinf | a_ninf) @ f(b == 0) + f(a == 0) @ f(b_pinf | b_ninf))
    pos_terms = f(a_pinf) @ f(b_pos) + f(a_ninf) @ f(b_neg) + f(a_pos) @ f(b_pinf) + f(a_neg) @ f(b_ninf)
    neg_terms = f(a_pinf) @ f(b_neg) + f(a_ninf) @ f(b_pos) + f(a_pos) @ f(b_ninf) + f(a_neg) @ f(b_pinf)
    is_nan = (nan_terms > 0) | ((pos_terms > 0) & (neg_terms > 0))
    block = ops.where(pos_terms > 0, ops.full_like(block, np.inf), block)
    block = ops.where(neg_terms > 0, ops.full_like(block, -np.inf), block)
    return ops.where(is_nan, ops.full_like(block, np.nan), block)


def patch_special_values(a, b, out) -> None:
    """Overwrite, in place, the outputs that NaN/Inf inputs reach.

    Parameters
    ----------
    a : array, shape (B, M, K), float32
    b : array, shape (B, K, N), float32
        The original operands (NumPy arrays or torch tensors).
    out : array, shape (B, M, N), float32
        The product computed with every special input treated as 0.
    """
    ops = Ops(a)
    bad_rows = ops.any(ops.special_mask(a), -1)  # (B, M)
    bad_cols = ops.any(ops.special_mask(b), -2)  # (B, N)
    for i in range(a.shape[0]):
        rows = ops.nonzero(bad_rows[i])
        cols = ops.nonzero(bad_cols[i])
        block = out[i]  # a view: index one axis at a time (NumPy reorders mixed indices)
        if len(rows):
            block[rows, :] = _pattern(ops, a[i][rows, :], b[i], block[rows, :])
        if len(cols):
            block[:, cols] = _pattern(ops, a[i], b[i][:, cols], block[:, cols])
