"""``torch.ops.sgemm_cube.matmul``: sgemm_cube as a PyTorch custom operator.

:func:`sgemm_cube.matmul` reads CPU tensors through NumPy views and launches
Triton or AscendC kernels from Python, none of which ``torch.compile`` can
trace.  Registered as an operator with :mod:`torch.library` it becomes one
opaque node that Dynamo, AOTAutograd, Inductor and ``torch.export`` keep in
their graphs without a graph break:

* schema ``sgemm_cube::matmul(Tensor a, Tensor b, *, int sb=12,
  str order="termwise", str? accumulate=None, bool keep_lo_lo=False,
  str backend="auto", bool rescale=True) -> Tensor``;
* one implementation for every device: it calls :func:`sgemm_cube.matmul`,
  which picks the backend from the tensors' device (CPU model, CUDA Triton
  kernels, Ascend NPU kernels where ``torch_npu`` is installed);
* a fake (meta) implementation giving the result's shape, dtype, device and
  (contiguous) strides, symbolic shapes included;
* autograd: ``dA = dC B^T`` and ``dB = A^T dC``, both computed with the
  operator itself (so double backward works too), summed over broadcast
  batch dimensions.

Out-of-range data.  The FP16 split keeps 22 significant bits of finite
``|x|`` below ``split_limits(sb).max_abs`` (32768 for sb = 12) and at or
above ``min_row_abs`` (2**-15).  Gradients leave that range all the time;
:func:`sgemm_cube.matmul` handles it on the device, per row of ``a`` and
column of ``b`` (:mod:`sgemm_cube.cpu_fallback.guard`).  With ``rescale=True`` (the
default) the operator passes ``scale="auto"``, the library's default: a
line that does not fit the split as it is is multiplied by the power of
two that puts its largest finite magnitude in the split's top binade, and
the result is multiplied back (exact, one rounding); lines that fit are
left alone, so on in-range data the result is bit for bit that of
``scale=None``.  ``rescale=False`` passes ``scale=None``: no line is
scaled, and the lines the split cannot hold have their outputs computed in
plain FP32 instead.  Either way every output keeps SGEMM's error bound, and
lines with NaN/Inf (or values the split would overflow on) are computed in
plain FP32, so special values propagate as in native FP32.
"""
from __future__ import annotations

import math

import torch

from sgemm_cube.cpu_fallback import ORDERS, split_limits

from . import product as _product_path
from .plan import make_request
from ._autograd import gradient_operands, gradients
from . import distributed as _distributed
from . import switch as _switch

__all__ = ["matmul", "linear", "OP"]

_SCHEMA = ('(Tensor a, Tensor b, *, int sb=12, str order="termwise", str? accumulate=None, '
           'bool keep_lo_lo=False, str backend="auto", bool rescale=True) -> Tensor')


# Tagged cudagraph_unsafe: Inductor leaves the operator out of CUDA-graph
# capture and graphs the rest.  (The CUDA backend no longer reads anything
# back to the host, but it prepares and caches its launches in Python on first
# use, and backend="auto" may take another path per shape; capture is not
# tested.)
_TAGS = {"tags": (torch.Tag.cudagraph_unsafe,)} if hasattr(torch.Tag, "cudagraph_unsafe") else {}


@torch.library.custom_op("sgemm_cube::matmul", mutates_args=(), schema=_SCHEMA, **_TAGS)
def _matmul_op(a: torch.Tensor, b: torch.Tensor, *, sb: int = 12, order: str = "termwise",
               accumulate: str | None = None, keep_lo_lo: bool = False, backend: str = "auto",
               rescale: bool = True) -> torch.Tensor:
    """The eager implementation, for every device: :func:`sgemm_cube.matmul` does the dispatch."""
    options = dict(sb=sb, order=order, accumulate=accumulate, keep_lo_lo=keep_lo_lo, backend=backend)
    # The backends call torch.matmul themselves (the native backend): with the
    # drop-in switch on they must reach the originals.
    with _switch.bypass():
        if a.dim() > 2 and b.dim() == 2:
            # One (batch*M, K) x (K, N) product instead of a batch of small ones;
            # rows are independent, so the values are the same.
            lead = a.shape[:-1]
            rows = math.prod(lead)  # not -1: ambiguous when K = 0
            return _product(a.reshape(rows, a.shape[-1]), b, rescale, options).reshape(*lead, b.shape[-1])
        return _product(a, b, rescale, options)


#: The operator, ``torch.ops.sgemm_cube.matmul.default``.
OP = torch.ops.sgemm_cube.matmul.default


def _product(a, b, rescale: bool, options: dict) -> torch.Tensor:
    # rescale: the API's exact power-of-two scaling of the rows of a and columns of b that need it.
    # product.compute, not sgemm_cube.matmul: the operator's own autograd formula records the gradients.
    req = make_request(scale="auto" if rescale else None, **options)
    return _product_path.compute(req, a, b)


def _check_options(sb: int, order: str) -> None:
    """Raise ValueError now for options the operator would refuse when it runs."""
    split_limits(sb)  # validates sb
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {list(ORDERS)}")


