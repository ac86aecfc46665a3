"""FP32 accumulation of FP16 matrix products under a named arithmetic model.

A matrix engine multiplies FP16 operands exactly (an FP16 x FP16 product has
at most 22 significant bits) and accumulates in FP32, but how it rounds while
it accumulates is the hardware's business.  This module makes that a
parameter with two documented models:

``"cube16"`` (default; models the Ascend cube)
    K is cut into chunks of 16 starting at index 0.  Each chunk's dot product
    is formed exactly and rounded once to FP32 (round to nearest even); the
    chunk sums are added to the FP32 accumulator in chunk order with
    round-to-nearest.
``"sequential"``
    One FP32 round-to-nearest add per product, in K order (a chunk of 1: the
    product itself is exact in FP32).

How the fast path stays exact: a chunk sum is computed in float64 by BLAS.
All products of row ``i`` and column ``j`` in chunk ``c`` are integer
multiples of ``2**(lsb_x + lsb_y)`` and smaller than ``2**(top_x + top_y + 2)``,
so every partial sum is exact in float64 when the chunk's bit spans satisfy
``span_x[i, c] + span_y[c, j] <= 47`` (53 bits minus 2 for the product, minus
4 for 16 terms).  That holds for almost all data; the (row, column, chunk)
triples that break it are recomputed with Python integers and rounded by
:func:`cpu_fallback.exact.round_scaled_int`.  Either way the chunk sum is the
exact sum, rounded once, and the result is bit-identical to the scalar
reference in :mod:`cpu_fallback.reference`.
"""
from __future__ import annotations

import numpy as np

from .exact import FP16_QUANTUM_EXP, fp16_to_scaled_int, round_scaled_int

__all__ = ["ACCUMULATION_MODELS", "accumulate_product", "chunk_sums", "chunk_length"]

#: Accumulation model name -> K chunk length.
ACCUMULATION_MODELS = {"cube16": 16, "sequential": 1}

_EXACT_SPAN_BITS = 47  # float64 holds a 16-term chunk sum exactly below this joint span
_GROUP_BYTES = 64 << 20  # float64 chunk sums materialised at a time


def chunk_length(accumulate: str) -> int:
    """Return the K chunk length of an accumulation model (16 or 1)."""
    try:
        return ACCUMULATION_MODELS[accumulate]
    except KeyError:
        raise ValueError(f"unknown accumulation model {accumulate!r}; "
                         f"choose one of {sorted(ACCUMULATION_MODELS)}") from None


