"""The fix-up inside the GEMM launch: the outputs of the fix-up lines, from the unscaled operands.

The split pass lists, per block of ``BLOCK_L`` lines, the rows of A and
columns of B whose outputs are not computed from the split, the fix-up lines
(:mod:`sgemm_cube.cpu_fallback.guard`: an entry the split would round to fewer
than 22 bits, NaN, infinity).  The GEMM's tiles leave those outputs alone, and
``fixup_programs`` extra programs of the same launch compute them
(:func:`fixup_program`):

* every fix-up program reads the per-block counts (a few hundred integers)
  and compacts the fix-up lines on the fly into groups of ``GROUP`` lines
  (rank ``r`` of a batch's list sits in the block whose running count first
  passes ``r``), so that a group reads the other operand once for up to
  ``GROUP`` lines however scattered they are;
* work items (group, block of the other dimension, output batch) are dealt
  round-robin to the fix-up programs; with empty lists they return at once.

The products are FP64 tensor-core dots (``tl.dot`` of float64 tiles; DMMA
on Hopper) of the **unscaled** operands: each product of two FP32 values is
exact in FP64 and cannot overflow or underflow there, the sums are FP64,
and each output times ``alpha`` is rounded once to FP32
(:func:`sgemm_cube.cpu_fallback.guard.fixup_dot`).  So a line spanning FP32's whole
range loses none of its entries, no partial sum overflows, an output
overflows exactly where its exact value does, and NaN and infinities come
out as IEEE arithmetic gives them (``inf * 0`` and ``inf - inf`` are NaN,
``inf * 1e-30`` is ``inf``).  Outputs in a listed row and a listed column are
written by the row pass only.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .line_meta import PAD_META, decode_meta

__all__ = ["fixup_dot", "fixup_program", "fixup_shape"]

#: From this K on, the fix-up takes the larger tiles and fewer programs (:func:`fixup_shape`).
LONG_K = 4096
#: Per-block counts of fix-up lines read per step while compacting a batch's lists.
_COUNTS_CHUNK = tl.constexpr(256)


def fixup_shape(k: int, sms: int) -> tuple[tuple[int, int, int], int]:
    """The fix-up's ``(GROUP, BLOCK_O, BLOCK_K)`` FP64 dot tiles and its number of programs, for K.

    Measured on an H200 (2026-11-24, every row listed, x cuBLAS SGEMM at 8192^3 / RBF 8192x1024 k8192 /
    softmax 16x2048x1024 k2048): (64, 128, 16) x 1 SM 0.85 / 0.78 / 0.46; (64, 128, 32) x 4 SMs 0.92 /
    0.84 / 0.92; (64, 256, 32) x 2 SMs 1.05 / 0.97 / 0.31; (64, 128, 64) x 2 SMs 1.02 / 0.93 / 0.60.
    Long K takes the large tiles, short K more programs of smaller ones.  Normal data (nothing
    listed) measured 3.64-3.81x SGEMM with each, within the run-to-run spread.
    """
    if k >= LONG_K:
        return (64, 256, 32), 2 * sms
    return (64, 128, 32), 4 * sms


@triton.jit
def fixup_dot(x_ptr, x_off, x_valid, stride_xk, y_ptr, y_off, y_valid, stride_yk, K, alpha,
               ROWS: tl.constexpr, COLS: tl.constexpr, BLOCK_K: tl.constexpr):
    """alpha * sum_k x[r, k] * y[k, c] of FP32 operands, summed in FP64 and rounded once to FP32.

    x rows at ``x_ptr + x_off[r]``, y columns at ``y_ptr + y_off[c]``.
    """
    acc = tl.zeros((ROWS, COLS), dtype=tl.float64)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_in = offs_k < K
        x = tl.load(x_ptr + x_off[:, None] + offs_k[None, :].to(tl.int64) * stride_xk,
                    mask=x_valid[:, None] & k_in[None, :], other=0.0)
        y = tl.load(y_ptr + y_off[None, :] + offs_k[:, None].to(tl.int64) * stride_yk,
                    mask=k_in[:, None] & y_valid[None, :], other=0.0)
        # exact products, FP64 sums (Triton 3.6 needs out_dtype and "ieee" spelled out for float64 tiles)
        acc = tl.dot(x.to(tl.float64), y.to(tl.float64), acc, input_precision="ieee", out_dtype=tl.float64)
    return (acc * tl.cast(alpha, tl.float64)).to(tl.float32)


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
               FIXUP_MIN_CLASS: tl.constexpr, BLOCK_L: tl.constexpr, GROUP: tl.constexpr, BLOCK_O: tl.constexpr,
               BLOCK_K: tl.constexpr, NB_CHUNK: tl.constexpr):
    """Outputs c[b, l, o] = sum_k x[b, l, k] y[b, k, o] of the fix-up lines l (c seen through strides).

    ``line_batched``/``y_batched`` are 0 for an operand broadcast over the
    batch; ``x_meta`` (.., n_lines) and ``y_meta`` (.., n_other) hold the
    lines' packed integers.  With SKIP_LISTED, outputs whose ``o`` is a
    fix-up line of y are left to the other pass.  Returns the next item
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
            acc = fixup_dot(x_ptr + tl.cast(bl, tl.int64) * stride_xb, lines.to(tl.int64) * stride_xl, valid,
                             stride_xk,
                             y_ptr + tl.cast(bo, tl.int64) * stride_yb, offs_o.to(tl.int64) * stride_yo, o_in,
                             stride_yk, K, alpha, GROUP, BLOCK_O, BLOCK_K)
            keep = valid[:, None] & o_in[None, :]
            if SKIP_LISTED:
                y_cls, _ = decode_meta(tl.load(y_meta + tl.cast(bo * y_batched, tl.int64) * n_other + offs_o,
                                               mask=o_in, other=PAD_META))
                keep = keep & (y_cls < FIXUP_MIN_CLASS)[None, :]
            c = c_ptr + tl.cast(bo, tl.int64) * stride_cb
            tl.store(c + lines[:, None].to(tl.int64) * stride_cl + offs_o[None, :].to(tl.int64) * stride_co, acc,
                     mask=keep)
        item_base += n_items
    return item_base


