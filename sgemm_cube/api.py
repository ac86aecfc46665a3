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

    __slots__ = ("a", "b", "m", "n", "k", "batch", "nb", "result_shape", "torch_mode")

    def __init__(self, a, b):
        torch_mode = _is_torch(a)
        if torch_mode != _is_torch(b):
            raise TypeError("sgemm_cube.matmul: a and b must both be NumPy arrays or both torch tensors")
        a = _check_operand(a, "a", torch_mode)
        b = _check_operand(b, "b", torch_mode)
        if torch_mode and a.device != b.device:
            raise ValueError(f"a is on {a.device} and b on {b.device}: move them to one device")
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("sgemm_cube.matmul: operands must have at least one dimension (use * for scalars)")
        sa, sb = tuple(a.shape), tuple(b.shape)
        m, k = sa[-2:] if len(sa) > 1 else (1, sa[0])
        k2, n = sb[-2:] if len(sb) > 1 else (sb[0], 1)
        if k != k2:
            raise ValueError(f"sgemm_cube.matmul: shapes {sa} and {sb} do not match: "
                             f"a has {k} columns, b has {k2} rows")
        if len(sa) <= 2 and len(sb) <= 2:  # the common case, kept cheap
            batch = ()
        else:
            try:
                batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
            except ValueError:
                raise ValueError(f"sgemm_cube.matmul: batch dimensions of {sa} and {sb} do not broadcast") from None
        self.a, self.b, self.m, self.n, self.k, self.batch = a, b, m, n, k, batch
        self.nb = math.prod(batch)
        self.result_shape = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
        self.torch_mode = torch_mode

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


def _options(sb, scheme, scale, order, accumulate, keep_lo_lo, backend, fixup, check_range):
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
    mod = get_backend(select_backend(prob.a, backend=req.backend))
    return mod.plan(req, prob.nb, prob.m, prob.n, prob.k, prob.a)


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
        float32 array of the result's shape (and device) to write into.
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
    ndarray or torch.Tensor, float32
        ``a @ b`` of the same kind (and device) as the inputs, or ``out``.

    Raises
    ------
    TypeError
        An operand is not float32, or NumPy and torch operands are mixed.
    ValueError
        Shapes do not match, ``out`` is wrong, or an option is unknown.

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
    prob = _Problem(a, b)
    out = _check_out(out, prob.result_shape, prob.a, prob.torch_mode)
    empty = not (prob.m and prob.n and prob.nb)
    plan = None if empty or prob.k == 0 else _plan(req, prob)
    if plan is not None and plan.backend == "native" and (out is None or not _overlaps(out, prob)):
        return get_backend("native").matmul(prob.a, prob.b, out=out)  # the library's own call, as it is
    shape3 = (prob.nb, prob.m, prob.n)
    res = _direct_view(out, shape3, prob)  # write straight into out when it can
    if res is None:
        if prob.torch_mode:
            import torch

            res = torch.empty(shape3, dtype=torch.float32, device=prob.a.device)
        else:
            res = np.empty(shape3, np.float32)
    if plan is None:
        if not empty:
            res[...] = 0  # K = 0
    else:
        a3, b3 = prob.views()
        get_backend(plan.backend).run(plan, req, a3, b3, res)
    if out is None:
        res = res.reshape(prob.result_shape)
        if not prob.torch_mode and res.ndim == 0:
            return res[()]  # NumPy gives a scalar for 1-D @ 1-D
        return res
    if not _same_memory(res, out, prob.torch_mode):
        out[...] = res.reshape(prob.result_shape)
    return out


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
    return out.reshape(shape3) if out.flags.c_contiguous else None


def _check_out(out, shape, like, torch_mode):
    if out is None:
        return None
    if torch_mode != _is_torch(out):
        raise TypeError("out must be of the same kind as the operands (NumPy array or torch tensor)")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)}, the result has shape {tuple(shape)}")
    if torch_mode:
        import torch

        if out.dtype != torch.float32 or out.device != like.device:
            raise ValueError(f"out must be float32 on {like.device}, got {out.dtype} on {out.device}")
    elif out.dtype != np.float32:
        raise ValueError(f"out must be float32, got {out.dtype}")
    return out
