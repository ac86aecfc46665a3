"""The fix-up inside the GEMM launch: the outputs of the fix-up lines, from the unscaled operands.

The split pass lists the rows of A and columns of B whose outputs are not
computed from the split, the fix-up lines (:mod:`sgemm_cube.cpu_fallback.guard`:
an entry the split would round to fewer than 22 bits, NaN, infinity), per
batch in rank order, then the other lines
(:func:`.split_kernel._compact_lists`).  The GEMM's tiles leave those outputs
alone, and ``fixup_programs`` extra programs of the same launch compute them
(:func:`fixup_program`); or, under the config key ``fixup_apart`` (the H200's
short-K entries), the tiles store every output and the fix-up programs run in a
launch of their own after theirs, overwriting their lines' outputs
(:func:`apart_shape`: four warps, :data:`APART_PROGRAMS_PER_SM` programs per
SM, an item each, compiled to :data:`APART_MAXNREG` registers).  Measured on an
H200 (2026-11-29, through the public API, x cuBLAS SGEMM, the same bits,
``fixup_apart_h200_20261129-150000.json``): 8192 x
64 x 8192 log-normal on both operands 0.957 -> 1.015x, normal data 1.22 ->
1.32x, Vandermonde features 8192 x 96 x 4096 1.18 -> 1.25x, 8192^2 x 128
log-normal 1.20 -> 1.22x; even at K = 256; at K = 512 the fused launch ran
1.31x against 1.24x, and 4096^3 with A log-normal 2.93-2.99x against 2.73x (a
long list's FP64 work no longer overlaps the tiles), so longer K stays fused:

* the fix-up lines go in groups of ``GROUP`` consecutive ranks, each found
  with one load (:func:`_gather_group`), so that a group reads the other
  operand once for up to ``GROUP`` lines however scattered they are.  (The
  programs scanned per-block counts for them before 2026-11-28: on an H200,
  8192^2 x 128 log-normal on both operands, half the fix-up programs' time;
  docs/speed.md, the fix-up's compacted lists);
* work items (group, block of the other dimension, output batch) are dealt
  round-robin to the first of the fix-up programs, at least
  :data:`_ITEMS_PER_PROGRAM` items each, and the others return at once
  (:func:`_active_programs`): a short list leaves the SMs' other slots to the
  GEMM's tiles, which run beside its latency-bound FP64 dots rather than
  after them; with empty lists every program returns at once;
* a list shorter than ``GROUP`` goes in groups of :data:`_SMALL_GROUP` (16)
  lines against blocks of :data:`_SMALL_O` (64) other lines: a few lines
  cost their number rounded up to 16, on 16 times as many items.  Measured
  on an H100 (2026-11-27, 4096^3, the same bits): 3 listed columns 2.06 ->
  1.69 ms; 100 rows and 40 columns listed 1.62 -> 1.14-1.18 ms; where every
  row is listed, 3-6% slower (2.83 -> 2.92-3.01 ms: the second tile shape in
  the kernel, inlined or not, 16 x 64, 16 x 256 or 32 x 128).  Their first
  phase's FP64 dots take K steps of :data:`_SMALL_K` (128), not the tiles'
  (32): a short list at long K no longer makes the launch's tail.

The products are FP64 tensor-core dots (``tl.dot`` of float64 tiles; DMMA
on Hopper) of the **unscaled** operands (:func:`fixup_dot`): each product of
two FP32 values is exact in FP64 and cannot overflow or underflow there, the
sums are FP64, and each output times ``alpha`` is rounded once to FP32.  So a
line spanning FP32's whole range loses none of its entries, no partial sum
overflows, and NaN and infinities come out as IEEE arithmetic gives them
(``inf * 0`` and ``inf - inf`` are NaN, ``inf * 1e-30`` is ``inf``).  Outputs
in a listed row and a listed column are computed once, by the row pass: the
column pass walks only the rows of A that are not listed (compacted like the
lists, :func:`_other_lines`; the split pass stores them from the end of each
block's list segment).  Measured on an H100 (2026-11-26, 4096^3, log-normal
sigma 3 on both operands, 83% of the rows and of the columns listed): 0.51x ->
0.71x cuBLAS SGEMM (``matrix_h100_20261126-134037.json``).

An FP64 sum is within ``gamma_K * sum_k |x_k y_k|`` of the exact one, far
inside the guarantee -- but where huge terms cancel (products up to 2**256
meeting a result near 2**128) that error can carry a finite result past
FP32's overflow threshold, or an overflowing one back, even to the other
sign (issue 33).  So every fix-up program works in two phases
(:func:`_fix_lines`):

1. each of its tiles stores its FP64 sums rounded once, the loop above
   unchanged (measured on an H100, 2026-11-26: checks placed after the K
   loop, inside the loop over tiles, cost 7-30% on data whose every line is
   listed, even where they never found anything);
2. then it reads its tiles back and checks them (:func:`_check_tile`): an
   output ``r`` is cleared where ``| |r| - threshold | - 2**-23 |r|`` exceeds
   the FP64 sum's error bound, from bounds of the lines' largest entries in
   their line meta.  Most tiles end here.  A tile that does not clear is
   recomputed in pieces of 64 columns (:func:`_careful_tile`): the FP64 sums
   again, checked with the other lines' actual maxima (one pass of loads,
   :func:`_col_maxima`), then if need be with ``sum_k |x_k y_k|`` itself
   (one more FP64 dot, :func:`_abs_dot`); a piece still undecided -- huge
   terms that cancel, or a result within the sum's error of the threshold --
   is computed exactly (:func:`exact_dot`: integer limbs over FP32's whole
   product range, rounded once, as the CPU's
   :func:`sgemm_cube.cpu_fallback.guard.fixup_dot` rounds every fix-up
   output).

So a finite exact result is never infinite, an overflowing one is the
infinity of its sign, and every other output is within the FP64 sum's error
of the exact value before its one rounding (exactly rounded in pieces
computed exactly).  Costs, measured on an H100 (2026-11-26, 4096^3, every
line listed, against the former single phase in the same runs): +3-6% for
log-normal data (sigma 3; 5.8 against 5.6 ms), +4-9% where every row holds
3e38; 5.7x (32 ms) where lines span FP32's whole range on both sides (every
tile recomputed with ``sum |x y|``); a 1024^3 product whose every tile is
computed exactly, 116 ms.  The phase-two check's time is the tiles' second
read and their lines' gathering.
"""
from __future__ import annotations

import math

import triton
import triton.language as tl

from sgemm_cube.cpu_fallback.guard import line_range

from .line_meta import LOSES_BITS, PAD_META, decode_meta
from .split_kernel import pow2_f64

__all__ = ["fixup_dot", "exact_dot", "fixup_program", "fixup_shape", "apart_shape", "overflow_recheck_kernel",
           "FP32_OVERFLOW", "RECHECK_ENTRY"]

#: From this K on, the fix-up takes fewer programs, and on eight warps the larger tiles (:func:`fixup_shape`).
LONG_K = 4096
#: Below this K, on eight warps the larger tiles with as many programs as at medium K (:func:`fixup_shape`).
SHORT_K = 128
#: The smallest magnitude that rounds to infinity in FP32 (halfway between its largest value and 2**128).
FP32_OVERFLOW = tl.constexpr(2.0 ** 128 * (1 - 2.0 ** -25))
#: A bound on ``big * 2**t`` of a line that is not a fix-up line (guard.meta_from_stats; a fix-up line has
#: ``big`` in ``[2**-t, 2**(1-t))``), under every scheme and ``sb``: scaled or not, such a line lies below
#: the split's ``upper`` (its class would be SPECIAL otherwise).
_LOG2_UPPER = tl.constexpr(max(math.ceil(math.log2(line_range(s, sb).upper))
                               for s in ("fp16x3", "fp16x4", "bf16x9", "bf16x6") for sb in range(25)))
