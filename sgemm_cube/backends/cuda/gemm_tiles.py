"""What surrounds the GEMM's K loop: the operands' layout, a tile's place, loads, line meta and epilogue.

:func:`.gemm_kernel.gemm_kernel` runs the K loop of every scheme (FP16 or BF16 slices, a
compile-time switch); these helpers are the rest of a tile program.  One launch computes every
output of a product:

* programs ``0 .. fixup_programs - 1`` are *fix-up programs*: they compute the outputs of the fix-up
  lines from the unscaled FP32 operands (:func:`.fixup_kernel.fixup_program`).  They come first
  because the GPU starts programs roughly in the order of their ids: placed first, their few FP64
  tiles (loads of scattered lines, short K loops) run beside the first waves of tile programs;
  placed last, as before, they ran after every tile, a tail of their own.  Measured on an H100
  (2026-11-28, log-normal data on both operands, 8192^2 x 128, 80 rows and 75 columns listed, the
  same bits): 531 -> 452 us, 0.84 -> 0.99x cuBLAS SGEMM (``fixup_first_h100_20261128-001600.json``);
  8192^2 x 256 1.02x, against 0.88x in the former order's last record (another H100, the same
  bits).  With nothing listed they return at once.  Under the config key ``fixup_apart`` (the H200's
  short-K entries) they run instead in a launch of their own *after* the tiles' (``FIXUP_AFTER``):
  the tiles then store every output, 16 bytes at a time, and the fix-up overwrites its lines'
  outputs (:func:`store_tile` says why that pays at short K);
* the ``tile_programs`` after them are *tile programs*: each computes one (``BLOCK_M``,
  ``BLOCK_N``) output tile (or, persistent, loops over tiles), in the order a tile program runs
  these helpers:

  1. :func:`tile_position` -- the batch and tile coordinates of tile number ``tile``;
  2. :func:`tile_line_meta` -- the line meta of the tile's rows and columns, and its number of K
     steps: none when all its rows or all its columns are fix-up lines (the fix-up programs write
     those outputs, so the tile has nothing to compute);
  3. :func:`load_tile` -- the slice tiles of each K step;
  4. :func:`store_tile` -- the epilogue: undo the lines' power-of-two scaling, times alpha, one
     rounding, and store every output whose row and column are not fix-up lines (every output
     with ``FIXUP_AFTER``).

The split operands are the padded slice buffers of :mod:`.split_kernel` seen as 2-D row-major
matrices: A as (S * Ba * Mp, Kp) and B as (S * Bb * Kp, Np) with S slices (2 FP16, 3 BF16), so a
tile is addressed by a row offset for the plane (the slice) and the batch; a batch offset of 0
broadcasts an operand.  The buffers are zero padded to whole tiles, so only the store is masked.

Why the level-0 partial is flushed (every kernel's ``FLUSH_STEPS``): tensor cores truncate while
they accumulate (docs/cuda_design.md: 4x-40x SGEMM's error measured when the level-0 sum lives in
them for all of K, and on same-sign data the truncation is biased, so the error grows with the
interval: 4.7e-7 at 128, 2.4e-7 at 64 on uniform [0, 1) data).  The flush is written
``fma(part, 1, hh)``, the same single rounding as an add: Triton fuses a plain ``hh + dot(...)``
back into the MMA, which would undo it.

Kernel variants (compile-time switches ``USE_TMA``, ``PERSISTENT``, named in :data:`VARIANTS`):
``"ptr"`` pointer loads; ``"tma"`` host tensor descriptors (Hopper's bulk tensor copies);
``"tma_persistent"`` the same with one tile program per SM looping over tiles.  Which is fastest
where: ``docs/cuda_design.md``.
"""
from __future__ import annotations

from typing import NamedTuple

import triton
import triton.language as tl

from .fixup_kernel import FP32_OVERFLOW, RECHECK_ENTRY
from .line_meta import LOSES_BITS, PAD_META, decode_meta
from .split_kernel import pow2_f64

__all__ = ["VARIANTS", "GemmOperand", "GemmOutput", "tile_position", "load_tile", "tile_line_meta", "store_tile"]


@triton.jit
def pow2_f32(shift):
    """``2.0 ** shift`` as float32 for integer ``shift`` in [-149, 127], subnormals included, exactly."""
    biased = shift + 127
    return tl.where(biased >= 1, biased << 23, 1 << (tl.minimum(biased, 0) + 22)).to(tl.float32, bitcast=True)


#: Kernel variant -> (use tensor descriptors, persistent tile programs).
VARIANTS = {"ptr": (False, False), "tma": (True, False), "tma_persistent": (True, True)}


