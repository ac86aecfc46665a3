"""The one path of a product: operands checked, the backend's plan, and its run.

:func:`compute` is :func:`sgemm_cube.matmul` after its options became a
validated :class:`~sgemm_cube.plan.Request`: the operands are checked and
broadcast to 3-D here (NumPy/torch conventions: 1-D operands, batch
broadcasting, any strides, empty dimensions, ``out=``), the backend of the
data's device makes the :class:`~sgemm_cube.plan.Plan` and runs it.
Everything that depends on the values (scaling, which rows and columns the
split cannot hold, NaN/Inf) is decided by the backend on the device, without
a round trip to the host.  A repeated call of the same shapes, strides and
options skips the checks and the plan it passed before: a native one runs
PyTorch's kernel (:func:`native_call`), an emulated CUDA one replays the
backend's launches (:func:`replay_emulated`).

Every caller that has a request comes here: :mod:`sgemm_cube.api` (public
functions), :mod:`sgemm_cube._autograd` (gradients), the switch
(:mod:`sgemm_cube.switch`) and the operator (:mod:`sgemm_cube.torch_ops`).
This module calls only the backends, never back up.
"""
from __future__ import annotations

import math
import sys
import warnings

import numpy as np

from .backends import get_backend
from .backends.base import native_plan
from .backends.native import cublas_tf32_flag
from .plan import Plan, Request

__all__ = ["Operands", "compute", "plan", "plan_for", "replay_emulated", "select_backend", "resize_output"]


#: Repeated small calls: (shapes, dtypes, layouts, devices, request) -> True for CUDA products of plain tensors
#: whose plan is PyTorch's own matmul of the operands as they are (compute's first return).  A hit
#: skips the checks and the plan, which the same shapes, device and options passed before; only the
#: hybrid rule's decision is remembered, so the answer is the one the full path gives.
_native_calls: dict = {}
_TENSOR = None  # torch.Tensor, once a CUDA call was recorded
_TORCH = None   # the torch module, from then on
_GET_TF32 = _SET_TF32 = None  # cuBLAS's TF32 flag (sgemm_cube.backends.native.cublas_tf32_flag), from then on
_FAST = None    # the C++ lookup (sgemm_cube.fast_path) once a CUDA call was planned native; False: not built
#: The C++ lookup's ``matmul(a, b, sb, scheme, scale, order, accumulate, backend, out, fixup)`` once it is
#: loaded, else None: :func:`sgemm_cube.matmul` asks it first, with its own arguments, and gets a result
#: or None (then it validates its options and comes to :func:`native_call`, which binds them for next time).
fast_matmul = None


#: Repeated CUDA calls whose plan emulates: (shapes, strides, dtypes, devices, alignment, request, the CUDA
#: backend's ``plan_state()``) -> (result shape, the backend's replay of the call's launches).  A hit skips the
#: checks, the plan and the launch cache's own key, which the same key passed before: about half of a call's
#: host time (H200, 2026-11-29: 1536^3, about 60 of 120 us), which a product up to about 2048^3 does not hide
#: behind its GPU time (docs/speed.md, "The Gluon K loop measured, the bench's small cubes, and the host time of
#: an emulated call").  A call with ``out=`` is remembered and replayed too, into ``out`` where the launches can
#: write it as a new result (:func:`_replay_target`): 121 against 150-254 us of host time at 8192 x 64 x 8192
#: (H200, 2026-11-29; docs/speed.md, "The fix-up launch under maxnreg, out= replayed, ...").
_emulated_calls: dict = {}
_EMULATED_TENSOR = None  # torch.Tensor, once an emulated call was remembered
_STRIDED = None  # torch.strided, from then on
_CUDA = None  # the CUDA backend, from then on


def _emulated_key(req: Request, a, b, plan_state) -> tuple:
    """:data:`_emulated_calls`' key of a call (``plan_state``: the CUDA backend's ``plan_state()``)."""
    return (a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.device, b.device, a.data_ptr() % 16,
            b.data_ptr() % 16, req, plan_state)


