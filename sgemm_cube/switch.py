"""The drop-in switch: PyTorch's FP32 matrix products computed by sgemm_cube, at the dispatcher.

While the switch is on, sgemm_cube replaces the device kernels of these
ATen operators (every overload: functional, ``out=`` and in-place,
:data:`OPERATORS`)::

    mm  bmm  addmm  baddbmm  addbmm  addmv  dot  vdot  _addmm_activation

for float32 tensors on the devices it routes (CUDA and the Ascend NPU where
their backends are available; the CPU when asked with ``devices=("cpu",)``).
It registers the replacements with :class:`torch.library.Library` under the
device's dispatch key, so everything that reaches these operators runs
sgemm_cube, however it was called or bound: ``torch.matmul``, ``@``,
``F.linear``, autograd's gradients, and ``torch.compile``d graphs (except
products with a vector under Inductor, which decomposes them).  What
reaches it and what does not, and its semantics (``beta * input + alpha *
(A @ B)`` as PyTorch computes it, :data:`PRODUCT_AT_ZERO_ALPHA`): the
reference is ``docs/pytorch.md``.  Each product keeps
:func:`sgemm_cube.matmul`'s guarantee (its docstring states the contract);
shapes where ``matmul`` would run native FP32 run PyTorch's own kernel, and
a call the switch does not take as it is goes to PyTorch's kernel, so the
errors and warnings are PyTorch's.

:func:`enable` and :func:`disable` are settings, as ``torch.backends``
flags are: ``enable`` twice then ``disable`` once leaves the switch off,
``disable`` while off does nothing, and ``enable`` with other options
replaces them.  Nesting is the :func:`enabled` context manager's: its blocks
count (across threads) and the switch goes off when the last one exits,
unless :func:`enable` turned it on.  The switch is process-wide (every
thread, autograd's too) with one set of options; a call asking for others
while a block holds it on raises a ValueError naming the options that
differ.  They take a lock and only flip what the kernels route: threads may
turn the switch on and off while others compute.  The first :func:`enable`
for a device registers sgemm_cube's kernels for it, and they stay: while
the switch is off they pass every call to the kernel they replaced.
Unregistering kernels while other threads run them crashes PyTorch's
dispatcher, so only :func:`restore`, called with the switch off and no
other thread computing, gives PyTorch its kernels back.  :func:`bypass`
sends one thread's calls to the original kernels.

On the CPU and CUDA a C++ kernel stands in front of each Python kernel
(:mod:`sgemm_cube.switch_kernels`, built on the first enable where a C++
compiler is present): it passes calls to PyTorch's kernel while the switch
is off, and sends a call whose shapes the plan ran native before to PyTorch's
kernel (TF32 off) without entering Python; every other call reaches the
Python kernel.  :func:`kernels` says which kernels are registered, and why.
``SGEMM_CUBE_ENABLE=1``
in the environment turns the switch on when this module is imported.  This
module imports torch only when the switch is turned on; it needs
torch >= 2.9 (``torch.library.get_kernel``).
"""
from __future__ import annotations

import collections
import contextlib
import math
import os
import threading
import warnings

from .backends.native import true_fp32
from .plan import Order, SbOption, Scale, Scheme

__all__ = ["enable", "disable", "enabled", "is_enabled", "bypass", "restore", "routed_devices", "routed_calls",
           "kernels", "ENV_VAR", "OPERATORS", "PRODUCT_AT_ZERO_ALPHA"]

#: Environment variable read at import: ``1`` / ``true`` / ``yes`` / ``on`` turns the switch on.
ENV_VAR = "SGEMM_CUBE_ENABLE"

#: The ATen operators (``name.overload``) whose device kernels the switch replaces.
OPERATORS = (
    "mm", "mm.out", "bmm", "bmm.out",
    "addmm", "addmm.out", "addmm_", "baddbmm", "baddbmm.out", "baddbmm_", "addbmm", "addbmm.out", "addbmm_",
    "addmv", "addmv.out", "addmv_", "dot", "dot.out", "vdot", "vdot.out",
    "_addmm_activation", "_addmm_activation.out",
)

#: torch device type -> the dispatch key of its kernels.
_DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA", "npu": "PrivateUse1"}

#: The GELU of ``_addmm_activation(use_gelu=True)`` per device, as PyTorch's kernels compute it.
_GELU_APPROXIMATION = {"cpu": "none", "cuda": "tanh", "npu": "tanh"}

