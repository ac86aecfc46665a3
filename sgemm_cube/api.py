"""The public entry point: :func:`matmul`.

Everything that is the same for every backend lives here: argument
checking, NumPy/torch conventions (1-D operands, batch broadcasting, any
strides, empty dimensions, ``out=``), the range check of the split and the
patching of NaN/Inf outputs.  The backends (``sgemm_cube/backends/``) only
compute the emulated product of finite 3-D operands.
"""
from __future__ import annotations

import math
import sys
from typing import NamedTuple

import numpy as np

from cpu_fallback import ORDERS, split_limits

from ._xp import Ops
from .backends import get_backend
from .plan import finite_absmax, plan_with_ranges, scale_exponents
from .special import patch_special_values

__all__ = ["matmul", "select_backend"]


def _is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _check_operand(x, name: str):
    if _is_torch(x):
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
    """Name the backend :func:`matmul` would use for these operands.

    ``"auto"`` picks by where the data lives: NumPy arrays and torch CPU
    tensors -> ``"cpu"``, CUDA tensors -> ``"cuda"``, Ascend NPU tensors ->
    ``"npu"``.  (On CUDA, ``matmul`` may still run ``"native"`` FP32 for
    shapes where that is faster; see :func:`matmul`.)
    """
    if backend != "auto":
        return backend
    if _is_torch(a):
        kind = a.device.type
        if kind == "cuda":
            return "cuda"
        if kind == "npu":
            return "npu"
        if kind != "cpu":
            raise ValueError(f"no sgemm_cube backend for tensors on {a.device}")
    return "cpu"


def _summary(stats, min_row_abs: float) -> np.ndarray:
    """The statistics the checks need, in one host transfer (one device sync on a GPU).

    Returns float64 ``[max |a|, max |b|, #tiny rows of a, #tiny columns of b, a_nonfinite,
    b_nonfinite]``, where a tiny row has its largest magnitude in ``(0, min_row_abs)``.
    """
    def tiny(m):
        return ((m > 0) & (m < min_row_abs)).sum()

    if not _is_torch(stats.a_rowmax):  # a backend may return either kind, whatever the operands are
        return np.array([np.max(stats.a_rowmax, initial=0), np.max(stats.b_colmax, initial=0),
                         tiny(stats.a_rowmax), tiny(stats.b_colmax),
                         bool(stats.a_nonfinite), bool(stats.b_nonfinite)], np.float64)
    import torch

    dev = stats.a_rowmax.device
    parts = [stats.a_rowmax.amax() if stats.a_rowmax.numel() else torch.zeros((), device=dev),
             stats.b_colmax.amax() if stats.b_colmax.numel() else torch.zeros((), device=dev),
             tiny(stats.a_rowmax), tiny(stats.b_colmax),
             torch.as_tensor(stats.a_nonfinite, device=dev), torch.as_tensor(stats.b_nonfinite, device=dev)]
    return torch.stack([p.float().reshape(()) for p in parts]).cpu().numpy().astype(np.float64)


def _range_check(stats, summary, sb: int) -> None:
    """Refuse data outside the FP16 split's range (``split_limits(sb)``), saying what to do."""
    limits = split_limits(sb)
    for big, name in ((summary[0], "a"), (summary[1], "b")):
        if big >= limits.max_abs:
            raise ValueError(
                f"{name} holds finite values up to {big:.6g}, beyond what the FP16 split with sb={sb} "
                f"represents (|x| < {limits.max_abs:g}): the result would hold infinities. "
                f"Use a smaller sb (|x| < min(65520, 2**(27 - sb))), scale='rows', scheme='auto', "
                f"or scale {name} by a power of two.")
    # Rows whose largest magnitude is tiny: counted with the summary, details only on failure.
    for rowmax, count, name, what in ((stats.a_rowmax, summary[2], "a", "row"),
                                      (stats.b_colmax, summary[3], "b", "column")):
        if not count:
            continue
        m = rowmax.detach().cpu().numpy() if _is_torch(rowmax) else np.asarray(rowmax)
        tiny = (m > 0) & (m < limits.min_row_abs)
        idx = np.argwhere(tiny)[0]
        raise ValueError(
            f"{int(tiny.sum())} {what}(s) of {name} (first at batch/index {tuple(int(i) for i in idx)}) have "
            f"all magnitudes below {limits.min_row_abs:.3g} (largest {float(m[tuple(idx)]):.3g}), where "
            f"the FP16 split with sb={sb} loses FP32 accuracy (Eq. 6 of the SGEMM-cube paper). "
            + (f"Use a larger sb (up to 12), s" if sb < 12 else "S")
            + f"cale {name} by a power of two (scale='rows' does it exactly), use scheme='auto', "
              f"or pass check_range=False to accept the precision loss.")