def replay_emulated(req: Request, a, b, out=None):
    """``a @ b`` if a call of these operands' shapes, strides, alignment, device and ``req`` was emulated on
    CUDA before (:data:`_emulated_calls`): the same launches on these operands, whose result is the bits the
    full path gives, in a new tensor or in ``out``.  None otherwise, or where the workspace does not fit in the
    GPU's memory now (the full path chunks the product then), or where ``out`` is not what the launches wrote
    before: a plain float32 tensor of the result's shape on the operands' device, contiguous, 16-byte aligned
    (the compiled launches assume it), sharing no memory with the operands (:func:`_replay_target`).  Callers
    pass no ``alpha``."""
    if (b.__class__ is not _EMULATED_TENSOR or a.layout is not _STRIDED or b.layout is not _STRIDED
            or a.is_nested or b.is_nested):  # the full path says what is wrong with such operands
        return None
    key = _emulated_key(req, a, b, _CUDA.plan_state())
    entry = _emulated_calls.get(key)
    if entry is None:
        return None
    result_shape, launches = entry
    if out is None:
        res = a.new_empty(result_shape)  # float32 (the key's dtype), contiguous: what the launches wrote before
    elif _replay_target(out, result_shape, a, b):
        res = out
    else:
        return None
    # The launches read only the tensors' addresses: a 2-D operand stands for its (1, M, K) view.
    if not launches(a, b, res):
        _emulated_calls.pop(key, None)  # (another thread may have dropped it too)
        return None
    return res


def _replay_target(out, result_shape: tuple, a, b) -> bool:
    """Whether remembered launches may write ``a @ b`` straight into ``out`` (:func:`replay_emulated`): the
    conditions under which the full path computes into ``out`` itself (:func:`_direct_view`), and the 16-byte
    alignment of a new result, which the launches were compiled for."""
    return (out.__class__ is _EMULATED_TENSOR and out.dtype is a.dtype and out.layout is _STRIDED
            and out.device == a.device and tuple(out.shape) == result_shape and out.is_contiguous()
            and out.data_ptr() % 16 == 0 and not _shares_storage(out, a, b))


def _remember_emulated(req: Request, chosen: Plan, prob: "Operands", a3, b3, res) -> None:
    """Remember a CUDA call that :func:`compute` just emulated into a new result, or into ``out`` itself
    (:func:`replay_emulated`): plain 2-D or 3-D tensors of one batch, whose launches the backend can replay,
    into a contiguous 16-byte aligned result (what a new one is)."""
    global _EMULATED_TENSOR, _CUDA, _STRIDED
    import torch

    a, b = prob.a, prob.b
    if a.__class__ is not torch.Tensor or b.__class__ is not torch.Tensor or not a.is_cuda:
        return
    if not res.is_contiguous() or res.data_ptr() % 16:
        return
    if not (a.dim() == b.dim() == 2 or (a.dim() == b.dim() == 3 and a.shape[0] == b.shape[0])):
        return
    cuda = get_backend("cuda")
    launches = cuda.replayable(chosen, a3, b3, res)
    if launches is None:
        return
    if len(_emulated_calls) > 4096:  # many shapes (dynamic sequence lengths): start over
        _emulated_calls.clear()
    _emulated_calls[_emulated_key(req, a, b, cuda.plan_state())] = (prob.result_shape, launches)
    _CUDA, _STRIDED, _EMULATED_TENSOR = cuda, torch.strided, torch.Tensor


