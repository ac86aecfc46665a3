"""The FP32 -> FP16 (hi, lo) split on the GPU: one memory-bound pass per operand.

The rule is :func:`cpu_fallback.split`, bit for bit on finite data::

    hi = fp16(x)                       # round to nearest even
    lo = fp16((x - f32(hi)) * 2**sb)   # the residual is exact in FP32

except that non-finite inputs split to ``hi = lo = 0`` (the API layer patches
the special outputs afterwards, so the GEMM never sees an infinity and never
makes a NaN from one).

The pass writes both parts into one zero-padded buffer of shape
``(2, batch, rows_pad, cols_pad)`` (plane 0 = hi, plane 1 = lo), padded to the
GEMM's tile multiples, so that the GEMM's loads need no masks and its tensor
descriptors see 16-byte aligned rows.  While the data is in registers it also
gathers the range statistics of :class:`sgemm_cube.backends.base.SplitStats`:
the largest finite magnitude along K (one atomic max per row or column and
program) and whether any element was non-finite.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["split_operand"]

# Layout of the source tile, chosen on the host from the strides so that the
# compiler knows which axis is contiguous and emits wide coalesced loads.
_STRIDED, _COLS_CONTIGUOUS, _ROWS_CONTIGUOUS = 0, 1, 2


@triton.jit
def _split_kernel(x_ptr, out_ptr, stat_ptr, flag_ptr,
                  R, C, R_PAD, C_PAD,
                  stride_xb, stride_xr, stride_xc,
                  stride_oplane, stride_ob, stride_or,
                  stride_sb,
                  SCALE: tl.constexpr, LAYOUT: tl.constexpr, K_AXIS: tl.constexpr, STATS: tl.constexpr,
                  BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Split one (BLOCK_R, BLOCK_C) tile of batch ``program_id(2)``.

    x : (batch, R, C) float32, strides (stride_xb, stride_xr, stride_xc).
    out : (2, batch, R_PAD, C_PAD) float16, last stride 1; elements outside
        (R, C) but inside (R_PAD, C_PAD) are written as 0.
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
    hi = x.to(tl.float16)  # RNE
    lo = ((x - hi.to(tl.float32)) * SCALE).to(tl.float16)  # residual exact, scaling exact

    o_off = bidx * stride_ob + offs_r[:, None].to(tl.int64) * stride_or + offs_c[None, :]
    in_pad = (offs_r[:, None] < R_PAD) & (offs_c[None, :] < C_PAD)
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
                  stats: bool = True, block: tuple[int, int] = (64, 64), num_warps: int = 4):
    """Split a batched FP32 operand into a padded FP16 (hi, lo) buffer.

    Parameters
    ----------
    x : torch.Tensor, shape (batch, R, C), float32
        Any strides (a transposed view is read in place, without a copy).
    sb : int
        Scaling exponent of the residual (``lo`` is scaled by ``2**sb``).
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

    Returns
    -------
    hilo : torch.Tensor, shape (2, batch, rows_pad, cols_pad), float16
        ``hilo[0]`` = hi, ``hilo[1]`` = lo.
    maxabs : torch.Tensor or None, shape (batch, R) if k_axis == 1 else (batch, C), float32
        Largest finite ``|x|`` along K (0 where there is none).
    nonfinite : torch.Tensor or None, 0-d bool
        Whether ``x`` holds any NaN or infinity.
    """
    batch, rows, cols = x.shape
    if rows_pad < rows or cols_pad < cols:
        raise ValueError(f"padding ({rows_pad}, {cols_pad}) smaller than the operand ({rows}, {cols})")
    hilo = torch.empty((2, batch, rows_pad, cols_pad), dtype=torch.float16, device=x.device)
    n_stat = rows if k_axis == 1 else cols
    maxabs = torch.zeros((batch, n_stat), dtype=torch.float32, device=x.device)
    flag = torch.zeros((), dtype=torch.int32, device=x.device)
    block_r, block_c = block
    grid = (triton.cdiv(rows_pad, block_r), triton.cdiv(cols_pad, block_c), batch)
    _split_kernel[grid](
        x, hilo, maxabs, flag,
        rows, cols, rows_pad, cols_pad,
        x.stride(0), x.stride(1), x.stride(2),
        hilo.stride(0), hilo.stride(1), hilo.stride(2),
        maxabs.stride(0),
        SCALE=float(2.0 ** sb), LAYOUT=_layout(x.stride(1), x.stride(2), rows, cols), K_AXIS=k_axis,
        STATS=stats, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=num_warps)
    if not stats:
        return hilo, None, None
    return hilo, maxabs, flag != 0
