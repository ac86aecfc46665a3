"""``sgemm_cube.matmul``'s small-call path in C++ (``csrc/fast_path.cpp``), or the reason it is not.

A small CUDA call whose plan is PyTorch's own matmul (the hybrid rule) is
remembered by :mod:`sgemm_cube.product` per operand shapes, dtypes, layouts,
devices and options; a repeated call then skips sgemm_cube's checks and
plan.  In Python that lookup alone costs about 2 microseconds, 12-25% of a
small call; this CPython extension does it in C++ and calls ``at::matmul``
as ``torch.matmul`` does (TF32 off, the GIL released).  ``sgemm_cube.matmul``
asks it first, with its own arguments (``matmul``: option values compared
by identity with those a validated call bound to its options object,
``bind``), so a repeated call validates nothing in Python.  It is compiled with
:func:`sgemm_cube.switch_kernels.build` (the compiler, cache and fallback of
the switch's C++ kernels) on the first CUDA call planned native, about half
a minute once per torch version; where it cannot be built the Python lookup
runs, with the same answers.  ``SGEMM_CUBE_SWITCH_KERNELS=python`` asks for
the Python lookup too.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util

from . import switch_kernels

__all__ = ["SOURCE", "load", "status"]

SOURCE = switch_kernels.SOURCE.with_name("fast_path.cpp")

_module = None
_reason = ""  # why _module is None once load() was called


def load():
    """The extension module (``remember``, ``call``, ``bind``, ``matmul``, ``forget``, ``size``), built and
    loaded once per process; None where it cannot be (:func:`status` says why)."""
    global _module, _reason
    if _module is not None or _reason:
        return _module
    if not switch_kernels.requested():
        _reason = f"{switch_kernels.ENV_VAR}=python asks for the Python lookup"
        return None
    try:
        import torch  # noqa: F401  (loads libtorch and its Python bindings, whose symbols it resolves)

        path = switch_kernels.build(SOURCE, python_extension=True)
        loader = importlib.machinery.ExtensionFileLoader("sgemm_cube._fast_path", str(path))
        spec = importlib.util.spec_from_file_location("sgemm_cube._fast_path", str(path), loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        _module = module
    except switch_kernels.Unavailable as exc:
        _reason = str(exc)
    except (OSError, ImportError) as exc:
        _reason = f"the C++ small-call path could not be built or loaded: {exc}"
    return _module


def status() -> switch_kernels.KernelsStatus:
    """Which lookup ``sgemm_cube.matmul``'s remembered calls use: ``("c++", path)`` or ``("python", why)``
    (builds the extension if it was not built yet)."""
    module = load()
    if module is None:
        return switch_kernels.KernelsStatus("python", _reason)
    return switch_kernels.KernelsStatus("c++", module.__file__)
