"""The SGEMM-cube GEMM on tensor cores (Triton), one kernel for every scheme: fp16x3, fp16x4, bf16x9, bf16x6.

The split pass (:mod:`.split_kernel`) wrote each operand as ``SLICES`` slices of a 16-bit format:

* FP16 schemes, ``SLICES = 2``: ``x = hi + lo * 2**-sb`` (slices 0 and 1 of this module);
* BF16 schemes, ``SLICES = 3``: ``x = s0 + s1 + s2``, not scaled (BF16 has FP32's exponent range).

Product ``(i, j)`` is slice ``i`` of A times slice ``j`` of B; its *level* ``i + j`` says how small
it is (:mod:`sgemm_cube.cpu_fallback.schemes`).  ``TOP_LEVEL`` is the highest level kept: fp16x3
keeps levels 0-1 (three products), fp16x4 and bf16x6 levels 0-2 (four, six), bf16x9 all of 0-4
(nine).  ``SCALE`` is the factor between consecutive levels' *stored* values: ``2**-sb`` for FP16
(the lo slices were stored scaled up), 1 for BF16.

A tile program follows the Triton tutorial's matmul: grouped tile id -> offsets -> K loop of
``tl.dot`` -> masked store.  For one (``BLOCK_M``, ``BLOCK_N``) output tile, with K walked in steps of
``BLOCK_K``::

    hh  : FP32 round-to-nearest accumulator of level 0, A_0 @ B_0
    part: tensor-core partial of A_0 @ B_0, added into hh every FLUSH_STEPS
          steps and after the last (why: :mod:`.gemm_tiles`)
    corr: tensor-core accumulator of level 1, A_1 @ B_0 + A_0 @ B_1 (2**-11
          (FP16) or ~2**-8 (BF16) smaller than hh, so its truncation error is
          far below FP32's ulp of C); SPLIT_CORR gives each product its own
          accumulator (corr2)
    ll  : tensor-core accumulator of the levels >= 2, smallest first:
          FP16: A_1 @ B_1;  BF16: A_2 @ B_2, A_2 @ B_1 + A_1 @ B_2 (bf16x9),
          then A_2 @ B_0 + A_1 @ B_1 + A_0 @ B_2.  Level 2 is ~2**-16 of C
          (BF16), levels 3-4 under 2**-24: one accumulator holds them all
          without a visible error.  MERGE_LEVELS (BF16) adds them into corr
          instead: three accumulators, so that 128x128 tiles fit in the registers

    termwise    C = (corr [+ ll * s]) * s + hh      (small terms first)
    elementwise hh also takes corr's and ll's partials, scaled, at every flush

with ``s = SCALE``.  This mirrors :func:`sgemm_cube.cpu_fallback.emulated_matmul` with the flush
interval as the K chunk (the CPU model's chunk is 16 and it keeps every product in its own
accumulator; the tensor cores' own chunk order is undocumented, so the tests compare within an error
bound, not bit for bit).  What happens around the K loop -- the tile's place, line meta, epilogue,
the fix-up programs -- is in :mod:`.gemm_tiles` and :mod:`.fixup_kernel`.

Shapes and limits (checked on the host by :mod:`.launch` and :mod:`.configs`, not here):

* A (batch, M, K), B (batch, K, N), C (batch, M, N), float32; any sizes >= 1 (the batch and M, N,
  K of one launch are int32: the products' element offsets are computed in int64);
* the slice buffers are zero padded to whole tiles: Mp, Np, Kp multiples of BLOCK_M, BLOCK_N,
  BLOCK_K, so that only the store is masked;
* BLOCK_M, BLOCK_N, BLOCK_K powers of two >= 16 (``tl.dot``); FLUSH_STEPS * BLOCK_K is the flush
  interval in K elements (:func:`.launch.flush_steps`);
* USE_TMA needs Hopper (compute capability 9) or later and 16-byte aligned rows (the padding gives
  them); UPCAST only under Triton's interpreter.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .fixup_kernel import fixup_program
from .gemm_tiles import GemmOperand, GemmOutput, load_tile, store_tile, tile_line_meta, tile_position

__all__ = ["gemm_kernel"]


@triton.jit
def gemm_kernel(
        # A's and B's slices: (SLICES * Ba * Mp, Kp) and (SLICES * Bb * Kp, Np) 16-bit floats
        # (pointers or tensor descriptors)
        a_slices, a_plane_rows, a_batch_rows,
        b_slices, b_plane_rows, b_batch_rows,
        # their line meta: (Ba, M) and (Bb, N) int32
        a_meta, a_meta_batch, b_meta, b_meta_batch,
        # the unscaled FP32 operands A (Ba, M, K) and B (Bb, K, N), read by the fix-up programs
        a_ptr, a_stride_batch, a_stride_m, a_stride_k,
        b_ptr, b_stride_batch, b_stride_k, b_stride_n,
        # their fix-up lines, compacted
        a_fix_order, a_fix_total, b_fix_order, b_fix_total,
        # the output C (batch, M, N) float32, the factor of every output, the scaled sums' error bound, the
        # list of tiles to recheck
        c_ptr, c_stride_batch, c_stride_m, alpha, c_error_bound, c_threshold, c_recheck, c_row_base, c_col_base,
        M, N, K, Kp, Np, batch, tile_programs, fixup_programs,
        # the device's choice of scheme (int32), read where RUN_IF >= 0
        choice, RUN_IF: tl.constexpr,
        # the fix-up (:func:`.fixup_kernel.fixup_program`)
        FIXUP_MIN_CLASS: tl.constexpr, CERTIFY: tl.constexpr,
        FIX_GROUP: tl.constexpr, FIX_BLOCK_O: tl.constexpr, FIX_BLOCK_K: tl.constexpr, FIX_ITEMS: tl.constexpr,
        # the scheme and order
        SLICES: tl.constexpr, SCALE: tl.constexpr, TOP_LEVEL: tl.constexpr, TERMWISE: tl.constexpr,
        FLUSH_STEPS: tl.constexpr, SPLIT_CORR: tl.constexpr, MERGE_LEVELS: tl.constexpr,
        # the tiles
        HAS_TILES: tl.constexpr, FIXUP_AFTER: tl.constexpr, USE_TMA: tl.constexpr, UPCAST: tl.constexpr,
        PERSISTENT: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C[b] = alpha * the emulated FP32 product A[b] @ B[b], every output rounded once.

    Programs ``0 .. fixup_programs - 1`` compute the outputs of the fix-up lines, the
    ``tile_programs`` after them output tiles (:func:`_gemm_tile`; :mod:`.gemm_tiles` says why in
    this order).

    a_slices, b_slices : the split buffers as 2-D row-major matrices (row strides Kp and Np);
        tensor descriptors (USE_TMA) with blocks [BLOCK_M, BLOCK_K] and [BLOCK_K, BLOCK_N].
    a_plane_rows, b_plane_rows : rows between consecutive slice planes (Ba * Mp, Bb * Kp).
    a_batch_rows, b_batch_rows : rows between batches (Mp, Kp; 0 to broadcast).
    Kp, Np : padded K and N, multiples of BLOCK_K and BLOCK_N (Mp is one of BLOCK_M).
    a_meta_batch, b_meta_batch : batch strides of the line meta (M, N; 0 to broadcast).
    c_error_bound : :func:`sgemm_cube.cpu_fallback.guard.emulated_error_bound` of the scheme and K (a power
        of two), for the epilogue's overflow check (:func:`.gemm_tiles.store_tile`).
    c_threshold : with CERTIFY, :func:`sgemm_cube.cpu_fallback.guard.certificate_threshold` of K (a power of
        two): an output of a LOSES_BITS line whose scaled sum is smaller is computed again.
    c_recheck : int32, the tiles that check could not decide or that hold such outputs (count, then
        entries), for :func:`.fixup_kernel.overflow_recheck_kernel`.
    c_row_base, c_col_base : where this launch's outputs start in the whole product (0, 0; a chunk of a
        chunked product, :func:`.launch._chunked_launches`, has the operands, line meta and output
        from there on): the recheck's entries are the whole product's.
    a_fix_order, a_fix_total (and b_*) : the split pass's fix-up lines, (Ba, M) int32 per batch in rank order
        then the other lines, and (Ba,) int32 their number (:func:`.split_kernel._compact_lists`).
    FIXUP_MIN_CLASS : smallest line class of the fix-up lines (LOSES_BITS, or SPECIAL with fixup=False).
    CERTIFY : LOSES_BITS lines are emulated (FIXUP_MIN_CLASS SPECIAL) and their outputs certified
        (:func:`sgemm_cube.cpu_fallback.guard.certifies`; :func:`.gemm_tiles.store_tile`).
    FIX_GROUP, FIX_BLOCK_O, FIX_BLOCK_K : the fix-up's FP64 dot tiles (:func:`.fixup_kernel.fixup_shape`).
    FIX_ITEMS : the fewest work items a fix-up program takes while fewer programs would do
        (:func:`.fixup_kernel.fixup_program`).
    HAS_TILES : False for a launch of fix-up programs only (``tile_programs`` 0): the tiles' code is not
        compiled, so its programs hold the fix-up's registers and no shared memory.
    FIXUP_AFTER : the fix-up programs run in a launch after this one (config ``fixup_apart``), which
        overwrites the fix-up lines' outputs: the tiles store every output (:func:`.gemm_tiles.store_tile`).
    SLICES : slices per operand, 2 (FP16 schemes) or 3 (BF16 schemes).
    SCALE : the factor between consecutive levels, 2**-sb (FP16) or 1.0 (BF16).
    TOP_LEVEL : the highest level kept, 1 (fp16x3), 2 (fp16x4, bf16x6) or 4 (bf16x9).
    FLUSH_STEPS : K steps between flushes of the level-0 partial; 0 = never
        (the whole K accumulates in the tensor cores: for comparison only).
    MERGE_LEVELS : the levels >= 2 accumulate with level 1 (in corr; no ll).
    UPCAST : FP32 tiles for the dots (Triton's interpreter only: :func:`.gemm_tiles.load_tile`).
    PERSISTENT : the tile programs loop over the tiles; otherwise one program per tile.
    WARP_SPECIALIZE : ask the compiler to split the K loop into producer (TMA)
        and consumer (MMA) warps (Triton 3.6 leaves this loop unchanged on Hopper).
    choice, RUN_IF : with RUN_IF >= 0, every program returns at once unless ``*choice == RUN_IF``
        (``scheme="auto"``: the launches of both schemes are queued, the device's choice runs;
        :func:`.split_kernel.scheme_choice_kernel`).
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_steps = Kp // BLOCK_K
    a = GemmOperand(a_slices, a_plane_rows, a_batch_rows, Kp, a_meta, a_meta_batch,
                    a_ptr, a_stride_batch, a_stride_m, a_stride_k, a_fix_order, a_fix_total)
    b = GemmOperand(b_slices, b_plane_rows, b_batch_rows, Np, b_meta, b_meta_batch,
                    b_ptr, b_stride_batch, b_stride_n, b_stride_k, b_fix_order, b_fix_total)
    c = GemmOutput(c_ptr, c_stride_batch, c_stride_m, alpha, c_error_bound, c_threshold, c_recheck, c_row_base,
                   c_col_base)
    pid = tl.program_id(0)
    chosen = True
    if RUN_IF >= 0:
        chosen = tl.load(choice) == RUN_IF
    if not chosen:
        pass
    elif pid < fixup_programs:
        fixup_program(pid, fixup_programs, a, b, c, batch, M, N, K,
                      FIXUP_MIN_CLASS, FIX_GROUP, FIX_BLOCK_O, FIX_BLOCK_K, FIX_ITEMS)
    elif not HAS_TILES:
        pass
    elif PERSISTENT:
        for tile in tl.range(pid - fixup_programs, num_pid_m * num_pid_n * batch, tile_programs):
            _gemm_tile(tile, a, b, c, M, N, k_steps, num_pid_m, num_pid_n,
                       FIXUP_MIN_CLASS, CERTIFY, FIXUP_AFTER, SLICES, SCALE, TOP_LEVEL, TERMWISE, FLUSH_STEPS,
                       SPLIT_CORR, MERGE_LEVELS,
                       USE_TMA, UPCAST, WARP_SPECIALIZE, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
    else:
        _gemm_tile(pid - fixup_programs, a, b, c, M, N, k_steps, num_pid_m, num_pid_n,
                   FIXUP_MIN_CLASS, CERTIFY, FIXUP_AFTER, SLICES, SCALE, TOP_LEVEL, TERMWISE, FLUSH_STEPS,
                   SPLIT_CORR, MERGE_LEVELS,
                   USE_TMA, UPCAST, WARP_SPECIALIZE, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)


@triton.jit
def _scaled(x, FACTOR: tl.constexpr):
    """``x * FACTOR``, with no multiply where FACTOR is 1 (the BF16 schemes' levels are stored unscaled)."""
    if FACTOR == 1.0:
        return x
    else:
        return x * FACTOR


@triton.jit
def _gemm_tile(tile, a, b, c, M, N, k_steps, num_pid_m, num_pid_n,
               FIXUP_MIN_CLASS: tl.constexpr, CERTIFY: tl.constexpr, FIXUP_AFTER: tl.constexpr,
               SLICES: tl.constexpr, SCALE: tl.constexpr, TOP_LEVEL: tl.constexpr,
               TERMWISE: tl.constexpr, FLUSH_STEPS: tl.constexpr, SPLIT_CORR: tl.constexpr,
               MERGE_LEVELS: tl.constexpr, USE_TMA: tl.constexpr, UPCAST: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Compute and store output tile ``tile`` (the module docstring says how)."""
    bidx, pid_m, pid_n = tile_position(tile, num_pid_m, num_pid_n, GROUP_M)
    a_row = bidx * a.batch_rows + pid_m * BLOCK_M  # the tile's first row in A's plane 0
    b_row = bidx * b.batch_rows                    # the batch's first row in B's plane 0
    col_n = pid_n * BLOCK_N
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = col_n + tl.arange(0, BLOCK_N)
    m_in = offs_m < M
    n_in = offs_n < N
    cls_a, t_a, cls_b, t_b, steps = tile_line_meta(a, b, bidx, offs_m, offs_n, m_in, n_in, k_steps,
                                                   FIXUP_MIN_CLASS)

    hh = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    corr = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    corr2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    ll = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ks in tl.range(0, steps, warp_specialize=WARP_SPECIALIZE):
        k = ks * BLOCK_K
        a0 = load_tile(a.slices, a_row, k, a.ld, USE_TMA, UPCAST, BLOCK_M, BLOCK_K)
        a1 = load_tile(a.slices, a_row + a.plane_rows, k, a.ld, USE_TMA, UPCAST, BLOCK_M, BLOCK_K)
        b0 = load_tile(b.slices, b_row + k, col_n, b.ld, USE_TMA, UPCAST, BLOCK_K, BLOCK_N)
        b1 = load_tile(b.slices, b_row + b.plane_rows + k, col_n, b.ld, USE_TMA, UPCAST, BLOCK_K, BLOCK_N)
        if SLICES == 3:
            a2 = load_tile(a.slices, a_row + 2 * a.plane_rows, k, a.ld, USE_TMA, UPCAST, BLOCK_M, BLOCK_K)
            b2 = load_tile(b.slices, b_row + 2 * b.plane_rows + k, col_n, b.ld, USE_TMA, UPCAST, BLOCK_K, BLOCK_N)
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
            if TOP_LEVEL == 4:  # bf16x9: levels 4 and 3
                low = tl.dot(a2, b2, low)
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
            # Every FLUSH_STEPS steps (and after the last) the partials go into hh with
            # round-to-nearest FP32 adds, fma(x, 1, hh) for level 0 (Triton would fuse a plain add
            # back into the MMA).
            if (ks % FLUSH_STEPS == FLUSH_STEPS - 1) | (ks == steps - 1):
                hh = tl.fma(part, 1.0, hh)
                part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                if not TERMWISE:
                    hh += _scaled(corr, SCALE)
                    corr = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                    if SPLIT_CORR:
                        hh += _scaled(corr2, SCALE)
                        corr2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                    if TOP_LEVEL >= 2:
                        if not MERGE_LEVELS:
                            hh += _scaled(ll, SCALE * SCALE)
                            ll = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

    if TERMWISE or FLUSH_STEPS == 0:
        if TOP_LEVEL >= 2:
            if not MERGE_LEVELS:
                corr = _scaled(ll, SCALE) + corr  # the smallest terms first
        if SPLIT_CORR:
            corr += corr2
        acc = _scaled(corr, SCALE) + hh
    else:
        acc = hh
    store_tile(acc, c, bidx, pid_m * BLOCK_M, col_n, offs_m, offs_n, m_in, n_in, cls_a, t_a, cls_b, t_b,
               FIXUP_MIN_CLASS, CERTIFY, FIXUP_AFTER, BLOCK_M, BLOCK_N)