#: A list shorter than GROUP goes in groups of this many fix-up lines (the least rows of an FP64 tl.dot),
#: against blocks of _SMALL_O other lines (:func:`_fix_lines`).
_SMALL_GROUP = tl.constexpr(16)
_SMALL_O = tl.constexpr(64)
#: And the K step of their first-phase FP64 dots (:func:`_fix_tile`; the careful pass keeps the tiles' step).
#: An item is a chain of K / step steps, each a load of the line indices, then of the lines, then a dot:
#: at long K a long chain, the launch's tail.  Measured on an H200 (2026-11-29, through the public API, x cuBLAS
#: SGEMM, two rounds in alternating processes, the same bits; ``small_k_h200_20261129-170000.json``): one loose
#: column of B listed beside wide rows of A (``guard.fp16_rule``) made the GEMM launch of a 1536^3 product 182 us
#: against 90 us with nothing listed, at the tiles' step of 32; steps 32 -> 128 -> 256: Laplacian kernel
#: 1536^3 0.81 -> 1.08 -> 1.00x, Vandermonde features 2048^3 1.05 -> 1.30 -> 1.20x, 4096^3 2.49 -> 3.29 ->
#: 3.10x, nothing listed (X^T X 1536^3) 1.39x under each.  A step of 128 in both phases needed 122880 bytes of
#: shared memory against 98304 (one program per SM at 64 x 128 tiles: nothing listed ran 1.21-1.29x).
_SMALL_K = tl.constexpr(128)
#: The fewest work items a fix-up program takes while fewer programs than launched would do
#: (:func:`_active_programs`).  Why, as we read the figures (not profiled further): an item of a short list at
#: short K is a chain of dependent loads, a few microseconds, and a launch's 4 x 132 fix-up programs (an item
#: each) took the SMs' slots first, so the tiles waited; the profiler put the 45-65 us that such data add
#: inside the GEMM launch, not in the split passes.  Measured on an H200 (2026-11-29, log-normal sigma 3 on
#: both operands, about 1% of the rows and of the columns listed, through the public API, x cuBLAS SGEMM, two
#: rounds in alternating processes, ``fixup_items_h200_20261129-120000.json``), 1 (every program with an
#: item, the dealing before) -> 4 -> 8: 8192 x 96 x 4096 0.96 -> 1.02 -> 1.02x; 8192 x 64 x 8192 0.935 ->
#: 0.967 -> 0.949x; 8192 x 128 x 8192 1.16 -> 1.19-1.21 -> 1.18x; Vandermonde features at K = 96 (long lists)
#: and 4096^3 on both operands unchanged; 4096^3 log-normal on A only 2.95 -> 2.92x (1% slower), and 1.78x
#: with 8 (the fix-up became the tail).  The same bits.  At long K it moved nothing: 1, 2 and 4 within 0.5% at
#: 1536^3, 2048^3, 4096^3 and 8192 x 512 x 8192 (H200, 2026-11-29, ``small_k_h200_20261129-170000.json``; a
#: short list's K step did, :data:`_SMALL_K`).
_ITEMS_PER_PROGRAM = tl.constexpr(4)
#: A launch of fix-up programs alone (config key ``fixup_apart``, :func:`apart_shape`): its programs per SM
#: and the warps of each.  Without the tiles' registers and shared memory many such programs fit on an SM, so a
#: short list's items, each a chain of dependent loads, run side by side rather than four to a program (8 and 16
#: per SM ran within 1% on an H200, 2026-11-29, with the fix-up launch before the tiles', a first version).
APART_PROGRAMS_PER_SM = 8
APART_WARPS = 4
#: The registers per thread that launch is compiled to (Triton's ``maxnreg``, :class:`.launch._Launch`).  Left to
#: itself ptxas gives its four warps 255 whatever the tile (two programs per SM); at 128 (four per SM) it spills
#: 390 bytes in the kernel's own frame and runs faster.  Measured on an H200 (2026-11-29, log-normal sigma 3 on
#: both operands, torch.profiler's time of the launch, the same bits; ``fixup_maxnreg_host_h200_20261129-143000.json``):
#: 8192 x 64 x 8192 35.3 / 32.8 / 31.2 us at 255 / 168 / 128 registers, 8192 x 96 x 4096 30.0 / 30.2 / 27.1 us;
#: the call 1.012-1.020x / 1.021-1.023x / 1.036-1.037x cuBLAS SGEMM at 8192 x 64 x 8192.
APART_MAXNREG = 128
#: Columns per piece of a tile the cheap checks leave undecided (:func:`_careful_tile`).
_PIECE_COLS = tl.constexpr(64)
#: int32 words per tile the GEMM's epilogue lists for :func:`overflow_recheck_kernel`: batch, first row, first
#: column, rows << 16 | columns.
RECHECK_ENTRY = tl.constexpr(4)
#: Rows per piece of an emulated tile computed again (:func:`overflow_recheck_kernel`; columns: _PIECE_COLS).
_RECHECK_ROWS = tl.constexpr(32)
#: K per step of those pieces' FP64 dots.
_RECHECK_K = tl.constexpr(32)
#: Outputs gathered from a piece and computed at once, each its own FP64 sum over K (:func:`_few_outputs`),
#: and how many of them a piece may hold to go that way rather than by the piece's FP64 dots: one output's
#: two sums load its row and column only, in steps of :data:`_FEW_K` (the certificate fails one or two
#: outputs in a tile where it fails any, :func:`.gemm_tiles.store_tile`).
_FEW = tl.constexpr(16)
_FEW_MAX = tl.constexpr(64)
_FEW_K = tl.constexpr(256)
#: Outputs per piece of a tile computed exactly (:func:`exact_dot`): rows and columns.
_EXACT_ROWS = tl.constexpr(8)
_EXACT_COLS = tl.constexpr(16)
#: Limbs of the exact sums: 32 bits each from 2**-298 (the smallest product of two FP32 values) up;
#: 20 hold any sum of K < 2**31 products times alpha's 24 significant bits.
_LIMBS = tl.constexpr(32)


def fixup_shape(k: int, sms: int, num_warps: int) -> tuple[tuple[int, int, int], int]:
    """The fix-up's ``(GROUP, BLOCK_O, BLOCK_K)`` FP64 dot tiles and its number of programs, for K and the
    launch's warps per program (the GEMM's config: the fix-up programs run in the same launch).

    Measured on an H200 (2026-11-24, every row listed, x cuBLAS SGEMM at 8192^3 / RBF 8192x1024 k8192 /
    softmax 16x2048x1024 k2048): (64, 128, 16) x 1 SM 0.85 / 0.78 / 0.46; (64, 128, 32) x 4 SMs 0.92 /
    0.84 / 0.92; (64, 256, 32) x 2 SMs 1.05 / 0.97 / 0.31; (64, 128, 64) x 2 SMs 1.02 / 0.93 / 0.60.
    Long K takes the large tiles, short K more programs of smaller ones.  Normal data (nothing
    listed) measured 3.64-3.81x SGEMM with each, within the run-to-run spread.  Very short K (below
    :data:`SHORT_K`) takes the wide tiles with the many programs: measured on an H100 (2026-11-26,
    Vandermonde features 8192 x 96 @ 96 x 4096, 71% of the rows listed, x cuBLAS SGEMM): (64, 128, 32)
    x 4 SMs 0.38, (64, 256, 32) x 4 0.44, x 2 0.43, (64, 256, 16) x 4 0.45, (128, 128, 32) x 2 0.29; the
    same bits from each.

    Four warps (the short-K entries' GEMM tiles) take 64 x 64 tiles at every K, with the programs of their K:
    measured on an H100 (2026-11-28, log-normal sigma 3 on both operands, 8192^2 x K, about 1% of the rows
    and of the columns listed, through the public API, x cuBLAS SGEMM): K = 512 0.96 -> 1.03x, K = 128
    0.99x with either (``fixup_first_h100_20261128-001600.json``); with the fix-up programs after the tiles
    (the order before that day), K = 128 531 -> 468 us.  The same bits.  Below :data:`SHORT_K` and from
    :data:`LONG_K` they took the wide tiles until 2026-11-29, and a 64 x 256 FP64 tile is 128 doubles per
    thread on four warps: compiled for sm_90 by Triton 3.6 (offline, ``shortk_h200_20261129-091500.json``),
    the fused kernel's own frame spilled 5.8-5.9 KB (fp16x3; bf16x6 7.1 KB) at 8192 x 96 x 4096 and
    2048 x 8192 x 2048, against 72-180 bytes (bf16x6 556) with 64 x 64, the spills the tile programs share
    (one register allocation).  Timed on an H200 (2026-11-29, ``fixup_items_h200_20261129-120000.json``,
    against the rule before in alternating processes): 8192 x 96 x 4096 log-normal on both operands 194 -> 190
    us, 2048 x 32768 x 2048 normal data 2379 -> 2309 us; the same bits.

    A list shorter than ``GROUP`` takes smaller tiles of its own (:data:`_SMALL_GROUP`, :data:`_SMALL_O`).
    """
    programs = 2 * sms if k >= LONG_K else 4 * sms
    if num_warps <= 4:
        return (64, 64, 32), programs
    if k >= LONG_K or k < SHORT_K:
        return (64, 256, 32), programs
    return (64, 128, 32), programs