class _Prepared(NamedTuple):
    """Operands checked and broadcast to 3-D, with where the result goes."""

    a3: object            # (B, M, K)
    b3: object            # (B, K, N)
    batch: tuple
    m: int
    n: int
    k: int
    result_shape: tuple
    torch_mode: bool
    backend: str
    backend_schemes: tuple


def _prepare(a, b, backend: str) -> _Prepared:
    a = _check_operand(a, "a")
    b = _check_operand(b, "b")
    torch_mode = _is_torch(a)
    if torch_mode != _is_torch(b):
        raise TypeError("sgemm_cube.matmul: a and b must both be NumPy arrays or both torch tensors")
    if torch_mode and a.device != b.device:
        raise ValueError(f"a is on {a.device} and b on {b.device}: move them to one device")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("sgemm_cube.matmul: operands must have at least one dimension (use * for scalars)")
    squeeze_m, squeeze_n = a.ndim == 1, b.ndim == 1
    a2 = a[None, :] if squeeze_m else a
    b2 = b[:, None] if squeeze_n else b
    (m, k), (k2, n) = a2.shape[-2:], b2.shape[-2:]
    if k != k2:
        raise ValueError(f"sgemm_cube.matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not match: "
                         f"a has {k} columns, b has {k2} rows")
    try:
        batch = tuple(np.broadcast_shapes(tuple(a2.shape[:-2]), tuple(b2.shape[:-2])))
    except ValueError:
        raise ValueError(f"sgemm_cube.matmul: batch dimensions of {tuple(a.shape)} and {tuple(b.shape)} "
                         f"do not broadcast") from None
    result_shape = batch + ((m,) if not squeeze_m else ()) + ((n,) if not squeeze_n else ())
    nb = math.prod(batch)
    if torch_mode:
        a3 = a2.expand(batch + (m, k)).reshape(nb, m, k)
        b3 = b2.expand(batch + (k, n)).reshape(nb, k, n)
    else:
        a3 = np.broadcast_to(a2, batch + (m, k)).reshape(nb, m, k)
        b3 = np.broadcast_to(b2, batch + (k, n)).reshape(nb, k, n)
    name = select_backend(a, b, backend)
    schemes = tuple(getattr(_backend_module(name), "SCHEMES", ("fp16x3", "fp16x4")))
    return _Prepared(a3, b3, batch, m, n, k, result_shape, torch_mode, name, schemes)


def _backend_module(name: str):
    from .backends import _module

    return _module(name)


