"""Options normalised once (:class:`Request`), and the plan a backend runs (:class:`Plan`).

:func:`sgemm_cube.matmul` turns its keyword options into one :class:`Request`
(validated here, once, and cached: a call repeats the same options), and the
backend named by the data's device turns the request and the problem's shape
into a :class:`Plan` (:func:`sgemm_cube.backends.base.make_plan` has the
decisions; no data is read: everything that depends on the values is
decided on the device, per row and column, by the split pass,
:mod:`sgemm_cube.cpu_fallback.guard`).  The plan holds every decision the
backend's ``run(plan, a, b, out, alpha)`` reads (it never sees the request),
and :func:`sgemm_cube.explain` returns that same plan.  The options, ``sb``
among them, are validated here only.  ``sb="auto"`` is 12 (the most accurate; with scaling every
sb holds the data).
"""
from __future__ import annotations

import functools
from typing import Literal, NamedTuple, Optional, Union

from sgemm_cube.cpu_fallback import ORDERS, SCHEMES, ACCUMULATION_MODELS
from sgemm_cube.cpu_fallback.guard import SCALES
from sgemm_cube.cpu_fallback.split import _check_sb

__all__ = ["Request", "Plan", "make_request", "Scheme", "Scale", "Order", "Accumulate", "BackendName"]

# The options' types, one definition for every interface (api, torch_ops, nn, switch).
Scheme = Literal["fp16x3", "fp16x4", "bf16x9", "bf16x6", "auto"]
Scale = Optional[Literal["auto", "rows", "matrix"]]
Order = Literal["termwise", "elementwise"]
Accumulate = Optional[Literal["cube16", "sequential", "truncate"]]
BackendName = Literal["auto", "cpu", "cuda", "npu", "native"]
SbOption = Union[int, Literal["auto"]]


class Request(NamedTuple):
    """The options of one :func:`sgemm_cube.matmul` call, validated (see its docstring)."""

    scheme: str            # "fp16x3", "fp16x4", "bf16x9", "bf16x6" or "auto"
    sb: int
    scale: str | None      # "auto", "rows", "matrix" or None
    order: str
    accumulate: str | None
    fixup: bool
    backend: str           # as asked: "auto", "cpu", "cuda", "npu", "native"


class Plan(NamedTuple):
    """How :func:`sgemm_cube.matmul` computes a product: every decision a backend's ``run`` reads.

    A backend's ``run(plan, a, b, out, alpha)`` reads these fields and nothing
    else of the options (the :class:`Request` stays above it), so
    :func:`sgemm_cube.explain` shows what runs.

    Attributes
    ----------
    scheme : str
        ``"fp16x3"``, ``"fp16x4"``, ``"bf16x9"``, ``"bf16x6"``, ``"native"`` (the array library's own
        FP32 product), ``"fp32"`` (plain FP32 on an NPU's vector units, where the library's is not FP32)
        or ``"auto"`` (CUDA: the GPU chooses fp16x3 or bf16x6 per call, from the lines it lists).
    sb : int
        Scaling exponent of the FP16 residuals (validated once, by :func:`make_request`).
    scale : str or None
        ``"auto"``, ``"rows"``, ``"matrix"`` or ``None`` (:mod:`sgemm_cube.cpu_fallback.guard`).
    backend : str
        The backend that runs it (``"native"`` when native FP32 runs).
    reason : str
        Why, in one sentence.
    order : str or None
        ``"termwise"`` or ``"elementwise"``: how the products' terms are combined; None where no
        terms are (native FP32, plain FP32).
    fixup : bool
        Whether the lines the split cannot hold to 22 bits are fixed up (lines with NaN/Inf or
        entries the split would overflow on always are); False where nothing is split.
    accumulate : str or None
        The CPU backend's FP32 accumulation model (``"cube16"`` unless asked otherwise); None
        where the hardware accumulates as it does.
    config : tuple of (key, value) pairs, or None
        Launch-configuration overrides of the backend's kernels (CUDA: keys of
        :func:`sgemm_cube.backends.cuda.launch.resolve_config`, ``variant`` among them, as
        gemlite's ``kernel=`` override; NPU: ``tiling``).  None: the backend's stored tables
        choose for the shape (:func:`sgemm_cube.backends.cuda.launch.resolve_config`,
        :func:`sgemm_cube.backends.npu.choose_tiling`).  Pairs, not a dict, so that a plan
        stays hashable and immutable.
    """

    scheme: str
    sb: int
    scale: str | None
    backend: str
    reason: str
    order: str | None = "termwise"
    fixup: bool = True
    accumulate: str | None = None
    config: tuple | None = None

    def with_config(self, **overrides) -> "Plan":
        """This plan with launch-configuration overrides added (e.g. ``variant="ptr"``), for tests and studies."""
        merged = dict(self.config or ())
        merged.update(overrides)
        return self._replace(config=tuple(sorted(merged.items())))


# typed: 12.0 == 12 and True == 1 must not find each other's entry (the first is refused, the second not)
@functools.lru_cache(maxsize=256, typed=True)
def make_request(sb: SbOption = 12, scheme: Scheme = "auto", scale: Scale = "auto", order: Order = "termwise",
                 accumulate: Accumulate = None, backend: BackendName = "auto", fixup: bool = True) -> Request:
    """Validate the product options once; raises ``TypeError``/``ValueError`` naming the option.

    The one validator of the options of every interface: :func:`sgemm_cube.matmul`,
    :func:`sgemm_cube.explain`, :func:`sgemm_cube.torch_ops.matmul` (the operator),
    :mod:`sgemm_cube.nn` and the switch (:func:`sgemm_cube.enable`) take the same names.
    """
    if scheme != "auto" and scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; choose one of {['auto', *SCHEMES]}")
    if sb == "auto":
        sb = 12
    else:
        sb = _check_sb(sb)
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {list(SCALES)}")
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {list(ORDERS)}")
    if accumulate is not None and accumulate not in ACCUMULATION_MODELS:
        raise ValueError(f"unknown accumulation model {accumulate!r}; choose one of "
                         f"{[None, *sorted(ACCUMULATION_MODELS)]}")
    if not isinstance(fixup, bool):
        raise TypeError(f"fixup must be True or False, got {fixup!r}")
    from .backends import BACKENDS

    if backend != "auto" and backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {['auto', *BACKENDS]}")
    if accumulate is not None and backend not in ("cpu", "auto"):
        raise ValueError(f"accumulate={accumulate!r} selects an arithmetic model of the CPU backend; "
                         f"the {backend!r} backend accumulates as its hardware does (pass accumulate=None)")
    return Request(scheme, sb, scale, order, accumulate, fixup, backend)