@_matmul_op.register_fake
def _matmul_fake(a, b, *, sb=12, order="termwise", accumulate=None, keep_lo_lo=False, backend="auto",
                 rescale=True):
    torch._check(a.dtype == torch.float32 and b.dtype == torch.float32,
                 lambda: f"sgemm_cube::matmul takes float32 tensors, got {a.dtype} and {b.dtype}")
    torch._check(a.device == b.device, lambda: f"a is on {a.device} and b on {b.device}")
    torch._check(a.dim() >= 1 and b.dim() >= 1, lambda: "sgemm_cube::matmul: operands must have at least one dimension")
    k_b = b.shape[-2] if b.dim() >= 2 else b.shape[0]
    torch._check(a.shape[-1] == k_b,
                 lambda: f"sgemm_cube::matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not match")
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m = a.shape[-2:-1]  # empty for a 1-D a
    n = b.shape[-1:] if b.dim() >= 2 else ()
    return a.new_empty((*batch, *m, *n))  # the implementation returns contiguous results too


def _setup_context(ctx, inputs, keyword_only_inputs, output):
    a, b = inputs
    ctx.save_for_backward(a, b)
    ctx.options = keyword_only_inputs


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    opts = ctx.options
    pair_a, pair_b = gradient_operands(a, b, grad, *ctx.needs_input_grad[:2])
    return gradients(a, b, None if pair_a is None else OP(*pair_a, **opts),
                     None if pair_b is None else OP(*pair_b, **opts))


_matmul_op.register_autograd(_backward, setup_context=_setup_context)


def matmul(a: torch.Tensor, b: torch.Tensor, sb: int = 12, *, order: str = "termwise",
           accumulate: str | None = None, keep_lo_lo: bool = False, backend: str = "auto",
           rescale: bool = True) -> torch.Tensor:
    """Differentiable, compilable sgemm_cube product of float32 tensors.

    The custom operator ``torch.ops.sgemm_cube.matmul``: same arithmetic as
    :func:`sgemm_cube.matmul`, but traceable by ``torch.compile`` and
    ``torch.export`` and differentiable (both gradients are computed with
    the same emulated product).

    Parameters
    ----------
    a : Tensor, shape (..., M, K) or (K,), float32
    b : Tensor, shape (..., K, N) or (K,), float32
        On one device (CPU, CUDA, or Ascend NPU).  Batch dimensions
        broadcast and 1-D operands are promoted as in :func:`torch.matmul`.
    sb : int, default 12
        Scaling exponent of the FP16 residuals, ``0 <= sb <= 24``.
    order : {"termwise", "elementwise"}, keyword-only
        How the three FP16 products are accumulated (see :func:`sgemm_cube.matmul`).
    accumulate : {"cube16", "sequential"} or None, keyword-only
        FP32 accumulation model of the CPU backend; ``None`` for the others.
    keep_lo_lo : bool, keyword-only
        Also add the fourth product ``a_lo @ b_lo * 2**-2sb``.
    backend : {"auto", "cpu", "cuda", "npu", "native"}, keyword-only
        As in :func:`sgemm_cube.matmul`; ``"auto"`` picks by device.
    rescale : bool, default True, keyword-only
        ``True``: :func:`sgemm_cube.matmul`'s ``scale="auto"`` (its
        default): the rows of ``a`` and columns of ``b`` that do not fit the
        split as they are are scaled by a power of two (exact; see the module
        docstring).  ``False``: ``scale=None``, no scaling; the lines the
        split cannot hold have their outputs computed in plain FP32.  Any
        finite float32 data keep FP32 accuracy either way.

    Returns
    -------
    Tensor, float32, contiguous
        ``a @ b`` on the operands' device, of :func:`torch.matmul`'s shape.
        NaN and infinities propagate as in native FP32.

    Examples
    --------
    >>> import torch
    >>> from sgemm_cube.torch_ops import matmul
    >>> a = torch.randn(8, 5, requires_grad=True)
    >>> c = matmul(a, torch.randn(5, 3))
    >>> c.sum().backward()
    >>> a.grad.shape
    torch.Size([8, 5])
    """
    return OP(a, b, sb=sb, order=order, accumulate=accumulate, keep_lo_lo=keep_lo_lo, backend=backend,
              rescale=rescale)


def linear(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *, sb: int = 12,
           order: str = "termwise", keep_lo_lo: bool = False, backend: str = "auto",
           rescale: bool = True) -> torch.Tensor:
    """``input @ weight.T + bias`` with the product computed by :func:`matmul`.

    The float32 counterpart of :func:`torch.nn.functional.linear`.

    Parameters
    ----------
    input : Tensor, shape (..., in_features), float32
    weight : Tensor, shape (out_features, in_features) or (in_features,), float32
    bias : Tensor, shape (out_features,) or (), float32, optional
        Added in FP32 after the product.
    sb, order, keep_lo_lo, backend, rescale
        As in :func:`matmul` (keyword-only).

    Returns
    -------
    Tensor, shape (..., out_features), float32
    """
    out = matmul(input, weight.t(), sb, order=order, keep_lo_lo=keep_lo_lo, backend=backend, rescale=rescale)
    return out if bias is None else out + bias


# DTensor operands: sharding rules registered when torch.distributed.tensor is (or gets) imported.
_distributed.install()