def apart_shape(k: int, sms: int) -> tuple[tuple[int, int, int], int, int]:
    """The tiles, the number of programs and the fewest items per program of a launch of fix-up programs alone
    (config key ``fixup_apart``): the four-warp tiles of :func:`fixup_shape`, :data:`APART_PROGRAMS_PER_SM`
    programs per SM, one item each where the list is short."""
    tile, _ = fixup_shape(k, sms, APART_WARPS)
    return tile, APART_PROGRAMS_PER_SM * sms, 1


@triton.jit
def fixup_dot(x_ptr, x_off, x_valid, stride_xk, y_ptr, y_off, y_valid, stride_yk, K, alpha,
               ROWS: tl.constexpr, COLS: tl.constexpr, BLOCK_K: tl.constexpr):
    """alpha * sum_k x[r, k] * y[k, c] of FP32 operands, summed in FP64 (not yet rounded to FP32).

    x rows at ``x_ptr + x_off[r]``, y columns at ``y_ptr + y_off[c]``.  The products are exact;
    the sum is within ``gamma_K * sum_k |x y|`` of theirs, times alpha rounded once more.
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
    return acc * tl.cast(alpha, tl.float64)


@triton.jit
def _error_scale(alpha, K, like):
    """``|alpha| K 2**-51`` as a tensor shaped ``like`` (0 where alpha is not finite: never near then).

    The FP64 sum is within ``gamma_K * sum_k |x_k y_k| <= 2 K 2**-53 sum_k |x_k y_k|`` of the exact one (any
    order, each operation rounded to nearest): twice that again, times ``|alpha|``.
    """
    a_mag = tl.abs(tl.cast(alpha, tl.float64)) + tl.zeros_like(like)  # a tensor: scalar comparisons differ
    return tl.where(a_mag < float("inf"), a_mag * K * 2.0 ** -51, 0.0)


@triton.jit
def _near_overflow(v, row_size, col_size):
    """Outputs ``v`` (FP64, alpha times the sum) whose rounding to FP32 the sum's error could change between
    finite and infinite (or the infinity's sign), with ``row_size[:, None] * col_size[None, :]`` at least
    ``|alpha| K 2**-51 sum_k |x_k y_k|`` (:func:`_error_scale`), and ``2**-51 |v|`` more for the rounding of
    alpha times the sum.  NaN and infinities (from the operands) are never near.  Few operations per
    output and no tile beside ``v`` (the vectors make the bound)."""
    mag = tl.abs(v)
    return tl.abs(mag - FP32_OVERFLOW) - mag * 2.0 ** -51 <= row_size[:, None] * col_size[None, :]


@triton.jit
def _near_overflow_by_sum(v, size, alpha, K):
    """:func:`_near_overflow` with ``size`` itself (``sum_k |x_k y_k|`` in FP64, :func:`_abs_dot`, the shape of
    ``v``) for the bound: the outputs whose rounding to FP32 the FP64 sum's error could still change between
    finite and infinite."""
    mag = tl.abs(v)
    return tl.abs(mag - FP32_OVERFLOW) - mag * 2.0 ** -51 <= size * _error_scale(alpha, K, size)


@triton.jit
def _col_maxima(y_ptr, y_off, y_valid, stride_yk, K, COLS: tl.constexpr, BLOCK_K: tl.constexpr):
    """``max_k |y[k, c]|`` (COLS, FP64; NaN and infinities read as 0) in one more pass over K that loads
    the other operand's lines only (a vector beside the tile's accumulator: few registers)."""
    y_max = tl.zeros((COLS,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        y = tl.abs(tl.load(y_ptr + y_off[None, :] + offs_k[:, None].to(tl.int64) * stride_yk,
                           mask=(offs_k < K)[:, None] & y_valid[None, :], other=0.0))
        y_max = tl.maximum(y_max, tl.max(tl.where(y < float("inf"), y, 0.0), axis=0))  # NaN compares false
    return y_max.to(tl.float64)


@triton.jit
def _abs_dot(x_ptr, x_off, x_valid, stride_xk, y_ptr, y_off, y_valid, stride_yk, K,
             ROWS: tl.constexpr, COLS: tl.constexpr, BLOCK_K: tl.constexpr):
    """sum_k |x[r, k]| |y[k, c]| in FP64 (NaN and infinities read as 0): :func:`fixup_dot` of the magnitudes,
    one more pass over K.  Within ``gamma_K`` of the exact sum, below it at most by that (nonnegative terms)."""
    acc = tl.zeros((ROWS, COLS), dtype=tl.float64)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_in = offs_k < K
        x = tl.abs(tl.load(x_ptr + x_off[:, None] + offs_k[None, :].to(tl.int64) * stride_xk,
                           mask=x_valid[:, None] & k_in[None, :], other=0.0))
        y = tl.abs(tl.load(y_ptr + y_off[None, :] + offs_k[:, None].to(tl.int64) * stride_yk,
                           mask=k_in[:, None] & y_valid[None, :], other=0.0))
        x = tl.where(x < float("inf"), x, 0.0)  # NaN compares false: 0 too
        y = tl.where(y < float("inf"), y, 0.0)
        acc = tl.dot(x.to(tl.float64), y.to(tl.float64), acc, input_precision="ieee", out_dtype=tl.float64)
    return acc


@triton.jit
def _fp32_fields(v):
    """FP32 ``v`` as ``m * 2**e`` (int64 ``m < 2**24``, int32 ``e`` in [-149, 104]), its sign, and whether it is
    finite (``m`` is 0 where not)."""
    bits = v.to(tl.int32, bitcast=True)
    ef = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    m = tl.where(ef > 0, frac | 0x800000, frac).to(tl.int64)
    finite = ef < 0xFF
    return tl.where(finite, m, 0), tl.where(ef > 0, ef, 1) - 150, bits < 0, finite


@triton.jit
def _carry(limbs, jj):
    """The limbs' value with every limb but the last in [0, 2**32) (carries moved up; the last keeps the sign)."""
    for j in range(0, _LIMBS - 1):
        lj = tl.sum(tl.where(jj == j, limbs, 0), axis=2)
        up = lj >> 32  # floor division by 2**32 (arithmetic shift)
        limbs = limbs - tl.where(jj == j, (up << 32)[:, :, None], 0) + tl.where(jj == j + 1, up[:, :, None], 0)
    return limbs


