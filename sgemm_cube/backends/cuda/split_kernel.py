"""The FP32 -> low-precision slices split on the GPU: one memory-bound pass per operand.

The rules are :func:`cpu_fallback.split_slices`, bit for bit on finite data.
FP16 schemes (:func:`cpu_fallback.split`)::

    hi = fp16(x)                       # round to nearest even
    lo = fp16((x - f32(hi)) * 2**sb)   # the residual is exact in FP32

BF16 schemes (three slices, :func:`cpu_fallback.formats.round_to_bf16`)::

    s0 = bf16(x)                       # nearest even; a value that would round
    s1 = bf16(x - s0)                  #   past the largest BF16 is truncated
    s2 = bf16(x - s0 - s1)             # each residual exact in FP32

The BF16 rounding is done on the FP32 bit pattern with integer operations,
not with a cast: the rule differs from a cast at the overflow edge, and
Triton's interpreter holds BF16 as raw 16-bit integers, so one integer
formula gives the same bits on the GPU and in CI.  Non-finite inputs split
to all-zero slices (the API layer patches the special outputs afterwards,
so the GEMM never sees an infinity and never makes a NaN from one).

The pass writes the slices into one zero-padded buffer of shape
``(slices, batch, rows_pad, cols_pad)`` (plane 0 = hi / s0, plane 1 = lo / s1,
plane 2 = s2), padded to the GEMM's tile multiples, so that the GEMM's loads
need no masks and its tensor descriptors see 16-byte aligned rows.  While the data is in registers it also
gathers the range statistics of :class:`sgemm_cube.backends.base.SplitStats`:
the largest finite magnitude along K (one atomic max per row or column and
program) and whether any element was non-finite.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from cpu_fallback import get_scheme

__all__ = ["split_operand"]

# Layout of the source tile, chosen on the host from the strides so that the
# compiler knows which axis is contiguous and emits wide coalesced loads.
_STRIDED, _COLS_CONTIGUOUS, _ROWS_CONTIGUOUS = 0, 1, 2


@triton.jit
def _bf16_bits(x):
    """FP32 ``x`` rounded to BF16 as ``round_to_bf16`` does, returned as FP32 bits (int32, low 16 bits 0).

    Nearest even: add 0x7FFF plus the lowest kept bit, clear the low half.
    A finite ``x`` that would round to infinity is truncated instead.  Signed
    int32 cannot overflow here: the sign bit never receives a carry from a
    finite magnitude (at most 0x7F7FFFFF + 0x8000).
    """
    u = x.to(tl.int32, bitcast=True)
    rounded = (u + (0x7FFF + ((u >> 16) & 1))) & -65536
    return tl.where((rounded & 0x7F800000) == 0x7F800000, u & -65536, rounded)


@triton.jit
def _split_kernel(x_ptr, out_ptr, stat_ptr, flag_ptr,
                  R, C, R_PAD, C_PAD,
                  stride_xb, stride_xr, stride_xc,
                  stride_oplane, stride_ob, stride_or,
                  stride_sb,
                  SCALE: tl.constexpr, BF16: tl.constexpr, LAYOUT: tl.constexpr, K_AXIS: tl.constexpr,
                  STATS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Split one (BLOCK_R, BLOCK_C) tile of batch ``program_id(2)``.

    x : (batch, R, C) float32, strides (stride_xb, stride_xr, stride_xc).
    out : float16 (2, batch, R_PAD, C_PAD) (hi, lo); or, if BF16, the three
        BF16 slices as int16 bit patterns (3, batch, R_PAD, C_PAD); last
        stride 1; elements outside (R, C) but inside (R_PAD, C_PAD) are 0.
    stat : (batch, R) if K_AXIS == 1 else (batch, C), float32, zero on entry:
        receives max |x| over the K axis of the finite elements.
    flag : int32 scalar, zero on entry: set to 1 if any element is non-finite.
    """
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    bidx = tl.program_id(2).to(tl.int64)
    offs_r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    # int64 row/column terms: a large operand's element offsets pass 2**31.
    if LAYOUT == 1:
        x_off = offs_r[:, None].to(tl.int64) * stride_xr + offs_c[None, :]
    elif LAYOUT == 2:
        x_off = offs_r[:, None] + offs_c[None, :].to(tl.int64) * stride_xc
    else:
        x_off = offs_r[:, None].to(tl.int64) * stride_xr + offs_c[None, :].to(tl.int64) * stride_xc
    inside = (offs_r[:, None] < R) & (offs_c[None, :] < C)
    x = tl.load(x_ptr + bidx * stride_xb + x_off, mask=inside, other=0.0)

    finite = tl.abs(x) < float("inf")  # false for NaN too
    x = tl.where(finite, x, 0.0)
    o_off = bidx * stride_ob + offs_r[:, None].to(tl.int64) * stride_or + offs_c[None, :]
    in_pad = (offs_r[:, None] < R_PAD) & (offs_c[None, :] < C_PAD)
    if BF16:
        rest = x
        for plane in tl.static_range(3):
            bits = _bf16_bits(rest)
            tl.store(out_ptr + plane * stride_oplane + o_off, (bits >> 16).to(tl.int16), mask=in_pad)
            rest = rest - bits.to(tl.float32, bitcast=True)  # exact: the slice is rest rounded to 8 bits
    else:
        hi = x.to(tl.float16)  # RNE
        lo = ((x - hi.to(tl.float32)) * SCALE).to(tl.float16)  # residual exact, scaling exact
        tl.store(out_ptr + o_off, hi, mask=in_pad)
        tl.store(out_ptr + stride_oplane + o_off, lo, mask=in_pad)

    if STATS:
        mag = tl.abs(x)
        if K_AXIS == 1:  # A: K runs along the columns, one maximum per row
            tl.atomic_max(stat_ptr + bidx * stride_sb + offs_r, tl.max(mag, axis=1), mask=offs_r < R)
        else:  # B: K runs along the rows, one maximum per column
            tl.atomic_max(stat_ptr + bidx * stride_sb + offs_c, tl.max(mag, axis=0), mask=offs_c < C)
        bad = tl.max(tl.max(tl.where(finite, 0, 1), axis=1), axis=0)
        if bad > 0:
            tl.atomic_max(flag_ptr, bad)