#: Per device, the operators (every overload) whose PyTorch kernel computes the product when
#: ``alpha == 0`` and multiplies it by 0, so that NaN and infinities in the operands give NaN, mapped to
#: the size ``m * n * k`` (of each matrix of a batch) below which it does so; from there up the kernel
#: skips the product.  Measured with torch 2.13 on the CPU: baddbmm's naive kernel, which runs below
#: 400 multiply-adds, computes it; from 400 up it calls BLAS, which skips it (as do addmm, addmv and
#: addbmm at every size).  Checked against PyTorch on every run, on both sides of 400, by
#: ``tests/sgemm_cube/test_torch_switch.py``.  CUDA: torch 2.11 on an H200 (2048^3,
#: ``tests/gpu/test_switch_cuda.py``: no CUDA kernel computes it).  The NPU's is not measured (no NPU
#: here): taken as CUDA's.
PRODUCT_AT_ZERO_ALPHA = {"cpu": {"baddbmm": 400}, "cuda": {}, "npu": {}}

_lock = threading.RLock()
_global: dict | None = None     # enable()'s options while it holds the switch on (None: disable()d)
_blocks = 0                     # enabled() blocks open, in every thread
_options: dict | None = None    # the options in force while on: {"request": Request, "devices": frozenset}
_request = None                 # the validated options of every product (sgemm_cube.plan.Request)
_devices: frozenset = frozenset()
_library = None                 # the torch.library.Library holding the replacements (kept once registered)
_registered: set = set()        # device types whose kernels _library holds
_originals: dict = {}           # (operator, device type) -> the kernel it replaced
_local = threading.local()      # .depth > 0: this thread's calls go to the originals (see bypass)
_calls = collections.Counter()  # operator -> calls sgemm_cube computed since the switch was turned on
_native_plans: dict = {}        # (device, batch, m, n, k) -> whether the plan runs native FP32 (see _native)
_cpp = None                     # the C++ kernels' library (sgemm_cube.switch_kernels), once loaded
_cpp_devices: dict = {}         # device type -> its c10::DeviceType, for the devices whose C++ kernels are registered
_cpp_reason = ""                # why the Python kernels stand alone (registration failed), if they do


def is_enabled() -> bool:
    """Whether the switch is on (:func:`enable` was called and not :func:`disable`, or an :func:`enabled` block is open)."""
    return _global is not None or _blocks > 0


def routed_calls() -> dict:
    """How many calls of each operator (``"mm"``, ``"addmm.out"``, ...) sgemm_cube computed since the switch went on.

    A diagnostic.  Calls whose shapes :func:`sgemm_cube.matmul`'s plan runs
    in native FP32 (``K < 16``; on CUDA the measured hybrid rule: see
    :func:`sgemm_cube.explain`) go to PyTorch's own kernel, in true FP32
    (TF32 off for the call), and are not counted.
    """
    return dict(_calls)


def routed_devices() -> frozenset:
    """The device types (``"cpu"``, ``"cuda"``, ``"npu"``) whose products the switch sends to sgemm_cube now."""
    return _devices


def kernels():
    """Which kernels the switch registers for the CPU and CUDA: ``KernelsStatus(language, detail)``.

    ``language`` is ``"c++"`` (``detail``: the library's path) or
    ``"python"`` (``detail``: why: no C++ compiler, a failed build,
    ``SGEMM_CUBE_SWITCH_KERNELS=python``).  Both give the same results; the
    C++ kernels take a few microseconds less per call where the plan runs
    PyTorch's kernel (:mod:`sgemm_cube.switch_kernels`).  Before the first
    :func:`enable` it says what that call will register, building the C++
    kernels if they were not built yet.

    Examples
    --------
    >>> import sgemm_cube.switch
    >>> sgemm_cube.switch.kernels().language in ("c++", "python")
    True
    """
    from .switch_kernels import KernelsStatus, status

    with _lock:
        if _cpp_devices:
            return KernelsStatus("c++", _cpp._name)
        if _cpp_reason:
            return KernelsStatus("python", _cpp_reason)
        return status()


