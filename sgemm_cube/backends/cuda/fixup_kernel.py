"""Plain FP32 outputs inside the GEMM launch: the recomputed lines, and tiles that may overflow.

The split pass lists, per block of ``BLOCK_L`` lines, the rows of A and
columns of B whose outputs must be native FP32 (:mod:`sgemm_cube.cpu_fallback.guard`:
an entry the split would round to fewer than 22 bits, NaN, infinity).  The
GEMM's tiles leave those outputs alone, and ``FIX_PROGRAMS`` extra programs
of the same launch compute them (:func:`fixup_program`):

* every fix-up program reads the per-block counts (a few hundred integers)
  and compacts the listed lines on the fly into groups of ``GROUP`` lines
  (rank ``r`` of a batch's list sits in the block whose running count first
  passes ``r``), so that a group reads the other operand once for up to
  ``GROUP`` lines however scattered they are;
* work items (group, block of the other dimension, output batch) are dealt
  round-robin to the fix-up programs; with empty lists they return at once.

The products are ``tl.dot(..., input_precision="ieee")``: FP32 fused
multiply-adds, so NaN and infinities propagate as in native SGEMM
(``inf * 0`` and ``inf - inf`` give NaN).  They run on lines scaled by their
exponents ``t`` (a listed line's largest entry in [1, 2), the other
operand's lines as the split scaled them) and are unscaled with one
rounding: no partial sum overflows (:mod:`sgemm_cube.cpu_fallback.guard`).  Outputs in a
listed row and a listed column are written by the row pass only.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .split_kernel import decode_meta, pow2_f64

__all__ = ["fp32_dot", "fixup_program"]


@triton.jit
def fp32_dot(x_ptr, x_off, x_valid, x_t, stride_xk, y_ptr, y_off, y_valid, y_t, stride_yk, K, alpha,
             ROWS: tl.constexpr, COLS: tl.constexpr, BLOCK_K: tl.constexpr):
    """alpha * sum_k x[r, k] * y[k, c] in FP32 (IEEE FMA) on lines scaled by 2**x_t[r] and 2**y_t[c], unscaled
    (and times the float32 ``alpha``) with one rounding.

    x rows at ``x_ptr + x_off[r]``, y columns at ``y_ptr + y_off[c]``.
    """
    x_scale = pow2_f64(x_t)
    y_scale = pow2_f64(y_t)
    acc = tl.zeros((ROWS, COLS), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_in = offs_k < K
        x = tl.load(x_ptr + x_off[:, None] + offs_k[None, :].to(tl.int64) * stride_xk,
                    mask=x_valid[:, None] & k_in[None, :], other=0.0)
        y = tl.load(y_ptr + y_off[None, :] + offs_k[:, None].to(tl.int64) * stride_yk,
                    mask=k_in[:, None] & y_valid[None, :], other=0.0)
        x = (x.to(tl.float64) * x_scale[:, None]).to(tl.float32)  # exact unless it underflows
        y = (y.to(tl.float64) * y_scale[None, :]).to(tl.float32)
        # Each BLOCK_K chunk summed on its own, then added with one rounding: a two-level sum, whose
        # error grows like BLOCK_K + K / BLOCK_K instead of K (fma(p, 1, acc): a plain `acc + dot`
        # would be fused back into one long chain).
        acc = tl.fma(tl.dot(x, y, input_precision="ieee"), 1.0, acc)
    # 24 bits of acc times 24 of alpha times a power of two: exact in float64, rounded once to FP32.
    return (acc.to(tl.float64) * (pow2_f64(-(x_t[:, None] + y_t[None, :])) * tl.cast(alpha, tl.float64))).to(tl.float32)


@triton.jit
def _batch_total(count_ptr, n_blocks, NB_CHUNK: tl.constexpr):
    total = tl.zeros([], dtype=tl.int32)  # a tensor: loop-carried values keep their type
    for c0 in range(0, n_blocks, NB_CHUNK):
        offs = c0 + tl.arange(0, NB_CHUNK)
        total += tl.sum(tl.load(count_ptr + offs, mask=offs < n_blocks, other=0), axis=0)
    return total


@triton.jit
def _gather_group(count_ptr, list_ptr, n_blocks, first_rank, total,
                  BLOCK_L: tl.constexpr, GROUP: tl.constexpr, NB_CHUNK: tl.constexpr):
    """Line indices of ranks first_rank ... first_rank + GROUP - 1 of one batch's lists, and which exist."""
    ranks = first_rank + tl.arange(0, GROUP)
    valid = ranks < total
    block = tl.zeros([GROUP], dtype=tl.int32)   # blocks whose lines all rank below r
    before = tl.zeros([GROUP], dtype=tl.int32)  # lines in those blocks
    running = tl.zeros([], dtype=tl.int32)
    for c0 in range(0, n_blocks, NB_CHUNK):
        offs = c0 + tl.arange(0, NB_CHUNK)
        cnt = tl.load(count_ptr + offs, mask=offs < n_blocks, other=0)
        ends = running + tl.cumsum(cnt, axis=0)
        passed = (ends[None, :] <= ranks[:, None]) & (offs[None, :] < n_blocks)
        block += tl.sum(passed.to(tl.int32), axis=1)
        before += tl.sum(tl.where(passed, cnt[None, :], 0), axis=1)
        running += tl.sum(cnt, axis=0)
    lines = tl.load(list_ptr + block.to(tl.int64) * BLOCK_L + (ranks - before), mask=valid, other=0)
    return lines, valid


