"""The SGEMM-cube GEMM on tensor cores (Triton): FP16 (hi, lo) or BF16 (s0, s1, s2) slices.

Product ``(i, j)`` is slice ``i`` of A times slice ``j`` of B; its *level*
``i + j`` says how small it is (:mod:`sgemm_cube.cpu_fallback.schemes`).  For one output
tile, with K walked in steps of ``BLOCK_K``::

    hh  : FP32 round-to-nearest accumulator of the level-0 product A_0 @ B_0
    part: tensor-core partial of A_0 @ B_0, added into hh every FLUSH_STEPS
          steps (tensor cores truncate while they accumulate: docs/cuda_design.md: measured
          4x-40x SGEMM's error when hh lives in them for all of K, and on
          same-sign data the truncation is biased, so the error grows with the
          interval: 4.7e-7 at 128, 2.4e-7 at 64 on uniform [0, 1) data)
    corr: tensor-core accumulator of level 1, A_1 @ B_0 + A_0 @ B_1 (2**-11
          (FP16) or ~2**-8 (BF16) smaller than hh, so its truncation error is
          far below FP32's ulp of C); SPLIT_CORR gives each product its own
          accumulator
    [ll : tensor-core accumulator of the levels >= 2, if TOP_LEVEL >= 2:
          FP16 A_1 @ B_1 (fp16x4); BF16 A_2 @ B_0 + A_1 @ B_1 + A_0 @ B_2
          (bf16x6) and A_2 @ B_1 + A_1 @ B_2 + A_2 @ B_2 (bf16x9), smallest
          first.  Level 2 is ~2**-16 of C for BF16, levels 3-4 under 2**-24:
          one accumulator holds them all without a visible error.
          MERGE_LEVELS (BF16 only) adds them into corr instead: three
          accumulators, so that 128x128 tiles fit in the registers]

    termwise    C = (corr [+ ll * s]) * s + hh      (small terms first)
    elementwise hh also takes corr's and ll's partials, scaled, at every flush

with ``s = SCALE`` = ``2**-sb`` for FP16 and 1 for BF16 (BF16 has FP32's
exponent range, so its slices are not scaled).  This mirrors
:func:`sgemm_cube.cpu_fallback.emulated_matmul` with the flush interval as the K chunk
(the CPU model's chunk is 16 and it keeps every product in its own
accumulator; the tensor cores' own chunk order is undocumented, so the tests
compare within an error bound, not bit for bit).

The operands are the padded slice buffers of :mod:`.split_kernel` seen as
2-D row-major matrices: A as (S * Ba * Mp, Kp) and B as (S * Bb * Kp, Np)
with S slices, so a tile is addressed by a row offset for the plane (the
slice) and the batch; batch offsets of 0 broadcast an operand.  The buffers
are zero padded to whole tiles, so only the store is masked.

Variants (compile-time switches of one kernel, named in :data:`VARIANTS`):
``"ptr"`` pointer loads; ``"tma"`` host tensor descriptors (Hopper's bulk
tensor copies); ``"tma_persistent"`` the same with one program per SM looping
over tiles.  Which is fastest where: ``docs/cuda_design.md``.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .fixup_kernel import fixup_program
from .split_kernel import decode_meta, pow2_f64

__all__ = ["sgemm_cube_kernel", "VARIANTS"]

#: Kernel variant -> (use tensor descriptors, persistent grid).
VARIANTS = {"ptr": (False, False), "tma": (True, False), "tma_persistent": (True, True)}


@triton.jit
def _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped tile order: GROUP_M row blocks reuse the same B columns from L2."""
    in_group = GROUP_M * num_pid_n
    first_m = (tile // in_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % in_group) % group_m
    pid_n = (tile % in_group) // group_m
    return pid_m, pid_n


@triton.jit
def _load_tile(src, row, col, ld, USE_TMA: tl.constexpr, UPCAST: tl.constexpr,
               ROWS: tl.constexpr, COLS: tl.constexpr):
    """Load the (ROWS, COLS) tile at (row, col) of a split buffer seen as a 2-D matrix (row stride ld).

    UPCAST converts it to FP32: only under Triton's interpreter, whose
    ``tl.dot`` multiplies BF16 tiles as their raw 16-bit integers (Triton
    3.9); BF16 values are exact in FP32, so the products stay exact.
    """
    if USE_TMA:
        tile = src.load([row, col])
    else:
        rr = tl.arange(0, ROWS)
        rc = tl.arange(0, COLS)
        tile = tl.load(src + (row.to(tl.int64) * ld + col) + (rr[:, None] * ld + rc[None, :]))
    if UPCAST:
        tile = tile.to(tl.float32)
    return tile


@triton.jit
def _compute_tile(tile, a_src, b_src, c_ptr, M, N, k_steps, num_pid_m, num_pid_n,
                  a_plane_rows, a_batch_rows, b_plane_rows, b_batch_rows, lda, ldb, stride_cb, stride_cm,
                  meta_a, meta_a_batch, meta_b, meta_b_batch, alpha,
                  FIXUP_MIN_CLASS: tl.constexpr, SCALE: tl.constexpr, TERMWISE: tl.constexpr, SLICES: tl.constexpr, TOP_LEVEL: tl.constexpr,
                  FLUSH_STEPS: tl.constexpr, SPLIT_CORR: tl.constexpr, USE_TMA: tl.constexpr,
                  UPCAST: tl.constexpr, MERGE_LEVELS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Compute and store one (BLOCK_M, BLOCK_N) output tile (see the module docstring)."""
    tiles_per_batch = num_pid_m * num_pid_n
    bidx = tile // tiles_per_batch
    pid_m, pid_n = _tile_coords(tile % tiles_per_batch, num_pid_m, num_pid_n, GROUP_M)
    a_row = bidx * a_batch_rows + pid_m * BLOCK_M
    b_row = bidx * b_batch_rows
    col_n = pid_n * BLOCK_N
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = col_n + tl.arange(0, BLOCK_N)
    m_in = offs_m < M
    n_in = offs_n < N
    # Line integers of the split pass (4096 packs cls 0, t 0 for the pad).
    cls_a, t_a = decode_meta(tl.load(meta_a + bidx * meta_a_batch + offs_m, mask=m_in, other=4096))
    cls_b, t_b = decode_meta(tl.load(meta_b + bidx * meta_b_batch + offs_n, mask=n_in, other=4096))
    # A tile whose rows (or columns) are all listed has no output of its own (the fix-up programs write
    # them): its K loop runs no step.
    rows_kept = tl.max((m_in & (cls_a < FIXUP_MIN_CLASS)).to(tl.int32), axis=0)
    cols_kept = tl.max((n_in & (cls_b < FIXUP_MIN_CLASS)).to(tl.int32), axis=0)
    steps = k_steps * rows_kept * cols_kept

    hh = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    corr = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    corr2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    ll = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ks in tl.range(0, steps, warp_specialize=WARP_SPECIALIZE):
        k = ks * BLOCK_K
        a0 = _load_tile(a_src, a_row, k, lda, USE_TMA, UPCAST, BLOCK_M, BLOCK_K)
        a1 = _load_tile(a_src, a_row + a_plane_rows, k, lda, USE_TMA, UPCAST, BLOCK_M, BLOCK_K)
        b0 = _load_tile(b_src, b_row + k, col_n, ldb, USE_TMA, UPCAST, BLOCK_K, BLOCK_N)
        b1 = _load_tile(b_src, b_row + b_plane_rows + k, col_n, ldb, USE_TMA, UPCAST, BLOCK_K, BLOCK_N)
        if SLICES == 3:
            a2 = _load_tile(a_src, a_row + 2 * a_plane_rows, k, lda, USE_TMA, UPCAST, BLOCK_M, BLOCK_K)
            b2 = _load_tile(b_src, b_row + 2 * b_plane_rows + k, col_n, ldb, USE_TMA, UPCAST, BLOCK_K, BLOCK_N)
        # Level 0.
        if FLUSH_STEPS == 0:
            hh = tl.dot(a0, b0, hh)
        else:
            part = tl.dot(a0, b0, part)
        # Level 1.
        if SPLIT_CORR:
            corr = tl.dot(a1, b0, corr)
            corr2 = tl.dot(a0, b1, corr2)
        else:
            corr = tl.dot(a1, b0, corr)
            corr = tl.dot(a0, b1, corr)
        # Levels 2 and up, the smallest first.
        if TOP_LEVEL >= 2:
            if MERGE_LEVELS:
                low = corr
            else:
                low = ll
            if TOP_LEVEL >= 4:
                low = tl.dot(a2, b2, low)
            if TOP_LEVEL >= 3:
                low = tl.dot(a2, b1, low)
                low = tl.dot(a1, b2, low)
            if SLICES == 3:
                low = tl.dot(a2, b0, low)
            low = tl.dot(a1, b1, low)
            if SLICES == 3:
                low = tl.dot(a0, b2, low)
            if MERGE_LEVELS:
                corr = low
            else:
                ll = low
        if FLUSH_STEPS > 0:
            # Every FLUSH_STEPS steps (and after the last) the partials go
            # into hh with round-to-nearest FP32 adds, written as fma(x, 1, hh)
            # (the same single rounding): Triton fuses a plain `hh + dot(...)`
            # back into the MMA, which would undo the flush.
            if (ks % FLUSH_STEPS == FLUSH_STEPS - 1) | (ks == steps - 1):
                hh = tl.fma(part, 1.0, hh)
                part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                if not TERMWISE:
                    hh += corr * SCALE
                    corr = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                    if SPLIT_CORR:
                        hh += corr2 * SCALE
                        corr2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                    if TOP_LEVEL >= 2 and not MERGE_LEVELS:
                        hh += ll * (SCALE * SCALE)
                        ll = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

    if TERMWISE or FLUSH_STEPS == 0:
        if TOP_LEVEL >= 2 and not MERGE_LEVELS:
            corr = ll * SCALE + corr  # the smallest terms first
        if SPLIT_CORR:
            corr += corr2
        c = corr * SCALE + hh
    else:
        c = hh

    # Undo the lines' power-of-two scaling and multiply by alpha, rounding once (float64 holds every
    # factor and their product exactly: 24 bits of c, 24 of alpha): the scaled sums never overflow, so
    # the result overflows exactly where alpha times the product exceeds FP32's range.
    if (tl.max(tl.abs(t_a), axis=0) + tl.max(tl.abs(t_b), axis=0) > 0) | (alpha != 1.0):
        c = (c.to(tl.float64) * (pow2_f64(-(t_a[:, None] + t_b[None, :])) * tl.cast(alpha, tl.float64))).to(tl.float32)
    # Outputs of fix-up lines belong to the fix-up programs.
    keep = (m_in & (cls_a < FIXUP_MIN_CLASS))[:, None] & (n_in & (cls_b < FIXUP_MIN_CLASS))[None, :]
    c_tile = c_ptr + bidx.to(tl.int64) * stride_cb
    tl.store(c_tile + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :], c, mask=keep)


@triton.jit
def sgemm_cube_kernel(a_src, b_src, c_ptr,
                      M, N, Kp, batch, num_programs,
                      a_plane_rows, a_batch_rows, b_plane_rows, b_batch_rows, lda, ldb,
                      stride_cb, stride_cm,
                      a_ptr, stride_ab, stride_am, stride_ak, b_ptr, stride_bb, stride_bk, stride_bn, K,
                      meta_a, meta_a_batch, meta_b, meta_b_batch,
                      a_count, a_list, a_blocks, b_count, b_list, b_blocks, fix_programs, alpha,
                      FIXUP_MIN_CLASS: tl.constexpr, BLOCK_LA: tl.constexpr, BLOCK_LB: tl.constexpr,
                      FIX_GROUP: tl.constexpr, FIX_BLOCK_O: tl.constexpr, FIX_BLOCK_K: tl.constexpr,
                      SCALE: tl.constexpr, TERMWISE: tl.constexpr, SLICES: tl.constexpr, TOP_LEVEL: tl.constexpr,
                      FLUSH_STEPS: tl.constexpr, SPLIT_CORR: tl.constexpr, USE_TMA: tl.constexpr,
                      UPCAST: tl.constexpr, MERGE_LEVELS: tl.constexpr, PERSISTENT: tl.constexpr,
                      WARP_SPECIALIZE: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C[b] = emulated FP32 product of the split operands, for every tile; then the plain FP32 outputs.

    Programs ``0 .. num_programs - 1`` compute output tiles; the
    ``fix_programs`` after them compute the outputs of the lines the split
    pass listed (:func:`.fixup_kernel.fixup_program`).

    a_src : pointer to, or tensor descriptor (block [BLOCK_M, BLOCK_K]) of,
        the A split buffer as a (SLICES * Ba * Mp, Kp) float16 or bfloat16
        matrix, row stride lda.
    b_src : same for B as (SLICES * Bb * Kp, Np), block [BLOCK_K, BLOCK_N], row stride ldb.
    c_ptr : (batch, M, N) float32 output, strides (stride_cb, stride_cm, 1).
    a_plane_rows, b_plane_rows : row offset between slice planes (Ba * Mp, Bb * Kp).
    a_batch_rows, b_batch_rows : row offset between batches (Mp, Kp; 0 to broadcast).
    Kp : padded K, a multiple of BLOCK_K; Mp, Np are multiples of BLOCK_M, BLOCK_N.
    a_ptr, b_ptr (+ strides), K : the original FP32 operands (batch stride 0 to broadcast).
    meta_a, meta_b : packed line meta (Ba, M) and (Bb, N); meta_*_batch their batch stride (0 to broadcast).
    a_count, a_list, a_blocks (and b_*) : the split pass's per-block lists of fix-up lines.
    alpha : float32 factor of every output, applied before its one rounding (1.0: the product).
    FIXUP_MIN_CLASS : smallest line class recomputed from the unscaled lines (1, or 2 with fixup=False).
    FIX_GROUP, FIX_BLOCK_O, FIX_BLOCK_K : the fix-up's FP64 dot tiles (:func:`.fixup_kernel.fixup_shape`).
    SCALE : factor between consecutive levels, 2**-sb (FP16) or 1 (BF16).
    SLICES, TOP_LEVEL : slices per operand (2 FP16, 3 BF16) and the highest
        level of the products kept: fp16x3 (2, 1), fp16x4 (2, 2),
        bf16x6 (3, 2), bf16x9 (3, 4).
    FLUSH_STEPS : K steps between flushes of the level-0 partial; 0 = never
        (the whole K accumulates in the tensor cores: for comparison only).
    UPCAST : FP32 tiles for the dots (Triton's interpreter with BF16 only).
    MERGE_LEVELS : levels >= 2 accumulate with level 1 (BF16 only: SCALE == 1).
    PERSISTENT : the tile programs loop over the tiles; otherwise one program per tile.
    WARP_SPECIALIZE : ask the compiler to split the K loop into producer (TMA)
        and consumer (MMA) warps (Triton 3.6 leaves this loop unchanged on Hopper).
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_steps = Kp // BLOCK_K
    pid = tl.program_id(0)
    if pid >= num_programs:
        fixup_program(pid - num_programs, fix_programs,
                      a_ptr, stride_ab, stride_am, stride_ak, (meta_a_batch > 0).to(tl.int32),
                      b_ptr, stride_bb, stride_bk, stride_bn, (meta_b_batch > 0).to(tl.int32),
                      c_ptr, stride_cb, stride_cm,
                      a_count, a_list, a_blocks, meta_a,
                      b_count, b_list, b_blocks, meta_b,
                      batch, M, N, K, alpha,
                      FIXUP_MIN_CLASS, BLOCK_LA, BLOCK_LB, FIX_GROUP, FIX_BLOCK_O, FIX_BLOCK_K)
    elif PERSISTENT:
        for tile in tl.range(pid, num_pid_m * num_pid_n * batch, num_programs):
            _compute_tile(tile, a_src, b_src, c_ptr, M, N, k_steps, num_pid_m, num_pid_n,
                          a_plane_rows, a_batch_rows, b_plane_rows, b_batch_rows, lda, ldb, stride_cb, stride_cm,
                          meta_a, meta_a_batch, meta_b, meta_b_batch, alpha,
                          FIXUP_MIN_CLASS, SCALE, TERMWISE, SLICES, TOP_LEVEL, FLUSH_STEPS, SPLIT_CORR, USE_TMA, UPCAST,
                          MERGE_LEVELS, WARP_SPECIALIZE, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
    else:
        _compute_tile(pid, a_src, b_src, c_ptr, M, N, k_steps, num_pid_m, num_pid_n,
                      a_plane_rows, a_batch_rows, b_plane_rows, b_batch_rows, lda, ldb, stride_cb, stride_cm,
                      meta_a, meta_a_batch, meta_b, meta_b_batch, alpha,
                      FIXUP_MIN_CLASS, SCALE, TERMWISE, SLICES, TOP_LEVEL, FLUSH_STEPS, SPLIT_CORR, USE_TMA, UPCAST,
                      MERGE_LEVELS, WARP_SPECIALIZE, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
