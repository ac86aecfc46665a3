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
from .base import native_plan

__all__ = ["SCHEMES", "ORDERS", "is_available", "unavailable_reason", "plan", "run", "matmul", "true_fp32",
           "cublas_tf32_flag"]

SCHEMES = ("native",)
ORDERS = ORDERS  # no terms to order: every order is accepted (and means nothing)


def is_available() -> bool:
    return True


def unavailable_reason() -> str:
    return ""


def plan(req: Request, batch: int, m: int, n: int, k: int, like=None) -> Plan:
    return native_plan(req.sb, "backend='native' as requested: the array library's own FP32 matmul")


def run(plan: Plan, a, b, out, alpha: float = 1.0) -> None:
    """``out = alpha * (a @ b)``: the library's own product, then ``alpha`` (two roundings: the baseline)."""
    matmul(a, b, out=out)
    if alpha != 1:
        out *= alpha


class true_fp32:
    """Context manager: cuBLAS computes FP32 products in FP32 inside the block, not TF32.

    ``with true_fp32():`` turns ``torch.backends.cuda.matmul.allow_tf32`` off
    and gives the previous setting back after the block; ``true_fp32(device)``
    does so only for a CUDA device (elsewhere it does nothing).  The one place
    that sets it: the native backend, the switch's native route, the benchmarks
    and the tuner use it (the C++ of ``sgemm_cube/csrc``, ``true_fp32.h``, sets the same flag).  A class,
    not a generator, reading the flag through ``torch._C`` where that has it
    (``torch.backends.cuda.matmul``'s ``__getattr__`` costs a microsecond a
    read): it runs on the small-call path, where microseconds show.
    """

    __slots__ = ("_cuda", "_saved")

    def __init__(self, device=None):
        self._cuda = device is None or getattr(device, "type", device) == "cuda"

    def __enter__(self):
        if self._cuda:
            get, set_ = cublas_tf32_flag()
            self._saved = get()
            if self._saved:
                set_(False)
        return self

    def __exit__(self, *exc):
        if self._cuda and self._saved:
            cublas_tf32_flag()[1](True)
        return False


_CUBLAS_TF32_FLAG = None


def cublas_tf32_flag():
    """(get, set) of cuBLAS's TF32 flag: ``torch._C``'s functions behind ``torch.backends.cuda.matmul.allow_tf32``."""
    global _CUBLAS_TF32_FLAG
    if _CUBLAS_TF32_FLAG is None:
        import torch

        if hasattr(torch._C, "_get_cublas_allow_tf32") and hasattr(torch._C, "_set_cublas_allow_tf32"):
            _CUBLAS_TF32_FLAG = torch._C._get_cublas_allow_tf32, torch._C._set_cublas_allow_tf32
        else:  # the public attribute, whatever implements it
            matmul = torch.backends.cuda.matmul
            _CUBLAS_TF32_FLAG = (lambda: matmul.allow_tf32), (lambda value: setattr(matmul, "allow_tf32", value))
    return _CUBLAS_TF32_FLAG


def matmul(a, b, *, out):
    """``a @ b`` in FP32 with the library's own kernel (NumPy or torch), into ``out`` if given; returns it."""
    if isinstance(a, np.ndarray):
        return np.matmul(a, b, out=out)
    import torch

    if a.is_cuda:
        with true_fp32():  # true FP32 SGEMM, not TF32
            return torch.matmul(a, b, out=out)
    return torch.matmul(a, b, out=out)
