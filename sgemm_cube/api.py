"""The public entry points: :func:`matmul` and :func:`explain`.

A call travels one way: the options become one validated
:class:`~sgemm_cube.plan.Request` (:func:`~sgemm_cube.plan.make_request`,
cached), the operands are checked and broadcast to 3-D here (NumPy/torch
conventions: 1-D operands, batch broadcasting, any strides, empty
dimensions, ``out=``), the backend of the data's device makes the
:class:`~sgemm_cube.plan.Plan` and runs it.  Everything that depends on the
values (scaling, which rows and columns the split cannot hold, NaN/Inf) is
decided by the backend on the device, without a round trip to the host.
"""
from __future__ import annotations

import math
import sys
import warnings

import numpy as np

from .backends import get_backend
from .plan import Plan, make_request

__all__ = ["matmul", "explain", "select_backend"]


def _is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _check_operand(x, name: str, torch_mode: bool):
    if torch_mode:
        import torch

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


def select_backend(a, b=None, backend: str = "auto") -> str:
    """Name the backend that handles ``a``'s device: NumPy arrays and torch CPU
    tensors -> ``"cpu"``, CUDA tensors -> ``"cuda"``, Ascend NPU tensors ->
    ``"npu"`` (its plan may still run ``"native"``: see :func:`explain`).
    ``b`` is accepted for compatibility; it is on ``a``'s device."""
    if backend != "auto":
        return backend
    if _is_torch(a):
        kind = a.device.type
        if kind in ("cuda", "npu"):
            return kind
        if kind != "cpu":
            raise ValueError(f"no sgemm_cube backend for tensors on {a.device}")
    return "cpu"


class _Problem:
    """Operands checked, the problem's sizes, and (on demand) the operands broadcast to 3-D."""

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
        sa, sb = tuple(a.shape), tuple(b.shape)
        m, k = sa[-2:] if len(sa) > 1 else (1, sa[0])
        k2, n = sb[-2:] if len(sb) > 1 else (sb[0], 1)
        if k != k2:
            raise error(f"sgemm_cube.matmul: shapes {sa} and {sb} cannot be multiplied: "
                        f"a has {k} columns, b has {k2} rows")
        if len(sa) <= 2 and len(sb) <= 2:  # the common case, kept cheap
            batch = ()
        else:
            try:
                batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
            except ValueError:
                raise error(f"sgemm_cube.matmul: batch dimensions of {sa} and {sb} do not broadcast") from None
        self.a, self.b, self.m, self.n, self.k, self.batch = a, b, m, n, k, batch
        self.nb = math.prod(batch)
        self.result_shape = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
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


def _options(sb, scheme, scale, order, accumulate, keep_lo_lo, backend, fixup, check_range):
    if _is_torch(sb) or isinstance(sb, np.ndarray):
        raise TypeError("sgemm_cube.matmul's third positional argument is sb (an int or 'auto'), not an "
                        "array: pass the output as out=... (keyword-only)")
    if check_range is not None and not isinstance(check_range, bool):
        raise TypeError(f"check_range must be True, False or None, got {check_range!r}")
    if check_range is not None:
        warnings.warn("check_range is deprecated: out-of-range data are now scaled or recomputed in FP32 "
                      "on the device; check_range=False is fixup=False", DeprecationWarning, stacklevel=3)
        if not check_range:
            fixup = False
    try:
        return make_request(sb, scheme, scale, order, accumulate, keep_lo_lo, backend, fixup)
    except TypeError as exc:
        if "unhashable" in str(exc):  # an option of a type no option has (a list, an array): say which
            raise TypeError(f"sgemm_cube.matmul: options must be strings, integers or booleans "
                            f"(sb={sb!r}, scheme={scheme!r}, scale={scale!r}, order={order!r})") from None
        raise


def _plan(req, prob: _Problem) -> Plan:
    return _plan_for(req, prob.a, prob.nb, prob.m, prob.n, prob.k)


def _plan_for(req, like, batch: int, m: int, n: int, k: int) -> Plan:
    """The plan of the backend of ``like``'s device for a (batch, m, k) @ (batch, k, n) product."""
    return get_backend(select_backend(like, backend=req.backend)).plan(req, batch, m, n, k, like)