def matmul(a, b, sb: int | str = 12, *, scheme: str = "fp16x3", scale: str | None = None,
           order: str = "termwise", accumulate: str | None = None, keep_lo_lo: bool = False,
           backend: str = "auto", out=None, check_range: bool = True):
    """FP32 matrix product computed with FP16 matrix products (SGEMM-cube).

    Each FP32 operand is split into an FP16 high part and an FP16 residual
    scaled by ``2**sb``; three FP16 products with FP32 accumulation rebuild
    ``a @ b`` to FP32 accuracy (``cpu_fallback/gemm.py`` has the algorithm).

    Parameters
    ----------
    a : ndarray or torch.Tensor, shape (..., M, K) or (K,), float32
    b : ndarray or torch.Tensor, shape (..., K, N) or (K,), float32
        Both NumPy arrays, or both torch tensors on one device.  Batch
        dimensions broadcast as in :func:`numpy.matmul`; 1-D operands are
        promoted to a row (``a``) or a column (``b``) and the added
        dimension is removed from the result.  Any strides.
    sb : int or "auto", default 12
        Scaling exponent of the FP16 residuals, ``0 <= sb <= 24``.  12 keeps
        22 significant bits over the FP16 normal range (Eq. 6 of the paper);
        see :func:`cpu_fallback.split_limits`.  ``"auto"``: the largest
        ``sb <= 12`` whose range holds the data (12 when scaling).
    scheme : {"fp16x3", "fp16x4", "bf16x9", "bf16x6", "auto"}, keyword-only
        The split: SGEMM-cube's three FP16 products (default), with the
        fourth ``lo*lo`` product, or three BF16 slices with nine or six
        products (FP32's whole exponent range; values below ``2**-110``, FP32
        subnormals among them, lose the bits under BF16's smallest step
        ``2**-133`` unless ``scale`` is given).  ``"auto"`` picks the fastest
        scheme that keeps FP32-level accuracy for these data, with
        power-of-two scaling where needed, or native FP32 when the backend
        has no kernel for it; :func:`sgemm_cube.explain` says which and why.
    scale : {None, "rows", "matrix"}, keyword-only
        Exact power-of-two scaling before the split, undone on the result:
        per row of ``a`` and per column of ``b``, or per matrix.  Makes data
        at 1e-30 or 1e30 as accurate as data near 1.
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
        Triton kernels for CUDA tensors (or cuBLAS FP32 for the small and
        skinny shapes where measurements show it is faster), the AscendC
        kernels for NPU tensors.  ``"native"`` is the library's own FP32
        matmul.  A backend that cannot run here raises
        :class:`~sgemm_cube.backends.BackendUnavailableError` naming what
        is missing.
    out : ndarray or torch.Tensor, optional, keyword-only
        float32 array of the result's shape (and device) to write into.
    check_range : bool, default True, keyword-only
        For FP16 schemes, refuse operands the split cannot represent to FP32
        accuracy: finite values at or above ``split_limits(sb).max_abs``
        (they would overflow to infinity) and rows of ``a`` / columns of
        ``b`` whose largest magnitude is below ``split_limits(sb).min_row_abs``.
        ``False`` skips the check (for studies of the split's limits).

    Returns
    -------
    ndarray or torch.Tensor, float32
        ``a @ b`` of the same kind (and device) as the inputs, or ``out``.
        NaN and infinities in the inputs reach the outputs they touch as in
        native FP32 SGEMM (``inf * 0`` and ``inf - inf`` give NaN).

    Raises
    ------
    TypeError
        An operand is not float32, or NumPy and torch operands are mixed.
    ValueError
        Shapes do not match, ``out`` is wrong, an option is unknown, or
        (with ``check_range``) the data are outside the split's range.

    Examples
    --------
    >>> import numpy as np, sgemm_cube
    >>> a = np.random.default_rng(0).standard_normal((64, 32), dtype=np.float32)
    >>> b = np.random.default_rng(1).standard_normal((32, 16), dtype=np.float32)
    >>> c = sgemm_cube.matmul(a, b)
    >>> c.shape, c.dtype
    ((64, 16), dtype('float32'))
    >>> sgemm_cube.matmul(a * np.float32(1e30), b, scheme="auto").dtype
    dtype('float32')
    """
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {list(ORDERS)}")
    if sb != "auto":
        split_limits(sb)  # validates sb
    if keep_lo_lo:
        if scheme not in ("fp16x3", "fp16x4"):
            raise ValueError(f"keep_lo_lo is shorthand for scheme='fp16x4'; it does not combine with {scheme!r}")
        scheme = "fp16x4"
    prep = _prepare(a, b, backend)
    if accumulate is not None and prep.backend != "cpu":
        raise ValueError(f"accumulate={accumulate!r} selects an arithmetic model of the CPU backend; "
                         f"the {prep.backend!r} backend accumulates as its hardware does (pass accumulate=None)")
    out = _check_out(out, prep.result_shape, a, prep.torch_mode)
    shape3 = (prep.a3.shape[0], prep.m, prep.n)
    res = _direct_view(out, shape3, a, b, prep.torch_mode)  # write straight into out when it can
    if res is None:
        if prep.torch_mode:
            import torch

            res = torch.empty(shape3, dtype=torch.float32, device=prep.a3.device)
        else:
            res = np.empty(shape3, np.float32)
    if (res.numel() if prep.torch_mode else res.size) and prep.k == 0:
        res[...] = 0
    elif res.numel() if prep.torch_mode else res.size:
        plan, maxima = plan_with_ranges(prep.a3, prep.b3, sb=sb, scheme=scheme, scale=scale,
                                        backend=prep.backend, backend_schemes=prep.backend_schemes)
        name = plan.backend
        if name == "cuda" and backend == "auto" and plan.scheme != "native":
            if _backend_module("cuda").prefers_native(prep.a3.shape[0], prep.m, prep.n, prep.k, prep.a3.device):
                name = "native"
        _compute(name, prep.a3, prep.b3, res, plan=plan, maxima=maxima, order=order, accumulate=accumulate,
                 check_range=check_range, torch_mode=prep.torch_mode)
    if out is None:
        return res.reshape(prep.result_shape)
    if not _same_memory(res, out, prep.torch_mode):
        out[...] = res.reshape(prep.result_shape)
    return out


def _same_memory(x, y, torch_mode) -> bool:
    if torch_mode:
        return x.data_ptr() == y.data_ptr()
    return np.shares_memory(x, y) and x.ctypes.data == y.ctypes.data


def _direct_view(out, shape3, a, b, torch_mode):
    """A (B, M, N) view of ``out`` to compute into, or None (not contiguous, or it overlaps an input)."""
    if out is None:
        return None
    if torch_mode:
        storages = {t.untyped_storage().data_ptr() for t in (a, b)}
        if not out.is_contiguous() or out.untyped_storage().data_ptr() in storages:
            return None
        return out.view(shape3)
    if not out.flags.c_contiguous or np.may_share_memory(out, a) or np.may_share_memory(out, b):
        return None
    return out.reshape(shape3)


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


