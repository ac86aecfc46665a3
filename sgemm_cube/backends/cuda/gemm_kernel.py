"""The three-product GEMM of SGEMM-cube on tensor cores (Triton).

For one output tile, with K walked in steps of ``BLOCK_K``::

    hh  : FP32 round-to-nearest accumulator of A_hi @ B_hi
    part: tensor-core partial of A_hi @ B_hi, added into hh every FLUSH_STEPS
          steps (tensor cores truncate while they accumulate: gpu.md measured
          4x-40x SGEMM's error when hh lives in them for all of K, and on
          same-sign data the truncation is biased, so the error grows with the
          interval: 4.7e-7 at 128, 2.4e-7 at 64 on uniform [0, 1) data)
    corr: tensor-core accumulator of A_lo @ B_hi + A_hi @ B_lo (2**-11 smaller
          than hh, so its truncation error is far below FP32's ulp of C);
          SPLIT_CORR gives each product its own accumulator
    [ll : tensor-core accumulator of A_lo @ B_lo, if KEEP_LO_LO]

    termwise    C = (corr [+ ll * 2**-sb]) * 2**-sb + hh      (small terms first)
    elementwise hh also takes corr's and ll's partials, scaled, at every flush

which mirrors :func:`cpu_fallback.emulated_matmul` with the flush interval as
the K chunk (the CPU model's chunk is 16; the tensor cores' own chunk order is
undocumented, so the tests compare within an error bound, not bit for bit).
The operands are the padded (hi, lo) buffers of :mod:`.split_kernel` seen as
2-D row-major matrices: A as (2 * Ba * Mp, Kp) and B as (2 * Bb * Kp, Np), so
a tile is addressed by a row offset for the plane (hi/lo) and the batch;
batch offsets of 0 broadcast an operand.  The buffers are zero padded to
whole tiles, so only the store is masked.

Variants (compile-time switches of one kernel, named in :data:`VARIANTS`):
``"ptr"`` pointer loads; ``"tma"`` host tensor descriptors (Hopper's bulk
tensor copies); ``"tma_persistent"`` the same with one program per SM looping
over tiles.  Which is fastest where: ``benchmarks/NOTES_gpu.md``.
"""
from __future__ import annotations

