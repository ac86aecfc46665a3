"""The split on the GPU: FP32 operands -> line meta, fix-up lists, scaled low-precision slices.

A *line* is a row of A or a column of B (:mod:`sgemm_cube.cpu_fallback.guard`).  Three
passes, each one launch over both operands (A's programs first, then B's;
each operand's branch is compiled with its own tile shape):

1. :func:`tile_stats_kernel`, tiled: per (line, K tile) the largest and the
   smallest nonzero finite magnitude, the smallest negated where the tile
   holds NaN/Inf, the largest where it holds a zero (a read of the operand,
   coalesced, every tile at once);
2. :func:`line_meta_kernel`, by blocks of whole lines: reduces those
   statistics into the line meta of :mod:`sgemm_cube.cpu_fallback.guard` (scaling
   exponent ``t`` and class, bit for bit, tested), stored packed in one int32
   per line (:mod:`.line_meta`), and appends the fix-up lines (whose
   outputs are not computed from the split) to the block's segment of a
   list, with their number in a per-block count (no atomics and no zeroed
   memory);
3. :func:`split_scaled_kernel`, tiled: the split of ``x * 2**t`` (float64,
   rounded once to float32: exact unless it underflows, as
   :func:`sgemm_cube.cpu_fallback.guard.scale_lines`); its first tile of
   each block of lines along K also compacts pass 2's segments into one
   list per batch in rank order (:func:`_compact_lists`), so that the
   GEMM's fix-up programs find the line of any rank with one load.

A BF16 scheme's lines are classified beside the other operand's
(:func:`sgemm_cube.cpu_fallback.guard.bf16_rule`), so its pass 2 is two launches:
:func:`line_summary_kernel` (2a) writes per block of lines a few integers
(:func:`sgemm_cube.cpu_fallback.guard.bf16_summary`: the lowest binade of the narrow
lines, how many lines are wide, very wide, or narrow and holding a zero), and
:func:`line_meta_kernel` (2b) has every program sum both operands' summaries
(a few hundred integers) before it classifies its lines.  So are an FP16 scheme's where
:func:`sgemm_cube.cpu_fallback.guard.fp16_rule_applies` (``scale`` "auto" or "rows", K >= 16):
its summary counts the wide and the loose lines (:func:`sgemm_cube.cpu_fallback.guard.fp16_summary`).
Under ``scheme="auto"`` both schemes classify the same lines: each of the two launches of pass 2 then
runs both schemes' programs (``BOTH``), fp16x3's first: choosing adds no launch to pass 2.

One read for the statistics, one read and one write for the split, whatever
the scaling.  (Owning whole lines in one program and re-reading the scaled
ones measured 2-4x slower on an H100: a fifth of 8192-long random normal
rows hold an entry below 2**-15 and are scaled, and line-owning reads
scatter across the matrix.)  The split itself is
:func:`sgemm_cube.cpu_fallback.split_slices`, bit for bit::

    FP16:  hi = fp16(x); lo = fp16((x - f32(hi)) * 2**sb)
    BF16:  s0 = bf16(x); s1 = bf16(x - s0); s2 = bf16(x - s0 - s1)

The BF16 rounding is done on the FP32 bit pattern with integer operations
(the rule differs from a cast at the overflow edge, and Triton's
interpreter holds BF16 as raw 16-bit integers).  NaN/Inf split to zeros: the
GEMM never sees a special value, and the lines holding one are recomputed.

The slices go into one zero-padded buffer ``(slices, batch, rows_pad,
cols_pad)`` laid out as the GEMM reads it (A: (Mp, Kp) row-major; B: (Kp,
Np) row-major), so the GEMM's loads need no masks.  An operand is seen as
(batch, L, K) through its strides (B transposed), and its slices through
``(plane, batch, line, k)`` strides.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .line_meta import (BF16_EVERY_LINE, BF16_FLOOR, BF16_NARROW_LOW, BF16_PAIR_FLOOR, FP16_TIGHT_SPAN, LOSES_BITS,
                        NO_BOTTOM, PAD_META, SPECIAL, SPLIT, decode_meta, encode_meta)

__all__ = ["tile_stats_kernel", "line_summary_kernel", "line_meta_kernel", "split_scaled_kernel", "scheme_choice_kernel",
           "SCALE_MODES", "floor_log2", "pow2_f64", "SUMMARY_WORDS", "PAIR_NONE", "PAIR_BF16", "PAIR_FP16"]

#: Per-block counts of fix-up lines summed per step while compacting the lists (:func:`_compact_lists`).
_COUNTS_CHUNK = tl.constexpr(256)
#: ``scale`` option -> the line-meta pass's SCALE_MODE.
SCALE_MODES = {None: 0, "auto": 1, "rows": 2, "matrix": 3}
# The same modes, as the kernel compares them.
SCALE_NONE, SCALE_AUTO, SCALE_ROWS = (tl.constexpr(SCALE_MODES[s]) for s in (None, "auto", "rows"))
#: int32 words per block of lines in an operand's summary (:func:`_bf16_summary`, :func:`_fp16_summary`).
SUMMARY_WORDS = tl.constexpr(4)
#: The line-meta pass's PAIR: how an operand's lines are classified beside the other's (none, BF16's, FP16's).
PAIR_NONE, PAIR_BF16, PAIR_FP16 = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)
# The float64 format: 52 fraction bits under an 11-bit exponent field biased by 1023.
_F64_FRACTION_BITS = tl.constexpr(52)
_F64_EXP_MASK = tl.constexpr(0x7FF)
_F64_EXP_BIAS = tl.constexpr(1023)


@triton.jit
def floor_log2(x):
    """floor(log2 |x|) of float32 ``x > 0`` (subnormals included), through the float64 exponent field."""
    bits = x.to(tl.float64).to(tl.int64, bitcast=True)
    return (((bits >> _F64_FRACTION_BITS) & _F64_EXP_MASK) - _F64_EXP_BIAS).to(tl.int32)


@triton.jit
def pow2_f64(t):
    """``2.0 ** t`` as float64 for integer ``t`` in [-1022, 1023], exactly."""
    return ((t.to(tl.int64) + _F64_EXP_BIAS) << _F64_FRACTION_BITS).to(tl.float64, bitcast=True)


@triton.jit
def _bf16_bits(x):
    """FP32 ``x`` rounded to BF16 as ``round_to_bf16`` does, returned as FP32 bits (int32, low 16 bits 0).

    Nearest even: add 0x7FFF plus the lowest kept bit, clear the low half.
    A finite ``x`` that would round to infinity is truncated instead.
    """
    u = x.to(tl.int32, bitcast=True)
    rounded = (u + (0x7FFF + ((u >> 16) & 1))) & -65536
    return tl.where((rounded & 0x7F800000) == 0x7F800000, u & -65536, rounded)


@triton.jit
def _store_slices(o_ptrs, stride_oplane, x, mask, SB_SCALE: tl.constexpr, BF16: tl.constexpr):
    if BF16:
        rest = x
        for plane in tl.static_range(3):
            bits = _bf16_bits(rest)
            tl.store(o_ptrs + plane * stride_oplane, (bits >> 16).to(tl.int16), mask=mask)
            rest = rest - bits.to(tl.float32, bitcast=True)  # exact: the slice is rest rounded to 8 bits
    else:
        hi = x.to(tl.float16)  # RNE
        lo = ((x - hi.to(tl.float32)) * SB_SCALE).to(tl.float16)  # residual exact, scaling exact
        tl.store(o_ptrs, hi, mask=mask)
        tl.store(o_ptrs + stride_oplane, lo, mask=mask)


@triton.jit
def _load_finite(x_ptrs, mask):
    x = tl.load(x_ptrs, mask=mask, other=0.0)
    mag = tl.abs(x)
    finite = mag < float("inf")  # false for NaN too
    return tl.where(finite, x, 0.0), mag, finite


@triton.jit
def _tile_stats(pid_l, pid_k, bidx, n_kt, x_ptr, part_ptr, L, K, L_PAD, stride_xb, stride_xl, stride_xk,
                BLOCK_L: tl.constexpr, BLOCK_K: tl.constexpr, STEPS: tl.constexpr):
    """Pass 1 for statistics tile (pid_l, pid_k) of batch bidx -- BLOCK_L lines times STEPS * BLOCK_K
    elements of K, read BLOCK_K at a time: per line, largest and smallest nonzero finite |x|.

    part : (batch, 2, n_kt, L_PAD) float32; the smallest is negated where the tile holds NaN/Inf, the
    largest where it holds a zero (``-0.0`` for a tile of zeros: the sign bit says it).
    """
    offs_l = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    line_ptrs = x_ptr + bidx.to(tl.int64) * stride_xb + offs_l[:, None].to(tl.int64) * stride_xl
    # Elementwise running statistics, reduced across the tile's K once after the loop.
    big2 = tl.zeros([BLOCK_L, BLOCK_K], dtype=tl.float32)
    small2 = tl.full([BLOCK_L, BLOCK_K], float("inf"), dtype=tl.float32)
    zero2 = tl.zeros([BLOCK_L, BLOCK_K], dtype=tl.int32)  # a zero
    bad2 = tl.zeros([BLOCK_L, BLOCK_K], dtype=tl.int32)   # a NaN or infinity
    for step in tl.static_range(STEPS):
        offs_k = (pid_k * STEPS + step) * BLOCK_K + tl.arange(0, BLOCK_K)
        valid = (offs_l[:, None] < L) & (offs_k[None, :] < K)
        x, mag, finite = _load_finite(line_ptrs + offs_k[None, :].to(tl.int64) * stride_xk, valid)
        big2 = tl.maximum(big2, tl.where(finite, mag, 0.0))
        zero2 = tl.maximum(zero2, tl.where(valid & (mag == 0), 1, 0))
        small2 = tl.minimum(small2, tl.where(finite & (mag > 0), mag, float("inf")))
        bad2 = tl.maximum(bad2, tl.where(finite, 0, 1))
    big = tl.max(big2, axis=1)
    big = tl.where(tl.max(zero2, axis=1) > 0, -big, big)
    small = tl.min(small2, axis=1)
    small = tl.where(tl.max(bad2, axis=1) > 0, -small, small)  # > 0 or inf otherwise
    at = part_ptr + bidx.to(tl.int64) * 2 * n_kt * L_PAD + pid_k * L_PAD + offs_l
    tl.store(at, big, mask=offs_l < L_PAD)
    tl.store(at + n_kt * L_PAD, small, mask=offs_l < L_PAD)


@triton.jit
def _line_stats(pid_l, bidx, part_ptr, n_kt, L, L_PAD, BLOCK_L: tl.constexpr, BLOCK_T: tl.constexpr):
    """Lines ``pid_l * BLOCK_L ...`` of batch bidx: (offsets, in range, largest, smallest nonzero finite
    magnitude, holds NaN/Inf, holds a zero) from pass 1's statistics (batch, 2, n_kt, L_PAD), read BLOCK_T
    tiles at a time."""
    offs_l = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    line_in = offs_l < L
    # Elementwise running statistics, reduced once after the loop.
    big2 = tl.zeros([BLOCK_L, BLOCK_T], dtype=tl.float32)
    small2 = tl.full([BLOCK_L, BLOCK_T], float("inf"), dtype=tl.float32)
    bad2 = tl.zeros([BLOCK_L, BLOCK_T], dtype=tl.int32)
    zero2 = tl.zeros([BLOCK_L, BLOCK_T], dtype=tl.int32)
    part_b = part_ptr + bidx.to(tl.int64) * 2 * n_kt * L_PAD
    for t0 in range(0, n_kt, BLOCK_T):
        offs_t = t0 + tl.arange(0, BLOCK_T)
        at = part_b + offs_t[None, :].to(tl.int64) * L_PAD + offs_l[:, None]
        mask = line_in[:, None] & (offs_t[None, :] < n_kt)
        p_big = tl.load(at, mask=mask, other=0.0)
        p_small = tl.load(at + n_kt * L_PAD, mask=mask, other=float("inf"))
        bad2 = tl.maximum(bad2, tl.where(p_small < 0, 1, 0))
        zero2 = tl.maximum(zero2, tl.where(p_big.to(tl.int32, bitcast=True) < 0, 1, 0))  # the sign bit
        big2 = tl.maximum(big2, tl.abs(p_big))
        small2 = tl.minimum(small2, tl.abs(p_small))
    return (offs_l, line_in, tl.max(big2, axis=1), tl.min(small2, axis=1), tl.max(bad2, axis=1),
            tl.max(zero2, axis=1))


@triton.jit
def _exponents(big, small, bidx, mat_t_ptr, LOWER, UPPER, TOP: tl.constexpr, SCALE_MODE: tl.constexpr):
    """The scaling exponent ``t`` of each line (before the fix-up lines take theirs; guard's ``_exponents``)."""
    to_top = tl.where(big > 0, TOP - floor_log2(big), 0)
    if SCALE_MODE == SCALE_NONE:
        t = tl.zeros(big.shape, dtype=tl.int32)
    elif SCALE_MODE == SCALE_AUTO:
        fits = (big < UPPER) & ((small >= LOWER) | (small == float("inf")))
        t = tl.where(fits, 0, to_top)
    elif SCALE_MODE == SCALE_ROWS:
        t = to_top
    else:  # "matrix"
        t = tl.zeros(big.shape, dtype=tl.int32) + tl.load(mat_t_ptr + bidx)
    return t


@triton.jit
def _bf16_summary(pid_l, bidx, n_blocks, part_ptr, n_kt, summary_ptr, mat_t_ptr, L, L_PAD,
                  TOP: tl.constexpr, SCALE_MODE: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_T: tl.constexpr):
    """The BF16 summary of lines ``pid_l * BLOCK_L ...`` of batch bidx (guard's ``bf16_summary``, per block):
    the lowest binade of its narrow lines, the numbers of its wide lines, of those reaching below
    2**BF16_FLOOR and of its narrow lines holding a zero, to ``summary[b, pid_l, :]`` (int32).  SCALE_MODE
    is never SCALE_AUTO (BF16 schemes scale every line under ``scale="auto"``)."""
    offs_l, line_in, big, small, bad, zero = _line_stats(pid_l, bidx, part_ptr, n_kt, L, L_PAD, BLOCK_L, BLOCK_T)
    t = _exponents(big, small, bidx, mat_t_ptr, 0.0, 0.0, TOP, SCALE_MODE)
    has = line_in & (small < float("inf"))
    bottom = tl.where(has, floor_log2(tl.where(has, small, 1.0)) + t, NO_BOTTOM)
    narrow = has & (bottom >= BF16_NARROW_LOW)
    at = summary_ptr + (bidx.to(tl.int64) * n_blocks + pid_l) * SUMMARY_WORDS
    tl.store(at, tl.min(tl.where(narrow, bottom, NO_BOTTOM), axis=0))
    tl.store(at + 1, tl.sum((has & (bottom < BF16_NARROW_LOW)).to(tl.int32), axis=0))
    tl.store(at + 2, tl.sum((has & (bottom < BF16_FLOOR)).to(tl.int32), axis=0))
    tl.store(at + 3, tl.sum((narrow & (zero > 0)).to(tl.int32), axis=0))


@triton.jit
def _fp16_summary(pid_l, bidx, n_blocks, part_ptr, n_kt, summary_ptr, mat_t_ptr, L, L_PAD, LOWER, UPPER,
                  TOP: tl.constexpr, SCALE_MODE: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_T: tl.constexpr):
    """The FP16 summary of lines ``pid_l * BLOCK_L ...`` of batch bidx (guard's ``fp16_summary``, per block):
    the numbers of its wide lines (word 1) and of its loose lines (word 2; neither SPECIAL nor empty,
    holding a zero or spanning more than FP16_TIGHT_SPAN + 1 binades) to ``summary[b, pid_l, :]`` (int32;
    words 0 and 3 unused)."""
    offs_l, line_in, big, small, bad, zero = _line_stats(pid_l, bidx, part_ptr, n_kt, L, L_PAD, BLOCK_L, BLOCK_T)
    scale = pow2_f64(_exponents(big, small, bidx, mat_t_ptr, LOWER, UPPER, TOP, SCALE_MODE))
    has = line_in & (small < float("inf"))
    special = _special(big, bad, scale, UPPER)
    wide = has & ~special & (small.to(tl.float64) * scale < LOWER)
    loose = has & ~special & _fp16_loose(big, small, zero)
    at = summary_ptr + (bidx.to(tl.int64) * n_blocks + pid_l) * SUMMARY_WORDS
    tl.store(at, NO_BOTTOM)
    tl.store(at + 1, tl.sum(wide.to(tl.int32), axis=0))
    tl.store(at + 2, tl.sum(loose.to(tl.int32), axis=0))
    tl.store(at + 3, 0)


@triton.jit
def _special(big, bad, scale, UPPER):
    """Whether a line is SPECIAL: NaN/Inf, or its largest entry at or above UPPER once scaled (float64 ``scale``)."""
    return (big.to(tl.float64) * scale >= UPPER) | (bad > 0)


@triton.jit
def _fp16_loose(big, small, zero):
    """Whether a line with a nonzero entry is loose for the FP16 rule: it holds a zero or spans more than
    FP16_TIGHT_SPAN + 1 binades (its largest and smallest nonzero entries' floor(log2) further apart)."""
    span = floor_log2(big) - floor_log2(tl.where(small < float("inf"), small, 1.0))
    return (zero > 0) | (span > FP16_TIGHT_SPAN)


@triton.jit
def _summary_totals(summary_ptr, n, BLOCK: tl.constexpr):
    """(lowest narrow binade, wide lines, very wide lines, narrow lines holding a zero; the counts int64)
    over an operand's ``n`` block summaries."""
    low = tl.full([BLOCK], NO_BOTTOM, dtype=tl.int32)
    wide = tl.zeros([BLOCK], dtype=tl.int64)
    very = tl.zeros([BLOCK], dtype=tl.int64)
    sparse = tl.zeros([BLOCK], dtype=tl.int64)
    for i0 in range(0, n, BLOCK):
        offs = i0 + tl.arange(0, BLOCK)
        at = summary_ptr + offs.to(tl.int64) * SUMMARY_WORDS
        low = tl.minimum(low, tl.load(at, mask=offs < n, other=NO_BOTTOM))
        wide += tl.load(at + 1, mask=offs < n, other=0).to(tl.int64)
        very += tl.load(at + 2, mask=offs < n, other=0).to(tl.int64)
        sparse += tl.load(at + 3, mask=offs < n, other=0).to(tl.int64)
    return tl.min(low, axis=0), tl.sum(wide, axis=0), tl.sum(very, axis=0), tl.sum(sparse, axis=0)


@triton.jit
def _bf16_rule(own_summary, own_n, own_lines, other_summary, other_n, other_lines, EVERY_LINE_OK: tl.constexpr,
               BLOCK: tl.constexpr):
    """How an operand's BF16 lines are classified beside the other's (guard's ``bf16_rule``): (the lowest
    binade its emulated lines may reach, whether its lines holding a zero are listed too).  The operand
    with the larger fraction of wide lines takes them; all of them where EVERY_LINE_OK (every line scaled
    to the top) and the other's narrow lines holding a zero (then listed) are the fewer."""
    _, own_wide, own_very, own_sparse = _summary_totals(own_summary, own_n, BLOCK)
    other_low, other_wide, other_very, other_sparse = _summary_totals(other_summary, other_n, BLOCK)
    takes = own_wide * other_lines > other_wide * own_lines
    given = other_wide * own_lines > own_wide * other_lines
    lowest = tl.maximum(BF16_FLOOR, BF16_PAIR_FLOOR - other_low)
    list_sparse = own_wide < 0  # False
    if EVERY_LINE_OK:
        lowest = tl.where(other_sparse * own_lines <= own_very * other_lines, BF16_EVERY_LINE, lowest)
        list_sparse = given & (own_sparse * other_lines <= other_very * own_lines)
    return tl.where(takes, lowest, BF16_NARROW_LOW), list_sparse


@triton.jit
def _fp16_rule(own_summary, own_n, own_lines, other_summary, other_n, other_lines, BLOCK: tl.constexpr):
    """How an operand's FP16 lines are classified beside the other's (guard's ``fp16_rule``): (it takes its
    wide lines, its loose lines are listed).  Of none, this operand and the other, the one listing the
    fewest outputs takes the wide lines (none on a tie)."""
    _, own_wide, own_loose, _ = _summary_totals(own_summary, own_n, BLOCK)
    _, other_wide, other_loose, _ = _summary_totals(other_summary, other_n, BLOCK)
    own_cost = other_loose * own_lines
    given_cost = own_loose * other_lines
    none_cost = own_wide * other_lines + other_wide * own_lines
    return (own_cost < none_cost) & (own_cost < given_cost), (given_cost < none_cost) & (given_cost < own_cost)


@triton.jit
def _line_meta(pid_l, bidx, n_blocks, part_ptr, n_kt, meta_ptr, list_ptr, count_ptr, mat_t_ptr,
               L, L_PAD, LOWER, UPPER, lowest, list_loose,
               TOP: tl.constexpr, SCALE_MODE: tl.constexpr, FIXUP_MIN_CLASS: tl.constexpr,
               PAIR: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_T: tl.constexpr):
    """Pass 2 for lines ``pid_l * BLOCK_L ...`` of batch bidx (``n_blocks`` blocks of lines per batch).

    part, n_kt : pass 1's statistics, (batch, 2, n_kt, L_PAD) float32, read BLOCK_T tiles at a time.
    meta : (batch, L) int32, packed line meta (:func:`.line_meta.encode_meta`).
    list, count : (batch, n_blocks * BLOCK_L) and (batch, n_blocks) int32:
        block p writes its lines with ``cls >= FIXUP_MIN_CLASS`` to
        ``list[b, p * BLOCK_L :]`` in order and their number to ``count[b, p]``; its other lines
        (within ``L``) from the segment's end, the q-th at ``list[b, p * BLOCK_L + BLOCK_L - 1 - q]``.
    mat_t : (batch,) int32, the matrix's exponent (``scale="matrix"`` only).
    LOWER, UPPER, TOP : :func:`sgemm_cube.cpu_fallback.guard.line_range` of the scheme.
    lowest, list_loose : the smallest magnitude a line's entries may have once scaled (``LOWER``, BF16's
        from :func:`_bf16_rule`, 0 where an FP16 operand takes its wide lines, :func:`_fp16_rule`), and
        whether a loose line is listed: one holding a zero (BF16's), or also spanning more than
        FP16_TIGHT_SPAN + 1 binades (FP16's, PAIR_FP16).
    SCALE_MODE : SCALE_NONE, SCALE_AUTO, SCALE_ROWS or "matrix" (:data:`SCALE_MODES`).
    """
    offs_l, line_in, big, small, bad, zero = _line_stats(pid_l, bidx, part_ptr, n_kt, L, L_PAD, BLOCK_L, BLOCK_T)
    t = _exponents(big, small, bidx, mat_t_ptr, LOWER, UPPER, TOP, SCALE_MODE)
    scale = pow2_f64(t)
    if PAIR == PAIR_FP16:
        loose = _fp16_loose(big, small, zero)
    else:
        loose = zero > 0
    loose = (small < float("inf")) & loose
    # tl.where, not `loose & list_loose`: under Triton 3.6's interpreter, a bool block & a bool
    # scalar is int32 or float32
    loses = (small.to(tl.float64) * scale < lowest) | tl.where(list_loose, loose, False)
    cls = tl.where(loses, LOSES_BITS, SPLIT)
    cls = tl.where(_special(big, bad, scale, UPPER), SPECIAL, cls)
    # Fix-up lines take the exponent that brings their largest entry into [1, 2).
    t = tl.where(cls >= FIXUP_MIN_CLASS, tl.where(big > 0, -floor_log2(big), 0), t)
    tl.store(meta_ptr + bidx * L + offs_l, encode_meta(cls, t), mask=line_in)
    fix = ((cls >= FIXUP_MIN_CLASS) & line_in).to(tl.int32)
    rank = tl.cumsum(fix, axis=0) - fix
    seg = bidx.to(tl.int64) * n_blocks * BLOCK_L + pid_l * BLOCK_L
    tl.store(list_ptr + seg + rank, offs_l, mask=fix > 0)
    # The other lines fill the segment from its end (the q-th at BLOCK_L - 1 - q): the fix-up's column
    # pass walks the rows of A that are not listed, so an output whose row and column are both listed is
    # computed once, by the row pass.
    rest = (line_in & (cls < FIXUP_MIN_CLASS)).to(tl.int32)
    tl.store(list_ptr + seg + BLOCK_L - 1 - (tl.cumsum(rest, axis=0) - rest), offs_l, mask=rest > 0)
    tl.store(count_ptr + bidx * n_blocks + pid_l, tl.sum(fix, axis=0))


@triton.jit
def _split_scaled(pid_l, pid_k, bidx, x_ptr, out_ptr, meta_ptr,
                  L, K, L_PAD, K_PAD, stride_xb, stride_xl, stride_xk, stride_oplane, stride_ob, stride_ol, stride_ok,
                  SB_SCALE: tl.constexpr, BF16: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_K: tl.constexpr):
    """Pass 3: the split of ``x * 2**t`` for tile (pid_l, pid_k) of batch bidx, ``t`` from the line meta."""
    offs_l = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    x, mag, finite = _load_finite(x_ptr + bidx.to(tl.int64) * stride_xb + offs_l[:, None].to(tl.int64) * stride_xl
                                  + offs_k[None, :].to(tl.int64) * stride_xk,
                                  (offs_l[:, None] < L) & (offs_k[None, :] < K))
    _, t = decode_meta(tl.load(meta_ptr + bidx.to(tl.int64) * L + offs_l, mask=offs_l < L, other=PAD_META))
    if tl.max(tl.abs(t), axis=0) > 0:  # exact unless it underflows; float64 holds every 2**t
        x = (x.to(tl.float64) * pow2_f64(t)[:, None]).to(tl.float32)
    _store_slices(out_ptr + bidx.to(tl.int64) * stride_ob + offs_l[:, None].to(tl.int64) * stride_ol
                  + offs_k[None, :].to(tl.int64) * stride_ok, stride_oplane, x,
                  (offs_l[:, None] < L_PAD) & (offs_k[None, :] < K_PAD), SB_SCALE, BF16)


@triton.jit
def _compact_lists(pl, pb, lists, n_blocks, L, TILE_L: tl.constexpr, LIST_BLOCK: tl.constexpr):
    """Pass 3's compaction, for the blocks of pass 2 (``LIST_BLOCK`` lines each) that start in split tile
    ``pl`` (``TILE_L`` lines) of batch ``pb``.  ``lists``: the pointers (list, count, order, total).
    ``order`` (batch, L) int32 receives, per batch, the fix-up
    lines in rank order (block by block, each block's as pass 2 listed them: ascending), then the other
    lines, ascending; ``total`` (batch,) the number of fix-up lines (written by tile 0).

    The rank of a line is what the per-block segments gave it before (the fix-up programs scanned the
    counts for it on every item; docs/speed.md, the fix-up's compacted lists), so the fix-up computes
    the same outputs in the same tiles.  Every block before the last holding lines is full, so the
    other lines of the blocks before ``p`` number ``p * LIST_BLOCK`` minus the fix-up lines there.
    """
    list_ptr, count_ptr, order_ptr, total_ptr = lists
    counts = count_ptr + pb.to(tl.int64) * n_blocks
    first = tl.cdiv(pl * TILE_L, LIST_BLOCK)
    last = tl.minimum(tl.cdiv((pl + 1) * TILE_L, LIST_BLOCK), n_blocks)
    before = tl.zeros([], dtype=tl.int32)  # fix-up lines in the blocks before `first` (a tensor: loop-carried)
    total = tl.zeros([], dtype=tl.int32)
    for c0 in range(0, n_blocks, _COUNTS_CHUNK):
        offs = c0 + tl.arange(0, _COUNTS_CHUNK)
        cnt = tl.load(counts + offs, mask=offs < n_blocks, other=0)
        total += tl.sum(cnt, axis=0)
        before += tl.sum(tl.where(offs < first, cnt, 0), axis=0)
    if pl == 0:
        tl.store(total_ptr + pb, total)
    order = order_ptr + pb.to(tl.int64) * L
    segments = list_ptr + pb.to(tl.int64) * n_blocks * LIST_BLOCK
    q = tl.arange(0, LIST_BLOCK)
    for p in range(first, last):
        seg = segments + p * LIST_BLOCK
        n_fix = tl.load(counts + p)
        n_open = tl.minimum(tl.maximum(L - p * LIST_BLOCK, 0), LIST_BLOCK) - n_fix  # lines past L: none
        tl.store(order + before + q, tl.load(seg + q, mask=q < n_fix, other=0), mask=q < n_fix)
        # pass 2 wrote the block's q-th other line at the segment's end, LIST_BLOCK - 1 - q
        tl.store(order + total + (p * LIST_BLOCK - before) + q,
                 tl.load(seg + LIST_BLOCK - 1 - q, mask=q < n_open, other=0), mask=q < n_open)
        before += n_fix


@triton.jit
def _tile_coords(pid, n_lt, n_kt):
    """(line tile, K tile, batch) of program ``pid`` of a tiled pass."""
    return pid % n_lt, (pid // n_lt) % n_kt, pid // (n_lt * n_kt)


@triton.jit
def tile_stats_kernel(programs_a, recheck,
                      a_x, a_part, a_n_lt_stats, a_n_kt, a_L, a_K, a_L_PAD, a_stride_xb, a_stride_xl, a_stride_xk,
                      b_x, b_part, b_n_lt_stats, b_n_kt, b_L, b_K, b_L_PAD, b_stride_xb, b_stride_xl, b_stride_xk,
                      A_BLOCK_L: tl.constexpr, A_BLOCK_K: tl.constexpr, A_STEPS: tl.constexpr,
                      B_BLOCK_L: tl.constexpr, B_BLOCK_K: tl.constexpr, B_STEPS: tl.constexpr):
    """Pass 1 of both operands (:func:`_tile_stats`): a 1-D grid of A's statistics tiles, then B's, each
    ``STEPS`` reads of ``BLOCK_L`` lines by ``BLOCK_K`` elements long along K.

    Program 0 also empties the GEMM's list of tiles to recheck (``recheck``, int32: its count;
    :func:`.fixup_kernel.overflow_recheck_kernel`), which runs after this launch."""
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(recheck, 0)
    if pid < programs_a:
        pl, pk, pb = _tile_coords(pid, a_n_lt_stats, a_n_kt)
        _tile_stats(pl, pk, pb, a_n_kt, a_x, a_part, a_L, a_K, a_L_PAD, a_stride_xb, a_stride_xl, a_stride_xk,
                    A_BLOCK_L, A_BLOCK_K, A_STEPS)
    else:
        pl, pk, pb = _tile_coords(pid - programs_a, b_n_lt_stats, b_n_kt)
        _tile_stats(pl, pk, pb, b_n_kt, b_x, b_part, b_L, b_K, b_L_PAD, b_stride_xb, b_stride_xl, b_stride_xk,
                    B_BLOCK_L, B_BLOCK_K, B_STEPS)


@triton.jit
def line_summary_kernel(programs_a, programs_job,
                        a_part, a_n_kt, a_summary, a_summary_bf, a_mat_t, a_n_blocks, a_L, a_L_PAD,
                        b_part, b_n_kt, b_summary, b_summary_bf, b_mat_t, b_n_blocks, b_L, b_L_PAD,
                        LOWER, UPPER, TOP: tl.constexpr, SCALE_MODE: tl.constexpr, PAIR: tl.constexpr,
                        TOP_BF: tl.constexpr, SCALE_MODE_BF: tl.constexpr, BOTH: tl.constexpr,
                        A_BLOCK_L: tl.constexpr, B_BLOCK_L: tl.constexpr, BLOCK_T: tl.constexpr):
    """Pass 2a where lines are classified beside the other operand's (PAIR: PAIR_BF16, :func:`_bf16_summary`;
    PAIR_FP16, :func:`_fp16_summary`), both operands: A's blocks of lines, then B's (``programs_job``
    programs).  BOTH (``scheme="auto"``): as many programs again write the BF16 summaries of the same
    statistics (TOP_BF, SCALE_MODE_BF) to ``summary_bf``, in the same launch."""
    pid = tl.program_id(0)
    if BOTH and pid >= programs_job:
        _summary_sides(pid - programs_job, programs_a, a_part, a_n_kt, a_summary_bf, a_mat_t, a_n_blocks, a_L,
                       a_L_PAD, b_part, b_n_kt, b_summary_bf, b_mat_t, b_n_blocks, b_L, b_L_PAD, LOWER, UPPER,
                       TOP_BF, SCALE_MODE_BF, PAIR_BF16, A_BLOCK_L, B_BLOCK_L, BLOCK_T)
    else:
        _summary_sides(pid, programs_a, a_part, a_n_kt, a_summary, a_mat_t, a_n_blocks, a_L, a_L_PAD,
                       b_part, b_n_kt, b_summary, b_mat_t, b_n_blocks, b_L, b_L_PAD, LOWER, UPPER,
                       TOP, SCALE_MODE, PAIR, A_BLOCK_L, B_BLOCK_L, BLOCK_T)


@triton.jit
def _summary_sides(pid, programs_a, a_part, a_n_kt, a_summary, a_mat_t, a_n_blocks, a_L, a_L_PAD,
                   b_part, b_n_kt, b_summary, b_mat_t, b_n_blocks, b_L, b_L_PAD, LOWER, UPPER,
                   TOP: tl.constexpr, SCALE_MODE: tl.constexpr, PAIR: tl.constexpr,
                   A_BLOCK_L: tl.constexpr, B_BLOCK_L: tl.constexpr, BLOCK_T: tl.constexpr):
    """Program ``pid`` of one scheme's pass 2a: a block of A's lines below ``programs_a``, else of B's."""
    if pid < programs_a:
        _summary(pid % a_n_blocks, pid // a_n_blocks, a_n_blocks, a_part, a_n_kt, a_summary, a_mat_t, a_L,
                 a_L_PAD, LOWER, UPPER, TOP, SCALE_MODE, PAIR, A_BLOCK_L, BLOCK_T)
    else:
        q = pid - programs_a
        _summary(q % b_n_blocks, q // b_n_blocks, b_n_blocks, b_part, b_n_kt, b_summary, b_mat_t, b_L,
                 b_L_PAD, LOWER, UPPER, TOP, SCALE_MODE, PAIR, B_BLOCK_L, BLOCK_T)


@triton.jit
def _summary(pid_l, bidx, n_blocks, part_ptr, n_kt, summary_ptr, mat_t_ptr, L, L_PAD, LOWER, UPPER,
             TOP: tl.constexpr, SCALE_MODE: tl.constexpr, PAIR: tl.constexpr, BLOCK_L: tl.constexpr,
             BLOCK_T: tl.constexpr):
    """One block's summary: the FP16 rule's counts (PAIR_FP16) or the BF16 rule's."""
    if PAIR == PAIR_FP16:
        _fp16_summary(pid_l, bidx, n_blocks, part_ptr, n_kt, summary_ptr, mat_t_ptr, L, L_PAD, LOWER, UPPER, TOP,
                      SCALE_MODE, BLOCK_L, BLOCK_T)
    else:
        _bf16_summary(pid_l, bidx, n_blocks, part_ptr, n_kt, summary_ptr, mat_t_ptr, L, L_PAD, TOP, SCALE_MODE,
                      BLOCK_L, BLOCK_T)


@triton.jit
def _lowest_binade(own_summary, own_n, own_lines, other_summary, other_n, other_lines, LOWER,
                   SCALE_MODE: tl.constexpr, PAIR: tl.constexpr):
    """(the smallest magnitude an operand's emulated lines may reach, whether its loose lines are listed
    too): beside the other operand's summaries (PAIR_BF16, :func:`_bf16_rule`; PAIR_FP16,
    :func:`_fp16_rule`), else the split's LOWER."""
    if PAIR == PAIR_BF16:
        exponent, list_loose = _bf16_rule(own_summary, own_n, own_lines, other_summary, other_n, other_lines,
                                          SCALE_MODE == SCALE_ROWS, 256)
        lowest = pow2_f64(exponent)
    elif PAIR == PAIR_FP16:
        takes, list_loose = _fp16_rule(own_summary, own_n, own_lines, other_summary, other_n, other_lines, 256)
        lowest = tl.where(takes, 0.0, LOWER)
    else:
        lowest, list_loose = LOWER, False
    return lowest, list_loose


@triton.jit
def line_meta_kernel(programs_a, programs_job,
                     a_part, a_n_kt, a_meta, a_list, a_count, a_mat_t, a_n_blocks, a_L, a_L_PAD,
                     a_summary, a_n_summary, a_lines, a_meta_bf, a_list_bf, a_count_bf, a_summary_bf,
                     b_part, b_n_kt, b_meta, b_list, b_count, b_mat_t, b_n_blocks, b_L, b_L_PAD,
                     b_summary, b_n_summary, b_lines, b_meta_bf, b_list_bf, b_count_bf, b_summary_bf,
                     LOWER, UPPER, LOWER_BF, UPPER_BF,
                     TOP: tl.constexpr, SCALE_MODE: tl.constexpr, FIXUP_MIN_CLASS: tl.constexpr,
                     PAIR: tl.constexpr, TOP_BF: tl.constexpr, SCALE_MODE_BF: tl.constexpr,
                     FIXUP_MIN_CLASS_BF: tl.constexpr, BOTH: tl.constexpr,
                     A_BLOCK_L: tl.constexpr, B_BLOCK_L: tl.constexpr, BLOCK_T: tl.constexpr):
    """Pass 2 of both operands (:func:`_line_meta`): A's blocks of lines, then B's (``programs_job`` programs).

    PAIR (PAIR_BF16, PAIR_FP16): each operand's lowest binade and whether its loose lines are listed, from
    both operands' summaries (pass 2a, ``summary``: ``n_summary`` blocks of ``lines`` lines, every batch;
    :func:`_bf16_rule`, :func:`_fp16_rule`); PAIR_NONE: LOWER.  BOTH (``scheme="auto"``): as many programs
    again classify the same lines under bf16x6's range (LOWER_BF, UPPER_BF, TOP_BF, SCALE_MODE_BF,
    FIXUP_MIN_CLASS_BF; PAIR_BF16 beside ``summary_bf``) into ``meta_bf``, ``list_bf`` and ``count_bf``, in
    the same launch.
    """
    pid = tl.program_id(0)
    if BOTH and pid >= programs_job:
        _line_meta_sides(pid - programs_job, programs_a,
                         a_part, a_n_kt, a_meta_bf, a_list_bf, a_count_bf, a_mat_t, a_n_blocks, a_L, a_L_PAD,
                         a_summary_bf, a_n_summary, a_lines,
                         b_part, b_n_kt, b_meta_bf, b_list_bf, b_count_bf, b_mat_t, b_n_blocks, b_L, b_L_PAD,
                         b_summary_bf, b_n_summary, b_lines, LOWER_BF, UPPER_BF, TOP_BF, SCALE_MODE_BF,
                         FIXUP_MIN_CLASS_BF, PAIR_BF16, A_BLOCK_L, B_BLOCK_L, BLOCK_T)
    else:
        _line_meta_sides(pid, programs_a,
                         a_part, a_n_kt, a_meta, a_list, a_count, a_mat_t, a_n_blocks, a_L, a_L_PAD,
                         a_summary, a_n_summary, a_lines,
                         b_part, b_n_kt, b_meta, b_list, b_count, b_mat_t, b_n_blocks, b_L, b_L_PAD,
                         b_summary, b_n_summary, b_lines, LOWER, UPPER, TOP, SCALE_MODE, FIXUP_MIN_CLASS, PAIR,
                         A_BLOCK_L, B_BLOCK_L, BLOCK_T)


@triton.jit
def _line_meta_sides(pid, programs_a,
                     a_part, a_n_kt, a_meta, a_list, a_count, a_mat_t, a_n_blocks, a_L, a_L_PAD,
                     a_summary, a_n_summary, a_lines,
                     b_part, b_n_kt, b_meta, b_list, b_count, b_mat_t, b_n_blocks, b_L, b_L_PAD,
                     b_summary, b_n_summary, b_lines, LOWER, UPPER,
                     TOP: tl.constexpr, SCALE_MODE: tl.constexpr, FIXUP_MIN_CLASS: tl.constexpr,
                     PAIR: tl.constexpr, A_BLOCK_L: tl.constexpr, B_BLOCK_L: tl.constexpr, BLOCK_T: tl.constexpr):
    """Program ``pid`` of one scheme's pass 2b: a block of A's lines below ``programs_a``, else of B's."""
    if pid < programs_a:
        lowest, list_loose = _lowest_binade(a_summary, a_n_summary, a_lines, b_summary, b_n_summary, b_lines,
                                             LOWER, SCALE_MODE, PAIR)
        _line_meta(pid % a_n_blocks, pid // a_n_blocks, a_n_blocks, a_part, a_n_kt, a_meta, a_list, a_count,
                   a_mat_t, a_L, a_L_PAD, LOWER, UPPER, lowest, list_loose, TOP, SCALE_MODE, FIXUP_MIN_CLASS,
                   PAIR, A_BLOCK_L, BLOCK_T)
    else:
        q = pid - programs_a
        lowest, list_loose = _lowest_binade(b_summary, b_n_summary, b_lines, a_summary, a_n_summary, a_lines,
                                             LOWER, SCALE_MODE, PAIR)
        _line_meta(q % b_n_blocks, q // b_n_blocks, b_n_blocks, b_part, b_n_kt, b_meta, b_list, b_count,
                   b_mat_t, b_L, b_L_PAD, LOWER, UPPER, lowest, list_loose, TOP, SCALE_MODE, FIXUP_MIN_CLASS,
                   PAIR, B_BLOCK_L, BLOCK_T)


@triton.jit
def _split_chosen(pl, pk, pb, x, out, meta, meta_bf, choice, L, K, L_PAD, K_PAD, stride_xb, stride_xl, stride_xk,
                  stride_oplane, stride_ob, stride_ol, stride_ok, lists, lists_bf, n_blocks,
                  SB_SCALE: tl.constexpr, BF16: tl.constexpr, CHOOSE: tl.constexpr, COMPACT: tl.constexpr,
                  SPLIT: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_K: tl.constexpr, LIST_BLOCK: tl.constexpr):
    """Pass 3 of one operand's tile; with CHOOSE, the scheme the device chose (:func:`scheme_choice_kernel`):
    BF16 slices from the BF16 line meta ``meta_bf``, or FP16 hi and lo (as bits into the 16-bit buffer).
    The first tile along K of each block of lines also compacts the fix-up lists (:func:`_compact_lists`)
    of that scheme: ``lists`` and ``lists_bf`` are (list, count, order, total) pointers.  COMPACT and
    SPLIT switch the two jobs (a chunked product compacts the whole operand's lists once, then splits
    chunks of its lines: :func:`.launch._chunked_launches`)."""
    bf16_chosen = False  # without CHOOSE: the one scheme's lists, `lists`
    if CHOOSE:
        bf16_chosen = tl.load(choice) != 0
    if COMPACT and pk == 0:
        if bf16_chosen:
            _compact_lists(pl, pb, lists_bf, n_blocks, L, BLOCK_L, LIST_BLOCK)
        else:
            _compact_lists(pl, pb, lists, n_blocks, L, BLOCK_L, LIST_BLOCK)
    if not SPLIT:
        pass
    elif CHOOSE:
        if bf16_chosen:
            _split_scaled(pl, pk, pb, x, out, meta_bf, L, K, L_PAD, K_PAD, stride_xb, stride_xl, stride_xk,
                          stride_oplane, stride_ob, stride_ol, stride_ok, SB_SCALE, True, BLOCK_L, BLOCK_K)
        else:
            _split_scaled(pl, pk, pb, x, out.to(tl.pointer_type(tl.float16)), meta, L, K, L_PAD, K_PAD,
                          stride_xb, stride_xl, stride_xk, stride_oplane, stride_ob, stride_ol, stride_ok,
                          SB_SCALE, False, BLOCK_L, BLOCK_K)
    else:
        _split_scaled(pl, pk, pb, x, out, meta, L, K, L_PAD, K_PAD, stride_xb, stride_xl, stride_xk,
                      stride_oplane, stride_ob, stride_ol, stride_ok, SB_SCALE, BF16, BLOCK_L, BLOCK_K)


@triton.jit
def split_scaled_kernel(programs_a, choice,
                        a_x, a_out, a_meta, a_meta_bf, a_n_lt, a_n_kt_split, a_L, a_K, a_L_PAD, a_K_PAD,
                        a_stride_xb, a_stride_xl, a_stride_xk, a_stride_oplane, a_stride_ob, a_stride_ol, a_stride_ok,
                        b_x, b_out, b_meta, b_meta_bf, b_n_lt, b_n_kt_split, b_L, b_K, b_L_PAD, b_K_PAD,
                        b_stride_xb, b_stride_xl, b_stride_xk, b_stride_oplane, b_stride_ob, b_stride_ol, b_stride_ok,
                        a_list, a_count, a_order, a_total, a_list_bf, a_count_bf, a_order_bf, a_total_bf, a_n_blocks,
                        b_list, b_count, b_order, b_total, b_list_bf, b_count_bf, b_order_bf, b_total_bf, b_n_blocks,
                        SB_SCALE: tl.constexpr, BF16: tl.constexpr, CHOOSE: tl.constexpr,
                        COMPACT: tl.constexpr, SPLIT: tl.constexpr,
                        A_BLOCK_L: tl.constexpr, A_BLOCK_K: tl.constexpr,
                        B_BLOCK_L: tl.constexpr, B_BLOCK_K: tl.constexpr, LIST_BLOCK: tl.constexpr):
    """Pass 3 of both operands (:func:`_split_scaled`): a 1-D grid of A's tiles, then B's; the tiles of the
    first K columns of each operand also compact pass 2's fix-up lists (``list``, ``count``: ``n_blocks``
    segments of LIST_BLOCK lines per batch) into ``order`` and ``total`` (:func:`_compact_lists`).

    COMPACT, SPLIT: which of the two jobs the launch does (both, but for a chunked product).

    CHOOSE: the scheme is the device's choice, ``*choice`` (int32: 0 fp16x3, 1 bf16x6, from
    :func:`scheme_choice_kernel`), each with its own line meta (``meta``, ``meta_bf``) and lists
    (``list``, ``list_bf``, ...); otherwise BF16 says which, and ``choice`` and the ``*_bf`` are not read.
    """
    pid = tl.program_id(0)
    if pid < programs_a:
        pl, pk, pb = _tile_coords(pid, a_n_lt, a_n_kt_split)
        _split_chosen(pl, pk, pb, a_x, a_out, a_meta, a_meta_bf, choice, a_L, a_K, a_L_PAD, a_K_PAD,
                      a_stride_xb, a_stride_xl, a_stride_xk, a_stride_oplane, a_stride_ob, a_stride_ol, a_stride_ok,
                      (a_list, a_count, a_order, a_total), (a_list_bf, a_count_bf, a_order_bf, a_total_bf),
                      a_n_blocks, SB_SCALE, BF16, CHOOSE, COMPACT, SPLIT, A_BLOCK_L, A_BLOCK_K, LIST_BLOCK)
    else:
        pl, pk, pb = _tile_coords(pid - programs_a, b_n_lt, b_n_kt_split)
        _split_chosen(pl, pk, pb, b_x, b_out, b_meta, b_meta_bf, choice, b_L, b_K, b_L_PAD, b_K_PAD,
                      b_stride_xb, b_stride_xl, b_stride_xk, b_stride_oplane, b_stride_ob, b_stride_ol, b_stride_ok,
                      (b_list, b_count, b_order, b_total), (b_list_bf, b_count_bf, b_order_bf, b_total_bf),
                      b_n_blocks, SB_SCALE, BF16, CHOOSE, COMPACT, SPLIT, B_BLOCK_L, B_BLOCK_K, LIST_BLOCK)


@triton.jit
def _listed_fraction(count_ptr, n_counts, lines, BLOCK: tl.constexpr):
    """The fraction of an operand's lines that are listed: the sum of its ``n_counts`` per-block counts
    over its ``lines`` lines (every batch)."""
    total = tl.zeros([BLOCK], dtype=tl.int32)
    for i0 in range(0, n_counts, BLOCK):
        offs = i0 + tl.arange(0, BLOCK)
        total += tl.load(count_ptr + offs, mask=offs < n_counts, other=0)
    return tl.sum(total, axis=0).to(tl.float32) / lines


@triton.jit
def scheme_choice_kernel(choice, a_count, b_count, a_count_bf, b_count_bf, a_n_counts, b_n_counts, a_lines, b_lines,
                         MARGIN: tl.constexpr, BLOCK: tl.constexpr):
    """The device's choice of scheme for one product, one program: 1 (bf16x6) where the outputs that
    fp16x3 would recompute in FP64 exceed those that bf16x6 would by more than MARGIN, a fraction of
    the outputs; 0 (fp16x3) otherwise.  The outputs recomputed are those of a listed row of A or a
    listed column of B: fa + fb - fa * fb of them with fa, fb the listed fractions (per scheme: its
    own line ranges, :func:`sgemm_cube.cpu_fallback.guard.line_range`).  Written to ``*choice``;
    :func:`sgemm_cube.cpu_fallback.guard.choose_scheme` is the same rule on the host.
    """
    fa = _listed_fraction(a_count, a_n_counts, a_lines, BLOCK)
    fb = _listed_fraction(b_count, b_n_counts, b_lines, BLOCK)
    fa_bf = _listed_fraction(a_count_bf, a_n_counts, a_lines, BLOCK)
    fb_bf = _listed_fraction(b_count_bf, b_n_counts, b_lines, BLOCK)
    listed = fa + fb - fa * fb
    listed_bf = fa_bf + fb_bf - fa_bf * fb_bf
    tl.store(choice, (listed - listed_bf > MARGIN).to(tl.int32))