@triton.jit
def fixup_program(p, num_programs, a, b, c, batch, M, N, K,
                  FIXUP_MIN_CLASS: tl.constexpr, BLOCK_L: tl.constexpr,
                  GROUP: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr):
    """Fix-up program ``p`` of ``num_programs``: the fix-up rows of A, then the fix-up columns of B.

    a, b : :class:`.gemm_tiles.GemmOperand` -- of each operand, the FP32 operand (A (Ba, M, K),
        B (Bb, K, N) through their strides), its line meta and the split pass's fix-up lists (per
        block of ``BLOCK_L`` lines).  A broadcast operand (``meta_batch`` 0) has its lines, counts
        and lists for batch 0 only.
    c : :class:`.gemm_tiles.GemmOutput` -- the (batch, M, N) output and alpha.
    GROUP, BLOCK_O, BLOCK_K : the FP64 dot tiles (:func:`fixup_shape`).
    """
    a_batched = (a.meta_batch > 0).to(tl.int32)
    b_batched = (b.meta_batch > 0).to(tl.int32)
    item = _fix_lines(p, num_programs, p * 0,
                      a.fix_counts, a.fix_lists, a.fix_blocks, a_batched,
                      a.ptr, a.stride_batch, a.stride_line, a.stride_k,
                      b.ptr, b.stride_batch, b.stride_k, b.stride_line,
                      c.ptr, c.stride_batch, c.stride_m, 1,
                      a.meta, M, b.meta, b_batched, batch, N, K, c.alpha, False,
                      FIXUP_MIN_CLASS, BLOCK_L, GROUP, BLOCK_O, BLOCK_K, _COUNTS_CHUNK)
    # Columns of B: c^T = b^T a^T, skipping the rows the first pass wrote.
    _fix_lines(p, num_programs, item,
               b.fix_counts, b.fix_lists, b.fix_blocks, b_batched,
               b.ptr, b.stride_batch, b.stride_line, b.stride_k,
               a.ptr, a.stride_batch, a.stride_k, a.stride_line,
               c.ptr, c.stride_batch, 1, c.stride_m,
               b.meta, N, a.meta, a_batched, batch, M, K, c.alpha, True,
               FIXUP_MIN_CLASS, BLOCK_L, GROUP, BLOCK_O, BLOCK_K, _COUNTS_CHUNK)
