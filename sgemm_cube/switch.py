"""The drop-in switch: route PyTorch's FP32 matrix products to sgemm_cube.

While the switch is on, these entry points send float32 tensors on a
supported device (CPU; CUDA and Ascend NPU where their backend is
available) to :func:`sgemm_cube.torch_ops.matmul`::

    torch.matmul   torch.mm   torch.bmm   torch.nn.functional.linear
    Tensor.matmul  Tensor.mm  Tensor.bmm  Tensor.__matmul__ (``@``)  Tensor.__rmatmul__

``torch.nn.Linear`` follows, through ``F.linear``; so do ``nn.MultiheadAttention``'s
projections and ``nn.TransformerEncoderLayer``: while the switch is on, PyTorch's fused
transformer fast path (``torch.backends.mha``) is turned off, since it never calls ``F.linear``.  Everything else -- other
dtypes, mixed dtypes or devices, ``out=`` and other extra arguments, sparse
or nested tensors, tensor subclasses (``torch.nn.Parameter`` aside), tensors
inside ``vmap`` or ``torch.func`` transforms, calls from inside sgemm_cube
itself -- goes to
the original function unchanged, as do shapes the original would reject
(so its error messages are the ones users see).

The switch is process-wide: it replaces those attributes of ``torch``,
``torch.Tensor`` and ``torch.nn.functional``, so it reaches every thread
and every caller that looks the function up when it calls it (code that
did ``from torch import matmul`` earlier keeps the original).
:func:`enable` and :func:`disable` count: the attributes are replaced by the
first :func:`enable` and restored -- the very same objects -- by the last
:func:`disable`; both take a lock, so threads may nest them freely.
``SGEMM_CUBE_ENABLE=1`` in the environment turns the switch on when this
module is imported.

Under ``torch.compile`` the switch's state is read while tracing: compile
after turning it on, and call ``torch.compiler.reset()`` after turning it
off to retrace.  This module imports torch only when the switch is
turned on.
"""
from __future__ import annotations

import contextlib
import os
import threading
import warnings

__all__ = ["enable", "disable", "enabled", "is_enabled", "bypass", "ENV_VAR"]

#: Environment variable read at import: ``1`` / ``true`` / ``yes`` / ``on`` turns the switch on.
ENV_VAR = "SGEMM_CUBE_ENABLE"

_lock = threading.RLock()
_count = 0
_options: dict | None = None      # keyword arguments of torch_ops.matmul while on
_devices: frozenset = frozenset()  # device types whose backend can run
_exact_types: frozenset = frozenset()  # torch.Tensor, torch.nn.Parameter (set by enable)
_saved: list = []                 # (owner, name, original, owned, wrapper): what enable() replaced
_local = threading.local()        # .depth > 0: this thread is inside sgemm_cube (see bypass)


def is_enabled() -> bool:
    """Whether the switch is on (some :func:`enable` is not yet matched by :func:`disable`)."""
    return _count > 0


def enable(*, sb: int = 12, order: str = "termwise", keep_lo_lo: bool = False, rescale: bool = True) -> None:
    """Turn the switch on (or, if it is on, count one more user of it).

    Parameters
    ----------
    sb, order, keep_lo_lo, rescale
        Options of every routed product, as in
        :func:`sgemm_cube.torch_ops.matmul`.  ``rescale=True`` (default)
        scales the rows and columns that do not fit the split by powers of
        two (``scale="auto"``); ``False`` scales none and computes the lines
        outside :func:`sgemm_cube.split_limits` in plain FP32.  Any finite
        float32 data keep FP32 accuracy either way.

    Raises
    ------
    ImportError
        torch is not installed.
    ValueError
        An option is invalid, or the switch is already on with other options
        (nested users must agree: a product cannot follow two settings).
    """
    global _count, _options, _devices, _exact_types
    from . import torch_ops  # imports torch and registers the operator

    torch_ops._check_options(sb, order)
    options = dict(sb=int(sb), order=order, keep_lo_lo=bool(keep_lo_lo), rescale=bool(rescale))
    with _lock:
        if _count:
            if options != _options:
                raise ValueError(f"sgemm_cube's switch is already on with {_options}; "
                                 f"it cannot also follow {options}")
            _count += 1
            return
        _options = options
        _devices = _supported_devices()
        _exact_types = _plain_types()
        _patch()
        _count = 1