def _compute(name, a3, b3, res, *, plan, maxima, order, accumulate, check_range, torch_mode):
    """Run one backend on 3-D operands: scaling, range check, product, NaN/Inf patch."""
    mod = get_backend(name)
    if name == "native":
        mod.matmul(a3, b3, out=res)
        return
    ops = Ops(a3)
    if torch_mode and name == "cpu":  # the NumPy model works on shared-memory views of CPU tensors
        a3, b3, res = a3.detach().numpy(), b3.detach().numpy(), res.numpy()
        ops = Ops(a3)
    sa3, sb3, shift = a3, b3, None
    if plan.scale is not None:
        sa3, sb3, shift = _apply_scale(ops, a3, b3, plan, maxima)
    kwargs = dict(sb=plan.sb, order=order, keep_lo_lo=plan.scheme == "fp16x4")
    if plan.scheme not in ("fp16x3", "fp16x4"):
        kwargs["scheme"] = plan.scheme
    if accumulate is not None:
        kwargs["accumulate"] = accumulate
    fp16 = plan.scheme.startswith("fp16")
    if name == "cpu":
        # Range statistics cost little next to the model's product: check before any work.
        stats = _stats(sa3, sb3)
        summary = _summary(stats, split_limits(plan.sb).min_row_abs)
        if check_range and fp16:
            _range_check(stats, summary, plan.sb)
        mod.matmul(sa3, sb3, out=res, **kwargs)
    else:
        checked = []

        def check(stats):  # one host read-back, between the split and the products
            checked.append(_summary(stats, split_limits(plan.sb).min_row_abs))
            if check_range and fp16:
                _range_check(stats, checked[0], plan.sb)

        if getattr(mod, "ACCEPTS_CHECK", False):
            kwargs["check"] = check
        stats = mod.matmul(sa3, sb3, out=res, **kwargs)
        if not checked:  # a backend without check=: read back after the products
            check(stats if stats is not None else _stats(sa3, sb3))
        summary = checked[0]
    if shift is not None:
        _undo_scale(ops, res, shift)
    if summary[4] or summary[5]:
        patch_special_values(a3, b3, res)


def _apply_scale(ops, a3, b3, plan, maxima=None):
    """Exact power-of-two scaling of a3 per row and b3 per column (or per matrix).

    ``maxima``: the largest finite magnitudes per row of a3 and column of b3,
    if the plan already read them.  Returns the scaled operands and the
    exponents (B, M, 1), (B, 1, N) that undo it on C.
    """
    a_big, b_big = maxima or (finite_absmax(ops, a3, -1), finite_absmax(ops, b3, -2))  # (B, M), (B, N)
    if plan.scale == "matrix":  # one shift per matrix, from its largest magnitude
        a_big = np.broadcast_to(a_big.max(axis=-1, keepdims=True, initial=0), a_big.shape)
        b_big = np.broadcast_to(b_big.max(axis=-1, keepdims=True, initial=0), b_big.shape)
    ta = scale_exponents(a_big, scheme=plan.scheme, sb=plan.sb)
    tb = scale_exponents(b_big, scheme=plan.scheme, sb=plan.sb)
    sa3 = ops.ldexp(a3, ops.from_numpy(ta[:, :, None], a3))
    sb3 = ops.ldexp(b3, ops.from_numpy(tb[:, None, :], b3))
    return sa3, sb3, (ops.from_numpy(-ta[:, :, None], a3), ops.from_numpy(-tb[:, None, :], a3))


def _undo_scale(ops, res, shift):
    """``res * 2**(u_i + v_j)`` rounded once: in float64 both factors are exact and nothing over/underflows."""
    u, v = shift
    if ops.np:
        res[...] = (res.astype(np.float64) * np.exp2(u.astype(np.float64)) * np.exp2(v.astype(np.float64)))
        return
    res.copy_(res.double() * u.double().exp2() * v.double().exp2())


def _stats(a3, b3):
    """Range statistics with plain array operations (for backends that give none)."""
    from .backends.base import SplitStats

    if isinstance(a3, np.ndarray):
        fa, fb = np.isfinite(a3), np.isfinite(b3)
        return SplitStats(np.where(fa, np.abs(a3), 0).max(axis=-1, initial=0),
                          np.where(fb, np.abs(b3), 0).max(axis=-2, initial=0), not fa.all(), not fb.all())
    import torch

    fa, fb = torch.isfinite(a3), torch.isfinite(b3)
    zero = torch.zeros((), dtype=a3.dtype, device=a3.device)
    return SplitStats(torch.where(fa, a3.abs(), zero).amax(dim=-1), torch.where(fb, b3.abs(), zero).amax(dim=-2),
                      ~fa.all(), ~fb.all())
