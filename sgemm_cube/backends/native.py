"""Native backend: the array library's own FP32 matmul (the baseline).

Used by the benchmarks and accuracy studies as "native FP32", and by
``backend="auto"`` on CUDA for shapes where cuBLAS SGEMM is faster than the
emulation (see :func:`sgemm_cube.backends.cuda.prefers_native`).  On CUDA
it disables TF32 for the call, so the result is true FP32 SGEMM.
"""
from __future__ import annotations

import numpy as np

__all__ = ["is_available", "unavailable_reason", "matmul"]


def is_available() -> bool:
    return True


def unavailable_reason() -> str:
    return ""


def matmul(a, b, *, sb=None, order=None, keep_lo_lo=None, out, accumulate=None):
    """``out = a @ b`` in FP32 with the library's own kernel (NumPy or torch)."""
    if isinstance(a, np.ndarray):
        np.matmul(a, b, out=out)
        return None
    import torch

    if a.is_cuda:
        saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # true FP32 SGEMM, not TF32
        try:
            torch.matmul(a, b, out=out)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved
    else:
        torch.matmul(a, b, out=out)
    return None
