"""CPU backend: the NumPy arithmetic model of :mod:`cpu_fallback`, with the guarantee's bookkeeping.

Runs on NumPy arrays and on torch CPU tensors (shared memory, no copy).  Per
product (:mod:`cpu_fallback.guard` defines every step, and the CUDA backend
computes the same line exponents and classes bit for bit):

1. line exponents and classes of ``a``'s rows and ``b``'s columns;
2. exact power-of-two scaling of the lines that need it, NaN/Inf as 0;
3. the emulated product (:func:`cpu_fallback.emulated_matmul`, exact to
   its documented accumulation model), unscaled with one rounding;
4. the outputs of recomputed lines computed by NumPy's float32 matmul (native FP32).

It is the reference the hardware backends are tested against, and fast
enough for accuracy studies (about 23-28x a float32 ``numpy.matmul`` at
1024^3 on two cores).
"""
from __future__ import annotations

import numpy as np

from cpu_fallback import ORDERS, emulated_matmul
from cpu_fallback.guard import line_meta, recomputed_lines, scale_lines, unscale

from ..plan import Plan, Request, make_plan

__all__ = ["SCHEMES", "ORDERS", "is_available", "unavailable_reason", "plan", "run", "DEFAULT_ACCUMULATE"]

#: Split schemes this backend implements (all of them: it is the definition).
SCHEMES = ("fp16x3", "fp16x4", "bf16x9", "bf16x6")

#: Accumulation model used when the caller passes ``accumulate=None``.
DEFAULT_ACCUMULATE = "cube16"


def is_available() -> bool:
    return True


def unavailable_reason() -> str:
    return ""


def plan(req: Request, batch: int, m: int, n: int, k: int, like=None) -> Plan:
    """The plan for a (batch, m, k) @ (batch, k, n) product (:func:`sgemm_cube.plan.make_plan`)."""
    return make_plan(req, "cpu", SCHEMES, k)


def _as_numpy(x):
    if isinstance(x, np.ndarray):
        return x
    return x.detach().numpy()  # a torch CPU tensor: a view of the same memory


def run(plan: Plan, req: Request, a, b, out) -> None:
    """``out[i] = a[i] @ b[i]`` for (B, M, K) and (B, K, N) float32 operands, into (B, M, N) ``out``."""
    a, b, out = _as_numpy(a), _as_numpy(b), _as_numpy(out)
    ma = line_meta(a, -1, scheme=plan.scheme, sb=plan.sb, scale=plan.scale, fixup=req.fixup)
    mb = line_meta(b, -2, scheme=plan.scheme, sb=plan.sb, scale=plan.scale, fixup=req.fixup)
    sa, sb_ = scale_lines(a, ma.t, -1), scale_lines(b, mb.t, -2)
    accumulate = req.accumulate or DEFAULT_ACCUMULATE
    for i in range(a.shape[0]):
        out[i] = emulated_matmul(sa[i], sb_[i], sb=plan.sb, order=req.order, accumulate=accumulate,
                                 scheme=plan.scheme)
    if ma.t.any() or mb.t.any():
        out[...] = unscale(out, ma.t, mb.t)
    # Recomputed lines: FP32 products of the scaled lines (NaN/Inf kept), unscaled with one rounding.
    for i, rows, cols in recomputed_lines(ma, mb, req.fixup):
        xa = scale_lines(a[i], ma.t[i], -1, keep_special=True)
        xb = scale_lines(b[i], mb.t[i], -2, keep_special=True)
        if rows.size:
            out[i, rows, :] = unscale(np.matmul(xa[rows, :], xb), ma.t[i, rows], mb.t[i])
        if cols.size:
            out[i][:, cols] = unscale(np.matmul(xa, xb[:, cols]), ma.t[i], mb.t[i, cols])