def disable() -> None:
    """Undo one :func:`enable`; the last one restores the original torch functions.

    Raises
    ------
    RuntimeError
        The switch is off.
    """
    global _count
    with _lock:
        if not _count:
            raise RuntimeError("sgemm_cube.disable() called while the switch is off")
        _count -= 1
        if not _count:
            _unpatch()


@contextlib.contextmanager
def enabled(*, sb: int = 12, order: str = "termwise", keep_lo_lo: bool = False, rescale: bool = True):
    """Context manager: the switch is on inside the ``with`` block.

    Takes :func:`enable`'s options; blocks nest (also across threads), and
    the originals come back when the last one exits.

    Examples
    --------
    >>> import torch, sgemm_cube
    >>> model = torch.nn.Linear(16, 4)
    >>> with sgemm_cube.enabled():
    ...     y = model(torch.randn(8, 16))   # FP32 product from FP16 ones
    """
    enable(sb=sb, order=order, keep_lo_lo=keep_lo_lo, rescale=rescale)
    try:
        yield
    finally:
        disable()


@contextlib.contextmanager
def bypass():
    """Send this thread's calls to the original torch functions inside the block.

    sgemm_cube's own kernels run under it (its backends call
    ``torch.matmul`` themselves); other threads are unaffected.
    """
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


# ---- routing ------------------------------------------------------------------------------

def _supported_devices() -> frozenset:
    from .backends import available_backends

    status = available_backends()
    return frozenset(dev for dev in ("cpu", "cuda", "npu") if status.get(dev) == "available")


def _plain_types() -> frozenset:
    import torch

    return frozenset({torch.Tensor, torch.nn.Parameter, getattr(torch.nn, "Buffer", torch.Tensor)})


def _routable(*tensors) -> bool:
    """Whether a product of these tensors goes to sgemm_cube (traceable by Dynamo)."""
    import torch

    if torch.compiler.is_compiling():
        # Dynamo and AOTAutograd handle subclasses and functorch levels themselves
        # (and cannot trace the checks below); the operator's fake kernel does the rest.
        plain = all(isinstance(t, torch.Tensor) for t in tensors)
    else:
        # Exact types: a subclass's properties would call its __torch_function__,
        # and inside that handler (torch function disabled) it would look plain.
        plain = (not getattr(_local, "depth", 0)  # inside sgemm_cube's own kernels
                 and all(type(t) in _exact_types for t in tensors)
                 and not any(torch._C._functorch.is_functorch_wrapped_tensor(t) for t in tensors))
    first = tensors[0]
    return plain and all(t.dtype == torch.float32 and t.layout == torch.strided and not t.is_nested
                         and t.device == first.device for t in tensors) and first.device.type in _devices


def _product(a, b):
    from .torch_ops import matmul

    return matmul(a, b, **_options)


def _no_extras(args, kwargs) -> bool:
    """No argument beyond the two operands (``out=``, ``out_dtype=``, ... go to the original)."""
    return not args and all(v is None for v in kwargs.values())


def _make_matmul(original):
    def matmul(input, other, *args, **kwargs):
        if _no_extras(args, kwargs) and _routable(input, other) and input.dim() >= 1 and other.dim() >= 1:
            return _product(input, other)
        return original(input, other, *args, **kwargs)
    return matmul


def _make_rmatmul(original):
    def __rmatmul__(self, other):
        import torch

        if isinstance(other, torch.Tensor) and _routable(other, self) and self.dim() >= 1 and other.dim() >= 1:
            return _product(other, self)
        return original(self, other)
    return __rmatmul__


def _make_mm(original, ndim):
    def mm(input, mat2, *args, **kwargs):
        if (_no_extras(args, kwargs) and _routable(input, mat2) and input.dim() == ndim and mat2.dim() == ndim
                and input.shape[-1] == mat2.shape[-2] and input.shape[:-2] == mat2.shape[:-2]):
            return _product(input, mat2)
        return original(input, mat2, *args, **kwargs)  # also for torch's own shape errors
    return mm


def _make_linear(original):
    def linear(input, weight, bias=None):
        if (_routable(input, weight) and weight.dim() == 2 and input.dim() >= 1
                and input.shape[-1] == weight.shape[1]
                and (bias is None or (_routable(input, bias) and bias.shape == weight.shape[:1]))):
            out = _product(input, weight.t())
            return out if bias is None else out + bias
        return original(input, weight, bias)
    return linear