def matmul(a, b, sb: int | str = 12, *, scheme: str = "fp16x3", scale: str | None = "auto",
           order: str = "termwise", accumulate: str | None = None, keep_lo_lo: bool = False,
           backend: str = "auto", out=None, fixup: bool = True, check_range: bool | None = None):
    """FP32 matrix product computed with FP16 matrix products (SGEMM-cube), never less accurate than SGEMM.

    Each FP32 operand is split into an FP16 high part and an FP16 residual
    scaled by ``2**sb``; three FP16 products with FP32 accumulation rebuild
    ``a @ b`` (``cpu_fallback/gemm.py`` has the algorithm).  Rows of ``a``
    and columns of ``b`` that the split cannot hold as they are are scaled by
    a power of two; those it cannot hold at all (entries spanning more than
    about 29 binades, NaN, infinities) have their outputs computed in plain
    FP32 (``cpu_fallback/guard.py``).  All of it is decided on the device:
    on CUDA a call launches three kernels and never waits for the GPU.

    **Guarantee** (default options, any finite float32 data, any backend):
    every output satisfies SGEMM's componentwise error bound,
    ``|C - C64| <= 3 * K * 2**-24 * (|a| @ |b|)`` (plus ``K * 2**-149`` for
    underflow); the relative Frobenius error against float64 was within
    twice native FP32's on every case tested (a measured property, not a
    bound; on random data it is 3-7x smaller).  NaN and
    infinities propagate as in native SGEMM; a result overflows where the
    exact product leaves FP32's range, with its sign.  Only ``fixup=False``
    gives the guarantee up.

    Parameters
    ----------
    a : ndarray or torch.Tensor, shape (..., M, K) or (K,), float32
    b : ndarray or torch.Tensor, shape (..., K, N) or (K,), float32
        Both NumPy arrays, or both torch tensors on one device.  Batch
        dimensions broadcast as in :func:`numpy.matmul`; 1-D operands are
        promoted to a row (``a``) or a column (``b``) and the added
        dimension is removed from the result.  Any strides.
    sb : int or "auto", default 12
        Scaling exponent of the FP16 residuals, ``0 <= sb <= 24``; 12 keeps
        22 significant bits over the widest range (Eq. 6 of the paper).
        ``"auto"`` is 12.  A smaller sb narrows the range each line must fit
        (more lines computed in FP32), it never costs accuracy.
    scheme : {"fp16x3", "fp16x4", "bf16x9", "bf16x6", "auto"}, keyword-only
        SGEMM-cube's three FP16 products (default), with the fourth
        ``lo*lo`` product, or three BF16 slices with nine or six products.
        ``"auto"`` is ``"fp16x3"`` (the fastest; scaling and the FP32
        recomputation keep every scheme within the guarantee).
    scale : {"auto", "rows", "matrix", None}, keyword-only
        Exact power-of-two scaling before the split, undone on the result
        with one rounding.  ``"auto"``: the rows of ``a`` and columns of ``b``
        that do not fit the split as they are (data at 1e-30 or 1e30 then
        split as well as data near 1); ``"rows"``: every row and column;
        ``"matrix"``: one factor per matrix; ``None``: none (lines outside
        the split's range are computed in FP32).
    order : {"termwise", "elementwise"}, keyword-only
        ``"termwise"`` keeps each product in its own FP32 accumulator and sums
        the small terms first (more accurate); ``"elementwise"`` adds all
        terms into one accumulator chunk by chunk (Fig. 7 of the paper).
    accumulate : {"cube16", "sequential"} or None, keyword-only
        FP32 accumulation model of the CPU backend (``None``: ``"cube16"``).
        Hardware backends accumulate as their matrix engine does and accept
        only ``None``.
    keep_lo_lo : bool, keyword-only
        Shorthand for ``scheme="fp16x4"``.
    backend : {"auto", "cpu", "cuda", "npu", "native"}, keyword-only
        ``"auto"``: the CPU model for NumPy arrays and CPU tensors, the
        Triton kernels for CUDA tensors, the AscendC kernels for NPU tensors;
        native FP32 where it is both faster and as accurate (``K < 16``
        everywhere; on CUDA the small and skinny shapes of the measured
        hybrid rule).  ``"native"`` is the library's own FP32 matmul.  A
        backend that cannot run here raises
        :class:`~sgemm_cube.backends.BackendUnavailableError` naming what
        is missing.
    out : ndarray or torch.Tensor, optional, keyword-only
        Array of the result's shape to write into, any strides.  NumPy: any
        dtype float32 casts to under ``same_kind`` (as :func:`numpy.matmul`);
        torch: a float32 tensor on the operands' device, resized (with
        torch's warning) if its shape differs, as :func:`torch.matmul` does.
    fixup : bool, default True, keyword-only
        Recompute in plain FP32 the outputs of rows and columns with an entry
        the split would round to fewer than 22 bits.  ``False`` keeps the
        paper's split for them (for studies of the split; no guarantee).
        Lines with NaN/Inf or entries the split would overflow on are always
        recomputed.
    check_range : bool, optional, keyword-only
        Deprecated: ``check_range=False`` is ``fixup=False``.

    Returns
    -------
    ndarray, NumPy scalar or torch.Tensor, float32
        ``a @ b`` of the same kind (and device) as the inputs, or ``out``.
        As :func:`numpy.matmul`: 1-D @ 1-D gives a NumPy scalar and an
        ndarray subclass (``np.matrix``, ...) comes back as that subclass.
        Tensors that require grad give a result recorded for autograd:
        both gradients are computed by this function with the same options.

    Raises
    ------
    TypeError
        An operand is not float32 (or is a sparse tensor), NumPy and torch
        operands are mixed, an option has the wrong type (an array passed
        positionally as ``sb``), or NumPy's ``out`` cannot hold float32
        (``same_kind`` casting, as :func:`numpy.matmul`).
    ValueError
        NumPy operands: shapes do not match, or ``out`` has the wrong shape;
        any operands: an option is unknown.
    RuntimeError
        Tensor operands (as :func:`torch.matmul`): shapes or devices do not
        match, ``out`` is not a float32 tensor on the operands' device, or
        ``out=`` with operands that require grad.
    MemoryError
        The result does not fit in memory (the message names the problem).

    Examples
    --------
    >>> import numpy as np, sgemm_cube
    >>> a = np.random.default_rng(0).standard_normal((64, 32), dtype=np.float32)
    >>> b = np.random.default_rng(1).standard_normal((32, 16), dtype=np.float32)
    >>> c = sgemm_cube.matmul(a, b)
    >>> c.shape, c.dtype
    ((64, 16), dtype('float32'))
    >>> float(sgemm_cube.matmul(a * np.float32(1e30), b * np.float32(1e-30))[0, 0]) == float(c[0, 0])
    True
    """
    req = _options(sb, scheme, scale, order, accumulate, keep_lo_lo, backend, fixup, check_range)
    if _needs_grad(a, b):
        return _differentiable(req, a, b, out)
    return _matmul(req, a, b, out)


