"""The products the studies compare, run on one backend.

Five kinds of product, as in the papers' figures, each labelled in the
figures and tables by the options it runs:

``"fp16"`` -- "FP16 only"
    ``fp16(A) @ fp16(B)`` with FP32 accumulation, what the matrix engine
    gives without the split (the paper's "FP16 HGEMM").
``"fp32"`` -- "native FP32"
    The array library's own SGEMM (OpenBLAS through NumPy on the CPU,
    cuBLAS with TF32 off on CUDA).
``"termwise"``, ``"elementwise"`` -- "paper's split termwise sb=12 (scale=None, fixup=False)"
    The paper's algorithm exactly: :func:`sgemm_cube.matmul` with that
    ``order``, a given ``sb`` and ``scale=None, fixup=False`` (no
    power-of-two scaling of the lines, no plain-FP32 fix-up of the lines
    the split cannot hold).  Not what the library does by default.
``"auto"`` -- "sgemm_cube sb=12 (default: scaling + fix-up)"
    :func:`sgemm_cube.matmul` with its default options (fp16x3, sb=12,
    termwise, ``scale="auto"``, ``fixup=True``): the lines that do not fit
    the split are scaled by powers of two, and those it cannot hold are
    computed in plain FP32 (the full FP32 range).  The studies that run the
    paper's split run this beside it.

The studies deliberately leave the split's accurate range, so the
``termwise``/``elementwise`` kinds run the paper's split unguarded.  A
point where an input reaches :func:`sgemm_cube.split_limits`
``(sb).max_abs`` (65520 for FP16 only) would overflow the split (the
paper's Rule 2; the library would compute those lines in plain FP32):
:meth:`Engine.run` reports it as ``"out_of_range"`` instead of computing
it, and the plots show it as missing.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sgemm_cube.cpu_fallback import accumulate_product, split_limits
from sgemm_cube.cpu_fallback.split import FP16_OVERFLOW

from ...api import matmul
from ...metrics import reference_matmul64

__all__ = ["Method", "KINDS", "BACKENDS", "methods", "Operands", "Outcome", "Engine"]

#: Product kinds, in the order the figures list them.
KINDS = ("fp16", "fp32", "elementwise", "termwise", "auto")

_NO_SB = ("fp16", "fp32", "auto")  # kinds that take no sb

#: Backends a study can run on.
BACKENDS = ("cpu", "cuda")



@dataclass(frozen=True)
class Method:
    """One product: a kind from :data:`KINDS`, and ``sb`` for the sgemm_cube kinds."""

    kind: str
    sb: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown method kind {self.kind!r}; choose one of {list(KINDS)}")
        if (self.sb is None) != (self.kind in _NO_SB):
            raise ValueError(f"{self.kind!r} {'needs' if self.sb is None else 'takes no'} sb")

    @property
    def key(self) -> str:
        """Short identifier used in the data files: ``fp16``, ``fp32``, ``termwise_sb12`` ..."""
        return self.kind if self.sb is None else f"{self.kind}_sb{self.sb}"

    @property
    def label(self) -> str:
        """Legend text."""
        if self.kind == "fp16":
            return "FP16 only"
        if self.kind == "fp32":
            return "native FP32"
        if self.kind == "auto":
            return "sgemm_cube sb=12 (default: scaling + fix-up)"
        return f"paper's split {self.kind} sb={self.sb} (scale=None, fixup=False)"

    def columns(self) -> dict:
        """The method's columns in a study's rows: ``method`` (key), ``kind``, ``sb`` (NaN for baselines)."""
        return {"method": self.key, "kind": self.kind, "sb": float("nan") if self.sb is None else self.sb}

    @property
    def max_abs(self) -> float:
        """Inputs must stay below this magnitude or the product holds infinities."""
        if self.kind == "fp16":
            return FP16_OVERFLOW
        if self.kind in ("fp32", "auto"):
            return np.inf
        return split_limits(self.sb).max_abs


def methods(*, sbs=(12,), orders=("elementwise", "termwise"), fp16: bool = True, fp32: bool = True,
            defaults: bool = True) -> list[Method]:
    """The baselines, every (order, sb) of the paper's split, then the library's defaults, in legend order."""
    out = ([Method("fp16")] if fp16 else []) + ([Method("fp32")] if fp32 else [])
    return out + [Method(order, int(sb)) for sb in sbs for order in orders] + ([Method("auto")] if defaults else [])


class Operands(NamedTuple):
    """One pair of inputs, on the host and on the backend's device, with its float64 product."""

    a: np.ndarray       # (M, K) float32, host
    b: np.ndarray       # (K, N) float32, host
    dev_a: object       # the same on the backend's device
    dev_b: object
    ref: np.ndarray | None  # (M, N) float64 reference a @ b (None when skipped)
    max_abs: float      # largest |value| in a and b
    skip: str | None    # why no product is measured: "nonfinite_input", "zero_reference" or None