def native_call(req: Request, a, b, out, options: tuple = ()):
    """``a @ b`` by PyTorch's kernel if this call's shapes, device and options were planned native before
    (:data:`_native_calls`), else None.  Operands that require grad take the full path while grad mode
    is on (their gradients are sgemm_cube's products).  Every line counts here: a small call's whole
    cost beyond PyTorch's is this function.  Where the C++ lookup is built (:mod:`sgemm_cube.fast_path`)
    it answers, and a hit binds ``options`` (``sgemm_cube.matmul``'s sb, scheme, scale, order,
    accumulate, backend and fixup, as passed) to ``req`` there, so that :data:`fast_matmul` answers
    the next such call before any Python; else the key is written out and the TF32 flag read through
    ``torch._C``."""
    if out is not None:
        return None
    if _FAST:
        result = _FAST.call(a, b, req)
        if options and result is not None:
            _FAST.bind(req, *options)
        return result
    if a.__class__ is not _TENSOR or b.__class__ is not _TENSOR:
        return None
    if ((a.requires_grad or b.requires_grad) and _TORCH.is_grad_enabled()) or not _native_calls.get(
            (a.shape, b.shape, a.dtype, b.dtype, a.layout, b.layout, a.get_device(), b.get_device(), req)):
        return None
    if not _GET_TF32():  # true FP32 SGEMM already (the native backend's matmul, inlined)
        return _TORCH.matmul(a, b)
    _SET_TF32(False)
    try:
        return _TORCH.matmul(a, b)
    finally:
        _SET_TF32(True)


def _call_key(req: Request, a, b) -> tuple:
    """:func:`native_call`'s key (written out there too, for speed)."""
    return a.shape, b.shape, a.dtype, b.dtype, a.layout, b.layout, a.get_device(), b.get_device(), req


def _remember_native(req: Request, a, b) -> None:
    global _TENSOR, _TORCH, _GET_TF32, _SET_TF32, _FAST, fast_matmul
    import torch

    if a.__class__ is torch.Tensor and b.__class__ is torch.Tensor and a.device.type == "cuda":
        if _FAST is None:  # the first CUDA call planned native: build or load the C++ lookup, once
            from . import fast_path

            _FAST = fast_path.load() or False
            fast_matmul = _FAST.matmul if _FAST else None
        if _FAST:
            _FAST.remember(a, b, req)
            return
        if len(_native_calls) > 4096:  # many shapes (dynamic sequence lengths): start over
            _native_calls.clear()
        _native_calls[_call_key(req, a, b)] = True
        _GET_TF32, _SET_TF32 = cublas_tf32_flag()
        _TENSOR, _TORCH = torch.Tensor, torch


def _is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _check_operand(x, name: str, torch_mode: bool):
    if torch_mode:
        import torch

        if x.is_nested:
            raise TypeError(f"sgemm_cube.matmul takes dense (strided) tensors; {name} is a nested tensor: "
                            f"multiply its components (for t in {name}.unbind()) or pad it with "
                            f"torch.nested.to_padded_tensor")
        if x.layout != torch.strided:
            raise TypeError(f"sgemm_cube.matmul takes dense (strided) tensors; {name} is {x.layout}: "
                            f"convert it with {name}.to_dense()")
        if x.dtype != torch.float32:
            raise TypeError(f"sgemm_cube.matmul takes float32 tensors; {name} is {x.dtype}: "
                            f"convert it with {name}.float() (sgemm_cube emulates FP32 products)")
        return x
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
        if x.dtype == np.float64 and x.size:  # a Python list of floats: say what to pass instead
            raise TypeError(f"sgemm_cube.matmul takes float32 arrays; {name} converts to float64: "
                            f"pass np.asarray({name}, dtype=np.float32)")
    if x.dtype != np.float32:
        raise TypeError(f"sgemm_cube.matmul takes float32 arrays; {name} is {x.dtype}: "
                        f"convert it with {name}.astype(np.float32) (sgemm_cube emulates FP32 products)")
    return x


