"""Backend registry: each backend is imported lazily, by name, and cached.

Every backend module follows :class:`sgemm_cube.backends.base.Backend`
(``SCHEMES``, ``ORDERS``, ``is_available``, ``unavailable_reason``,
``plan``, ``run``; a test checks each one).  A
missing optional library (torch, triton, torch_npu) never breaks
``import sgemm_cube``: it only makes that backend unavailable, and asking
for it raises :class:`BackendUnavailableError` naming what is missing.
"""
from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["BACKENDS", "BackendUnavailableError", "get_backend", "available_backends"]

#: name -> module implementing it.
BACKENDS = {
    "cpu": "sgemm_cube.backends.cpu",        # NumPy arithmetic model (cpu_fallback)
    "cuda": "sgemm_cube.backends.cuda",      # Triton kernels on NVIDIA tensor cores
    "npu": "sgemm_cube.backends.npu",        # AscendC kernels through torch_npu
    "native": "sgemm_cube.backends.native",  # plain FP32 matmul of the array library (baseline)
}

_cache: dict[str, ModuleType] = {}
_ready: dict[str, ModuleType] = {}  # backends found available (checked once: the check costs microseconds)


class BackendUnavailableError(RuntimeError):
    """A backend was asked for but cannot run here; the message says why."""


def _module(name: str) -> ModuleType:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {['auto', *BACKENDS]}")
    if name not in _cache:
        try:
            _cache[name] = importlib.import_module(BACKENDS[name])
        except ImportError as exc:  # the backend's own module failed to import: report, never crash
            raise BackendUnavailableError(f"sgemm_cube backend {name!r} failed to import: {exc}") from exc
    return _cache[name]


def get_backend(name: str) -> ModuleType:
    """Return the backend module ``name``, or raise if it cannot run here.

    Raises
    ------
    ValueError
        ``name`` is not a backend (the message lists the valid names).
    BackendUnavailableError
        The backend exists but a library, toolkit or device it needs is
        missing (the message says which).
    """
    mod = _ready.get(name)
    if mod is not None:
        return mod
    mod = _module(name)
    if not mod.is_available():
        raise BackendUnavailableError(f"sgemm_cube backend {name!r} is unavailable: {mod.unavailable_reason()}")
    _ready[name] = mod
    return mod


def available_backends() -> dict[str, str]:
    """Map every backend name to ``"available"`` or the reason it is not."""
    status = {}
    for name in BACKENDS:
        try:
            mod = _module(name)
            status[name] = "available" if mod.is_available() else mod.unavailable_reason()
        except BackendUnavailableError as exc:
            status[name] = str(exc)
    return status