def enable(*, sb: SbOption = 12, scheme: Scheme = "auto", scale: Scale = "auto", order: Order = "termwise",
           fixup: bool = True, devices=None) -> None:
    """Turn the switch on, process-wide, with these options (a setting, like ``torch.backends`` flags).

    Calling it again with the same options changes nothing; with other
    options it replaces them (the last call wins), except while an
    :func:`enabled` block is open, whose options stay in force.  One
    :func:`disable` turns the switch off however many calls came before;
    nesting is the :func:`enabled` context manager's.

    Parameters
    ----------
    sb, scheme, scale, order, fixup
        Options of every routed product, as in :func:`sgemm_cube.matmul` (same
        names, defaults and validation).
    devices : iterable of {"cuda", "npu", "cpu"}, optional
        The device types whose products are routed.  Default: the
        accelerators whose sgemm_cube backend can run here (CUDA, Ascend
        NPU).  The CPU backend is an arithmetic model, much slower than
        native, for studies and tests: it is routed only when listed.

    Raises
    ------
    ImportError
        torch is not installed (``pip install 'sgemm_cube[torch]'``), or older than 2.9.
    ValueError
        An option or device is unknown, or an :func:`enabled` block with
        other options is open (the message names the options that differ).
    sgemm_cube.BackendUnavailableError
        A listed device's backend cannot run here.

    Examples
    --------
    >>> import sgemm_cube
    >>> sgemm_cube.enable(devices=("cpu",))
    >>> sgemm_cube.enable(devices=("cpu",), sb=10)   # replaces sb=12
    >>> sgemm_cube.disable()                         # off
    """
    global _global
    options = _options_of(sb, scheme, scale, order, fixup, devices)
    with _lock:
        if _blocks and options != _options:
            raise ValueError(f"sgemm_cube.enable({_call_text(options)}) conflicts with the open "
                             f"sgemm_cube.enabled() block: {_difference(_options, options)}; the switch is "
                             f"process-wide with one set of options: pass the block's, or call enable() after "
                             f"the block exits")
        _turn_on(options, stacklevel=2)
        _global = options


def disable() -> None:
    """Turn the switch off: every call goes to PyTorch's own kernels again.

    Idempotent: it does nothing while the switch is off, and one call undoes
    any number of :func:`enable` calls.  Inside an open :func:`enabled` block
    the switch stays on until the last block exits.  sgemm_cube's kernels
    stay registered and pass the calls on (so that other threads may compute
    meanwhile); :func:`restore` removes them.
    """
    global _global
    with _lock:
        _global = None
        if not _blocks:
            _turn_off()


def restore() -> None:
    """Remove sgemm_cube's kernels from PyTorch's dispatcher: PyTorch's own are called directly again.

    While the switch is off, sgemm_cube's kernels only pass calls on to
    PyTorch's (a few microseconds of Python each); this takes even that
    away.  Call it with the switch off and **no other thread running
    PyTorch operators**: the dispatcher does not support removing kernels
    while they run.  A later :func:`enable` registers them again.

    Raises
    ------
    RuntimeError
        The switch is on.
    """
    global _library
    with _lock:
        if is_enabled():
            raise RuntimeError("sgemm_cube.switch.restore() called while the switch is on; disable() it first")
        if _library is not None:
            if _cpp_devices:
                _cpp.sgemm_cube_switch_unregister()  # the C++ kernels first: they call the Python ones
                _cpp_devices.clear()
            _library._destroy()  # the dispatcher reinstates the kernels registered before ours
            _library = None
            _registered.clear()
            _originals.clear()


@contextlib.contextmanager
def enabled(*, sb: SbOption = 12, scheme: Scheme = "auto", scale: Scale = "auto", order: Order = "termwise",
            fixup: bool = True, devices=None):
    """Context manager: the switch is on inside the ``with`` block.

    Takes :func:`enable`'s options.  Blocks nest, also across threads: the
    switch goes off when the last one exits, unless :func:`enable` turned it
    on (then it stays on).  The switch is process-wide with one set of
    options, so a block opened while it is on must ask for the options in
    force.

    Raises
    ------
    ValueError
        As :func:`enable`, or the switch is on with other options (the
        message names the options that differ).

    Examples
    --------
    >>> import torch, sgemm_cube
    >>> model = torch.nn.Linear(16, 4)
    >>> with sgemm_cube.enabled(devices=("cpu",)):
    ...     y = model(torch.randn(8, 16))   # FP32 product from FP16 ones (the CPU model)
    """
    global _blocks
    options = _options_of(sb, scheme, scale, order, fixup, devices)
    with _lock:
        if is_enabled() and options != _options:
            where = "an open sgemm_cube.enabled() block" if _blocks else "sgemm_cube.enable()"
            raise ValueError(f"sgemm_cube.enabled({_call_text(options)}) conflicts with the switch turned on by "
                             f"{where}: {_difference(_options, options)}; the switch is process-wide with one "
                             f"set of options: pass the same ones, or call sgemm_cube.disable() first")
        _turn_on(options, stacklevel=3)  # the with statement (through contextlib)
        _blocks += 1
    try:
        yield
    finally:
        with _lock:
            _blocks -= 1
            if not _blocks and _global is None:
                _turn_off()