@triton.jit
def _fix_lines(p, num_programs, item_base,
               count_ptr, list_ptr, n_blocks, line_batched,
               x_ptr, stride_xb, stride_xl, stride_xk,
               y_ptr, stride_yb, stride_yk, stride_yo,
               c_ptr, stride_cb, stride_cl, stride_co,
               x_meta, n_lines, y_meta, y_batched, n_batch, n_other, K, alpha,
               SKIP_LISTED: tl.constexpr,
               FIX_FROM: tl.constexpr, BLOCK_L: tl.constexpr, GROUP: tl.constexpr, BLOCK_O: tl.constexpr,
               BLOCK_K: tl.constexpr, NB_CHUNK: tl.constexpr):
    """Outputs c[b, l, o] = sum_k x[b, l, k] y[b, k, o] of the listed lines l (c seen through strides).

    ``line_batched``/``y_batched`` are 0 for an operand broadcast over the
    batch; ``x_meta`` (.., n_lines) and ``y_meta`` (.., n_other) hold the
    lines' packed integers.  With SKIP_LISTED, outputs whose ``o`` is a
    listed line of y are left to the other pass.  Returns the next item
    number (items are dealt round-robin across the passes).
    """
    n_ob = tl.cdiv(n_other, BLOCK_O)
    for bo in range(0, n_batch):
        bl = bo * line_batched
        counts = count_ptr + tl.cast(bl, tl.int64) * n_blocks
        total = _batch_total(counts, n_blocks, NB_CHUNK)
        n_items = tl.cdiv(total, GROUP) * n_ob
        first = (p - item_base % num_programs + num_programs) % num_programs
        for j in range(first, n_items, num_programs):
            g = j // n_ob
            offs_o = (j % n_ob) * BLOCK_O + tl.arange(0, BLOCK_O)
            o_in = offs_o < n_other
            lines, valid = _gather_group(counts, list_ptr + tl.cast(bl, tl.int64) * n_blocks * BLOCK_L, n_blocks,
                                         g * GROUP, total, BLOCK_L, GROUP, NB_CHUNK)
            _, x_t = decode_meta(tl.load(x_meta + tl.cast(bl, tl.int64) * n_lines + lines, mask=valid, other=4096))
            y_cls, y_t = decode_meta(tl.load(y_meta + tl.cast(bo * y_batched, tl.int64) * n_other + offs_o,
                                             mask=o_in, other=4096))
            acc = fp32_dot(x_ptr + tl.cast(bl, tl.int64) * stride_xb, lines.to(tl.int64) * stride_xl, valid, x_t,
                           stride_xk,
                           y_ptr + tl.cast(bo, tl.int64) * stride_yb, offs_o.to(tl.int64) * stride_yo, o_in, y_t,
                           stride_yk, K, alpha, GROUP, BLOCK_O, BLOCK_K)
            keep = valid[:, None] & o_in[None, :]
            if SKIP_LISTED:
                keep = keep & (y_cls < FIX_FROM)[None, :]
            c = c_ptr + tl.cast(bo, tl.int64) * stride_cb
            tl.store(c + lines[:, None].to(tl.int64) * stride_cl + offs_o[None, :].to(tl.int64) * stride_co, acc,
                     mask=keep)
        item_base += n_items
    return item_base


@triton.jit
def fixup_program(p, num_programs,
                  a_ptr, stride_ab, stride_am, stride_ak, a_batched,
                  b_ptr, stride_bb, stride_bk, stride_bn, b_batched,
                  c_ptr, stride_cb, stride_cm,
                  a_count, a_list, a_blocks, a_meta,
                  b_count, b_list, b_blocks, b_meta,
                  batch, M, N, K, alpha,
                  FIX_FROM: tl.constexpr, BLOCK_LA: tl.constexpr, BLOCK_LB: tl.constexpr,
                  GROUP: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr):
    """Fix-up program ``p`` of ``num_programs``: the listed rows of A, then the listed columns of B.

    ``a_batched``/``b_batched``: 1, or 0 where the operand is broadcast over
    the batch (its lines, counts and lists exist for batch 0 only).
    """
    item = _fix_lines(p, num_programs, p * 0,
                      a_count, a_list, a_blocks, a_batched,
                      a_ptr, stride_ab, stride_am, stride_ak,
                      b_ptr, stride_bb, stride_bk, stride_bn,
                      c_ptr, stride_cb, stride_cm, 1,
                      a_meta, M, b_meta, b_batched, batch, N, K, alpha, False,
                      FIX_FROM, BLOCK_LA, GROUP, BLOCK_O, BLOCK_K, 256)
    # Columns of B: c^T = b^T a^T, skipping the rows the first pass wrote.
    _fix_lines(p, num_programs, item,
               b_count, b_list, b_blocks, b_batched,
               b_ptr, stride_bb, stride_bn, stride_bk,
               a_ptr, stride_ab, stride_ak, stride_am,
               c_ptr, stride_cb, 1, stride_cm,
               b_meta, N, a_meta, a_batched, batch, M, K, alpha, True,
               FIX_FROM, BLOCK_LB, GROUP, BLOCK_O, BLOCK_K, 256)