def _layout(stride_r: int, stride_c: int, rows: int, cols: int) -> int:
    if stride_c == 1 or cols == 1:
        return _COLS_CONTIGUOUS
    if stride_r == 1 or rows == 1:
        return _ROWS_CONTIGUOUS
    return _STRIDED


def split_operand(x: torch.Tensor, *, sb: int, rows_pad: int, cols_pad: int, k_axis: int,
                  stats: bool = True, block: tuple[int, int] = (64, 64), num_warps: int = 4,
                  scheme: str = "fp16x3"):
    """Split a batched FP32 operand into a padded buffer of its slices.

    Parameters
    ----------
    x : torch.Tensor, shape (batch, R, C), float32
        Any strides (a transposed view is read in place, without a copy).
    sb : int
        Scaling exponent of the FP16 residual (``lo`` is scaled by
        ``2**sb``); unused by the BF16 schemes.
    rows_pad, cols_pad : int
        Padded extents, ``>= R`` and ``>= C``; the pad is filled with zeros.
    k_axis : {0, 1}
        Which axis of ``x`` is the reduction axis of the matmul: 1 for A
        (M, K), 0 for B (K, N).  Only used for the statistics.
    stats : bool
        Whether to gather the statistics (one atomic per row/column tile).
    block : (int, int)
        Tile of one program (powers of two).
    num_warps : int
        Warps per program.
    scheme : {"fp16x3", "fp16x4", "bf16x9", "bf16x6"}
        Which split (:mod:`cpu_fallback.schemes`): FP16 (hi, lo) or three BF16 slices.

    Returns
    -------
    slices : torch.Tensor, shape (S, batch, rows_pad, cols_pad)
        FP16 schemes: float16, S = 2, ``slices[0]`` = hi, ``slices[1]`` = lo.
        BF16 schemes: bfloat16, S = 3, the slices s0, s1, s2.
    maxabs : torch.Tensor or None, shape (batch, R) if k_axis == 1 else (batch, C), float32
        Largest finite ``|x|`` along K (0 where there is none).
    nonfinite : torch.Tensor or None, 0-d bool
        Whether ``x`` holds any NaN or infinity.
    """
    batch, rows, cols = x.shape
    if rows_pad < rows or cols_pad < cols:
        raise ValueError(f"padding ({rows_pad}, {cols_pad}) smaller than the operand ({rows}, {cols})")
    sch = get_scheme(scheme)
    bf16 = sch.format.name == "bf16"
    slices = torch.empty((sch.slices, batch, rows_pad, cols_pad), dtype=torch.bfloat16 if bf16 else torch.float16,
                         device=x.device)
    # The kernel writes BF16 bit patterns: give it an int16 view of the same memory.
    target = slices.view(torch.int16) if bf16 else slices
    n_stat = rows if k_axis == 1 else cols
    maxabs = torch.zeros((batch, n_stat), dtype=torch.float32, device=x.device)
    flag = torch.zeros((), dtype=torch.int32, device=x.device)
    block_r, block_c = block
    grid = (triton.cdiv(rows_pad, block_r), triton.cdiv(cols_pad, block_c), batch)
    _split_kernel[grid](
        x, target, maxabs, flag,
        rows, cols, rows_pad, cols_pad,
        x.stride(0), x.stride(1), x.stride(2),
        slices.stride(0), slices.stride(1), slices.stride(2),
        maxabs.stride(0),
        SCALE=float(2.0 ** sb), BF16=bf16, LAYOUT=_layout(x.stride(1), x.stride(2), rows, cols), K_AXIS=k_axis,
        STATS=stats, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=num_warps)
    if not stats:
        return slices, None, None
    return slices, maxabs, flag != 0
