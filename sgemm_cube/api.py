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

import numpy as np

from cpu_fallback import ORDERS, split_limits

from .backends import get_backend
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


def _range_check(stats, sb: int, to_numpy) -> None:
    limits = split_limits(sb)
    for rowmax, name, what in ((stats.a_rowmax, "a", "row"), (stats.b_colmax, "b", "column")):
        m = to_numpy(rowmax)
        if m.size == 0:
            continue
        big = float(m.max())
        if big >= limits.max_abs:
            raise ValueError(
                f"{name} holds finite values up to {big:.6g}, beyond what the FP16 split with sb={sb} "
                f"represents (|x| < {limits.max_abs:g}): the result would hold infinities. "
                f"Use a smaller sb (|x| < min(65520, 2**(27 - sb))) or scale {name} by a power of two.")
        tiny = (m > 0) & (m < limits.min_row_abs)
        if tiny.any():
            idx = np.argwhere(tiny)[0]
            raise ValueError(
                f"{int(tiny.sum())} {what}(s) of {name} (first at batch/index {tuple(int(i) for i in idx)}) have "
                f"all magnitudes below {limits.min_row_abs:.3g} (largest {float(m[tuple(idx)]):.3g}), where "
                f"the FP16 split with sb={sb} loses FP32 accuracy (Eq. 6 of the SGEMM-cube paper). "
                + (f"Use a larger sb (up to 12), s" if sb < 12 else "S")
                + f"cale {name} by a power of two, or pass check_range=False to accept the precision loss.")


def matmul(a, b, sb: int = 12, *, order: str = "termwise", accumulate: str | None = None,
           keep_lo_lo: bool = False, backend: str = "auto", out=None, check_range: bool = True):
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
    sb : int, default 12
        Scaling exponent of the residuals, ``0 <= sb <= 24``.  12 keeps 22
        significant bits over the FP16 normal range (Eq. 6 of the paper);
        see :func:`cpu_fallback.split_limits` for the range it covers.
    order : {"termwise", "elementwise"}, keyword-only
        ``"termwise"`` keeps each product in its own FP32 accumulator and sums
        the small terms first (more accurate); ``"elementwise"`` adds all
        terms into one accumulator chunk by chunk (Fig. 7 of the paper).
    accumulate : {"cube16", "sequential"} or None, keyword-only
        FP32 accumulation model of the CPU backend (``None``: ``"cube16"``).
        Hardware backends accumulate as their matrix engine does and accept
        only ``None``.
    keep_lo_lo : bool, keyword-only
        Also add the fourth product ``a_lo @ b_lo * 2**-2sb``.
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
        Refuse operands the split cannot represent to FP32 accuracy: finite
        values at or above ``split_limits(sb).max_abs`` (they would overflow
        to infinity) and rows of ``a`` / columns of ``b`` whose largest
        magnitude is below ``split_limits(sb).min_row_abs``.  ``False``
        skips the check (for studies of the split's limits).

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
    """
    a = _check_operand(a, "a")
    b = _check_operand(b, "b")
    torch_mode = _is_torch(a)
    if torch_mode != _is_torch(b):
        raise TypeError("sgemm_cube.matmul: a and b must both be NumPy arrays or both torch tensors")
    if torch_mode and a.device != b.device:
        raise ValueError(f"a is on {a.device} and b on {b.device}: move them to one device")
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {list(ORDERS)}")
    split_limits(sb)  # validates sb
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

    name = select_backend(a, b, backend)
    if accumulate is not None and name != "cpu":
        raise ValueError(f"accumulate={accumulate!r} selects an arithmetic model of the CPU backend; "
                         f"the {name!r} backend accumulates as its hardware does (pass accumulate=None)")
    nb = math.prod(batch)
    if torch_mode:
        import torch

        a3 = a2.expand(batch + (m, k)).reshape(nb, m, k)
        b3 = b2.expand(batch + (k, n)).reshape(nb, k, n)
        res = torch.empty((nb, m, n), dtype=torch.float32, device=a.device)
        if name == "cuda" and backend == "auto":
            from .backends import cuda

            if cuda.is_available() and cuda.prefers_native(nb, m, n, k, a.device):
                name = "native"
    else:
        a3 = np.broadcast_to(a2, batch + (m, k)).reshape(nb, m, k)
        b3 = np.broadcast_to(b2, batch + (k, n)).reshape(nb, k, n)
        res = np.empty((nb, m, n), np.float32)
    out = _check_out(out, result_shape, a, torch_mode)

    if res.numel() if torch_mode else res.size:
        if k == 0:
            res[...] = 0
        else:
            _compute(name, a3, b3, res, sb=sb, order=order, accumulate=accumulate, keep_lo_lo=keep_lo_lo,
                     check_range=check_range, torch_mode=torch_mode)
    res = res.reshape(result_shape)
    if out is None:
        return res
    out[...] = res
    return out


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


def _compute(name, a3, b3, res, *, sb, order, accumulate, keep_lo_lo, check_range, torch_mode):
    """Run one backend on 3-D operands, then the range check and the NaN/Inf patch."""
    mod = get_backend(name)
    kwargs = dict(sb=sb, order=order, keep_lo_lo=keep_lo_lo)
    if accumulate is not None:
        kwargs["accumulate"] = accumulate
    if name == "cpu":
        # The NumPy model works on shared-memory views of CPU tensors.  Its
        # range statistics cost little next to the product: check first.
        if torch_mode:
            a3, b3, res = a3.detach().numpy(), b3.detach().numpy(), res.numpy()
        stats = _stats(a3, b3)
        if check_range:
            _range_check(stats, sb, np.asarray)
        mod.matmul(a3, b3, out=res, **kwargs)
        if stats.a_nonfinite or stats.b_nonfinite:
            patch_special_values(a3, b3, res)
        return
    stats = mod.matmul(a3, b3, out=res, **kwargs)
    if name == "native":
        return
    if stats is None:
        stats = _stats(a3, b3)
    if check_range:
        _range_check(stats, sb, (lambda t: t.detach().cpu().numpy()) if torch_mode else np.asarray)
    if bool(stats.a_nonfinite) or bool(stats.b_nonfinite):
        patch_special_values(a3, b3, res)


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