def select_backend(a, backend: str = "auto") -> str:
    """Name the backend that handles ``a``'s device: NumPy arrays and torch CPU
    tensors -> ``"cpu"``, CUDA tensors -> ``"cuda"``, Ascend NPU tensors ->
    ``"npu"`` (its plan may still run ``"native"``: see :func:`explain`); ``backend="native"`` on
    an NPU tensor -> ``"npu"``, whose plan decides what native FP32 is on that chip.
    (Both operands are on ``a``'s device: :func:`compute` checked.)"""
    if _is_torch(a) and a.device.type == "meta":
        return "native"  # meta tensors hold no values: torch computes the result's shape (plan_for says so)
    if backend == "native" and _is_torch(a) and a.device.type == "npu":
        return "npu"  # what native FP32 is on an NPU depends on the chip and CANN's precision mode: npu.plan
    if backend != "auto":
        return backend
    if _is_torch(a):
        kind = a.device.type
        if kind in ("cuda", "npu"):
            return kind
        if kind != "cpu":
            raise ValueError(f"no sgemm_cube backend for tensors on {a.device}")
    return "cpu"


class Operands:
    """A call's operands, checked, with the product's sizes and (on demand) the operands broadcast to 3-D."""

    __slots__ = ("a", "b", "m", "n", "k", "batch", "nb", "result_shape", "torch_mode", "wrap")

    def __init__(self, a, b):
        torch_mode = _is_torch(a)
        if torch_mode != _is_torch(b):
            raise TypeError("sgemm_cube.matmul: a and b must both be NumPy arrays or both torch tensors")
        a = _check_operand(a, "a", torch_mode)
        b = _check_operand(b, "b", torch_mode)
        # Errors of the kind the operands' library raises: torch's RuntimeError, NumPy's ValueError.
        error = RuntimeError if torch_mode else ValueError
        if torch_mode and a.device != b.device:
            raise error(f"Expected all tensors to be on the same device, but got a on {a.device} and "
                        f"b on {b.device}: move them to one device")
        if a.ndim == 0 or b.ndim == 0:
            raise error("sgemm_cube.matmul: operands must have at least one dimension (use * for scalars)")
        shape_a, shape_b = tuple(a.shape), tuple(b.shape)
        m, k = shape_a[-2:] if len(shape_a) > 1 else (1, shape_a[0])
        k2, n = shape_b[-2:] if len(shape_b) > 1 else (shape_b[0], 1)
        if k != k2:
            raise error(f"sgemm_cube.matmul: shapes {shape_a} and {shape_b} cannot be multiplied: "
                        f"a has {k} columns, b has {k2} rows")
        if len(shape_a) <= 2 and len(shape_b) <= 2:  # the common case, kept cheap
            batch = ()
        else:
            try:
                batch = tuple(np.broadcast_shapes(shape_a[:-2], shape_b[:-2]))
            except ValueError:
                raise error(f"sgemm_cube.matmul: batch dimensions of {shape_a} and {shape_b} "
                            "do not broadcast") from None
        self.a, self.b, self.m, self.n, self.k, self.batch = a, b, m, n, k, batch
        self.nb = math.prod(batch)
        self.result_shape = batch + ((m,) if len(shape_a) > 1 else ()) + ((n,) if len(shape_b) > 1 else ())
        self.torch_mode = torch_mode
        self.wrap = None if torch_mode else _subclass_of(a, b)

    def views(self):
        """``a`` as (B, M, K) and ``b`` as (B, K, N) views (broadcast batches have stride 0)."""
        a, b, m, n, k, batch = self.a, self.b, self.m, self.n, self.k, self.batch
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        if not batch:
            return a2[None], b2[None]
        if self.torch_mode:
            return (a2.expand(batch + (m, k)).reshape(self.nb, m, k),
                    b2.expand(batch + (k, n)).reshape(self.nb, k, n))
        return (np.broadcast_to(a2, batch + (m, k)).reshape(self.nb, m, k),
                np.broadcast_to(b2, batch + (k, n)).reshape(self.nb, k, n))


def _subclass_of(a, b):
    """The operand whose ndarray subclass the result takes (highest ``__array_priority__``, as NumPy), or None."""
    subclassed = [x for x in (a, b) if type(x) is not np.ndarray]
    if not subclassed:
        return None
    return max(subclassed, key=lambda x: getattr(x, "__array_priority__", 0.0))