def _chunked(x: np.ndarray, chunk: int, axis: int) -> np.ndarray:
    """Zero-pad K to a multiple of ``chunk`` and return float64 chunks.

    Returns shape (nc, M, chunk) for the left operand (axis=1) and
    (nc, chunk, N) for the right operand (axis=0).  Zero padding adds exact
    zero products, so a short tail chunk keeps its exact sum.
    """
    k = x.shape[axis]
    nc = -(-k // chunk)
    pad = nc * chunk - k
    xd = x.astype(np.float64)
    if axis == 1:
        if pad:
            xd = np.pad(xd, ((0, 0), (0, pad)))
        # Contiguous chunks: BLAS is several times faster on them than on a strided view.
        return np.ascontiguousarray(xd.reshape(x.shape[0], nc, chunk).transpose(1, 0, 2))
    if pad:
        xd = np.pad(xd, ((0, pad), (0, 0)))
    return xd.reshape(nc, chunk, x.shape[1])


def _bit_span(x16: np.ndarray, chunk: int, axis: int) -> np.ndarray:
    """Bits spanned by the nonzero FP16 values of each chunk row (or column).

    For a value with biased exponent field ``E`` (1 for subnormals) the
    leading bit is at most ``2**(E-15)`` and the unit is ``2**(E-25)``, so a
    chunk spans ``max E - min E + 10`` bits; -1 marks an all-zero chunk.
    Returns shape (nc, M) for axis=1 (left operand), (nc, N) for axis=0.
    """
    bits = x16.view(np.uint16)
    field = ((bits >> 10) & 0x1F).astype(np.int16)
    nonzero = (bits & 0x7FFF) != 0
    e_hi = np.where(nonzero, np.maximum(field, 1), -1)
    e_lo = np.where(nonzero, np.maximum(field, 1), 99)
    k = x16.shape[axis]
    nc = -(-k // chunk)
    pad = [(0, 0), (0, 0)]
    pad[axis] = (0, nc * chunk - k)
    e_hi = np.pad(e_hi, pad, constant_values=-1)
    e_lo = np.pad(e_lo, pad, constant_values=99)
    if axis == 1:
        top = e_hi.reshape(-1, nc, chunk).max(axis=2).T
        low = e_lo.reshape(-1, nc, chunk).min(axis=2).T
    else:
        top = e_hi.reshape(nc, chunk, -1).max(axis=1)
        low = e_lo.reshape(nc, chunk, -1).min(axis=1)
    return np.where(top < 0, -1, top - low + 10)


def _exact_chunk_sums(x16, y16, rows, cols, k0, k1) -> np.ndarray:
    """Exact sums of x16[rows[p], k0:k1] . y16[k0:k1, cols[p]] for each pair p, rounded to FP32."""
    xi = fp16_to_scaled_int(x16[rows, k0:k1]).astype(object)  # (P, chunk) Python integers
    yi = fp16_to_scaled_int(y16[k0:k1, cols].T).astype(object)
    sums = (xi * yi).sum(axis=1)  # exact: Python integers do not round
    return np.array([round_scaled_int(v, 2 * FP16_QUANTUM_EXP) for v in sums], np.float32)


def chunk_sums(x16: np.ndarray, y16: np.ndarray, chunk: int):
    """Yield, in K order, each chunk's exact dot products (float64, or FP32 where patched).

    Each yielded chunk is exact in float64 except where the exact fallback
    replaced it by its correctly rounded FP32 value; either way, converting it
    to FP32 gives the chunk's exact sum rounded once.

    Parameters
    ----------
    x16 : ndarray, shape (M, K), float16
    y16 : ndarray, shape (K, N), float16
    chunk : int
        Chunk length (16 for ``"cube16"``, 1 for ``"sequential"``).

    Yields
    ------
    ndarray, shape (M, N), float64
        ``sum_{k in chunk c} x16[:, k] * y16[k, :]``, for c = 0, 1, ...; cast
        to FP32 (round to nearest even) it is the chunk sum of the model.
    """
    m, k = x16.shape
    n = y16.shape[1]
    xc = _chunked(x16, chunk, axis=1)  # (nc, M, chunk)
    yc = _chunked(y16, chunk, axis=0)  # (nc, chunk, N)
    nc = xc.shape[0]
    exact_always = chunk == 1  # a single product is exact in FP32 and float64
    if not exact_always:
        span_x = _bit_span(x16, chunk, axis=1)  # (nc, M)
        span_y = _bit_span(y16, chunk, axis=0)  # (nc, N)
        exact_always = span_x.max() + span_y.max() <= _EXACT_SPAN_BITS
    group = min(nc, max(1, _GROUP_BYTES // max(1, 8 * m * n)))
    # One buffer reused for every group: fresh pages would cost more than the BLAS call.
    buffer = np.empty((group, m, n), np.float64)
    for g0 in range(0, nc, group):
        g1 = min(nc, g0 + group)
        sums64 = np.matmul(xc[g0:g1], yc[g0:g1], out=buffer[: g1 - g0])  # exact where spans allow
        for c in range(g0, g1):
            s64 = sums64[c - g0]
            if not exact_always:
                sx, sy = span_x[c], span_y[c]
                if sx.max() + sy.max() > _EXACT_SPAN_BITS:
                    rows = np.nonzero(sx + sy.max() > _EXACT_SPAN_BITS)[0]
                    pr, pc = np.nonzero(sx[rows, None] + sy[None, :] > _EXACT_SPAN_BITS)
                    pr = rows[pr]
                    k0, k1 = c * chunk, min(k, (c + 1) * chunk)
                    s64[pr, pc] = _exact_chunk_sums(x16, y16, pr, pc, k0, k1)
            yield s64


def accumulate_product(x16, y16, *, accumulate: str = "cube16", acc=None) -> np.ndarray:
    """FP32 accumulation of the FP16 product ``x16 @ y16`` under a model.

    Parameters
    ----------
    x16 : array_like, shape (M, K), float16
    y16 : array_like, shape (K, N), float16
    accumulate : {"cube16", "sequential"}
        The arithmetic model (see the module docstring).
    acc : ndarray, shape (M, N), float32, optional
        Accumulator to continue from (updated in place and returned).  A K
        loop cut into blocks whose lengths are multiples of the chunk length,
        each continuing from the last, gives a bit-identical result.

    Returns
    -------
    ndarray, shape (M, N), float32
        The accumulator after adding every chunk sum in K order.
    """
    x16 = np.asarray(x16)
    y16 = np.asarray(y16)
    if x16.dtype != np.float16 or y16.dtype != np.float16:
        raise TypeError(f"accumulate_product takes float16 operands, got {x16.dtype} and {y16.dtype}")
    if x16.ndim != 2 or y16.ndim != 2 or x16.shape[1] != y16.shape[0]:
        raise ValueError(f"shapes {x16.shape} and {y16.shape} are not (M, K) and (K, N)")
    chunk = chunk_length(accumulate)
    shape = (x16.shape[0], y16.shape[1])
    if acc is None:
        acc = np.zeros(shape, np.float32)
    elif acc.shape != shape or acc.dtype != np.float32:
        raise ValueError(f"acc must be float32 of shape {shape}, got {acc.dtype} {acc.shape}")
    for s64 in chunk_sums(x16, y16, chunk):
        # The float32 loop casts the chunk sum to FP32 (one rounding of an exact
        # value), then adds in FP32 with round to nearest even.
        np.add(acc, s64, out=acc, dtype=np.float32, casting="unsafe")
    return acc
