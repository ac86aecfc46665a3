"""Native backend: the array library's own FP32 matmul (the baseline).

Used by the benchmarks and accuracy studies as "native FP32", and by
``backend="auto"`` where native FP32 is as accurate and faster (``K < 16``;
on CUDA the measured hybrid rule).  On CUDA it disables TF32 for the call,
so the result is true FP32 SGEMM.
"""
from __future__ import annotations

import numpy as np

from sgemm_cube.cpu_fallback import ORDERS

from ..plan import Plan, Request

__all__ = ["SCHEMES", "ORDERS", "is_available", "unavailable_reason", "plan", "run", "matmul"]

SCHEMES = ("native",)
ORDERS = ORDERS  # no terms to order: every order is accepted (and means nothing)


def is_available() -> bool:
    return True


def unavailable_reason() -> str:
    return ""


def plan(req: Request, batch: int, m: int, n: int, k: int, like=None) -> Plan:
    return Plan("native", req.sb, None, "native", "backend='native' as requested: the array library's own FP32 matmul")


def run(plan: Plan, req: Request, a, b, out, alpha: float = 1.0) -> None:
    """``out = alpha * (a @ b)``: the library's own product, then ``alpha`` (two roundings: the baseline)."""
    matmul(a, b, out=out)
    if alpha != 1:
        out *= alpha



def matmul(a, b, *, out):
    """``a @ b`` in FP32 with the library's own kernel (NumPy or torch), into ``out`` if given; returns it."""
    if isinstance(a, np.ndarray):
        return np.matmul(a, b, out=out)
    import torch

    if a.is_cuda and torch.backends.cuda.matmul.allow_tf32:
        torch.backends.cuda.matmul.allow_tf32 = False  # true FP32 SGEMM, not TF32
        try:
            return torch.matmul(a, b, out=out)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = True
    return torch.matmul(a, b, out=out)