def plan(req: Request, a, b) -> Plan:
    """The plan :func:`compute` runs for ``a @ b`` (:func:`sgemm_cube.explain` returns it)."""
    prob = Operands(a, b)
    return plan_for(req, prob.a, prob.nb, prob.m, prob.n, prob.k)


def plan_for(req: Request, like, batch: int, m: int, n: int, k: int) -> Plan:
    """The plan of the backend of ``like``'s device for a (batch, m, k) @ (batch, k, n) product."""
    name = select_backend(like, backend=req.backend)
    if name == "native" and _is_torch(like) and like.device.type == "meta":
        return native_plan(req.sb, "meta tensors hold no values: torch.matmul gives the result's shape and "
                                   "dtype, as it does for meta tensors")
    return get_backend(name).plan(req, batch, m, n, k, like)


def compute(req: Request, a, b, out=None, *, alpha: float = 1.0):
    """:func:`sgemm_cube.matmul` with validated options ``req``, without autograd.

    ``alpha``: the result is ``alpha * (a @ b)``, each output rounded once
    (the switch's ``addmm``/``baddbmm``/... scalars; see the backends' ``run``).

    Raises what :func:`sgemm_cube.matmul` documents for the operands and ``out``.
    """
    if alpha == 1 and a.__class__ is _EMULATED_TENSOR:
        res = replay_emulated(req, a, b, out)
        if res is not None:
            return res
    prob = Operands(a, b)
    out = _check_out(out, prob)
    chosen = plan_for(req, prob.a, prob.nb, prob.m, prob.n, prob.k)  # also for empty results: an option no backend takes fails on every shape
    if out is not None and prob.torch_mode and tuple(out.shape) != prob.result_shape:
        # torch resizes out= (with its warning): only once the result is there, so that a call that
        # fails (an unavailable backend, a full memory) leaves out untouched
        res = compute(req, prob.a, prob.b, alpha=alpha)
        resize_output(out, prob.result_shape)
        return out.copy_(res)
    empty = not (prob.m and prob.n and prob.nb)
    if empty or prob.k == 0:
        chosen = None
    if chosen is not None and chosen.backend == "native" and alpha == 1 and (out is None or not _overlaps(out, prob)):
        if out is None and prob.torch_mode:
            _remember_native(req, prob.a, prob.b)
        return get_backend("native").matmul(prob.a, prob.b, out=out)  # the library's own call, as it is
    shape3 = (prob.nb, prob.m, prob.n)
    res = _direct_view(out, shape3, prob)  # write straight into out when it can
    if res is None:
        if prob.torch_mode:
            import torch

            res = torch.empty(shape3, dtype=torch.float32, device=prob.a.device)
        else:
            res = _result_array(shape3, prob)
    if chosen is None:
        if not empty:
            res[...] = 0  # K = 0
    else:
        a3, b3 = prob.views()
        get_backend(chosen.backend).run(chosen, a3, b3, res, alpha=alpha)
        if alpha == 1 and chosen.backend == "cuda" and prob.torch_mode:  # res: a new tensor or out's own view
            _remember_emulated(req, chosen, prob, a3, b3, res)
    if out is None:
        return _wrap(res.reshape(prob.result_shape), prob)
    if not _same_memory(res, out, prob.torch_mode):
        out[...] = res.reshape(prob.result_shape)  # NumPy: cast to out's dtype (same_kind, as np.matmul)
    return out


def _wrap(res, prob: "Operands"):
    """The result as NumPy's matmul gives it: a scalar for 1-D @ 1-D, the operands' ndarray subclass."""
    if prob.torch_mode:
        return res
    if res.ndim == 0:
        return res[()]  # np.float32
    if prob.wrap is not None:
        try:
            return prob.wrap.__array_wrap__(res, None, False)
        except TypeError:  # NumPy < 2: (array, context)
            return prob.wrap.__array_wrap__(res, None)
    return res


