"""The low-precision operand formats of the matrix engines: FP16 and BF16.

NumPy has FP16 but no BF16, so BF16 values are held in float32 arrays whose
low 16 bits are zero.  Each format says how to round FP32 to it and how its
bits encode the exponent, which the accumulation model needs to prove its
float64 chunk sums exact (:mod:`sgemm_cube.cpu_fallback.accumulate`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Format", "FP16", "BF16", "format_of", "round_to_bf16"]


class Format(NamedTuple):
    """A binary floating-point format with ``precision`` significant bits.

    Attributes
    ----------
    name : str
    precision : int
        Significant bits, the hidden bit included (FP16 11, BF16 8).
    bias : int
        Exponent bias: a normal value with exponent field E lies in
        ``[2**(E - bias), 2**(E - bias + 1))``.
    exp_shift, exp_mask : int
        Position and mask of the exponent field in the holder's bits.
    holder : numpy dtype
        The NumPy dtype the values are stored in (float16, or float32 for BF16).
    bits : numpy dtype
        Unsigned integer dtype of the same width as ``holder``.
    """

    name: str
    precision: int
    bias: int
    exp_shift: int
    exp_mask: int
    holder: type
    bits: type

    @property
    def quantum_exp(self) -> int:
        """Every value of the format is an integer multiple of ``2**quantum_exp``."""
        return 1 - self.bias - (self.precision - 1)


FP16 = Format("fp16", 11, 15, 10, 0x1F, np.float16, np.uint16)
BF16 = Format("bf16", 8, 127, 23, 0xFF, np.float32, np.uint32)


def format_of(x: np.ndarray) -> Format:
    """The format of operand values: float16 arrays are FP16, float32 arrays hold BF16."""
    if x.dtype == np.float16:
        return FP16
    if x.dtype == np.float32:
        return BF16
    raise TypeError(f"operands of the products must be float16 (FP16) or float32 holding BF16, got {x.dtype}")


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round FP32 values to BF16 (nearest, ties to even), held in float32.

    Values that would round past the largest BF16 number are truncated to it
    instead (so a finite input never becomes infinite; the residual stays
    exact).  NaN and infinities are kept.
    """
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    truncated = (u & 0xFFFF0000).astype(np.uint32)
    out = rounded.view(np.float32)
    overflow = np.isinf(out) & np.isfinite(x)
    special = ~np.isfinite(x)
    out = np.where(overflow | special, truncated.view(np.float32), out)
    nan = np.isnan(x)
    if nan.any():
        out = np.where(nan, x, out)  # keep NaN payloads quiet and NaN
    return out.astype(np.float32)
