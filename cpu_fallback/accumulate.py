"""FP32 accumulation of low-precision matrix products under a named arithmetic model.

A matrix engine multiplies FP16 (or BF16) operands exactly and accumulates
in FP32, but how it rounds while it accumulates is the hardware's business.
This module makes that a parameter with two documented models:

``"cube16"`` (default; models the Ascend cube)
    K is cut into chunks of 16 starting at index 0.  Each chunk's dot product
    is formed exactly and rounded once to FP32 (round to nearest even); the
    chunk sums are added to the FP32 accumulator in chunk order with
    round-to-nearest.
``"sequential"``
    One FP32 round-to-nearest add per product, in K order (a chunk of 1: the
    product is exact in float64 and rounds once to FP32).
``"truncate"``
    ``"cube16"``'s chunks with every rounding toward zero: each chunk's exact
    dot product rounded toward zero to FP32, each add to the accumulator
    rounded toward zero (as NVIDIA's tensor cores truncate; the field
    ``accumulate`` of :mod:`sgemm_cube.cpu_fallback.arithmetic`).  Past FP32's
    range a sum truncates to the largest finite value, as IEEE does.

Two levels (:data:`K_GROUP`).  The NPU kernel never lets one cube accumulator run over all of K:
the cube's FP32 partial sum covers one K group of ``K_GROUP`` elements (in L0C), and the groups'
partial sums are added into a second FP32 accumulator in K order (in GM: the first group stored,
each later one added by the FP32 atomic add, ``Arithmetic.atomic``).  With one accumulator over
K the error of same-sign data grows with K (5.8e-7 at K = 32,768 on uniform [0, 1) data, against
1.1e-7 at K = 1,024); with the second level it stays flat (8.5e-8).
:class:`sgemm_cube.cpu_fallback.ProductAccumulator` applies it to the termwise products
(``k_group``); this module's :func:`accumulate_product` is one level, one accumulator.

These are the models of Mmad's accumulation inside one call
(``Arithmetic.accumulate``); the other FP32 operations of the algorithm (the
termwise combination, the unscaling) run on the vector unit and round to
nearest whatever the model.  The operands are read as they are: a cube that
flushes FP16 subnormals (``Arithmetic.subnormals="flush"``) reads them as zero,
but only the split feeds it, and under that arithmetic the split writes none
(:func:`sgemm_cube.cpu_fallback.split`), so flushing Mmad's inputs is modelled
there, as flushing the split's outputs.

How the fast path stays exact: chunk sums are computed in float64 by BLAS.
All products of row ``i`` and column ``j`` in chunk ``c`` are integer
multiples of ``2**(lsb_x + lsb_y)`` and smaller than ``2**(top_x + top_y + 2)``,
so every partial sum is exact in float64 when the chunk's bit spans satisfy
``span_x[i, c] + span_y[c, j] <= 47`` (53 bits, minus 2 for the product,
minus 4 for 16 terms).  That holds for almost all data; the (row, column,
chunk) triples that break it are recomputed with Python integers and rounded
by :func:`sgemm_cube.cpu_fallback.exact.round_scaled_int` (in the model's rounding mode).
Either way the chunk sum is the exact sum rounded once, whatever order BLAS adds in, and
the result is bit-identical to the scalar reference in :mod:`sgemm_cube.cpu_fallback.reference`.
"truncate"'s adds are exact float64 sums (with their TwoSum error) truncated to FP32
(:func:`add_toward_zero`).

Speed: the chunk sums are materialised one row panel at a time, in a buffer
small enough to stay in cache; on two cores a 1024^3 product takes about
three float64 GEMMs' time.
"""
from __future__ import annotations

import numpy as np

from .exact import round_scaled_int
from .formats import format_of

__all__ = ["ACCUMULATION_MODELS", "K_GROUP", "ROUNDING", "accumulate_product", "panel_sums", "chunk_length",
           "to_f32_toward_zero", "add_toward_zero", "mul_toward_zero"]

#: Elements of K in one cube accumulation before its partial sum is added into the second FP32
#: accumulator (the NPU kernel's K group; ``npu_schedule.fit_tiling`` makes every tiling's group this
#: long).  1,024: the error at K = 32,768 stays at that of K = 1,024 on same-sign data (256 and 512
#: gain little more), and the resident A group of 1,024 / bk blocks fits L1 at the tiling tables'
#: blocks on both chips (2,048 would not on the 910B's 512 KiB).
K_GROUP = 1024
#: Accumulation model name -> K chunk length.
ACCUMULATION_MODELS = {"cube16": 16, "sequential": 1, "truncate": 16}
#: Accumulation model name -> how it rounds its chunk sums and adds ("rne" or "trunc").
ROUNDING = {"cube16": "rne", "sequential": "rne", "truncate": "trunc"}