def _options_of(sb, scheme, scale, order, fixup, devices) -> dict:
    """The switch's options, validated: ``{"request": Request, "devices": frozenset}``."""
    from .plan import make_request

    try:
        import torch
    except ImportError as exc:
        raise ImportError(f"sgemm_cube's switch needs torch ({exc}): pip install 'sgemm_cube[torch]' "
                          f"(or 'sgemm_cube[cuda]' for CUDA GPUs)") from exc
    if not hasattr(torch.library, "get_kernel"):
        raise ImportError(f"sgemm_cube's switch needs torch >= 2.9 (torch.library.get_kernel); "
                          f"this is torch {torch.__version__}")
    return dict(request=make_request(sb, scheme, scale, order, fixup=fixup), devices=_choose_devices(devices))


#: The switch's options as the user names them, in enable()'s order.
_OPTION_NAMES = ("sb", "scheme", "scale", "order", "fixup")


def _user_terms(options) -> dict:
    req = options["request"]
    terms = {name: getattr(req, name) for name in _OPTION_NAMES}
    terms["devices"] = tuple(sorted(options["devices"]))
    return terms


def _call_text(options) -> str:
    """The options as keyword arguments: ``sb=12, scheme='fp16x3', ..., devices=('cpu',)``."""
    return ", ".join(f"{k}={v!r}" for k, v in _user_terms(options).items())


def _difference(current, asked) -> str:
    """``the switch has sb=12, this call asks for sb=10`` for the options that differ."""
    have, want = _user_terms(current), _user_terms(asked)
    names = [k for k in have if have[k] != want[k]]
    return (f"the switch has {', '.join(f'{k}={have[k]!r}' for k in names)}, this call asks for "
            f"{', '.join(f'{k}={want[k]!r}' for k in names)}")


def _turn_on(options, stacklevel: int) -> None:
    """Route ``options["devices"]`` with ``options["request"]`` (under ``_lock``; nothing to do if already so)."""
    global _options, _request, _devices
    if is_enabled() and options == _options:
        return
    chosen = options["devices"]
    if not chosen:
        warnings.warn("sgemm_cube's switch routes no device: no CUDA or NPU backend can run here "
                      "(see sgemm_cube.available_backends()); pass devices=('cpu',) to route CPU "
                      "tensors to the CPU model", UserWarning, stacklevel=stacklevel + 1)
    _register(chosen)
    if not is_enabled():
        _calls.clear()
    _options, _request = options, options["request"]
    _forget_plans()
    _devices = chosen  # last: from here on the kernels route these devices' calls
    _route_cpp()


def _turn_off() -> None:
    global _devices, _options
    _devices = frozenset()
    _route_cpp()
    _options = None


def _forget_plans() -> None:
    _native_plans.clear()
    if _cpp_devices:
        _cpp.sgemm_cube_switch_forget_plans()


def _route_cpp() -> None:
    """Tell the C++ kernels which devices the switch routes now (under ``_lock``)."""
    for device, device_type in _cpp_devices.items():
        _cpp.sgemm_cube_switch_route(device_type, int(device in _devices))


def _enter_own():
    """This thread's calls go to PyTorch's kernels until ``_exit_own(<what this returned>)`` (sgemm_cube's
    own calls, :func:`bypass`)."""
    _local.depth = getattr(_local, "depth", 0) + 1
    cpp = _cpp
    if cpp is not None:
        cpp.sgemm_cube_switch_enter_own()
    return cpp


def _exit_own(cpp) -> None:
    _local.depth -= 1
    if cpp is not None:
        cpp.sgemm_cube_switch_exit_own()