class GemmOperand(NamedTuple):
    """Everything a GEMM launch reads of one operand, grouped once in the kernel (a tuple costs
    nothing: Triton flattens it when it compiles).

    Lines are A's rows (``L = M``) or B's columns (``L = N``); ``Bx`` is the batch, 1 for a
    broadcast operand.
    """

    slices: object        # tile programs: pointer to, or tensor descriptor of, the split buffer as a 2-D matrix
    plane_rows: object    # its rows between slice planes (Ba * Mp, Bb * Kp)
    batch_rows: object    # its rows between batches (Mp, Kp; 0 to broadcast)
    ld: object            # its row stride (Kp, Np)
    meta: object          # both: (Bx, L) int32 packed line meta (:mod:`.line_meta`)
    meta_batch: object    # its batch stride (L, or 0 to broadcast)
    ptr: object           # fix-up programs: the FP32 operand, (Bx, L, K) through the next three strides
    stride_batch: object
    stride_line: object
    stride_k: object
    fix_order: object     # (Bx, L) int32: the fix-up lines in rank order, then the others (split pass 3)
    fix_total: object     # (Bx,) int32: the number of fix-up lines


class GemmOutput(NamedTuple):
    """The (batch, M, N) float32 output, strides (stride_batch, stride_m, 1), and the factor of every output."""

    ptr: object
    stride_batch: object
    stride_m: object
    alpha: object         # float32, applied before each output's one rounding (1.0: the product)
    error_bound: object   # float32 power of two: guard.emulated_error_bound of the scaled sums (overflow check)
    threshold: object     # float32 power of two: guard.certificate_threshold (with CERTIFY)
    recheck: object       # int32: the tiles with an undecided overflow or an uncertified output (overflow_recheck_kernel)
    row_base: object      # the launch's first row and column in the whole product (a chunk's; else 0): the
    col_base: object      # recheck's list holds whole-product coordinates