import triton
import triton.language as tl

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
def _load_step(a_src, b_src, a_row, a_lo_rows, b_row, b_lo_rows, col_n, k, lda, ldb,
               USE_TMA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Load the four FP16 tiles of one K step: A_hi, A_lo (BLOCK_M, BLOCK_K), B_hi, B_lo (BLOCK_K, BLOCK_N)."""
    if USE_TMA:
        a_hi = a_src.load([a_row, k])
        a_lo = a_src.load([a_row + a_lo_rows, k])
        b_hi = b_src.load([b_row + k, col_n])
        b_lo = b_src.load([b_row + b_lo_rows + k, col_n])
    else:
        rm = tl.arange(0, BLOCK_M)
        rn = tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a_src + (a_row.to(tl.int64) * lda + k) + (rm[:, None] * lda + rk[None, :])
        b_ptrs = b_src + ((b_row + k).to(tl.int64) * ldb + col_n) + (rk[:, None] * ldb + rn[None, :])
        a_hi = tl.load(a_ptrs)
        a_lo = tl.load(a_ptrs + a_lo_rows.to(tl.int64) * lda)
        b_hi = tl.load(b_ptrs)
        b_lo = tl.load(b_ptrs + b_lo_rows.to(tl.int64) * ldb)
    return a_hi, a_lo, b_hi, b_lo


@triton.jit
def _compute_tile(tile, a_src, b_src, c_ptr, M, N, k_steps, num_pid_m, num_pid_n,
                  a_lo_rows, a_batch_rows, b_lo_rows, b_batch_rows, lda, ldb, stride_cb, stride_cm,
                  SCALE: tl.constexpr, TERMWISE: tl.constexpr, KEEP_LO_LO: tl.constexpr,
                  FLUSH_STEPS: tl.constexpr, SPLIT_CORR: tl.constexpr, USE_TMA: tl.constexpr,
                  WARP_SPECIALIZE: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Compute and store one (BLOCK_M, BLOCK_N) output tile (see the module docstring)."""
    tiles_per_batch = num_pid_m * num_pid_n
    bidx = tile // tiles_per_batch
    pid_m, pid_n = _tile_coords(tile % tiles_per_batch, num_pid_m, num_pid_n, GROUP_M)
    a_row = bidx * a_batch_rows + pid_m * BLOCK_M
    b_row = bidx * b_batch_rows
    col_n = pid_n * BLOCK_N

    hh = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    corr = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    corr2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    ll = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ks in tl.range(0, k_steps, warp_specialize=WARP_SPECIALIZE):
        a_hi, a_lo, b_hi, b_lo = _load_step(a_src, b_src, a_row, a_lo_rows, b_row, b_lo_rows, col_n,
                                            ks * BLOCK_K, lda, ldb, USE_TMA, BLOCK_M, BLOCK_N, BLOCK_K)
        if FLUSH_STEPS == 0:
            hh = tl.dot(a_hi, b_hi, hh)
        else:
            part = tl.dot(a_hi, b_hi, part)
        if SPLIT_CORR:
            corr = tl.dot(a_lo, b_hi, corr)
            corr2 = tl.dot(a_hi, b_lo, corr2)
        else:
            corr = tl.dot(a_lo, b_hi, corr)
            corr = tl.dot(a_hi, b_lo, corr)
        if KEEP_LO_LO:
            ll = tl.dot(a_lo, b_lo, ll)
        if FLUSH_STEPS > 0:
            # Every FLUSH_STEPS steps (and after the last) the partials go
            # into hh with round-to-nearest FP32 adds, written as fma(x, 1, hh)
            # (the same single rounding): Triton fuses a plain `hh + dot(...)`
            # back into the MMA, which would undo the flush.
            if (ks % FLUSH_STEPS == FLUSH_STEPS - 1) | (ks == k_steps - 1):
                hh = tl.fma(part, 1.0, hh)
                part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                if not TERMWISE:
                    hh += corr * SCALE
                    corr = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                    if SPLIT_CORR:
                        hh += corr2 * SCALE
                        corr2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                    if KEEP_LO_LO:
                        hh += ll * (SCALE * SCALE)
                        ll = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

    if TERMWISE or FLUSH_STEPS == 0:
        if KEEP_LO_LO:
            corr = ll * SCALE + corr  # the smallest term first
        if SPLIT_CORR:
            corr += corr2
        c = corr * SCALE + hh
    else:
        c = hh

    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    c_tile = c_ptr + (bidx.to(tl.int64) * stride_cb + (pid_m * BLOCK_M).to(tl.int64) * stride_cm + col_n)
    mask = (pid_m * BLOCK_M + offs_m[:, None] < M) & (col_n + offs_n[None, :] < N)
    tl.store(c_tile + offs_m[:, None] * stride_cm + offs_n[None, :], c, mask=mask)


@triton.jit
def sgemm_cube_kernel(a_src, b_src, c_ptr,
                      M, N, Kp, batch, num_programs,
                      a_lo_rows, a_batch_rows, b_lo_rows, b_batch_rows, lda, ldb,
                      stride_cb, stride_cm,
                      SCALE: tl.constexpr, TERMWISE: tl.constexpr, KEEP_LO_LO: tl.constexpr,
                      FLUSH_STEPS: tl.constexpr, SPLIT_CORR: tl.constexpr, USE_TMA: tl.constexpr,
                      PERSISTENT: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C[b] = emulated FP32 product of the split operands, for every tile.

    a_src : pointer to, or tensor descriptor (block [BLOCK_M, BLOCK_K]) of,
        the A split buffer as a (2 * Ba * Mp, Kp) float16 matrix, row stride lda.
    b_src : same for B as (2 * Bb * Kp, Np), block [BLOCK_K, BLOCK_N], row stride ldb.
    c_ptr : (batch, M, N) float32 output, strides (stride_cb, stride_cm, 1).
    a_lo_rows, b_lo_rows : row offset of the lo plane (Ba * Mp, Bb * Kp).
    a_batch_rows, b_batch_rows : row offset between batches (Mp, Kp; 0 to broadcast).
    Kp : padded K, a multiple of BLOCK_K; Mp, Np are multiples of BLOCK_M, BLOCK_N.
    FLUSH_STEPS : K steps between flushes of the hi*hi partial; 0 = never
        (the whole K accumulates in the tensor cores: for comparison only).
    PERSISTENT : one program per SM (num_programs of them) loops over the
        tiles; otherwise one program per tile.
    WARP_SPECIALIZE : ask the compiler to split the K loop into producer (TMA)
        and consumer (MMA) warps (Triton 3.6 leaves this loop unchanged on Hopper).
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_steps = Kp // BLOCK_K
    if PERSISTENT:
        for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n * batch, num_programs):
            _compute_tile(tile, a_src, b_src, c_ptr, M, N, k_steps, num_pid_m, num_pid_n,
                          a_lo_rows, a_batch_rows, b_lo_rows, b_batch_rows, lda, ldb, stride_cb, stride_cm,
                          SCALE, TERMWISE, KEEP_LO_LO, FLUSH_STEPS, SPLIT_CORR, USE_TMA, WARP_SPECIALIZE,
                          BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
    else:
        _compute_tile(tl.program_id(0), a_src, b_src, c_ptr, M, N, k_steps, num_pid_m, num_pid_n,
                      a_lo_rows, a_batch_rows, b_lo_rows, b_batch_rows, lda, ldb, stride_cb, stride_cm,
                      SCALE, TERMWISE, KEEP_LO_LO, FLUSH_STEPS, SPLIT_CORR, USE_TMA, WARP_SPECIALIZE,
                      BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)