@contextlib.contextmanager
def bypass():
    """Send this thread's products to PyTorch's own kernels inside the block.

    sgemm_cube's backends run under it (its native path calls
    ``torch.matmul`` itself); other threads are unaffected.
    """
    cpp = _enter_own()
    try:
        yield
    finally:
        _exit_own(cpp)


# ---- registration ---------------------------------------------------------------------------

def _choose_devices(devices) -> frozenset:
    from .backends import available_backends, get_backend

    if devices is None:
        status = available_backends()
        return frozenset(dev for dev in ("cuda", "npu") if status.get(dev) == "available" and _present(dev))
    chosen = frozenset([devices] if isinstance(devices, str) else devices)
    unknown = chosen - set(_DISPATCH_KEYS)
    if unknown:
        raise ValueError(f"unknown device types {sorted(unknown)}; choose among {sorted(_DISPATCH_KEYS)}")
    for dev in sorted(chosen):
        get_backend(dev)  # BackendUnavailableError naming what is missing
        if not _present(dev):
            from .backends import BackendUnavailableError

            raise BackendUnavailableError(f"sgemm_cube's switch cannot route {dev!r}: this process has no "
                                          f"{dev.upper()} device")
    return chosen


def _present(device: str) -> bool:
    """Whether this process has a device of this type (the CUDA backend also runs under Triton's interpreter)."""
    import torch

    if device == "cpu":
        return True
    module = getattr(torch, device, None)
    return bool(module is not None and module.is_available())


def _register(devices) -> None:
    """Register sgemm_cube's kernels for the devices that do not have them yet (they stay: module docstring):
    the Python kernels, and on the CPU and CUDA the C++ kernels in front of them where they build."""
    global _library, _FLOAT32
    import torch

    _FLOAT32 = torch.float32
    new = sorted(set(devices) - _registered)
    if not new:
        return
    if _library is None:
        _library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # "Overriding a previously registered kernel": that is the point.
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        for dev in new:
            key = _DISPATCH_KEYS[dev]
            device_type = _cpp_device_type(dev)  # None: the Python kernels alone
            for name in OPERATORS:
                original = torch.library.get_kernel(f"aten::{name}", key)
                _originals[name, dev] = original
                if device_type is not None and not _cpp_call("keep_original", name.encode(), device_type):
                    device_type = None
                _library.impl(name, _IMPLEMENTATIONS[name](original, dev, name), key, with_keyset=True)
                if device_type is not None and not _cpp_call("register", name.encode(), device_type):
                    device_type = None
            if device_type is not None:
                _cpp_devices[dev] = device_type
            _registered.add(dev)


def _cpp_device_type(device: str):
    """The c10::DeviceType of ``device`` where its C++ kernels are to be registered (loading them into
    ``_cpp``), or None: not built here, not asked for, a device type they do not serve, or an earlier
    registration failed (``_cpp_reason``)."""
    global _cpp
    from . import switch_kernels

    if device not in switch_kernels.DEVICES or _cpp_reason or not switch_kernels.requested():
        return None
    _cpp = switch_kernels.load()
    return None if _cpp is None else _cpp.sgemm_cube_switch_device_type(device.encode())


def _cpp_call(function: str, *args) -> bool:
    """``sgemm_cube_switch_<function>(*args)``; on failure, remove every C++ kernel (the Python kernels
    stay), warn, and return False so that the registration goes on with Python kernels alone."""
    global _cpp_reason
    if getattr(_cpp, f"sgemm_cube_switch_{function}")(*args) == 0:
        return True
    _cpp_reason = (f"registering the C++ kernels failed ({function}{args}): "
                   f"{_cpp.sgemm_cube_switch_last_error().decode(errors='replace')}")
    _cpp.sgemm_cube_switch_unregister()
    _cpp_devices.clear()
    warnings.warn(f"sgemm_cube's switch runs its Python kernels: {_cpp_reason}", RuntimeWarning, stacklevel=4)
    return False


# ---- the kernels ------------------------------------------------------------------------------
#
# Each factory takes the kernel it replaces (a torch._C._SafeKernelFunction) and returns the
# replacement, called by the dispatcher with the dispatch key set first.  A call sgemm_cube does
# not take (another dtype, shapes or devices that do not match: PyTorch raises) goes to the
# original with the same arguments.

# Every call of a routed operator runs the checks below, so they are written for speed (explicit loops,
# no generators): on small products their microseconds are the switch's whole cost.

