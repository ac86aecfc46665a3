"""The public entry points: :func:`matmul` and :func:`explain`.

A call travels one way: the options become one validated
:class:`~sgemm_cube.plan.Request` (:func:`~sgemm_cube.plan.make_request`,
cached), then :mod:`sgemm_cube.product` checks the operands, asks the
backend of the data's device for its :class:`~sgemm_cube.plan.Plan` and runs
it (operands that require grad go through :mod:`sgemm_cube._autograd`
first, which computes the gradients on the same path).
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Union

import numpy as np

from . import product
from .plan import Accumulate, BackendName, Order, Plan, SbOption, Scale, Scheme, make_request
from .product import _is_torch, select_backend

__all__ = ["matmul", "explain", "select_backend"]

if TYPE_CHECKING:  # annotations only: importing sgemm_cube never imports torch
    import torch

#: What ``a``, ``b`` and ``out`` may be: NumPy arrays or torch tensors (CPU, CUDA, Ascend NPU).
Operand = Union[np.ndarray, "torch.Tensor"]


def _options(sb, scheme, scale, order, accumulate, backend, fixup):
    try:
        return make_request(sb, scheme, scale, order, accumulate, backend, fixup)  # cached: the common case
    except TypeError as exc:
        if _is_torch(sb) or isinstance(sb, np.ndarray):
            raise TypeError("sgemm_cube.matmul's third positional argument is sb (an int or 'auto'), not an "
                            "array: pass the output as out=... (keyword-only)") from None
        if "unhashable" in str(exc):  # an option of a type no option has (a list, an array): say which
            raise TypeError(f"sgemm_cube.matmul: options must be strings, integers or booleans "
                            f"(sb={sb!r}, scheme={scheme!r}, scale={scale!r}, order={order!r})") from None
        raise


def matmul(a: Operand, b: Operand, sb: SbOption = 12, *, scheme: Scheme = "auto", scale: Scale = "auto",
           order: Order = "termwise", accumulate: Accumulate = None, backend: BackendName = "auto",
           out: Operand | None = None, fixup: bool = True) -> Operand:
    """FP32 matrix product computed with FP16 matrix products (SGEMM-cube), never less accurate than SGEMM.

    This docstring is the one statement of what a product promises (shapes,
    dtypes, ``out=``, errors, the guarantee); README.md and
    :mod:`sgemm_cube.switch` link here.  The switch, the operator
    ``torch.ops.sgemm_cube.matmul`` and :mod:`sgemm_cube.nn` compute each
    product with these options and this guarantee; their calling
    conventions (shapes, ``out=``, errors) are PyTorch's.

    Each FP32 operand is split into an FP16 high part and an FP16 residual
    scaled by ``2**sb``; three FP16 products with FP32 accumulation rebuild
    ``a @ b`` (``cpu_fallback/gemm.py`` has the algorithm).  Rows of ``a``
    and columns of ``b`` that the split cannot hold as they are are scaled by
    a power of two; those it cannot hold at all (entries spanning more than
    about 29 binades, NaN, infinities) have their outputs computed in plain
    FP32 (the fix-up, ``cpu_fallback/guard.py``).  All of it is decided on
    the device: on CUDA a call launches four kernels and never waits for the GPU.

    **Guarantee** (default options, any finite float32 data, any device):
    every output satisfies SGEMM's componentwise error bound,
    ``|C - C64| <= 3 * K * 2**-24 * (|a| @ |b|)`` (plus ``K * 2**-149`` for
    underflow).  With an emulating backend named and ``K < 16`` the split's
    own rounding makes it ``max(3K, K + 14) * 2**-24 * (|a| @ |b|)``.  NaN
    and infinities propagate as in native SGEMM.  Only ``fixup=False``
    gives the guarantee up.  How it is kept, overflow, what was measured
    beside it and how it is tested: README.md, "The accuracy guarantee".

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
    scheme : {"auto", "fp16x3", "fp16x4", "bf16x9", "bf16x6"}, keyword-only
        SGEMM-cube's three FP16 products, with the fourth ``lo*lo`` product,
        or three BF16 slices with nine or six products (scaling and the FP32
        recomputation keep every scheme within the guarantee).  ``"auto"``
        (default) is ``"fp16x3"``, the fastest where the rows and columns fit
        its split; on CUDA, from 2*batch*m*n*k >= 2**34 (2048^3) or from
        K = 1024, the GPU chooses per call, with no host synchronisation, ``"bf16x6"`` where
        ``"fp16x3"`` would recompute far more outputs in FP64 than ``"bf16x6"``
        (wide-range rows: log-normal data, kernel matrices, polynomial
        features; ``configs/default.json``, key ``auto_scheme``).  That call's
        workspace holds three 16-bit planes per operand instead of two.
    scale : {"auto", "rows", "matrix", None}, keyword-only
        Exact power-of-two scaling before the split, undone on the result
        with one rounding.  ``"auto"``: the rows of ``a`` and columns of ``b``
        that do not fit the split as they are (data at 1e-30 or 1e30 then
        split as well as data near 1); ``"rows"``: every row and column, and
        with the FP16 schemes on the CPU and CUDA backends the rows and
        columns that reach below the split's range are emulated too, each of
        their outputs certified after the product (its magnitude, scaled, at
        least ``cpu_fallback.guard.certificate_threshold(K)``) or computed
        again from the unscaled operands: the same componentwise guarantee,
        and on data wide on both sides (log-normal) 2.8-3.4x SGEMM instead
        of 1.7x (H200, docs/speed.md), but on wide data whose outputs rest on
        a few products a normwise error up to 4x native's (docs/guarantee.md);
        ``"matrix"``: one factor per matrix; ``None``:
        none (lines outside the split's range are computed in FP32).
    order : {"termwise", "elementwise"}, keyword-only
        ``"termwise"`` keeps each product in its own FP32 accumulator and sums
        the small terms first (more accurate); ``"elementwise"`` adds all
        terms into one accumulator chunk by chunk (Fig. 7 of the paper).
    accumulate : {"cube16", "sequential", "truncate"} or None, keyword-only
        FP32 accumulation model of the CPU backend (``None``: ``"cube16"``;
        :mod:`sgemm_cube.cpu_fallback.accumulate`).
        Hardware backends accumulate as their matrix engine does and accept
        only ``None``.
    backend : {"auto", "cpu", "cuda", "npu", "native"}, keyword-only
        ``"auto"``: the CPU model for NumPy arrays and CPU tensors, the
        Triton kernels for CUDA tensors, the AscendC kernels for NPU tensors;
        native FP32 where it is both faster and as accurate (``K < 16``
        everywhere; on CUDA the small and skinny shapes of the measured
        hybrid rule; on an Ascend 910B wherever the pipeline model predicts
        its FP32 cube faster).  ``"native"`` is the library's own FP32
        matmul, except on an NPU where that is not FP32 (always on the 910A,
        whose CANN computes FP32 products in FP16 by default; on the 910B
        under another precision mode or HF32): there the vector units compute
        it in plain FP32 (``K < 16``) or the emulation with the guarantee
        runs; :func:`explain` says which and why.  A
        backend that cannot run here raises
        :class:`~sgemm_cube.backends.BackendUnavailableError` naming what
        is missing.
    out : ndarray or torch.Tensor, optional, keyword-only
        Array of the result's shape to write into, any strides.  NumPy: any
        dtype float32 casts to under ``same_kind`` (as :func:`numpy.matmul`);
        torch: a float32 tensor on the operands' device, resized (with
        torch's warning) if its shape differs, as :func:`torch.matmul` does;
        the resize comes once the result is computed, so a call that fails
        leaves it untouched.
    fixup : bool, default True, keyword-only
        Fix up the rows and columns with an entry the split would round to
        fewer than 22 bits: their outputs are computed from the unscaled
        operands, without the split.  ``False`` keeps the paper's split for
        them (for studies of the split; no guarantee).  Lines with NaN/Inf or
        entries the split would overflow on are always fixed up.

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
        An operand is not float32 (or is a sparse or nested tensor), NumPy
        and torch operands are mixed, an option has the wrong type (an array
        passed positionally as ``sb``), ``out`` is not of the operands' kind
        (an array for tensors or a tensor for arrays), or NumPy's ``out``
        cannot hold float32 (``same_kind`` casting, as :func:`numpy.matmul`).
    ValueError
        NumPy operands: shapes do not match, or ``out`` has the wrong shape;
        any operands: an option is unknown; tensors on a device type with no
        sgemm_cube backend.
    BackendUnavailableError
        (a RuntimeError, :mod:`sgemm_cube.backends`) the backend asked for,
        or the one of the operands' device, cannot run here; the message
        names what is missing.
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
    >>> big = sgemm_cube.matmul(a * np.float32(2.0**100), b)    # data near 1e30: scaled, the same bits
    >>> bool((big == c * np.float32(2.0**100)).all())
    True
    """
    fast_matmul = product.fast_matmul  # a small CUDA call planned native before: PyTorch's kernel, from C++
    if fast_matmul is not None:
        fast = fast_matmul(a, b, sb, scheme, scale, order, accumulate, backend, out, fixup)
        if fast is not None:
            return fast
    req = _options(sb, scheme, scale, order, accumulate, backend, fixup)
    if ((getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False)  # torch tensors
         or getattr(out, "requires_grad", False)) and sys.modules["torch"].is_grad_enabled()):
        from ._autograd import differentiable

        return differentiable(req, a, b, out)
    fast = product.native_call(req, a, b, out, (sb, scheme, scale, order, accumulate, backend, fixup))
    if fast is not None:
        return fast
    return product.compute(req, a, b, out)


def explain(a: Operand, b: Operand, sb: SbOption = 12, *, scheme: Scheme = "auto", scale: Scale = "auto",
            order: Order = "termwise", accumulate: Accumulate = None, backend: BackendName = "auto",
            fixup: bool = True) -> Plan:
    """Say how :func:`matmul` would compute ``a @ b`` with these options, and why, without computing it.

    Takes :func:`matmul`'s parameters and returns the :class:`~sgemm_cube.plan.Plan`
    it runs, native FP32 included: every decision the backend's ``run`` reads (scheme,
    sb, scale, backend, order, fixup, accumulate, config) and the reason.
    What depends on the values (which lines are scaled, which are computed
    in FP32) is decided per row and column on the device while splitting.

    Examples
    --------
    >>> import numpy as np, sgemm_cube
    >>> a = np.ones((4, 8), np.float32)
    >>> sgemm_cube.explain(a, a.T).backend          # K = 8 < 16: native FP32 is faster and as accurate
    'native'
    """
    req = _options(sb, scheme, scale, order, accumulate, backend, fixup)
    return product.plan(req, a, b)