def _matmul(req, a, b, out=None):
    """:func:`matmul` with validated options ``req``, without autograd (the switch's kernels call this)."""
    prob = _Problem(a, b)
    out = _check_out(out, prob)
    plan = _plan(req, prob)  # also for empty results: an option no backend takes fails on every shape
    empty = not (prob.m and prob.n and prob.nb)
    if empty or prob.k == 0:
        plan = None
    if plan is not None and plan.backend == "native" and (out is None or not _overlaps(out, prob)):
        return get_backend("native").matmul(prob.a, prob.b, out=out)  # the library's own call, as it is
    shape3 = (prob.nb, prob.m, prob.n)
    res = _direct_view(out, shape3, prob)  # write straight into out when it can
    if res is None:
        if prob.torch_mode:
            import torch

            res = torch.empty(shape3, dtype=torch.float32, device=prob.a.device)
        else:
            res = _result_array(shape3, prob)
    if plan is None:
        if not empty:
            res[...] = 0  # K = 0
    else:
        a3, b3 = prob.views()
        get_backend(plan.backend).run(plan, req, a3, b3, res)
    if out is None:
        return _wrap(res.reshape(prob.result_shape), prob)
    if not _same_memory(res, out, prob.torch_mode):
        out[...] = res.reshape(prob.result_shape)  # NumPy: cast to out's dtype (same_kind, as np.matmul)
    return out


def _needs_grad(a, b) -> bool:
    """Whether ``a @ b`` must be recorded for autograd (torch tensors that require grad, grad mode on)."""
    torch = sys.modules.get("torch")
    return (torch is not None and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and (a.requires_grad or b.requires_grad) and torch.is_grad_enabled())