_EXACT_SPAN_BITS = 47      # float64 holds a 16-term chunk sum exactly below this joint span
# The same for the platform's long double (64-bit significand on x86: 58; equal to 47 where
# long double is double, and then only Python integers are exact beyond 47).
_EXTENDED_SPAN_BITS = np.finfo(np.longdouble).nmant + 1 - 6
_PANEL_BYTES = 8 << 20     # float64 chunk sums materialised at a time (stays in cache)
_PAIRS_AT_ONCE = 1 << 14   # exact pair sums per batch: their long double products take 4 MiB


def chunk_length(accumulate: str) -> int:
    """Return the K chunk length of an accumulation model (16 or 1)."""
    try:
        return ACCUMULATION_MODELS[accumulate]
    except KeyError:
        raise ValueError(f"unknown accumulation model {accumulate!r}; "
                         f"choose one of {sorted(ACCUMULATION_MODELS)}") from None


def to_f32_toward_zero(x: np.ndarray) -> np.ndarray:
    """float64 (or long double) values rounded toward zero to FP32; past FP32's range the largest finite
    value of the sign (IEEE's round toward zero).  NaN and infinities stay."""
    x = np.asarray(x)
    with np.errstate(over="ignore", invalid="ignore"):
        t = x.astype(np.float32)                              # to nearest: at most one step off
        away = np.abs(t.astype(x.dtype)) > np.abs(x)          # it went away from zero (inf included)
        return np.where(away & np.isfinite(x), np.nextafter(t, np.float32(0)), t).astype(np.float32)


