"""The protocol every backend follows, and what it gives the API layer.

A backend is a module of :data:`sgemm_cube.backends.BACKENDS` that satisfies
:class:`Backend`: it names the schemes and orders it implements, says
whether it can run here, turns a validated :class:`~sgemm_cube.plan.Request`
and a problem's shape into a :class:`~sgemm_cube.plan.Plan` that holds every
decision (:func:`sgemm_cube.explain` returns exactly that plan), and runs a
plan: ``run(plan, a, b, out, alpha)``, its one entry point, reads the plan only.

The layers above own everything that is the same for all of them:
:mod:`sgemm_cube.api` validates the options once (a
:class:`~sgemm_cube.plan.Request`) and sends operands that require grad
through :mod:`sgemm_cube._autograd`; :mod:`sgemm_cube.product` checks the
operands (dtypes, devices, shapes), broadcasts them and handles ``out=``.  So
``run`` receives 3-D float32 operands ``a`` (B, M, K) and ``b`` (B, K, N)
of the backend's array kind, with any strides, and writes all of ``out``
(B, M, N), including the accuracy guarantee's bookkeeping (line statistics,
scaling, fix-up lines, non-finite inputs), which each backend computes
from its own operands.

The plan's decisions (:func:`make_plan`, shared by every backend):

* ``scheme="auto"`` is ``fp16x3``: with per-line scaling and the plain-FP32
  fix-up of the lines the split cannot hold (``fixup=True``), it
  keeps SGEMM's error bound on every finite input, and it is the fastest.
  The CUDA backend's plan may say ``"auto"`` instead: the GPU then chooses
  between fp16x3 and bf16x6 per call (:mod:`sgemm_cube.backends.cuda`).
* ``backend="auto"`` runs native FP32 where the emulation cannot win:
  ``K < MIN_K`` on every device (the split's own 22-bit rounding makes it
  2.5-3x less accurate than native there, and native is faster), and on
  CUDA the measured hybrid rule (``backends/cuda/configs/<gpu>.json``).
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from sgemm_cube.cpu_fallback import ORDERS
from sgemm_cube.cpu_fallback.guard import certifies

from ..plan import Plan, Request

__all__ = ["Backend", "make_plan", "native_plan", "MIN_K"]

#: Below this K, ``backend="auto"`` runs native FP32 on every device.
MIN_K = 16


@runtime_checkable
class Backend(Protocol):
    """What a backend module provides (``isinstance(module, Backend)`` checks the names)."""

    #: Schemes it implements ("fp16x3", "fp16x4", "bf16x9", "bf16x6"; "native" for the baseline).
    SCHEMES: tuple[str, ...]
    #: Accumulation orders it implements ("termwise", "elementwise").
    ORDERS: tuple[str, ...]

    def is_available(self) -> bool:
        """Whether the library, toolkit and device it needs are here (cheap; cached by the registry)."""

    def unavailable_reason(self) -> str:
        """Why not, naming what is missing ("" when available)."""

    def plan(self, req, batch: int, m: int, n: int, k: int, like=None):
        """The :class:`~sgemm_cube.plan.Plan` for a (batch, m, k) @ (batch, k, n) product on ``like``'s device."""

    def run(self, plan, a, b, out, alpha: float = 1.0) -> None:
        """Compute ``alpha`` times the planned product of 3-D float32 operands into ``out``.

        Reads the decisions from ``plan`` alone (scheme, sb, scale, order, fixup,
        accumulate, config), never from the request: what runs is what
        :func:`sgemm_cube.explain` shows.  Options were validated when the
        request was made; a backend may assert its invariants, not re-check them.

        ``alpha`` (taken as float32, as PyTorch takes a float32 operator's
        scalar) multiplies each output before its final rounding, so that
        ``alpha * (a @ b)`` overflows only where the exact value does (the
        switch's ``addmm(..., alpha=...)``).
        """


def native_plan(sb: int, reason: str, *, scheme: str = "native", backend: str = "native") -> Plan:
    """A plan without a split (native FP32, or plain FP32 on an NPU's vector units): no terms to order,
    no lines to fix up, the hardware's accumulation."""
    return Plan(scheme, sb, None, backend, reason, order=None, fixup=False, accumulate=None)


def make_plan(req: Request, backend: str, schemes, k: int, *, orders=ORDERS, native_reason: str | None = None,
              auto_scheme: tuple[str, str] | None = None) -> Plan:
    """The plan of backend ``backend`` (which implements ``schemes`` and ``orders``) for a product with this K.

    ``native_reason``: the backend's own reason to run native FP32 under
    ``backend="auto"`` (its measured hybrid rule), or None.  ``auto_scheme``: ``(scheme, why)``, what
    ``scheme="auto"`` runs on this backend for this product instead of fp16x3 (CUDA: ``"auto"``, the
    GPU's choice per call), or None.
    """
    scheme = req.scheme if req.scheme != "auto" else "fp16x3" if auto_scheme is None else auto_scheme[0]
    auto = req.backend == "auto"
    if req.accumulate is not None and backend != "cpu":
        raise ValueError(f"accumulate={req.accumulate!r} selects an arithmetic model of the CPU backend; "
                         f"the {backend!r} backend accumulates as its hardware does (pass accumulate=None)")
    if auto and k < MIN_K:
        return native_plan(req.sb, f"K = {k} < {MIN_K}: the split's 22-bit rounding would cost accuracy and "
                                   f"native FP32 is faster")
    if auto and native_reason:
        return native_plan(req.sb, native_reason)
    if scheme not in schemes and scheme != "auto":
        if req.scheme == "auto":
            return native_plan(req.sb, f"the {backend!r} backend has no {scheme} kernel, so native FP32 runs")
        raise ValueError(f"the {backend!r} backend implements the schemes {list(schemes)}, not {scheme!r}")
    if req.order not in orders:
        raise ValueError(f"the {backend!r} backend implements order={list(orders)}, not {req.order!r}")
    # Each decision with what made it: the caller's option, or the rule that chose for "auto".
    where = (f"backend='auto': the {backend!r} backend of the operands' device (K = {k} >= {MIN_K} and no "
             f"measured rule prefers native FP32 here)" if auto else f"backend={backend!r} as requested")
    if req.scheme != "auto":
        what = f"scheme={scheme!r} as requested"
    elif auto_scheme is not None:
        what = f"scheme='auto' (the default): {auto_scheme[1]}"
    else:
        what = ("scheme='auto' (the default): fp16x3, with per-line power-of-two scaling and the fix-up of the lines "
                "the split cannot hold, keeps SGEMM's error bound and is the fastest scheme")
    why = f"{where}; {what}"
    if backend in ("cpu", "cuda") and certifies("fp16x3" if scheme == "auto" else scheme, req.scale, req.fixup):
        why += ("; scale='rows': the lines that reach below the split's range are emulated too, each of their "
                "outputs certified after the product or computed again from the unscaled operands")
    if not req.fixup:
        why += "; fixup=False: lines whose entries lose bits in the split are NOT fixed up (no guarantee)"
    return Plan(scheme, req.sb, req.scale, backend, why, order=req.order, fixup=req.fixup)
