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
nn, torch_ops
    ``sgemm_cube.nn`` (Linear, convert) and ``sgemm_cube.torch_ops`` (the
    ``torch.ops.sgemm_cube.matmul`` operator): loaded on first use of the
    name, so that ``import sgemm_cube`` does not import torch.

``torch.ops.sgemm_cube.matmul`` is registered as soon as both torch and
sgemm_cube are imported, in either order: at ``import sgemm_cube`` where
torch is loaded, else right after torch's own import finishes (an import
hook, :mod:`sgemm_cube._after_import`).  A NumPy-only program never imports
torch, and ``import sgemm_cube`` never does.
"""
from .cpu_fallback import split, split_limits

from .api import matmul, select_backend
from .backends import BackendUnavailableError, available_backends
from .api import explain
from .plan import Plan
from .switch import disable, enable, enabled, is_enabled  # imports torch only when turned on

__version__ = "0.1.0"

#: Submodules that import torch, loaded when first named (``sgemm_cube.nn``, ``sgemm_cube.torch_ops``).
_TORCH_SUBMODULES = ("nn", "torch_ops")


def __getattr__(name: str):
    if name in _TORCH_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")  # also binds it as an attribute of the package
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _register_operator() -> None:
    """Define ``torch.ops.sgemm_cube.matmul`` (import :mod:`sgemm_cube.torch_ops`); never breaks torch's import."""
    try:
        import sgemm_cube.torch_ops  # noqa: F401
    except Exception as exc:  # an unsupported torch: the operator is missing, everything else works
        import warnings

        warnings.warn(f"torch.ops.sgemm_cube.matmul is not registered: {type(exc).__name__}: {exc}",
                      RuntimeWarning, stacklevel=2)


from ._after_import import after_import as _after_import  # noqa: E402

_after_import("torch", _register_operator)

__all__ = ["matmul", "explain", "Plan", "split", "split_limits", "select_backend", "available_backends",
           "enable", "disable", "enabled", "is_enabled",
           "BackendUnavailableError", "__version__"]
