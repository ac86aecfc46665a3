"""CUDA backend of sgemm_cube: the SGEMM-cube algorithm on tensor cores, in Triton.

Importing this package needs neither torch nor triton nor a GPU; the kernels
are imported on first use.  A product is four launches (:mod:`.launch`): the
statistics of both operands; their line meta and fix-up lists; the scaled
split; the GEMM with its fix-up programs.  Layers, one per module:

* :mod:`.split_kernel` -- FP32 -> padded buffer of FP16 (hi, lo) or three
  BF16 slices, with the line meta (:mod:`.line_meta`) and fix-up lists (three
  memory-bound passes, each over both operands);
* :mod:`.gemm_kernel` -- one GEMM kernel for every scheme: the scheme's
  tensor-core products per K step (3 or 4 FP16, 9 or 6 BF16), the level-0
  partial flushed into a round-to-nearest FP32 accumulator every ``flush_k``
  elements, termwise or elementwise combination; around the K loop (a tile's
  place, line meta and epilogue): :mod:`.gemm_tiles`;
* :mod:`.fixup_kernel` -- the fix-up programs of the GEMM launch: the fix-up
  lines' outputs from the unscaled operands, in FP64;
* :mod:`.launch` -- config resolution, padding, launches (:func:`matmul`);
* :mod:`.configs` -- the schema, key list and validator of ``configs/<gpu>.json``
  and ``configs/default.json`` (written by ``tuning/gpu.py`` alone);
* :mod:`.hybrid` -- per-GPU tables and :func:`prefers_native`.

Measurements behind every default: ``docs/cuda_design.md``.
"""
from __future__ import annotations

from .configs import ORDERS, SCHEMES
from .hybrid import interpreter_active, prefers_native

__all__ = ["SCHEMES", "ORDERS", "is_available", "unavailable_reason", "plan", "run", "matmul", "prefers_native",
           "interpreter_active"]


def unavailable_reason() -> str:
    """One line saying what is missing for this backend, or ``""`` if nothing is.

    The backend runs on CUDA tensors, or on CPU data when Triton's NumPy
    interpreter is on (``TRITON_INTERPRET=1`` before triton is imported).
    """
    try:
        import torch
    except ImportError:
        return "the cuda backend needs torch and triton: pip install 'sgemm_cube[cuda]'"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "the cuda backend needs triton beside torch: pip install 'sgemm_cube[cuda]'"
    if not torch.cuda.is_available() and not interpreter_active():
        return ("the cuda backend needs a CUDA GPU (torch.cuda.is_available() is False; "
                "TRITON_INTERPRET=1 runs its kernels on the CPU, slowly)")
    return ""


def is_available() -> bool:
    """Whether torch and triton import and there is a GPU (or the Triton interpreter is on)."""
    return unavailable_reason() == ""


def plan(req, batch: int, m: int, n: int, k: int, like=None):
    """The plan for a (batch, m, k) @ (batch, k, n) product on ``like``'s device (:func:`sgemm_cube.backends.base.make_plan`).

    Under ``backend="auto"`` the measured hybrid rule (:func:`prefers_native`) may choose native FP32.
    """
    from ..base import make_plan

    native = None
    if req.backend == "auto" and like is not None and prefers_native(batch, m, n, k, like.device):
        native = "the measured hybrid rule says cuBLAS SGEMM is faster for this shape on this GPU"
    return make_plan(req, "cuda", SCHEMES, k, orders=ORDERS, native_reason=native)


def run(plan, req, a, b, out, alpha: float = 1.0) -> None:
    """Run ``plan`` on (B, M, K) and (B, K, N) float32 tensors into (B, M, N) ``out`` (times ``alpha``): no sync."""
    import warnings

    import torch

    from .launch import run as _run

    if interpreter_active() and not isinstance(a, torch.Tensor):  # NumPy data for the CPU interpreter
        with warnings.catch_warnings():  # broadcast views are read-only; the kernels only read a and b
            warnings.simplefilter("ignore", UserWarning)
            a, b, out = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(out)
    if out.shape[2] > 1 and out.stride(2) != 1:
        res = torch.empty(out.shape, dtype=out.dtype, device=out.device)
        _run(a, b, res, sb=plan.sb, order=req.order, scheme=plan.scheme, scale=plan.scale, fixup=req.fixup,
             alpha=alpha)
        out.copy_(res)
        return
    _run(a, b, out, sb=plan.sb, order=req.order, scheme=plan.scheme, scale=plan.scale, fixup=req.fixup, alpha=alpha)


def matmul(a, b, *, out, **options) -> None:
    """Emulated FP32 batched product on tensor cores with checked arguments; see :func:`.launch.matmul`."""
    from .launch import matmul as _matmul

    _matmul(a, b, out=out, **options)