@triton.jit
def tile_position(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(batch, row block, column block) of output tile ``tile``: batch-major, then grouped, so that
    GROUP_M row blocks reuse the same B columns from L2."""
    tiles_per_batch = num_pid_m * num_pid_n
    bidx = tile // tiles_per_batch
    in_batch = tile % tiles_per_batch
    in_group = GROUP_M * num_pid_n
    first_m = (in_batch // in_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (in_batch % in_group) % group_m
    pid_n = (in_batch % in_group) // group_m
    return bidx, pid_m, pid_n


@triton.jit
def load_tile(src, row, col, ld, USE_TMA: tl.constexpr, UPCAST: tl.constexpr,
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
def tile_line_meta(a, b, bidx, offs_m, offs_n, m_in, n_in, k_steps, FIXUP_MIN_CLASS: tl.constexpr):
    """The line meta of a tile's rows ``offs_m`` of A and columns ``offs_n`` of B, and its K steps.

    Returns ``(cls_a, t_a, cls_b, t_b, steps)``: classes and exponents (BLOCK_M,) and (BLOCK_N,)
    int32, pad lines read as :data:`.line_meta.PAD_META` (class SPLIT, t 0); ``steps`` is
    ``k_steps``, or 0 where every row or every column of the tile is a fix-up line (class
    ``>= FIXUP_MIN_CLASS``) or pad: then the tile has no output of its own.
    """
    cls_a, t_a = decode_meta(tl.load(a.meta + bidx * a.meta_batch + offs_m, mask=m_in, other=PAD_META))
    cls_b, t_b = decode_meta(tl.load(b.meta + bidx * b.meta_batch + offs_n, mask=n_in, other=PAD_META))
    rows_kept = tl.max((m_in & (cls_a < FIXUP_MIN_CLASS)).to(tl.int32), axis=0)
    cols_kept = tl.max((n_in & (cls_b < FIXUP_MIN_CLASS)).to(tl.int32), axis=0)
    return cls_a, t_a, cls_b, t_b, k_steps * rows_kept * cols_kept


@triton.jit
def store_tile(acc, c, bidx, row0, col0, offs_m, offs_n, m_in, n_in, cls_a, t_a, cls_b, t_b,
               FIXUP_MIN_CLASS: tl.constexpr, CERTIFY: tl.constexpr, FIXUP_AFTER: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The epilogue: store ``alpha * 2**-(t_a + t_b) * acc`` (rounded once) at the outputs of the tile
    whose row and column are not fix-up lines (the fix-up programs write the others), or with FIXUP_AFTER
    (the fix-up programs run in a later launch and overwrite theirs) at every output of the tile.

    As on the CPU (``guard.undecided_overflow``): where an output overflows but ``|acc| - c.error_bound``
    does not (the exact value may be finite), the tile is listed in ``c.recheck``, and
    :func:`.fixup_kernel.overflow_recheck_kernel` (the next launch) computes its infinite outputs again from
    the unscaled operands, so a finite exact result never comes out infinite.  (A call from here measured
    7-10% slower on an H100, fp16x3 at 4096^3 and 8192^3, even where it never ran.)

    CERTIFY (``guard.uncertified``): an output of a LOSES_BITS row or column whose scaled sum ``|acc|`` is
    below ``c.threshold`` is stored as NaN (no emulated output is NaN otherwise) and its tile listed too;
    the recheck computes it again.  Tiles without such a line skip the test (scalar branch: the mask is not
    kept live through the unscaling).
    """
    keep = (m_in & (cls_a < FIXUP_MIN_CLASS))[:, None] & (n_in & (cls_b < FIXUP_MIN_CLASS))[None, :]
    listed = tl.program_id(0) * 0  # int32: does the recheck need this tile
    if CERTIFY:
        wide_a, wide_b = cls_a == LOSES_BITS, cls_b == LOSES_BITS
        if tl.max(wide_a.to(tl.int32), axis=0) + tl.max(wide_b.to(tl.int32), axis=0) > 0:  # most tiles: none
            uncertified = keep & (wide_a[:, None] | wide_b[None, :]) & (tl.abs(acc) < c.threshold)
            listed = tl.max(uncertified.to(tl.int32))
            acc = tl.where(uncertified, float("nan"), acc)  # NaN through the unscaling below
    # Undo the lines' power-of-two scaling and multiply by alpha, rounding once.  The scaled sums never
    # overflow: only this rounding can.  Unscaled lines (t = 0) with alpha 1 cannot overflow (|acc| < K upper**2).
    if (tl.max(tl.abs(t_a), axis=0) + tl.max(tl.abs(t_b), axis=0) > 0) | (c.alpha != 1.0):
        # |acc| < K upper**2 + error_bound / 2 < error_bound * 2**20 (guard.emulated_error_bound), so
        # |acc| < 2**acc_exp: a tile whose every factor 2**-(t_a + t_b) is an FP32 number (subnormal
        # ones included) and whose products stay below 2**127 unscales with one FP32 multiply, the exact
        # product rounded once: the FP64 path's bits without its conversions, which took a fifth of the
        # GEMM at K = 128 where every tile is scaled (docs/speed.md).
        acc_exp = (tl.cast(c.error_bound, tl.float32).to(tl.int32, bitcast=True) >> 23) - 127 + 23
        smallest_shift = -(tl.max(t_a, axis=0) + tl.max(t_b, axis=0))
        largest_shift = -(tl.min(t_a, axis=0) + tl.min(t_b, axis=0))
        if (c.alpha == 1.0) & (smallest_shift >= -149) & (largest_shift + acc_exp <= 127):
            acc = acc * pow2_f32((-t_a)[:, None] - t_b[None, :])
        else:
            # float64 holds every factor and their product exactly: 24 bits of acc, 24 of alpha
            factor = pow2_f64(-(t_a[:, None] + t_b[None, :])) * tl.cast(c.alpha, tl.float64)
            acc64 = acc.to(tl.float64)
            value = acc64 * factor
            low = (tl.abs(acc64) - tl.cast(c.error_bound, tl.float64)) * tl.abs(factor)
            # (a non-finite alpha is left to IEEE arithmetic: its factors are infinite or NaN, the others < 1e300)
            undecided = keep & (tl.abs(value) >= FP32_OVERFLOW) & (low < FP32_OVERFLOW) & (tl.abs(factor) < 1e300)
            listed = tl.maximum(listed, tl.max(undecided.to(tl.int32)))
            acc = value.to(tl.float32)
    if listed > 0:
        entry = c.recheck + 1 + tl.atomic_add(c.recheck, 1) * RECHECK_ENTRY
        tl.store(entry, bidx)
        tl.store(entry + 1, row0 + c.row_base)
        tl.store(entry + 2, col0 + c.col_base)
        tl.store(entry + 3, (BLOCK_M << 16) | BLOCK_N)
    c_tile = c.ptr + bidx.to(tl.int64) * c.stride_batch
    c_ptrs = c_tile + offs_m[:, None].to(tl.int64) * c.stride_m + offs_n[None, :]
    # A mask constant over aligned runs of columns lets the compiler store 16 bytes at a time; one that varies
    # column by column (a fix-up column crossing the tile) stores 4 bytes at a time: 172 against 135 us for the
    # GEMM at 8192 x 4096 x 128 on an H100 with an FP32 factor (docs/speed.md).  Fix-up rows alone keep the
    # mask constant along the columns (pad lines are class SPLIT).  At short K the stores are most of a tile's
    # time: on an H200 (2026-11-29, 8192 x 64 x 8192, log-normal on both operands, 22 rows and 30 columns
    # listed) the tiles alone took 226 us against 179 us on normal data, with no fix-up programs beside them;
    # with FIXUP_AFTER every tile stores 16 bytes at a time (fixup_apart_h200_20261129-150000.json).
    if FIXUP_AFTER:
        tl.store(c_ptrs, acc, mask=m_in[:, None] & n_in[None, :])
    elif tl.max((cls_b >= FIXUP_MIN_CLASS).to(tl.int32), axis=0) > 0:
        tl.store(c_ptrs, acc, mask=keep)
    else:
        tl.store(c_ptrs, acc, mask=(m_in & (cls_a < FIXUP_MIN_CLASS))[:, None] & n_in[None, :])