@triton.jit
def exact_dot(x_ptr, x_off, x_valid, stride_xk, y_ptr, y_off, y_valid, stride_yk, K, alpha,
              ROWS: tl.constexpr, COLS: tl.constexpr):
    """alpha * sum_k x[r, k] * y[k, c] of FP32 operands, exactly, rounded once to FP32 (nearest, ties to even).

    Each product ``mx my 2**(ex + ey)`` (48-bit integer, exponent from -298) is added exactly into
    32-bit limbs of int64 (:data:`_LIMBS`, each with room for 2**31 additions), then the limbs are
    normalised (:func:`_carry`), multiplied by alpha's 24-bit integer and normalised again.  The top
    two nonzero limbs make an exact FP64 pair ``h + l`` (TwoSum) with everything below under one
    unit of ``l``; ``float32(h)`` is the rounding unless ``h`` is a rounding boundary of FP32 (the
    halfway point of two neighbours, or the overflow threshold), where the sign of the rest picks the
    side.  Outputs with NaN or infinite products come out as IEEE arithmetic gives them.
    Slow (about a hundred integer operations per product): for the few pieces no bound decides.
    """
    jj = tl.arange(0, _LIMBS)[None, None, :]
    limbs = tl.zeros((ROWS, COLS, _LIMBS), dtype=tl.int64)
    nan = tl.zeros((ROWS, COLS), dtype=tl.int1)
    pos_inf = tl.zeros((ROWS, COLS), dtype=tl.int1)
    neg_inf = tl.zeros((ROWS, COLS), dtype=tl.int1)
    for k in range(0, K):
        xk = tl.load(x_ptr + x_off + tl.cast(k, tl.int64) * stride_xk, mask=x_valid, other=0.0)
        yk = tl.load(y_ptr + y_off + tl.cast(k, tl.int64) * stride_yk, mask=y_valid, other=0.0)
        mx, ex, sx, fx = _fp32_fields(xk)
        my, ey, sy, fy = _fp32_fields(yk)
        neg = sx[:, None] ^ sy[None, :]
        # IEEE special values: NaN * y, inf * 0 -> NaN; inf * nonzero -> inf of the product's sign
        x_nan = xk != xk
        y_nan = yk != yk
        x_inf = (~fx) & (~x_nan)
        y_inf = (~fy) & (~y_nan)
        p_nan = (x_nan[:, None] | y_nan[None, :] | (x_inf[:, None] & (yk == 0)[None, :])
                 | ((xk == 0)[:, None] & y_inf[None, :]))
        p_inf = (x_inf[:, None] | y_inf[None, :]) & (~p_nan)
        nan = nan | p_nan
        pos_inf = pos_inf | (p_inf & (~neg))
        neg_inf = neg_inf | (p_inf & neg)
        # the finite product m * 2**(sh - 298), sh in [0, 506]: m << (sh % 32) spans limbs sh // 32 .. + 2
        m = mx[:, None] * my[None, :]
        sh = ex[:, None] + ey[None, :] + 298
        j0 = (sh >> 5)[:, :, None]
        r = (sh & 31).to(tl.int64)
        w = m << r
        c0 = w - ((w >> 32) << 32)
        c1 = m >> (32 - r)
        c1 = c1 - ((c1 >> 32) << 32)
        c2 = (m >> 32) >> (32 - r)
        sign = tl.where(neg, -1, 1).to(tl.int64)
        limbs += (tl.where(jj == j0, (c0 * sign)[:, :, None], 0) + tl.where(jj == j0 + 1, (c1 * sign)[:, :, None], 0)
                  + tl.where(jj == j0 + 2, (c2 * sign)[:, :, None], 0))
    limbs = _carry(limbs, jj)
    negative = tl.sum(tl.where(jj == _LIMBS - 1, limbs, 0), axis=2) < 0
    limbs = _carry(tl.where(negative[:, :, None], -limbs, limbs), jj)
    ma, ea, sa, _ = _fp32_fields(tl.cast(alpha, tl.float32) + tl.zeros((ROWS, COLS), dtype=tl.float32))
    limbs = _carry(limbs * ma[:, :, None], jj)
    # |alpha * sum| = sum_j limbs[j] 2**(32 j - 298 + ea), every limb in [0, 2**32)
    top = tl.max(tl.where(limbs != 0, jj, -1), axis=2)
    hi = tl.sum(tl.where(jj == top[:, :, None], limbs, 0), axis=2).to(tl.float64) * 4294967296.0
    lo = tl.sum(tl.where(jj == top[:, :, None] - 1, limbs, 0), axis=2).to(tl.float64)
    rest = tl.max(tl.where((jj < top[:, :, None] - 1) & (limbs != 0), 1, 0), axis=2)
    h = hi + lo  # TwoSum: h + l == hi + lo exactly (integers below 2**64)
    hv = h - hi
    l = (hi - (h - hv)) + (lo - hv)
    unit = pow2_f64(tl.maximum(32 * (top - 1) - 298 + ea, -1022))
    h = h * unit
    l = l * unit
    r32 = h.to(tl.float32)
    r64 = r32.to(tl.float64)
    bits = r32.to(tl.int32, bitcast=True)
    other = tl.where(h > r64, bits + 1, bits - 1).to(tl.float32, bitcast=True)  # the neighbour on h's side
    half = tl.where(bits == 0x7F800000, FP32_OVERFLOW, (r64 + other.to(tl.float64)) * 0.5)
    # the rest beyond h: l (a whole number of l's units) if nonzero, else the limbs below (< one unit)
    beyond = tl.where(l != 0, tl.where(l > 0, 1, -1), rest)
    tie = (h != r64) & (h == half) & (beyond != 0)
    r32 = tl.where(tie & (beyond > 0), tl.maximum(r32, other), tl.where(tie, tl.minimum(r32, other), r32))
    r32 = tl.where(top < 0, 0.0, r32)
    r32 = tl.where(negative ^ sa, -r32, r32)
    # NaN/Inf products: as IEEE arithmetic sums them, times alpha
    special = tl.where(nan | (pos_inf & neg_inf), float("nan"), tl.where(pos_inf, float("inf"), float("-inf")))
    special = (special * tl.cast(alpha, tl.float64)).to(tl.float32)
    return tl.where(nan | pos_inf | neg_inf, special, r32)


@triton.jit
def _gather_group(lists, first_rank, total, GROUP: tl.constexpr):
    """Line indices of ranks first_rank ... first_rank + GROUP - 1 of one batch's fix-up lines (``lists``:
    that batch's row of the compacted order, :func:`.split_kernel._compact_lists`), and which exist."""
    ranks = first_rank + tl.arange(0, GROUP)
    valid = ranks < total
    return tl.load(lists + ranks, mask=valid, other=0), valid