def add_toward_zero(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x + y`` for FP32 arrays, rounded once toward zero (the exact sum, not float64's rounding of it).

    The float64 sum ``r`` of two FP32 values can round; TwoSum gives its error ``err`` exactly
    (``x + y == r + err``).  Rounding ``r`` toward zero gives the exact sum's truncation, except where
    ``r`` is itself an FP32 number and ``err`` points toward zero: then the exact sum lies just inside
    ``r`` and truncates to the FP32 number below it.  ``x + (-x)`` is +0, as IEEE gives it.
    """
    a = np.asarray(x, np.float32).astype(np.float64)
    b = np.asarray(y, np.float32).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        r = a + b
        bb = r - a
        err = (a - (r - bb)) + (b - bb)                       # TwoSum: a + b == r + err exactly
        t = r.astype(np.float32)
        t64 = t.astype(np.float64)
        inside = (t64 == r) & (err != 0) & ((err < 0) != (r < 0))
        step = ((np.abs(t64) > np.abs(r)) | inside) & np.isfinite(r)
        return np.where(step, np.nextafter(t, np.float32(0)), t).astype(np.float32)


def mul_toward_zero(x: np.ndarray, scale: float) -> np.ndarray:
    """``x * scale`` for FP32 ``x`` and a power-of-two ``scale``, rounded toward zero (exact unless it
    leaves FP32's normal range)."""
    return to_f32_toward_zero(np.asarray(x, np.float32).astype(np.float64) * float(scale))


def _chunked(x: np.ndarray, chunk: int, axis: int) -> np.ndarray:
    """Zero-pad K to a multiple of ``chunk``; return contiguous float64 chunks.

    Shape (nc, M, chunk) for the left operand (axis=1), (nc, chunk, N) for the
    right one (axis=0).  Zero padding adds exact zero products.
    """
    k = x.shape[axis]
    nc = -(-k // chunk)
    pad = [(0, 0), (0, 0)]
    pad[axis] = (0, nc * chunk - k)
    xd = np.pad(x.astype(np.float64), pad)
    if axis == 1:
        return np.ascontiguousarray(xd.reshape(x.shape[0], nc, chunk).transpose(1, 0, 2))
    return xd.reshape(nc, chunk, x.shape[1])


def _bit_span(x: np.ndarray, chunk: int, axis: int) -> np.ndarray:
    """Bits spanned by the nonzero values of each chunk row (or column).

    A value with exponent field E (1 for subnormals) has its leading bit at
    most at ``2**(E - bias)`` and its unit at ``2**(E - bias - precision + 1)``,
    so a chunk spans ``max E - min E + precision - 1`` bits; -1 marks an
    all-zero chunk.  Shape (nc, M) for axis=1, (nc, N) for axis=0.
    """
    fmt = format_of(x)
    bits = x.view(fmt.bits)
    field = ((bits >> fmt.exp_shift) & fmt.exp_mask).astype(np.int16)
    nonzero = (bits << np.array(1, fmt.bits)) != 0  # any bit but the sign
    field = np.maximum(field, 1)
    k = x.shape[axis]
    nc = -(-k // chunk)
    pad = [(0, 0), (0, 0)]
    pad[axis] = (0, nc * chunk - k)
    e_hi = np.pad(np.where(nonzero, field, -1), pad, constant_values=-1)
    e_lo = np.pad(np.where(nonzero, field, 9999), pad, constant_values=9999)
    if axis == 1:
        top = e_hi.reshape(-1, nc, chunk).max(axis=2).T
        low = e_lo.reshape(-1, nc, chunk).min(axis=2).T
    else:
        top = e_hi.reshape(nc, chunk, -1).max(axis=1)
        low = e_lo.reshape(nc, chunk, -1).min(axis=1)
    return np.where(top < 0, -1, top - low + fmt.precision - 1)


def _scaled_ints(values: np.ndarray) -> np.ndarray:
    """Exact integers ``values * 2**-quantum_exp`` as a Python-int object array."""
    fmt = format_of(values)
    mant, exp = np.frexp(values.astype(np.float64))  # value = mant * 2**exp, |mant| in [0.5, 1)
    ints = (mant * 2.0 ** fmt.precision).astype(np.int64).astype(object)  # exact: <= precision bits
    return ints * (2 ** (exp - fmt.precision - fmt.quantum_exp).astype(object))


def _exact_pair_sums(x, y, rows, cols, k0, k1, spans, rounding="rne") -> np.ndarray:
    """Exact sums of x[rows[p], k0:k1] . y[k0:k1, cols[p]] for each pair p, rounded once to FP32.

    Pairs whose joint bit span fits the extended format's significand are
    summed there (vectorised; exact, so the order does not matter, and the
    one cast to FP32 rounds once); the rest with Python integers.  At most
    ``_PAIRS_AT_ONCE`` pairs at a time (a panel can have 256 x 1024 of them).
    ``rounding``: ``"rne"`` to nearest even, ``"trunc"`` toward zero.
    """
    if len(rows) > _PAIRS_AT_ONCE:
        return np.concatenate([_exact_pair_sums(x, y, rows[p:p + _PAIRS_AT_ONCE], cols[p:p + _PAIRS_AT_ONCE],
                                                k0, k1, spans[p:p + _PAIRS_AT_ONCE], rounding)
                               for p in range(0, len(rows), _PAIRS_AT_ONCE)])
    xs, ys = x[rows, k0:k1], y[k0:k1, cols].T  # (P, chunk) each
    out = np.empty(len(rows), np.float32)
    wide = spans > _EXTENDED_SPAN_BITS
    if _EXTENDED_SPAN_BITS > _EXACT_SPAN_BITS and not wide.all():
        sums = (xs[~wide].astype(np.longdouble) * ys[~wide].astype(np.longdouble)).sum(axis=1)
        out[~wide] = to_f32_toward_zero(sums) if rounding == "trunc" else sums.astype(np.float32)
    if wide.any():
        xi, yi = _scaled_ints(xs[wide]), _scaled_ints(ys[wide])
        e = format_of(x).quantum_exp + format_of(y).quantum_exp
        out[wide] = [round_scaled_int(v, e, rounding) for v in (xi * yi).sum(axis=1)]  # Python integers: exact
    return out


class _Operands:
    """One product's operands, chunked once, with the spans needed for exactness."""

    def __init__(self, x, y, chunk):
        self.x, self.y = x, y
        self.xc = _chunked(x, chunk, axis=1)  # (nc, M, chunk)
        self.yc = _chunked(y, chunk, axis=0)  # (nc, chunk, N)
        self.exact = chunk == 1  # one product: exact in float64
        if not self.exact:
            self.span_x = _bit_span(x, chunk, axis=1)
            self.span_y = _bit_span(y, chunk, axis=0)
            self.exact = self.span_x.max() + self.span_y.max() <= _EXACT_SPAN_BITS

    def sums(self, rows, cols, g0, g1, chunk, out, rounding="rne"):
        """Chunk sums g0:g1 of a (rows, cols) tile into ``out`` (G, R, C): exact in float64, or patched
        (rounded to FP32 in ``rounding``'s mode)."""
        np.matmul(self.xc[g0:g1, rows], self.yc[g0:g1, :, cols], out=out)
        if self.exact:
            return out
        k = self.x.shape[1]
        span_y = self.span_y[g0:g1, cols]
        sy_max = span_y.max(axis=1)
        for c in range(g0, g1):
            sx = self.span_x[c, rows]
            if sx.max() + sy_max[c - g0] <= _EXACT_SPAN_BITS:
                continue
            suspects = np.flatnonzero(sx + sy_max[c - g0] > _EXACT_SPAN_BITS)  # few rows: test pairs there only
            joint = sx[suspects, None] + span_y[c - g0][None, :]
            pr, pc = np.nonzero(joint > _EXACT_SPAN_BITS)
            k0, k1 = c * chunk, min(k, (c + 1) * chunk)
            out[c - g0, suspects[pr], pc] = _exact_pair_sums(self.x, self.y, suspects[pr] + rows.start,
                                                             pc + cols.start, k0, k1, joint[pr, pc], rounding)
        return out


def panel_sums(pairs, chunk: int, rounding: str = "rne"):
    """Yield the exact chunk sums of several products, one cache-sized tile at a time.

    Parameters
    ----------
    pairs : list of (x, y)
        Products ``x @ y`` with x (M, K) and y (K, N) of one shape, FP16 or
        BF16 operands (see :mod:`sgemm_cube.cpu_fallback.formats`).
    chunk : int
        Chunk length of the accumulation model.
    rounding : {"rne", "trunc"}
        The model's rounding of a chunk sum to FP32 (:data:`ROUNDING`): the
        mode of the values patched where float64 cannot hold the sum.

    Yields
    ------
    rows, cols : slice
        The output tile.
    sums : list of ndarray, each (G, R, C), float64
        For each pair, the tile's chunk sums for G consecutive chunks; the
        tiles of one (rows, cols) come in K order.  Each value is the exact
        chunk sum, or its FP32 value rounded in ``rounding``'s mode where
        float64 could not hold it: converted to FP32 in that mode it is the
        model's chunk sum.  The
        arrays are reused: consume them before the next iteration.
    """
    ops = [_Operands(x, y, chunk) for x, y in pairs]
    nc, m, _ = ops[0].xc.shape
    n = ops[0].yc.shape[2]
    # Tall tiles and few chunks per call: OpenBLAS runs the K = 16 products ~3x faster on
    # 256 x 1024 x 16 than on 16 x 1024 x 16 (measured at 1024^3 on two cores).
    width = min(n, 1024)
    height = min(m, 256)
    group = min(nc, max(1, _PANEL_BYTES // (8 * height * width)))
    buffers = [np.empty((group, height, width), np.float64) for _ in ops]
    for r0 in range(0, m, height):
        rows = slice(r0, min(m, r0 + height))
        for c0 in range(0, n, width):
            cols = slice(c0, min(n, c0 + width))
            for g0 in range(0, nc, group):
                g1 = min(nc, g0 + group)
                yield rows, cols, [op.sums(rows, cols, g0, g1, chunk,
                                           buf[: g1 - g0, : rows.stop - rows.start, : cols.stop - cols.start],
                                           rounding)
                                   for op, buf in zip(ops, buffers)]


def accumulate_product(x16, y16, *, accumulate: str = "cube16", acc=None) -> np.ndarray:
    """FP32 accumulation of the product ``x16 @ y16`` under a model.

    Parameters
    ----------
    x16 : array_like, shape (M, K), float16 (or float32 holding BF16 values)
    y16 : array_like, shape (K, N), same kind
    accumulate : {"cube16", "sequential", "truncate"}
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
    if x16.dtype not in (np.float16, np.float32) or y16.dtype not in (np.float16, np.float32):
        raise TypeError(f"accumulate_product takes float16 (or BF16-in-float32) operands, "
                        f"got {x16.dtype} and {y16.dtype}")
    if x16.ndim != 2 or y16.ndim != 2 or x16.shape[1] != y16.shape[0]:
        raise ValueError(f"shapes {x16.shape} and {y16.shape} are not (M, K) and (K, N)")
    chunk = chunk_length(accumulate)
    shape = (x16.shape[0], y16.shape[1])
    if acc is None:
        acc = np.zeros(shape, np.float32)
    elif acc.shape != shape or acc.dtype != np.float32:
        raise ValueError(f"acc must be float32 of shape {shape}, got {acc.dtype} {acc.shape}")
    if 0 in x16.shape or 0 in y16.shape:
        return acc
    rounding = ROUNDING[accumulate]
    for rows, cols, (sums,) in panel_sums([(x16, y16)], chunk, rounding):
        tile = acc[rows, cols]
        for s in sums:
            if rounding == "trunc":  # the chunk sum and the add, each rounded once toward zero
                tile[...] = add_toward_zero(tile, to_f32_toward_zero(s))
                continue
            # The float32 loop casts the chunk sum to FP32 (one rounding of an exact
            # value), then adds in FP32 with round to nearest even.  (ufunc.accumulate
            # over the chunk axis would be one call, but NumPy runs it ~30x slower.)
            np.add(tile, s, out=tile, dtype=np.float32, casting="unsafe")
    return acc