def _float32(*tensors) -> bool:
    """Whether the tensors are float32 on one device, outside sgemm_cube's own calls and :func:`bypass`."""
    if getattr(_local, "depth", 0):
        return False  # inside sgemm_cube (its native path) or bypass()
    device = tensors[0].device
    for t in tensors:
        if t.dtype != _FLOAT32 or t.device != device:
            return False
    return True


_FLOAT32 = None  # torch.float32: set by _register (this module imports torch only when the switch is turned on)


def _nonempty(*tensors) -> bool:
    """Whether the operands hold elements.  An empty operand leaves no product to compute, and PyTorch's
    kernels give such calls shapes of their own (``addmv`` of a (0, K) matrix keeps ``input``'s shape):
    those calls go to PyTorch."""
    for t in tensors:
        if not t.numel():
            return False
    return True


def _product(a, b, alpha=1.0):
    """``alpha * (a @ b)`` by sgemm_cube, rounded once (:func:`sgemm_cube.product.compute`; its own torch
    calls reach the originals)."""
    from .product import compute

    cpp = _enter_own()
    try:
        return compute(_request, a, b, alpha=float(alpha))
    finally:
        _exit_own(cpp)


def _broadcasts(input, shape) -> bool:
    """Whether ``input`` broadcasts to ``shape`` (PyTorch's ``expand_size`` rule)."""
    have = input.shape
    if len(have) > len(shape):
        return False
    for s, t in zip(reversed(have), reversed(shape)):
        if s != 1 and s != t:
            return False
    return True


def _update(input, a, b, beta, alpha, shape, name, product=_product):
    """``beta * input + alpha * (a @ b)`` of ``shape``, with PyTorch's conventions for special scalars.

    ``alpha`` multiplies the product before its one rounding; ``alpha == 0``
    computes the product only where :data:`PRODUCT_AT_ZERO_ALPHA` says
    PyTorch's kernel does; ``beta == 0`` does not read ``input``.  A NaN or
    infinite ``alpha`` gives IEEE's ``beta * input + alpha * p`` (NaN where
    an infinity meets the other sign or a NaN); for ``addbmm`` it scales each
    batch's product before the sum, as PyTorch's kernel does.
    """
    import torch

    device = a.device.type
    finite = math.isfinite(alpha)
    if alpha != 0 or _product_at_zero_alpha(name, device, a, shape):
        if finite or product is not _summed_product:
            res = product(a, b, alpha)
        else:  # addbmm: sum of alpha * (each batch's product), so inf - inf = NaN as in PyTorch
            res = _product(a, b, alpha).sum(0)
    else:
        res = torch.zeros(shape, dtype=torch.float32, device=a.device)  # the product is not computed
    if beta != 0:
        res.add_(input, alpha=beta)  # input broadcast; not read at all when beta == 0
        if device == "cpu" and alpha != 0 and finite:
            res = _infinite_input_wins(res, input, beta, a, b, product is _summed_product)
    return res


def _product_at_zero_alpha(name, device, a, shape) -> bool:
    """Whether PyTorch's kernel of ``name`` computes the product at ``alpha == 0`` for this size."""
    below = PRODUCT_AT_ZERO_ALPHA.get(device, {}).get(name.partition(".")[0].rstrip("_"))
    return below is not None and math.prod(shape[-2:]) * a.shape[-1] < below  # m * n (m for addmv) * k


def _infinite_input_wins(res, input, beta, a, b, summed: bool):
    """Where ``beta * input`` is infinite and the product's operands are finite, the result is
    ``beta * input`` (the exact product is finite, however large), as PyTorch's CPU addmm and addbmm
    give it (its baddbmm and addmv give NaN); an overflowed product would otherwise meet the infinity
    of the other sign as NaN.  CPU only: whether ``input`` holds an infinity is a host read."""
    import torch

    infinite = torch.isinf(input)
    if not bool(infinite.any()):
        return res
    rows = torch.isfinite(a).all(-1)                      # (..., M), or (M,) for addmv's matrix
    cols = torch.isfinite(b).all(-2) if b.dim() > 1 else torch.isfinite(b).all()
    if summed:                                            # addbmm: a line is finite in every batch
        rows, cols = rows.all(0), cols.all(0)
    finite = rows[..., :, None] & cols[..., None, :] if b.dim() > 1 else rows & cols
    return torch.where(finite & infinite, input * beta, res)