@triton.jit
def _fix_lines(p, num_programs, item_base,
               order_ptr, total_ptr, line_batched,
               x_ptr, stride_xb, stride_xl, stride_xk,
               y_ptr, stride_yb, stride_yk, stride_yo,
               c_ptr, stride_cb, stride_cl, stride_co,
               x_meta, n_lines, y_meta, y_batched, n_batch, n_other, K, alpha,
               o_order_ptr, o_total_ptr, SKIP_LISTED: tl.constexpr,
               FIXUP_MIN_CLASS: tl.constexpr, GROUP: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr):
    """Outputs c[b, l, o] = sum_k x[b, l, k] y[b, k, o] of the fix-up lines l (c seen through strides).

    ``line_batched``/``y_batched`` are 0 for an operand broadcast over the
    batch; ``x_meta`` (.., n_lines) and ``y_meta`` (.., n_other) hold the
    lines' packed integers; ``order_ptr`` (.., n_lines) and ``total_ptr`` the
    fix-up lines compacted in rank order and their number, per batch
    (:func:`.split_kernel._compact_lists`).  With SKIP_LISTED, the ``o`` are
    y's lines that are *not* fix-up lines, from y's compacted order
    (``o_order_ptr``, ``o_total_ptr``: they follow its fix-up lines): the
    outputs of two fix-up lines are the other pass's, and are not computed
    here at all.  Returns the next item number (items are dealt round-robin
    across the passes).

    The items of a batch (:func:`_batch_work`): groups of GROUP fix-up lines times blocks of BLOCK_O
    other lines, or for a list shorter than GROUP, groups of :data:`_SMALL_GROUP` times blocks of
    :data:`_SMALL_O`: a few lines cost their number rounded up to 16, not to 64, spread over four times
    as many programs.

    Two phases, so that the rare work costs the common tiles nothing: first
    every tile stores its FP64 sums rounded once, as it always did; then
    the program reads its tiles back and checks them (:func:`_check_tile`),
    and computes carefully those it cannot clear (:func:`_careful_tile`).
    """
    base = item_base
    for phase in tl.static_range(2):
        if phase == 1:
            tl.debug_barrier()  # the first phase's stores, visible to all the program's threads
        item_base = base
        for bo in range(0, n_batch):
            bl = bo * line_batched
            lists, total, o_open, n_open, n_ob, n_items = _batch_work(
                bo, bl, order_ptr, total_ptr, n_lines, y_batched, o_order_ptr, o_total_ptr, n_other,
                SKIP_LISTED, GROUP, BLOCK_O)
            x_base = x_ptr + tl.cast(bl, tl.int64) * stride_xb
            y_base = y_ptr + tl.cast(bo, tl.int64) * stride_yb
            c = c_ptr + tl.cast(bo, tl.int64) * stride_cb
            xm = x_meta + tl.cast(bl, tl.int64) * n_lines
            ym = y_meta + tl.cast(bo * y_batched, tl.int64) * n_other
            first = (p - item_base % num_programs + num_programs) % num_programs
            if total < GROUP:  # a short list: small groups
                for j in range(first, n_items, num_programs):
                    _fix_tile(phase, (j // n_ob) * _SMALL_GROUP, (j % n_ob) * _SMALL_O, lists, total,
                              x_base, stride_xl, stride_xk, y_base, stride_yk, stride_yo, c, stride_cl, stride_co,
                              xm, ym, n_open, o_open, K, alpha, SKIP_LISTED,
                              FIXUP_MIN_CLASS, _SMALL_GROUP, _SMALL_O, BLOCK_K, _SMALL_K)
            else:
                for j in range(first, n_items, num_programs):
                    _fix_tile(phase, (j // n_ob) * GROUP, (j % n_ob) * BLOCK_O, lists, total,
                              x_base, stride_xl, stride_xk, y_base, stride_yk, stride_yo, c, stride_cl, stride_co,
                              xm, ym, n_open, o_open, K, alpha, SKIP_LISTED,
                              FIXUP_MIN_CLASS, GROUP, BLOCK_O, BLOCK_K, BLOCK_K)
            item_base += n_items
    return item_base


@triton.jit
def _fix_tile(phase: tl.constexpr, first_rank, first_o, lists, total,
              x_base, stride_xl, stride_xk, y_base, stride_yk, stride_yo, c, stride_cl, stride_co,
              x_meta, y_meta, n_open, o_open, K, alpha, SKIP_LISTED: tl.constexpr,
              FIXUP_MIN_CLASS: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr, BLOCK_K: tl.constexpr,
              DOT_K: tl.constexpr):
    """One item of :func:`_fix_lines`: the fix-up lines of ranks ``first_rank ...`` (ROWS of them, fewer at
    the end of the list) against the other lines of ranks ``first_o ...`` (COLS).  Phase 0 stores their FP64
    sums rounded once, in K steps of DOT_K; phase 1 reads them back and checks them, and computes again
    carefully, in steps of BLOCK_K, a tile it cannot clear."""
    if phase == 0:
        acc = _listed_rows_dot(lists, first_rank, total, x_base, stride_xl, stride_xk, y_base, stride_yk,
                               stride_yo, first_o, n_open, o_open, K, alpha, SKIP_LISTED, ROWS, COLS, DOT_K)
        offs_o, o_in = _other_lines(first_o, n_open, o_open, SKIP_LISTED, COLS)
        lines, valid = _gather_group(lists, first_rank, total, ROWS)
        tl.store(c + lines[:, None].to(tl.int64) * stride_cl + offs_o[None, :].to(tl.int64) * stride_co,
                 acc.to(tl.float32), mask=valid[:, None] & o_in[None, :])
    else:
        offs_o, o_in = _other_lines(first_o, n_open, o_open, SKIP_LISTED, COLS)
        lines, valid = _gather_group(lists, first_rank, total, ROWS)
        if _check_tile(lines, valid, offs_o, o_in, c, stride_cl, stride_co, x_meta, y_meta, K, alpha,
                       FIXUP_MIN_CLASS):
            _careful_tile(first_rank, tl.minimum(total - first_rank, ROWS), first_o,
                          tl.minimum(n_open - first_o, COLS), lists, total,
                          x_base, stride_xl, stride_xk, y_base, stride_yk, stride_yo, c, stride_cl, stride_co,
                          x_meta, n_open, o_open, K, alpha, SKIP_LISTED, ROWS, BLOCK_K)


@triton.jit
def _listed_rows_dot(lists, first_rank, total, x_base, stride_xl, stride_xk, y_base, stride_yk, stride_yo,
                     first_o, n_open, o_open, K, alpha, SKIP_LISTED: tl.constexpr,
                     ROWS: tl.constexpr, COLS: tl.constexpr, BLOCK_K: tl.constexpr):
    """:func:`fixup_dot` of the fix-up lines of ranks ``first_rank ...`` against the pass's other lines of
    ranks ``first_o ...``, reading the line indices again in every step of K.

    Why again: this code shares one kernel, and so one register allocation, with the GEMM's tiles.  Line
    indices read once and held across the K loop (as :func:`fixup_dot` takes them) made the tiles spill
    more and run 3% slower on normal data (H200, 8192^3); read in each step (from L1) they cost no more
    than the scans of the per-block lists did before (docs/speed.md, the fix-up's compacted lists)."""
    acc = tl.zeros((ROWS, COLS), dtype=tl.float64)
    for k0 in range(0, K, BLOCK_K):
        # k0 // K is 0; it ties the load to the loop so the compiler cannot hoist it (a volatile load does
        # too, but goes to L2 every step: 8% slower at K = 512)
        offs_o, o_in = _other_lines(first_o, n_open, o_open, SKIP_LISTED, COLS)
        ranks = first_rank + tl.arange(0, ROWS)
        valid = ranks < total
        lines = tl.load(lists + ranks + k0 // K, mask=valid, other=0)
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_in = offs_k < K
        x = tl.load(x_base + lines.to(tl.int64)[:, None] * stride_xl + offs_k[None, :].to(tl.int64) * stride_xk,
                    mask=valid[:, None] & k_in[None, :], other=0.0)
        y = tl.load(y_base + offs_o.to(tl.int64)[None, :] * stride_yo + offs_k[:, None].to(tl.int64) * stride_yk,
                    mask=k_in[:, None] & o_in[None, :], other=0.0)
        acc = tl.dot(x.to(tl.float64), y.to(tl.float64), acc, input_precision="ieee", out_dtype=tl.float64)
    return acc * tl.cast(alpha, tl.float64)


@triton.jit
def _batch_work(bo, bl, order_ptr, total_ptr, n_lines, y_batched, o_order_ptr, o_total_ptr, n_other,
                SKIP_LISTED: tl.constexpr, GROUP: tl.constexpr, BLOCK_O: tl.constexpr):
    """Output batch ``bo``'s work in one pass of :func:`_fix_lines` (both phases walk the same items): its
    fix-up lines in rank order (batch ``bl`` of x) and their number, the other lines the pass walks (all,
    ``o_open`` unused; or with SKIP_LISTED those not listed, from ``o_open``) and their number, their
    blocks, and the items (groups of fix-up lines times blocks of other lines: GROUP times BLOCK_O, or for
    a list shorter than GROUP, :data:`_SMALL_GROUP` times :data:`_SMALL_O`)."""
    lists = order_ptr + tl.cast(bl, tl.int64) * n_lines
    total = tl.load(total_ptr + bl)
    o_batch = tl.cast(bo * y_batched, tl.int64)
    n_open = n_other + tl.zeros([], dtype=tl.int32)
    o_open = o_order_ptr + o_batch * n_other
    if SKIP_LISTED:
        o_total = tl.load(o_total_ptr + o_batch)
        n_open -= o_total
        o_open += o_total
    short = total < GROUP
    n_ob = tl.where(short, tl.cdiv(n_open, _SMALL_O), tl.cdiv(n_open, BLOCK_O))
    return lists, total, o_open, n_open, n_ob, tl.cdiv(total, tl.where(short, _SMALL_GROUP, GROUP)) * n_ob


@triton.jit
def _other_lines(first, n_open, o_open, SKIP_LISTED: tl.constexpr, WIDTH: tl.constexpr):
    """The other operand's lines ``first ... first + WIDTH - 1`` of a pass, and which exist: consecutive
    lines, or (SKIP_LISTED) those of the lines not listed, in order from ``o_open`` (the other operand's
    compacted order past its fix-up lines)."""
    ranks = first + tl.arange(0, WIDTH)
    valid = ranks < n_open
    if SKIP_LISTED:
        lines = tl.load(o_open + ranks, mask=valid, other=0)
    else:
        lines = ranks
    return lines, valid


@triton.jit
def _check_tile(lines, valid, offs_o, o_in, c, stride_cl, stride_co, x_meta, y_meta, K, alpha,
                FIXUP_MIN_CLASS: tl.constexpr):
    """Whether a tile's stored outputs ``r`` (FP32) may be on the wrong side of FP32's overflow
    threshold: the FP64 sum ``v`` they were rounded from lies within ``2**-24 |r|`` of them (``|v|`` at
    least the threshold where ``r`` is infinite), and within its error bound of the exact value, bounded
    here from the line meta (:func:`_meta_size`, :func:`_meta_size_other`).  So an output is cleared
    where ``| |r| - threshold | - 2**-23 |r|`` exceeds the bound (that also covers the rounding of
    alpha times the sum); an infinite one only where the bound is 0.  ``lines``, ``valid``: the tile's
    fix-up lines (:func:`_gather_group`); ``offs_o``, ``o_in``: its other lines (:func:`_other_lines`)."""
    y_cls, y_t = decode_meta(tl.load(y_meta + offs_o, mask=o_in, other=PAD_META))
    _, x_t = decode_meta(tl.load(x_meta + lines, mask=valid, other=PAD_META))
    x_size = _meta_size(x_t, valid, alpha, K)
    y_size = _meta_size_other(y_cls, y_t, o_in, FIXUP_MIN_CLASS)
    r = tl.load(c + lines[:, None].to(tl.int64) * stride_cl + offs_o[None, :].to(tl.int64) * stride_co,
                mask=valid[:, None] & o_in[None, :], other=0.0)
    mag = tl.abs(r.to(tl.float64))
    bound = x_size[:, None] * y_size[None, :]
    near = (tl.abs(mag - FP32_OVERFLOW) - mag * 2.0 ** -23 <= bound) | ((mag == float("inf")) & (bound > 0))
    return tl.max(near.to(tl.int32)) > 0


@triton.jit
def _meta_size(x_t, valid, alpha, K):
    """Per fix-up line, ``|alpha| K 2**-51 * K * 2**(1 - t)``: with :func:`_meta_size_other`'s bound on
    the other line's largest entry, a bound of ``|alpha| K 2**-51 sum_k |x_k y_k|`` (a fix-up line's largest
    entry lies in ``[2**-t, 2**(1 - t))``; ``sum_k |x_k y_k| <= K max|x| max|y|``)."""
    size = pow2_f64(1 - x_t) * _error_scale(alpha, K, x_t.to(tl.float64)) * K
    return tl.where(valid, size, 0.0)


@triton.jit
def _meta_size_other(y_cls, y_t, keep_o, FIXUP_MIN_CLASS: tl.constexpr):
    """A bound on each other line's largest entry from its meta: a fix-up line's below ``2**(1 - t)``; another
    line's below ``2**(_LOG2_UPPER - t)``, its scaled largest entry below the split's upper limit (every
    scheme's: the scheme in use may have a lower one)."""
    y_log2 = tl.where(y_cls >= FIXUP_MIN_CLASS, 1, _LOG2_UPPER) - y_t
    return tl.where(keep_o, pow2_f64(tl.minimum(tl.maximum(y_log2, -1000), 1000)), 0.0)


@triton.jit(noinline=True)  # a cold path: its registers must not weigh on the tile's
def _careful_tile(first_rank, n_rows, first_o, n_cols, lists, total,
                  x_base, stride_xl, stride_xk, y_base, stride_yk, stride_yo, c, stride_cl, stride_co,
                  x_meta, n_open, o_open, K, alpha, SKIP_LISTED: tl.constexpr,
                  GROUP: tl.constexpr, BLOCK_K: tl.constexpr):
    """Store the outputs of a tile the meta check left undecided, by pieces of :data:`_PIECE_COLS` columns:
    the FP64 sum again, checked with the other lines' actual maxima (a pass of loads,
    :func:`_col_maxima`); where that does not decide, with ``sum_k |x y|`` itself (one more FP64 dot,
    :func:`_abs_dot`); a piece still undecided is computed exactly (:func:`_exact_tile`).  Scalar
    arguments only (a function Triton does not inline); ``first_o``, ``n_cols``: ranks among the pass's
    other lines (:func:`_other_lines`)."""
    lines, valid = _gather_group(lists, first_rank, total, GROUP)
    _, x_t = decode_meta(tl.load(x_meta + lines, mask=valid, other=PAD_META))
    x_size = _meta_size(x_t, valid, alpha, K)
    for c0 in range(0, n_cols, _PIECE_COLS):
        offs_o, o_in = _other_lines(first_o + c0, n_open, o_open, SKIP_LISTED, _PIECE_COLS)
        o_in = o_in & (c0 + tl.arange(0, _PIECE_COLS) < n_cols)
        keep_o = o_in
        keep = valid[:, None] & keep_o[None, :]
        acc = fixup_dot(x_base, lines.to(tl.int64) * stride_xl, valid, stride_xk,
                        y_base, offs_o.to(tl.int64) * stride_yo, o_in, stride_yk, K, alpha, GROUP, _PIECE_COLS, BLOCK_K)
        y_max = _col_maxima(y_base, offs_o.to(tl.int64) * stride_yo, o_in, stride_yk, K, _PIECE_COLS, BLOCK_K)
        near = _near_overflow(acc, x_size, tl.where(keep_o, y_max, 0.0)) & keep
        if tl.max(near.to(tl.int32)) > 0:
            size = _abs_dot(x_base, lines.to(tl.int64) * stride_xl, valid, stride_xk,
                            y_base, offs_o.to(tl.int64) * stride_yo, o_in, stride_yk, K, GROUP, _PIECE_COLS, BLOCK_K)
            near = _near_overflow_by_sum(acc, size, alpha, K) & keep
        if tl.max(near.to(tl.int32)) > 0:
            _exact_tile(first_rank, n_rows, first_o + c0, tl.minimum(n_cols - c0, _PIECE_COLS), lists, total,
                        x_base, stride_xl, stride_xk, y_base, stride_yk, stride_yo, c, stride_cl, stride_co,
                        n_open, o_open, K, alpha, SKIP_LISTED)
        else:
            tl.store(c + lines[:, None].to(tl.int64) * stride_cl + offs_o[None, :].to(tl.int64) * stride_co,
                     acc.to(tl.float32), mask=keep)


@triton.jit(noinline=True)  # a cold path: its registers must not weigh on the tile's
def _exact_tile(first_rank, n_rows, first_o, n_cols, lists, total,
                x_base, stride_xl, stride_xk, y_base, stride_yk, stride_yo, c, stride_cl, stride_co,
                n_open, o_open, K, alpha, SKIP_LISTED: tl.constexpr):
    """Store the outputs of ``n_rows`` fix-up lines from rank ``first_rank`` and ``n_cols`` others from
    ``first_o``, each computed by :func:`exact_dot`, in pieces of (_EXACT_ROWS, _EXACT_COLS)."""
    for r0 in range(0, n_rows, _EXACT_ROWS):
        lines, valid = _gather_group(lists, first_rank + r0, total, _EXACT_ROWS)
        valid = valid & (r0 + tl.arange(0, _EXACT_ROWS) < n_rows)
        for c0 in range(0, n_cols, _EXACT_COLS):
            offs_o, o_in = _other_lines(first_o + c0, n_open, o_open, SKIP_LISTED, _EXACT_COLS)
            o_in = o_in & (c0 + tl.arange(0, _EXACT_COLS) < n_cols)
            out = exact_dot(x_base, lines.to(tl.int64) * stride_xl, valid, stride_xk,
                            y_base, offs_o.to(tl.int64) * stride_yo, o_in, stride_yk, K, alpha,
                            _EXACT_ROWS, _EXACT_COLS)
            keep = valid[:, None] & o_in[None, :]
            tl.store(c + lines[:, None].to(tl.int64) * stride_cl + offs_o[None, :].to(tl.int64) * stride_co, out,
                     mask=keep)


@triton.jit
def fixup_program(p, num_programs, a, b, c, batch, M, N, K,
                  FIXUP_MIN_CLASS: tl.constexpr, GROUP: tl.constexpr, BLOCK_O: tl.constexpr,
                  BLOCK_K: tl.constexpr, ITEMS: tl.constexpr):
    """Fix-up program ``p`` of the ``num_programs`` launched: the fix-up rows of A, then the fix-up columns of B,
    the items of both dealt round-robin to the programs :func:`_active_programs` counts (the others return).

    a, b : :class:`.gemm_tiles.GemmOperand` -- of each operand, the FP32 operand (A (Ba, M, K),
        B (Bb, K, N) through their strides), its line meta and the split pass's compacted fix-up lines
        (:func:`.split_kernel._compact_lists`).  A broadcast operand (``meta_batch`` 0) has its lines
        for batch 0 only.
    c : :class:`.gemm_tiles.GemmOutput` -- the (batch, M, N) output and alpha.
    GROUP, BLOCK_O, BLOCK_K : the FP64 dot tiles (:func:`fixup_shape`).
    """
    a_batched = (a.meta_batch > 0).to(tl.int32)
    b_batched = (b.meta_batch > 0).to(tl.int32)
    active = _active_programs(num_programs, a, b, a_batched, b_batched, batch, M, N, GROUP, BLOCK_O, ITEMS)
    if p < active:
        item = _fix_lines(p, active, p * 0,
                          a.fix_order, a.fix_total, a_batched,
                          a.ptr, a.stride_batch, a.stride_line, a.stride_k,
                          b.ptr, b.stride_batch, b.stride_k, b.stride_line,
                          c.ptr, c.stride_batch, c.stride_m, 1,
                          a.meta, M, b.meta, b_batched, batch, N, K, c.alpha,
                          b.fix_order, b.fix_total, False, FIXUP_MIN_CLASS, GROUP, BLOCK_O, BLOCK_K)
        # Columns of B: c^T = b^T a^T, over the rows of A the first pass did not write.
        _fix_lines(p, active, item,
                   b.fix_order, b.fix_total, b_batched,
                   b.ptr, b.stride_batch, b.stride_line, b.stride_k,
                   a.ptr, a.stride_batch, a.stride_k, a.stride_line,
                   c.ptr, c.stride_batch, 1, c.stride_m,
                   b.meta, N, a.meta, a_batched, batch, M, K, c.alpha,
                   a.fix_order, a.fix_total, True, FIXUP_MIN_CLASS, GROUP, BLOCK_O, BLOCK_K)


@triton.jit
def _active_programs(num_programs, a, b, a_batched, b_batched, batch, M, N,
                     GROUP: tl.constexpr, BLOCK_O: tl.constexpr, ITEMS: tl.constexpr):
    """How many of the ``num_programs`` fix-up programs take work items: all of them, or fewer where that
    gives each at least :data:`_ITEMS_PER_PROGRAM` (0 with empty lists).  The items are those of
    :func:`fixup_program`'s two passes over every output batch (:func:`_batch_work`), so every program
    finds the same count."""
    items = num_programs * 0
    for bo in range(0, batch):
        _, _, _, _, _, rows_items = _batch_work(bo, bo * a_batched, a.fix_order, a.fix_total, M, b_batched,
                                                b.fix_order, b.fix_total, N, False, GROUP, BLOCK_O)
        _, _, _, _, _, cols_items = _batch_work(bo, bo * b_batched, b.fix_order, b.fix_total, N, a_batched,
                                                a.fix_order, a.fix_total, M, True, GROUP, BLOCK_O)
        items += rows_items + cols_items
    return tl.minimum(num_programs, tl.cdiv(items, ITEMS))


@triton.jit
def overflow_recheck_kernel(recheck, a_ptr, a_stride_batch, a_stride_m, a_stride_k, a_meta, a_meta_batch,
                            b_ptr, b_stride_batch, b_stride_k, b_stride_n, b_meta, b_meta_batch,
                            c_ptr, c_stride_batch, c_stride_m, alpha, M, N, K, choice, a_meta_bf, b_meta_bf,
                            FIXUP_MIN_CLASS: tl.constexpr, CERTIFY: tl.constexpr, CHOOSE: tl.constexpr):
    """Compute again the infinite outputs of the emulated tiles the GEMM listed in ``recheck`` (int32: their
    number, then :data:`RECHECK_ENTRY` words per tile): outputs whose overflow the emulation's error bound
    could not decide (:func:`.gemm_tiles.store_tile`), from the unscaled operands A (Ba, M, K) and B (Bb, K,
    N) as the fix-up computes its outputs: the FP64 sum rounded once, checked with ``sum_k |x y|``, and
    exactly (:func:`exact_dot`) where that does not decide.  Only outputs of rows and columns that are not
    fix-up lines, in pieces of (_RECHECK_ROWS, _PIECE_COLS) that hold one: each output by its own FP64 sums
    where the piece holds at most :data:`_FEW_MAX` (:func:`_few_outputs`), else by the piece's FP64 dots
    (two tiles over the whole K: 0.42 ms for 16 tiles of log-normal data at 4096^3 on an H200).  The programs
    take the tiles round-robin; with none listed (every product but those with huge cancelling terms) they return at once.
    ``recheck``'s count is set to 0 by the split's first pass (:func:`.split_kernel.tile_stats_kernel`).
    CERTIFY: the GEMM also listed the tiles holding outputs its certificate failed, stored as NaN
    (:func:`.gemm_tiles.store_tile`): NaN outputs are computed again too.
    CHOOSE (``scheme="auto"``): the line meta is that of the scheme the device chose (``*choice``: 0 ``a_meta``
    and ``b_meta``, fp16x3's, whose FIXUP_MIN_CLASS and CERTIFY these are; 1 ``a_meta_bf`` and ``b_meta_bf``,
    bf16x6's, which lists its LOSES_BITS lines unless FIXUP_MIN_CLASS is SPECIAL without CERTIFY)."""
    n_tiles = tl.load(recheck)
    lowest = FIXUP_MIN_CLASS + tl.program_id(0) * 0  # int32: the chosen scheme's smallest fix-up class
    if CHOOSE:
        if tl.load(choice) != 0:
            a_meta, b_meta = a_meta_bf, b_meta_bf
            if CERTIFY:
                lowest = lowest * 0 + LOSES_BITS
    for i in range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        entry = recheck + 1 + i * RECHECK_ENTRY
        bidx, row0, col0, shape = tl.load(entry), tl.load(entry + 1), tl.load(entry + 2), tl.load(entry + 3)
        x_base = a_ptr + bidx.to(tl.int64) * a_stride_batch
        y_base = b_ptr + bidx.to(tl.int64) * b_stride_batch
        c_base = c_ptr + bidx.to(tl.int64) * c_stride_batch
        x_meta, y_meta = a_meta + bidx * a_meta_batch, b_meta + bidx * b_meta_batch
        row_end, col_end = tl.minimum(row0 + (shape >> 16), M), tl.minimum(col0 + (shape & 0xFFFF), N)
        for r0 in range(row0, row_end, _RECHECK_ROWS):
            rows = r0 + tl.arange(0, _RECHECK_ROWS)
            cls_r, t_r = decode_meta(tl.load(x_meta + rows, mask=rows < row_end, other=PAD_META))
            r_in = (rows < row_end) & (cls_r < lowest)
            for c0 in range(col0, col_end, _PIECE_COLS):
                cols = c0 + tl.arange(0, _PIECE_COLS)
                cls_c, t_c = decode_meta(tl.load(y_meta + cols, mask=cols < col_end, other=PAD_META))
                c_in = (cols < col_end) & (cls_c < lowest)
                at = c_base + rows[:, None].to(tl.int64) * c_stride_m + cols[None, :]
                keep = r_in[:, None] & c_in[None, :]
                redo = keep & _redone(tl.load(at, mask=keep, other=0.0), CERTIFY)
                n_redo = tl.sum(redo.to(tl.int32))
                if (n_redo > 0) & (n_redo <= _FEW_MAX):
                    near = _few_outputs(redo, n_redo, r0, c0, x_base, a_stride_m, a_stride_k, y_base, b_stride_k,
                                        b_stride_n, c_base, c_stride_m, K, alpha)
                    if near:
                        _exact_outputs(r0, c0, row_end, col_end, x_base, a_stride_m, a_stride_k, y_base, b_stride_k,
                                       b_stride_n, c_base, c_stride_m, x_meta, y_meta, K, alpha, lowest, CERTIFY)
                elif n_redo > 0:
                    x_off, y_off = rows.to(tl.int64) * a_stride_m, cols.to(tl.int64) * b_stride_n
                    acc = fixup_dot(x_base, x_off, r_in, a_stride_k, y_base, y_off, c_in, b_stride_k, K, alpha,
                                    _RECHECK_ROWS, _PIECE_COLS, _RECHECK_K)
                    size = _abs_dot(x_base, x_off, r_in, a_stride_k, y_base, y_off, c_in, b_stride_k, K,
                                    _RECHECK_ROWS, _PIECE_COLS, _RECHECK_K)
                    near = _near_overflow_by_sum(acc, size, alpha, K) & redo
                    if tl.max(near.to(tl.int32)) > 0:
                        _exact_outputs(r0, c0, row_end, col_end, x_base, a_stride_m, a_stride_k, y_base, b_stride_k,
                                       b_stride_n, c_base, c_stride_m, x_meta, y_meta, K, alpha, lowest, CERTIFY)
                    else:
                        tl.store(at, acc.to(tl.float32), mask=redo)


@triton.jit
def _few_outputs(redo, n_redo, row0, col0, x_base, stride_xl, stride_xk, y_base, stride_yk, stride_yo,
                 c_base, stride_cm, K, alpha):
    """Store the outputs ``redo`` ((_RECHECK_ROWS, _PIECE_COLS), at most :data:`_FEW_MAX` of them) of the
    recheck's piece at (``row0``, ``col0``), :data:`_FEW` at a time: each the FP64 sum of its row and column
    rounded once, as :func:`fixup_dot` gives it, with ``sum_k |x y|`` beside it to decide its overflow.  Those
    it does not decide stay as they are (NaN or infinite) for :func:`_exact_outputs`; returns whether any did.
    The products are exact in FP64, and the sums are within ``gamma_K`` of theirs in any order."""
    lin = tl.arange(0, _RECHECK_ROWS)[:, None] * _PIECE_COLS + tl.arange(0, _PIECE_COLS)[None, :]
    slot = tl.arange(0, _FEW)
    undecided = n_redo * 0
    for _ in range(0, n_redo, _FEW):
        # gather the next _FEW outputs (their linear indices in the piece, smallest first)
        picked = tl.zeros((_FEW,), dtype=tl.int32) - 1
        for j in range(0, _FEW):
            idx = tl.min(tl.where(redo, lin, _RECHECK_ROWS * _PIECE_COLS))
            picked = tl.where((slot == j) & (idx < _RECHECK_ROWS * _PIECE_COLS), idx, picked)
            redo = redo & (lin != idx)
        valid = picked >= 0
        rows = row0 + tl.where(valid, picked, 0) // _PIECE_COLS
        cols = col0 + tl.where(valid, picked, 0) % _PIECE_COLS
        x_row = x_base + rows.to(tl.int64) * stride_xl
        y_col = y_base + cols.to(tl.int64) * stride_yo
        acc = tl.zeros((_FEW,), dtype=tl.float64)
        size = tl.zeros((_FEW,), dtype=tl.float64)
        for k0 in range(0, K, _FEW_K):
            offs_k = k0 + tl.arange(0, _FEW_K)
            m = valid[:, None] & (offs_k < K)[None, :]
            x = tl.load(x_row[:, None] + offs_k[None, :].to(tl.int64) * stride_xk, mask=m, other=0.0)
            y = tl.load(y_col[:, None] + offs_k[None, :].to(tl.int64) * stride_yk, mask=m, other=0.0)
            prod = x.to(tl.float64) * y.to(tl.float64)
            acc += tl.sum(prod, axis=1)
            size += tl.sum(tl.abs(prod), axis=1)
        v = acc * tl.cast(alpha, tl.float64)
        near = _near_overflow_by_sum(v, size, alpha, K) & valid
        tl.store(c_base + rows.to(tl.int64) * stride_cm + cols, v.to(tl.float32), mask=valid & ~near)
        undecided += tl.sum(near.to(tl.int32))
    return undecided > 0


@triton.jit
def _redone(stored, CERTIFY: tl.constexpr):
    """Which stored outputs of a listed tile the recheck computes again: the infinite ones, and with CERTIFY the
    NaN ones (the certificate's, :func:`.gemm_tiles.store_tile`; an emulated output is NaN only where alpha
    is, and then its recomputation is NaN too)."""
    redo = tl.abs(stored) == float("inf")
    if CERTIFY:
        redo = redo | (stored != stored)
    return redo


@triton.jit(noinline=True)  # rarer still: its registers must not weigh on the pieces'
def _exact_outputs(row0, col0, row_end, col_end, x_base, stride_xl, stride_xk, y_base, stride_yk, stride_yo,
                   c_base, stride_cm, x_meta, y_meta, K, alpha, lowest, CERTIFY: tl.constexpr):
    """:func:`overflow_recheck_kernel`'s piece at (``row0``, ``col0``): its outputs to compute again
    (:func:`_redone`) by :func:`exact_dot`; ``lowest``: the smallest fix-up class."""
    for r1 in range(0, _RECHECK_ROWS, _EXACT_ROWS):
        rows = row0 + r1 + tl.arange(0, _EXACT_ROWS)
        cls_r, t_r = decode_meta(tl.load(x_meta + rows, mask=rows < row_end, other=PAD_META))
        r_in = (rows < row_end) & (cls_r < lowest)
        for c1 in range(0, _PIECE_COLS, _EXACT_COLS):
            cols = col0 + c1 + tl.arange(0, _EXACT_COLS)
            cls_c, t_c = decode_meta(tl.load(y_meta + cols, mask=cols < col_end, other=PAD_META))
            c_in = (cols < col_end) & (cls_c < lowest)
            at = c_base + rows[:, None].to(tl.int64) * stride_cm + cols[None, :]
            keep = r_in[:, None] & c_in[None, :]
            redo = keep & _redone(tl.load(at, mask=keep, other=0.0), CERTIFY)
            if tl.max(redo.to(tl.int32)) > 0:
                out = exact_dot(x_base, rows.to(tl.int64) * stride_xl, r_in, stride_xk,
                                y_base, cols.to(tl.int64) * stride_yo, c_in, stride_yk, K, alpha,
                                _EXACT_ROWS, _EXACT_COLS)
                tl.store(at, out, mask=redo)
