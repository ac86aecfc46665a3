"""The protocol every backend follows, and what it gives the API layer.

A backend is a module of :data:`sgemm_cube.backends.BACKENDS` that satisfies
:class:`Backend`: it names the schemes and orders it implements, says
whether it can run here, turns a validated :class:`~sgemm_cube.plan.Request`
and a problem's shape into a :class:`~sgemm_cube.plan.Plan`
(:func:`sgemm_cube.explain` returns exactly that plan), and runs a plan.

The API layer (:mod:`sgemm_cube.api`) owns everything that is the same for
all of them: dtype and shape checks, broadcasting, ``out=``, autograd.  So
``run`` receives 3-D float32 operands ``a`` (B, M, K) and ``b`` (B, K, N)
of the backend's array kind, with any strides, and writes all of ``out``
(B, M, N), including the accuracy guarantee's bookkeeping (line statistics,
scaling, recomputed lines, non-finite inputs), which each backend computes
from its own operands.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Backend"]


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

    def run(self, plan, req, a, b, out) -> None:
        """Compute the planned product of 3-D float32 operands into ``out``."""
