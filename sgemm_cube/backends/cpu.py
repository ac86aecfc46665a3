"""CPU backend: the NumPy arithmetic model of :mod:`sgemm_cube.cpu_fallback`, with the guarantee's bookkeeping.

Runs on NumPy arrays and on torch CPU tensors (shared memory, no copy).  Per
product (:mod:`sgemm_cube.cpu_fallback.guard` defines every step, and the CUDA backend
computes the same line exponents and classes bit for bit):

1. line exponents and classes of ``a``'s rows and ``b``'s columns;
2. exact power-of-two scaling of the lines that need it, NaN/Inf as 0;
3. the emulated product (:func:`sgemm_cube.cpu_fallback.emulated_matmul`, exact to
   its documented accumulation model), unscaled with one rounding;
4. the outputs of fix-up lines from the unscaled operands, summed in float64 and rounded once
   (:func:`sgemm_cube.cpu_fallback.guard.fixup_dot`).

Bounded memory: steps 1-3 run slab by slab, so that their temporaries
(line statistics, scaled and split copies, float64 chunk sums, FP32
accumulators) stay within :data:`MEMORY_BUDGET` whatever B, M, N and K.  K
slabs are cut at multiples of every accumulation model's chunk length and
carry the accumulators (:class:`sgemm_cube.cpu_fallback.ProductAccumulator`); line
statistics of slabs combine exactly (:class:`sgemm_cube.cpu_fallback.guard.LineStats`).
So the result is bit-identical to the unsliced computation, whatever the
budget.  Step 4 multiplies whole lines in one float64 ``numpy.matmul`` each:
it needs float64 copies of the lines, of the operand they meet and of the
recomputed outputs.

It is the reference the hardware backends are tested against, and fast
enough for accuracy studies (about 23-28x a float32 ``numpy.matmul`` at
1024^3 on two cores).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from sgemm_cube.cpu_fallback import ACCUMULATION_MODELS, ORDERS, ProductAccumulator, get_scheme
from sgemm_cube.cpu_fallback.accumulate import _PANEL_BYTES
from sgemm_cube.cpu_fallback.guard import (LineStats, certificate_threshold, certifies, emulated_error_bound,
                                          fixup_dot, fixup_lines, line_range, line_stats, meta_from_stats,
                                          scale_lines, uncertified, undecided_overflow, unscale)

from ..plan import Plan, Request
from .base import make_plan

__all__ = ["SCHEMES", "ORDERS", "is_available", "unavailable_reason", "plan", "run", "DEFAULT_ACCUMULATE",
           "MEMORY_BUDGET"]

#: Split schemes this backend implements (all of them: it is the definition).
SCHEMES = ("fp16x3", "fp16x4", "bf16x9", "bf16x6")

#: Accumulation model used when the caller passes ``accumulate=None``.
DEFAULT_ACCUMULATE = "cube16"

#: Bytes of working memory the slabs of a product may take (module docstring): line statistics,
#: scaled and split copies of operand slabs, their float64 chunk copies, the FP32 accumulators of an
#: output tile and the float64 temporaries of unscaling.  A product that fits runs in one slab (a
#: 1024^3 product does, for every scheme).  On top come the fixed, cache-sized panel buffers of
#: :mod:`sgemm_cube.cpu_fallback.accumulate` (8 MiB per product of the scheme in flight: one termwise, all of
#: them elementwise) and the float64 copies of the fix-up (step 4).
MEMORY_BUDGET = 256 << 20

# Slab lengths along K are multiples of every accumulation model's chunk (16): no chunk is cut.
_K_ALIGN = math.lcm(*ACCUMULATION_MODELS.values())
# A K slab shorter than this costs more in per-slab overhead than re-splitting operand slabs for
# several output tiles: the output is cut into tiles first.
_MIN_DEPTH = 32 * _K_ALIGN
# Bytes per element of the temporaries, counted generously from the code (tracemalloc measures less):
_STATS_BYTES = 16     # line_stats: isfinite mask, magnitudes, masked magnitudes (float32)
_UNSCALE_BYTES = 24   # unscale: float64 copy, int exponents, float64 result
_SPLIT_SLACK = 48     # transients of scaling, splitting (BF16 rounding works in uint64) and chunking


def is_available() -> bool:
    return True


def unavailable_reason() -> str:
    return ""


def plan(req: Request, batch: int, m: int, n: int, k: int, like=None) -> Plan:
    """The plan for a (batch, m, k) @ (batch, k, n) product (:func:`sgemm_cube.backends.base.make_plan`).

    An emulated plan carries the accumulation model that runs (``accumulate=None`` asks for
    :data:`DEFAULT_ACCUMULATE`).
    """
    chosen = make_plan(req, "cpu", SCHEMES, k)
    if chosen.backend == "cpu":
        chosen = chosen._replace(accumulate=req.accumulate or DEFAULT_ACCUMULATE)
    return chosen


def _as_numpy(x):
    if isinstance(x, np.ndarray):
        return x
    return x.detach().numpy()  # a torch CPU tensor: a view of the same memory


def _slices(n: int, step: int):
    """Consecutive slices of ``range(n)`` of length ``step`` (the last may be shorter)."""
    step = max(1, step)
    return [slice(i, min(n, i + step)) for i in range(0, n, step)]


class _Tiling(NamedTuple):
    """How the emulated product of one batch entry is cut: output tiles of rows x cols, K slabs of depth."""

    rows: int
    cols: int
    depth: int
    acc_bytes: int  # a tile's accumulators
    bytes: int      # estimated working memory of a tile and a slab, panel buffers included


def _tiling(m: int, n: int, k: int, scheme: str, order: str, budget: int) -> _Tiling:
    """The largest tiles and slabs whose temporaries fit ``budget`` (whole output and K when they fit).

    Operand slab (per element of ``a[rows, ks]`` and ``b[ks, cols]``): the
    scaled float32 copy, the slices, one float64 chunked copy per product in
    flight (:func:`sgemm_cube.cpu_fallback.accumulate.panel_sums`) and transients.
    Output tile (per element): one FP32 accumulator per product (termwise)
    or one in all (elementwise), and the float32 terms of the elementwise
    loop.  Cutting K costs nothing but per-slab overhead; cutting the output
    makes each operand slab be scaled and split once per tile across it, so
    K is cut first, down to ``_MIN_DEPTH``, and then the output, its longer
    side first (square tiles re-split least).
    """
    sch = get_scheme(scheme)
    in_flight = len(sch.products) if order == "elementwise" else 1
    per_operand = 4 + sch.slices * np.dtype(sch.format.holder).itemsize + 8 * in_flight + _SPLIT_SLACK
    per_output = 4 * len(sch.products) if order == "termwise" else 4 + 8

    def need(r, c, d):
        return per_operand * (r + c) * d + per_output * r * c

    floor = min(k, _MIN_DEPTH)
    tiles_m = tiles_n = 1
    r, c = m, n
    while need(r, c, floor) > budget and (r > 1 or c > 1):
        if r >= c:
            tiles_m *= 2
            r = -(-m // tiles_m)
        else:
            tiles_n *= 2
            c = -(-n // tiles_n)
    depth = (budget - per_output * r * c) // (per_operand * (r + c))
    depth = k if depth >= k else max(_K_ALIGN, depth // _K_ALIGN * _K_ALIGN)
    panels = in_flight * min(_PANEL_BYTES, 8 * r * c * -(-depth // _K_ALIGN))
    return _Tiling(r, c, depth, per_output * r * c, need(r, c, depth) + panels)


def _line_stats(x: np.ndarray, axis: int) -> LineStats:
    """:func:`sgemm_cube.cpu_fallback.guard.line_stats` of a (B, M, K) (``axis=-1``) or (B, K, N) (``axis=-2``) operand.

    The statistics are read in blocks of at most ``MEMORY_BUDGET`` bytes of
    temporaries, whole lines first, then batches of them.
    """
    nb, k = x.shape[0], x.shape[axis]
    n_lines = x.shape[-2] if axis == -1 else x.shape[-1]
    cap = max(1, MEMORY_BUDGET // _STATS_BYTES)  # elements per block
    depth = min(k, cap)
    lines = min(n_lines, max(1, cap // depth))
    batches = min(nb, max(1, cap // (depth * lines)))
    stats = LineStats.empty((nb, n_lines))
    for bs in _slices(nb, batches):
        for ls in _slices(n_lines, lines):
            for ks in _slices(k, depth):
                block = x[bs, ls, ks] if axis == -1 else x[bs, ks, ls]
                stats.merge((bs, ls), line_stats(block, axis))
    return stats


def _line_metas(a: np.ndarray, b: np.ndarray, plan: Plan, certify: bool):
    """The line meta of A's rows and B's columns (:func:`sgemm_cube.cpu_fallback.guard.meta_from_stats`, each
    operand's lines classified beside the other's; ``certify``: :func:`sgemm_cube.cpu_fallback.guard.certifies`)."""
    sa, sb = _line_stats(a, -1), _line_stats(b, -2)
    return tuple(meta_from_stats(own, scheme=plan.scheme, sb=plan.sb, scale=plan.scale, fixup=plan.fixup,
                                 partner=other, k=a.shape[-1], certify=certify) for own, other in ((sa, sb), (sb, sa)))


def _unscaled(c, ta, tb, room: int, alpha: float):
    """Yield ``(r, unscale(c[r], ta[r], tb, alpha))`` over row blocks ``r`` of 2-D ``c`` whose temporaries fit ``room`` bytes."""
    for r in _slices(c.shape[0], room // (_UNSCALE_BYTES * max(1, c.shape[1]))):
        yield r, unscale(c[r], ta[r], tb, alpha)


def _recompute(redo, a, b, alpha: float, out) -> None:
    """Outputs ``redo`` (bool) of 2-D ``out``, computed again from the unscaled operands ``a`` (rows, K) and
    ``b`` (K, cols) by ``fixup_dot`` (exact): those whose overflow the emulation's error bound cannot decide
    (:func:`sgemm_cube.cpu_fallback.guard.undecided_overflow`), and those of wide lines the certificate
    fails (:func:`sgemm_cube.cpu_fallback.guard.uncertified`)."""
    rows, cols = np.nonzero(redo)
    if rows.size:
        ur, ri = np.unique(rows, return_inverse=True)
        uc, ci = np.unique(cols, return_inverse=True)
        out[rows, cols] = fixup_dot(a[ur], b[:, uc], alpha)[ri, ci]


def _emulate(plan: Plan, a, b, ma, mb, out, tiling: _Tiling, alpha: float, certify: bool) -> None:
    """Steps 2-3 for every batch entry, output tile and K slab (:func:`_tiling`); the result times ``alpha``;
    with ``certify`` the outputs :func:`sgemm_cube.cpu_fallback.guard.uncertified` are computed again."""
    _, m, k = a.shape
    n = b.shape[2]
    error_bound = emulated_error_bound(k, line_range(plan.scheme, plan.sb))  # undecided_overflow's
    threshold = certificate_threshold(k) if certify else None
    for i in range(a.shape[0]):
        for rows in _slices(m, tiling.rows):
            ta = ma.t[i, rows]
            for cols in _slices(n, tiling.cols):
                tb = mb.t[i, cols]
                acc = ProductAccumulator((rows.stop - rows.start, cols.stop - cols.start), sb=plan.sb,
                                         order=plan.order, accumulate=plan.accumulate,
                                         scheme=plan.scheme)
                for ks in _slices(k, tiling.depth):
                    acc.add(scale_lines(a[i, rows, ks], ta, -1), scale_lines(b[i, ks, cols], tb, -2))
                c = acc.result()
                redo = None
                if ta.any() or tb.any() or alpha != 1:
                    tile = out[i, rows, cols]
                    for r, values in _unscaled(c, ta, tb, MEMORY_BUDGET - tiling.acc_bytes, alpha):
                        tile[r] = values
                    if np.isinf(tile).any():
                        redo = undecided_overflow(c, ta, tb, alpha, error_bound)
                else:  # unscaling by 2**0 would give the same values back
                    out[i, rows, cols] = c
                if threshold is not None:
                    fails = uncertified(c, ma.cls[i, rows], mb.cls[i, cols], threshold)
                    redo = fails if redo is None else redo | fails
                if redo is not None:
                    _recompute(redo, a[i, rows], b[i, :, cols], alpha, out[i, rows, cols])


def _fixup(a, b, out, i: int, rows, cols, alpha: float) -> None:
    """Step 4 for batch entry ``i``: the fix-up rows, then the fix-up columns (their crossings take the
    column's value), by :func:`sgemm_cube.cpu_fallback.guard.fixup_dot` from the unscaled operands."""
    if rows.size:
        out[i, rows, :] = fixup_dot(a[i, rows, :], b[i], alpha)
    if cols.size:
        out[i][:, cols] = fixup_dot(a[i], b[i][:, cols], alpha)


def _fixup_bytes(a, b, rows, cols) -> int:
    """Step 4's float64 copies for one batch entry: the lines taken, the operand they meet, the products."""
    _, m, k = a.shape
    n = b.shape[2]
    return 8 * (rows.size * (k + n) + k * n if rows.size else 0) + 8 * (cols.size * (k + m) + m * k if cols.size else 0)


def _out_of_memory(a_shape, b_shape, need: int) -> str:
    """The message of a MemoryError of the backend: the user's problem, and what it needed."""
    nb, m, k = a_shape
    n = b_shape[2]
    return (f"sgemm_cube.matmul: the CPU model of a ({nb}, {m}, {k}) @ ({nb}, {k}, {n}) float32 product needs "
            f"about {need / 2**30:.3g} GiB of working memory besides the operands and the result (the result "
            f"alone is {4 * nb * m * n / 2**30:.3g} GiB), and this machine could not allocate it: free memory, "
            f"or lower sgemm_cube.backends.cpu.MEMORY_BUDGET (now {MEMORY_BUDGET / 2**20:.3g} MiB) to compute "
            f"in smaller slabs")


def run(plan: Plan, a, b, out, alpha: float = 1.0) -> None:
    """``out[i] = alpha * (a[i] @ b[i])`` for (B, M, K) and (B, K, N) float32 operands, into (B, M, N) ``out``.

    Every decision comes from ``plan`` (:func:`plan`: scheme, sb, scale, order, fixup, accumulate).
    ``alpha`` (float32) multiplies each output before its one rounding.

    Temporaries stay within :data:`MEMORY_BUDGET` (module docstring); a
    MemoryError is re-raised naming the product and the memory it needs.
    """
    a, b, out = _as_numpy(a), _as_numpy(b), _as_numpy(out)
    assert plan.backend == "cpu" and plan.accumulate in ACCUMULATION_MODELS, plan
    tiling = _tiling(a.shape[1], b.shape[2], a.shape[2], plan.scheme, plan.order, MEMORY_BUDGET)
    need = tiling.bytes
    try:
        certify = certifies(plan.scheme, plan.scale, plan.fixup)
        ma, mb = _line_metas(a, b, plan, certify)
        _emulate(plan, a, b, ma, mb, out, tiling, alpha, certify)
        for i, rows, cols in fixup_lines(ma, mb, plan.fixup, certify):
            need = max(need, _fixup_bytes(a, b, rows, cols))
            _fixup(a, b, out, i, rows, cols, alpha)
    except MemoryError as exc:
        raise MemoryError(_out_of_memory(a.shape, b.shape, need)) from exc