def _summed_product(b1, b2, alpha=1.0):
    """``alpha * sum_i b1[i] @ b2[i]`` as one product over K' = batch * K (addbmm): one rounding of the sum."""
    batch, m, k = b1.shape
    n = b2.shape[-1]
    return _product(b1.permute(1, 0, 2).reshape(m, batch * k), b2.reshape(batch * k, n), alpha)


#: compute()'s answer for a product sgemm_cube's plan runs in native FP32: PyTorch's own kernel runs it.
_NATIVE = object()


def _native(like, batch: int, m: int, n: int, k: int) -> bool:
    """Whether :func:`sgemm_cube.matmul`'s plan runs this product in native FP32 (cached per device and shape
    until the next :func:`enable`; on an NPU the plan reads CANN's precision mode and HF32 setting then)."""
    key = (like.device, batch, m, n, k)
    native = _native_plans.get(key)
    if native is None:
        from .product import plan_for

        if len(_native_plans) > 4096:  # many shapes (dynamic sequence lengths): start over
            _forget_plans()
        native = _native_plans[key] = plan_for(_request, like, batch, m, n, k).backend == "native"
        device_type = _cpp_devices.get(like.device.type)
        if native and device_type is not None:  # the C++ kernel takes the next such calls itself
            index = like.device.index
            _cpp.sgemm_cube_switch_remember_native(device_type, -1 if index is None else index, batch, m, n, k)
    return native


def _run_native(original, keyset, args, kwargs):
    """PyTorch's kernel, in true FP32 (TF32 off, as sgemm_cube's native backend runs it)."""
    if args[0].device.type != "cuda":
        return original.call_boxed(keyset, *args, **kwargs)
    with true_fp32():
        return original.call_boxed(keyset, *args, **kwargs)


def _functional(original, compute, device, name, *, inplace=False, out_variant=False, resize_warns=True):
    """Wrap ``compute(args) -> result, None (not ours) or _NATIVE`` as a functional, in-place or out= kernel
    that passes every call to ``original`` while the switch does not route ``device``."""
    from .product import resize_output

    def kernel(keyset, *args, **kwargs):
        if device not in _devices:  # the switch is off (or routes other devices): PyTorch's kernel
            return original.call_boxed(keyset, *args, **kwargs)
        result = compute(*args, **kwargs)
        if result is None:
            return original.call_boxed(keyset, *args, **kwargs)
        if result is _NATIVE:
            return _run_native(original, keyset, args, kwargs)
        _calls[name] += 1
        if inplace:
            args[0].copy_(result)
            return args[0]
        if out_variant:
            out = kwargs["out"]
            resize_output(out, result.shape, resize_warns)
            out.copy_(result)
            return out
        return result
    return kernel


def _mm(original, device, name, *, batched=False, out_variant=False):
    ndim = 3 if batched else 2

    def compute(self, mat2, out=None):
        if not (_float32(self, mat2) if out is None else _float32(self, mat2, out)):
            return None
        shape_a, shape_b = self.shape, mat2.shape  # each .shape makes a new torch.Size: once
        if (len(shape_a) != ndim or len(shape_b) != ndim or shape_a[-1] != shape_b[-2]
                or (batched and shape_a[0] != shape_b[0]) or not _nonempty(self, mat2)):
            return None
        if _native(self, shape_a[0] if batched else 1, shape_a[-2], shape_b[-1], shape_a[-1]):
            return _NATIVE
        return _product(self, mat2)
    return _functional(original, compute, device, name, out_variant=out_variant)


def _addmm(original, device, name, *, inplace=False, out_variant=False, activation=False):
    gelu = _GELU_APPROXIMATION[device]

    def compute(self, mat1, mat2, *, beta=1, alpha=1, use_gelu=False, out=None):
        import torch

        if not (_float32(self, mat1, mat2) if out is None else _float32(self, mat1, mat2, out)):
            return None
        shape_1, shape_2 = mat1.shape, mat2.shape
        if len(shape_1) != 2 or len(shape_2) != 2 or shape_1[1] != shape_2[0] or not _nonempty(mat1, mat2):
            return None
        shape = (shape_1[0], shape_2[1])
        if not (tuple(self.shape) == shape if inplace else _broadcasts(self, shape)):
            return None
        if _native(mat1, 1, shape[0], shape[1], shape_1[1]):
            return _NATIVE
        res = _update(self, mat1, mat2, beta, alpha, shape, name)
        if activation:
            res = torch.nn.functional.gelu(res, approximate=gelu) if use_gelu else res.relu_()
        return res
    return _functional(original, compute, device, name, inplace=inplace, out_variant=out_variant)