def _targets():
    """(owner, attribute name, wrapper factory) of every routed entry point."""
    import torch
    import torch.nn.functional as F

    matmul, mm, bmm = _make_matmul, (lambda f: _make_mm(f, 2)), (lambda f: _make_mm(f, 3))
    return [(torch, "matmul", matmul), (torch, "mm", mm), (torch, "bmm", bmm), (F, "linear", _make_linear),
            (torch.Tensor, "matmul", matmul), (torch.Tensor, "mm", mm), (torch.Tensor, "bmm", bmm),
            (torch.Tensor, "__matmul__", matmul), (torch.Tensor, "__rmatmul__", _make_rmatmul)]


_fastpath_saved: list = []  # the MHA fast-path flag enable() found


def _set_mha_fastpath(value):
    """Set PyTorch's fused transformer fast path; returns the previous value (None where torch has no switch)."""
    import torch

    mha = getattr(torch.backends, "mha", None)
    if mha is None or not hasattr(mha, "get_fastpath_enabled"):
        return None
    previous = mha.get_fastpath_enabled()
    mha.set_fastpath_enabled(value)
    return previous


def _patch() -> None:
    # nn.TransformerEncoderLayer / nn.MultiheadAttention in eval mode take a fused C++ path
    # (torch._transformer_encoder_layer_fwd) that never calls F.linear: turn it off while the
    # switch is on, so that their products reach sgemm_cube (measured on an H100: a 6-layer
    # encoder's eval forward 18.9 ms fused native, 12.0 ms unfused under the switch).
    _fastpath_saved.append(_set_mha_fastpath(False))
    _refresh_dynamo_tables(rebuild=True)
    for owner, name, factory in _targets():
        owned = name in vars(owner)  # False: inherited (torch.Tensor from torch._C.TensorBase)
        original = getattr(owner, name)
        wrapper = factory(original)
        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__qualname__ = getattr(original, "__qualname__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        wrapper.__wrapped__ = original
        wrapper._sgemm_cube_wrapper = True
        setattr(owner, name, wrapper)
        _saved.append((owner, name, original, owned, wrapper))


def _unpatch() -> None:
    while _saved:
        owner, name, original, owned, wrapper = _saved.pop()
        if vars(owner).get(name) is not wrapper:
            warnings.warn(f"{getattr(owner, '__name__', owner)}.{name} was replaced by someone else while "
                          f"sgemm_cube's switch was on; leaving the replacement in place", RuntimeWarning,
                          stacklevel=3)
            continue
        if owned:
            setattr(owner, name, original)
        else:
            delattr(owner, name)  # lookup falls back to the base class: the very same object
    while _fastpath_saved:
        previous = _fastpath_saved.pop()
        if previous is not None:
            _set_mha_fastpath(previous)
    _refresh_dynamo_tables(rebuild=False)


def _refresh_dynamo_tables(*, rebuild: bool) -> None:
    """Keep Dynamo's cached tables of torch functions built from the originals.

    Dynamo reads ``torch.matmul`` and the ``torch.Tensor`` methods by name
    into cached tables the first time it traces.  Built while the switch is
    on, they would list the wrappers instead of the originals, and code
    compiled after the switch is off would graph-break on the originals.
    So: build them before patching (if Dynamo is loaded), and drop them
    after restoring (if they were built while on, they are rebuilt from
    the originals when next needed).  Either way Dynamo traces correctly
    while the switch is on: it inlines the wrappers, or puts them in the
    graph for AOTAutograd to trace through.
    """
    import sys

    rules = sys.modules.get("torch._dynamo.trace_rules")
    for name in ("get_torch_obj_rule_map", "get_tensor_method"):
        table = getattr(rules, name, None)
        if table is None or not hasattr(table, "cache_clear"):
            continue  # Dynamo not loaded yet, or a torch version without this table
        if rebuild:
            table()
        else:
            table.cache_clear()


def _enable_from_environment() -> None:
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return
    if value not in ("1", "true", "yes", "on"):
        warnings.warn(f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not understood (use 1 or 0); "
                      f"sgemm_cube's switch stays off", RuntimeWarning, stacklevel=2)
        return
    try:
        enable()
    except ImportError as exc:
        warnings.warn(f"{ENV_VAR} is set but sgemm_cube's switch needs torch: {exc}", RuntimeWarning,
                      stacklevel=2)


_enable_from_environment()