class Outcome(NamedTuple):
    """What one product gave.

    ``status`` is ``"ok"``; ``"out_of_range"`` (not computed: an input
    reaches the method's overflow limit); ``"nonfinite_input"`` or
    ``"zero_reference"`` (not computed: the study's scaling overflowed FP32,
    or flushed the inputs so far that the exact product is 0 and no
    relative error exists); or ``"nonfinite"`` (computed, but holds
    infinities or NaN).
    """

    c: np.ndarray | None  # (M, N) float32 on the host; None when not computed
    status: str


class Engine:
    """Runs :class:`Method` products on one backend.

    Parameters
    ----------
    backend : {"cpu", "cuda"}
        ``"cpu"``: NumPy arrays and the CPU arithmetic model.  ``"cuda"``:
        torch CUDA tensors, the Triton kernels and cuBLAS (without a GPU
        but with ``TRITON_INTERPRET=1``: CPU tensors and Triton's
        interpreter, for tests).
    accumulate : {"cube16", "sequential"} or None
        Accumulation model of the CPU model (``None``: its default,
        ``"cube16"``); it also applies to the FP16-only product there.
        Must be None on ``"cuda"``.
    """

    def __init__(self, backend: str = "cpu", *, accumulate: str | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {list(BACKENDS)}")
        if backend != "cpu" and accumulate is not None:
            raise ValueError(f"accumulate={accumulate!r} selects a model of the CPU backend; "
                             f"the {backend!r} backend accumulates as its hardware does")
        self.backend = backend
        self.accumulate = accumulate
        self.device = None
        if backend == "cuda":
            from ...backends import get_backend

            get_backend("cuda")  # raises BackendUnavailableError saying what is missing
            import torch

            # Without a GPU, get_backend passed because TRITON_INTERPRET=1: the
            # kernels run in Triton's interpreter on CPU tensors (slowly; tests).
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def describe(self) -> str:
        """The device in words, for the data files."""
        if self.backend == "cuda":
            import torch

            if self.device.type != "cuda":
                return f"Triton interpreter on the CPU (TRITON_INTERPRET=1, torch {torch.__version__})"
            return f"{torch.cuda.get_device_name(self.device)} (torch {torch.__version__})"
        model = self.accumulate or "cube16"
        return (f"CPU arithmetic model, accumulate={model!r}; native FP32 = numpy.matmul "
                f"(numpy {np.__version__}, {platform.machine()})")

    def operands(self, a: np.ndarray, b: np.ndarray) -> Operands:
        """Move one input pair to the device and compute its float64 reference."""
        max_abs = max(float(np.max(np.abs(x), initial=0.0)) for x in (a, b))
        if self.backend == "cuda":
            import torch

            dev_a, dev_b = torch.from_numpy(a).to(self.device), torch.from_numpy(b).to(self.device)
        else:
            dev_a, dev_b = a, b
        if not np.isfinite(max_abs):  # the study scaled its data beyond FP32
            return Operands(a, b, dev_a, dev_b, None, max_abs, "nonfinite_input")
        ref = reference_matmul64(a, b)
        return Operands(a, b, dev_a, dev_b, ref, max_abs, None if ref.any() else "zero_reference")

    def run(self, method: Method, ops: Operands) -> Outcome:
        """Compute one product; skip it when an input is beyond the method's range or the reference is 0."""
        if ops.skip:
            return Outcome(None, ops.skip)
        if ops.max_abs >= method.max_abs:
            return Outcome(None, "out_of_range")
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            c = self._product(method, ops.dev_a, ops.dev_b)
        c = c if isinstance(c, np.ndarray) else c.cpu().numpy()
        return Outcome(c, "ok" if np.isfinite(c).all() else "nonfinite")

    def _product(self, method: Method, a, b):
        if method.kind == "fp32":
            return matmul(a, b, backend="native")
        if method.kind == "fp16":
            if self.backend == "cuda" and self.device.type == "cuda":
                from ...demo import _plain_fp16

                return _plain_fp16(a, b)  # cuBLAS FP16 x FP16 -> FP32
            # The CPU model (torch CPU tensors under the interpreter share their memory with NumPy).
            a, b = (x if isinstance(x, np.ndarray) else x.numpy() for x in (a, b))
            return accumulate_product(a.astype(np.float16), b.astype(np.float16),
                                      accumulate=self.accumulate or "cube16")
        if method.kind == "auto":  # the library's defaults: scaling and plain-FP32 lines where needed
            return matmul(a, b, accumulate=self.accumulate, backend=self.backend)
        # The paper's split exactly: no scaling, no fix-up (the study measures the split itself).
        return matmul(a, b, method.sb, order=method.kind, accumulate=self.accumulate, backend=self.backend,
                      scale=None, fixup=False)
