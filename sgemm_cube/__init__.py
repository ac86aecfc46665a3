"""sgemm_cube: FP32-accurate matrix multiply from FP16 matrix engines.

Implements SGEMM-cube (Xue et al.): each FP32 operand is split into an FP16
high part and an FP16 residual scaled by ``2**sb``, and three FP16 products
with FP32 accumulation, combined termwise, rebuild the FP32 product.

Public API
----------
matmul(a, b, sb=12, *, scheme, scale, order, accumulate, backend, out, fixup)
    The product, on NumPy arrays or torch tensors (CPU, CUDA, Ascend NPU), never less
    accurate than native FP32 SGEMM (README: "The accuracy guarantee").
explain(a, b, ...)
    The plan matmul runs (scheme, sb, scaling, backend, native choice) and why.
split(x, sb=12), split_limits(sb=12)
    The FP32 -> (FP16 hi, FP16 lo) split and the range it represents.
available_backends()
    Which backends can run here, and why the others cannot.
enable(), disable(), enabled()
    The PyTorch drop-in switch: every FP32 GEMM PyTorch runs on CUDA (and the CPU when asked) is
    computed by sgemm_cube, at PyTorch's dispatcher (also ``SGEMM_CUBE_ENABLE=1`` at import).
    ``sgemm_cube.nn`` (Linear, convert) and ``sgemm_cube.torch_ops``
    (the ``torch.ops.sgemm_cube.matmul`` operator) import torch.
"""
from .cpu_fallback import split, split_limits

from .api import matmul, select_backend
from .backends import BackendUnavailableError, available_backends
from .api import explain
from .plan import Plan
from .switch import disable, enable, enabled, is_enabled  # imports torch only when turned on

__version__ = "0.1.0"

__all__ = ["matmul", "explain", "Plan", "split", "split_limits", "select_backend", "available_backends",
           "enable", "disable", "enabled", "is_enabled",
           "BackendUnavailableError", "__version__"]