def _batched(original, device, name, *, summed=False, inplace=False, out_variant=False):
    """``baddbmm`` (a batch of products) or, ``summed``, ``addbmm`` (their sum, as one product over batch * K)."""
    def compute(self, batch1, batch2, *, beta=1, alpha=1, out=None):
        if not (_float32(self, batch1, batch2, *(() if out is None else (out,))) and batch1.dim() == 3
                and batch2.dim() == 3 and batch1.shape[0] == batch2.shape[0] and batch1.shape[2] == batch2.shape[1]
                and _nonempty(batch1, batch2)):
            return None
        batch, m, k = batch1.shape
        shape = (m, batch2.shape[2]) if summed else (batch, m, batch2.shape[2])
        if not (tuple(self.shape) == shape if inplace else _broadcasts(self, shape)):
            return None
        if _native(batch1, 1, m, shape[-1], batch * k) if summed else _native(batch1, *shape, k):
            return _NATIVE
        return _update(self, batch1, batch2, beta, alpha, shape, name,
                       product=_summed_product if summed else _product)
    # addbmm's out= resizes silently (PyTorch's kernel resizes it directly, without resize_output's warning)
    return _functional(original, compute, device, name, inplace=inplace, out_variant=out_variant,
                       resize_warns=not summed)


def _addmv(original, device, name, *, inplace=False, out_variant=False):
    def compute(self, mat, vec, *, beta=1, alpha=1, out=None):
        if not (_float32(self, mat, vec, *(() if out is None else (out,))) and mat.dim() == 2 and vec.dim() == 1
                and mat.shape[1] == vec.shape[0] and _nonempty(mat, vec)):
            return None
        shape = (mat.shape[0],)
        if not (tuple(self.shape) == shape if inplace else _broadcasts(self, shape)):
            return None
        if _native(mat, 1, shape[0], 1, mat.shape[1]):
            return _NATIVE
        return _update(self, mat, vec, beta, alpha, shape, name)
    return _functional(original, compute, device, name, inplace=inplace, out_variant=out_variant)


def _dot(original, device, name, *, out_variant=False):
    def compute(self, tensor, out=None):
        if not (_float32(self, tensor, *(() if out is None else (out,))) and self.dim() == 1 and tensor.dim() == 1
                and self.shape == tensor.shape and _nonempty(self)):
            return None
        if _native(self, 1, 1, 1, self.shape[0]):
            return _NATIVE
        return _product(self, tensor)
    return _functional(original, compute, device, name, out_variant=out_variant)


def _variant(factory, **flags):
    return lambda original, device, name: factory(original, device, name, **flags)


#: operator -> factory of its replacement (one per entry of OPERATORS).
_IMPLEMENTATIONS = {
    "mm": _variant(_mm), "mm.out": _variant(_mm, out_variant=True),
    "bmm": _variant(_mm, batched=True), "bmm.out": _variant(_mm, batched=True, out_variant=True),
    "addmm": _variant(_addmm), "addmm.out": _variant(_addmm, out_variant=True),
    "addmm_": _variant(_addmm, inplace=True),
    "baddbmm": _variant(_batched), "baddbmm.out": _variant(_batched, out_variant=True),
    "baddbmm_": _variant(_batched, inplace=True),
    "addbmm": _variant(_batched, summed=True), "addbmm.out": _variant(_batched, summed=True, out_variant=True),
    "addbmm_": _variant(_batched, summed=True, inplace=True),
    "addmv": _variant(_addmv), "addmv.out": _variant(_addmv, out_variant=True),
    "addmv_": _variant(_addmv, inplace=True),
    "dot": _variant(_dot), "dot.out": _variant(_dot, out_variant=True),
    "vdot": _variant(_dot), "vdot.out": _variant(_dot, out_variant=True),  # real vdot is dot
    "_addmm_activation": _variant(_addmm, activation=True),
    "_addmm_activation.out": _variant(_addmm, activation=True, out_variant=True),
}
assert set(_IMPLEMENTATIONS) == set(OPERATORS)


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