def _differentiable(req, a, b, out):
    """``a @ b`` recorded for autograd: both gradients computed by :func:`_matmul` with the same options."""
    if out is not None:
        raise RuntimeError("matmul(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    from ._autograd import differentiable_matmul

    return differentiable_matmul(lambda x, y: _matmul_with(req, x, y), a, b)


def _matmul_with(req, a, b):
    """:func:`matmul` with validated options ``req``: differentiable where autograd needs it."""
    if _needs_grad(a, b):
        return _differentiable(req, a, b, None)
    return _matmul(req, a, b)


def _wrap(res, prob: "_Problem"):
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


def _result_array(shape3, prob: "_Problem"):
    """A new float32 result, with an error naming the user's problem when it does not fit in memory."""
    try:
        return np.empty(shape3, np.float32)
    except MemoryError:
        gib = math.prod(shape3) * 4 / 2**30
        raise MemoryError(f"sgemm_cube.matmul: the result of {tuple(prob.a.shape)} @ {tuple(prob.b.shape)} "
                          f"(float32, shape {prob.result_shape}) needs {gib:.3g} GiB, more than can be "
                          f"allocated") from None


def explain(a, b, sb=12, *, scheme: str = "fp16x3", scale="auto", order: str = "termwise", accumulate=None,
            keep_lo_lo: bool = False, backend: str = "auto", fixup: bool = True) -> Plan:
    """Say how :func:`matmul` would compute ``a @ b`` with these options, and why, without computing it.

    Takes :func:`matmul`'s parameters and returns the :class:`~sgemm_cube.plan.Plan`
    it runs (scheme, sb, scale, backend, reason), native FP32 included.
    What depends on the values (which lines are scaled, which are computed
    in FP32) is decided per row and column on the device while splitting.

    Examples
    --------
    >>> import numpy as np, sgemm_cube
    >>> a = np.ones((4, 8), np.float32)
    >>> sgemm_cube.explain(a, a.T).backend          # K = 8 < 16: native FP32 is faster and as accurate
    'native'
    """
    req = _options(sb, scheme, scale, order, accumulate, keep_lo_lo, backend, fixup, None)
    return _plan(req, _Problem(a, b))


def _same_memory(x, y, torch_mode) -> bool:
    if torch_mode:
        return x.data_ptr() == y.data_ptr()
    return np.shares_memory(x, y) and x.ctypes.data == y.ctypes.data


def _overlaps(out, prob: _Problem) -> bool:
    if prob.torch_mode:
        storages = {t.untyped_storage().data_ptr() for t in (prob.a, prob.b)}
        return out.untyped_storage().data_ptr() in storages
    return np.may_share_memory(out, prob.a) or np.may_share_memory(out, prob.b)


def _direct_view(out, shape3, prob: _Problem):
    """A (B, M, N) view of ``out`` to compute into, or None (not contiguous, or it overlaps an input)."""
    if out is None or _overlaps(out, prob):
        return None
    if prob.torch_mode:
        return out.view(shape3) if out.is_contiguous() else None
    return out.reshape(shape3) if out.flags.c_contiguous and out.dtype == np.float32 else None


def _resize_output(out, shape, warns: bool = True) -> None:
    """Resize tensor ``out`` to ``shape`` as PyTorch's ``resize_output`` does (it warns when a non-empty
    ``out`` changes shape; ``warns=False`` for the kernels that resize silently, such as ``addbmm``)."""
    if tuple(out.shape) == tuple(shape):
        return
    if out.numel() and warns:
        warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                      f"which does not match the required output shape {list(shape)}. This behavior is "
                      f"deprecated, and in a future PyTorch release outputs will not be resized unless they "
                      f"have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, "
                      f"to zero elements with t.resize_(0).", UserWarning, stacklevel=4)
    out.resize_(shape)


def _check_out(out, prob: _Problem):
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
        _resize_output(out, prob.result_shape)  # as torch.matmul does
        return out
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a NumPy array for array operands, got {type(out).__name__}")
    if tuple(out.shape) != prob.result_shape:
        raise ValueError(f"out has shape {tuple(out.shape)}, the result has shape {prob.result_shape}")
    if not np.can_cast(np.float32, out.dtype, "same_kind"):
        raise TypeError(f"Cannot cast sgemm_cube.matmul output from dtype('float32') to {out.dtype!r} "
                        f"with casting rule 'same_kind'")
    return out