def _result_array(shape3, prob: "Operands"):
    """A new float32 result, with an error naming the user's problem when it does not fit in memory."""
    try:
        return np.empty(shape3, np.float32)
    except MemoryError:
        gib = math.prod(shape3) * 4 / 2**30
        raise MemoryError(f"sgemm_cube.matmul: the result of {tuple(prob.a.shape)} @ {tuple(prob.b.shape)} "
                          f"(float32, shape {prob.result_shape}) needs {gib:.3g} GiB, more than can be "
                          f"allocated") from None


def _same_memory(x, y, torch_mode) -> bool:
    if torch_mode:
        return x.data_ptr() == y.data_ptr()
    return np.shares_memory(x, y) and x.ctypes.data == y.ctypes.data


def _shares_storage(out, a, b) -> bool:
    """Whether tensor ``out`` lies in the storage of tensor ``a`` or ``b``."""
    return out.untyped_storage().data_ptr() in (a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr())


def _overlaps(out, prob: Operands) -> bool:
    if prob.torch_mode:
        return _shares_storage(out, prob.a, prob.b)
    return np.may_share_memory(out, prob.a) or np.may_share_memory(out, prob.b)


def _direct_view(out, shape3, prob: Operands):
    """A (B, M, N) view of ``out`` to compute into, or None (not contiguous, or it overlaps an input)."""
    if out is None or _overlaps(out, prob) or tuple(out.shape) != prob.result_shape:
        return None
    if prob.torch_mode:
        return out.view(shape3) if out.is_contiguous() else None
    return out.reshape(shape3) if out.flags.c_contiguous and out.dtype == np.float32 else None


def resize_output(out, shape, warns: bool = True, stacklevel: int = 4) -> None:
    """Resize tensor ``out`` to ``shape`` as PyTorch's ``resize_output`` does (it warns when a non-empty
    ``out`` changes shape; ``warns=False`` for the kernels that resize silently, such as ``addbmm``)."""
    if tuple(out.shape) == tuple(shape):
        return
    if out.numel() and warns:
        warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                      f"which does not match the required output shape {list(shape)}. This behavior is "
                      f"deprecated, and in a future PyTorch release outputs will not be resized unless they "
                      f"have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, "
                      f"to zero elements with t.resize_(0).", UserWarning, stacklevel=stacklevel)
    out.resize_(shape)


def _check_out(out, prob: Operands):
    """``out`` checked as NumPy (ValueError/TypeError) or torch (RuntimeError) would check it."""
    if out is None:
        return None
    if prob.torch_mode:
        import torch

        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch tensor for tensor operands, got {type(out).__name__}")
        if out.dtype != torch.float32:
            raise RuntimeError(f"Expected out tensor to have dtype float, but got {out.dtype} instead")
        if out.device != prob.a.device:
            raise RuntimeError(f"Expected out tensor to be on {prob.a.device}, but got {out.device} instead")
        return out  # resized as torch.matmul resizes it by compute, once the result is computed
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a NumPy array for array operands, got {type(out).__name__}")
    core = prob.result_shape[len(prob.batch):]  # as numpy.matmul: out may add leading (loop) dimensions
    loop = tuple(out.shape[:out.ndim - len(core)])
    try:
        fits = (out.ndim >= len(prob.result_shape) and tuple(out.shape[out.ndim - len(core):]) == core
                and np.broadcast_shapes(loop, prob.batch) == loop)
    except ValueError:  # loop dimensions that do not broadcast
        fits = False
    if not fits:
        raise ValueError(f"out has shape {tuple(out.shape)}, the result has shape {prob.result_shape}")
    if not np.can_cast(np.float32, out.dtype, "same_kind"):
        raise TypeError(f"Cannot cast sgemm_cube.matmul output from dtype('float32') to {out.dtype!r} "
                        f"with casting rule 'same_kind'")
    return out

