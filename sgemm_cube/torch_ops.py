"""``torch.ops.sgemm_cube.matmul``: sgemm_cube as a PyTorch custom operator.

:func:`sgemm_cube.matmul` reads CPU tensors through NumPy views and launches
Triton or AscendC kernels from Python, none of which ``torch.compile`` can
trace.  Registered as an operator with :mod:`torch.library` it becomes one
opaque node that Dynamo, AOTAutograd, Inductor and ``torch.export`` keep in
their graphs without a graph break:

* schema ``sgemm_cube::matmul(Tensor a, Tensor b, *, int sb=12,
  str scheme="auto", str? scale="auto", str order="termwise",
  str? accumulate=None, str backend="auto", bool fixup=True) -> Tensor``:
  :func:`sgemm_cube.matmul`'s options, with the same names and meanings;
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
column of ``b`` (:mod:`sgemm_cube.cpu_fallback.guard`).  With ``scale="auto"``
(the default) a line that does not fit the split as it is is multiplied by
the power of two that puts its largest finite magnitude in the split's top
binade, and the result is multiplied back (exact, one rounding); lines that
fit are left alone, so on in-range data the result is bit for bit that of
``scale=None``.  With ``scale=None`` no line is scaled, and the lines the
split cannot hold are fixed up (their outputs computed without the split).
Either way every output keeps SGEMM's error bound, and lines with NaN/Inf
(or values the split would overflow on) are fixed up, so special values
propagate as in native FP32.
"""
from __future__ import annotations

import math

import torch

from . import product as _product_path
from .plan import Accumulate, BackendName, Order, Scale, Scheme, make_request
from ._autograd import gradient_operands, gradients
from . import distributed as _distributed
from . import switch as _switch

__all__ = ["matmul", "linear", "OP"]

_SCHEMA = ('(Tensor a, Tensor b, *, int sb=12, str scheme="auto", str? scale="auto", str order="termwise", '
           'str? accumulate=None, str backend="auto", bool fixup=True) -> Tensor')


# Tagged cudagraph_unsafe: Inductor leaves the operator out of CUDA-graph
# capture and graphs the rest.  The CUDA backend reads nothing back to the host
# and replays correctly when captured by hand (tested:
# tests/gpu/test_guarantee_gpu.py, test_switch_cuda.py), but it prepares and caches its launches in Python on a shape's
# first call, which must not happen during Inductor's capture.
_TAGS = {"tags": (torch.Tag.cudagraph_unsafe,)} if hasattr(torch.Tag, "cudagraph_unsafe") else {}


@torch.library.custom_op("sgemm_cube::matmul", mutates_args=(), schema=_SCHEMA, **_TAGS)
def _matmul_op(a: torch.Tensor, b: torch.Tensor, *, sb: int = 12, scheme: str = "auto", scale: str | None = "auto",
               order: str = "termwise", accumulate: str | None = None, backend: str = "auto",
               fixup: bool = True) -> torch.Tensor:
    """The eager implementation, for every device: :func:`sgemm_cube.matmul` does the dispatch."""
    req = make_request(sb, scheme, scale, order, accumulate, backend, fixup)
    # The backends call torch.matmul themselves (the native backend): with the
    # drop-in switch on they must reach the originals.
    with _switch.bypass():
        if a.dim() > 2 and b.dim() == 2:
            # One (batch*M, K) x (K, N) product instead of a batch of small ones;
            # rows are independent, so the values are the same.
            lead = a.shape[:-1]
            rows = math.prod(lead)  # not -1: ambiguous when K = 0
            return _product_path.compute(req, a.reshape(rows, a.shape[-1]), b).reshape(*lead, b.shape[-1])
        # product.compute, not sgemm_cube.matmul: the operator's own autograd formula records the gradients.
        return _product_path.compute(req, a, b)


#: The operator, ``torch.ops.sgemm_cube.matmul.default``.
OP = torch.ops.sgemm_cube.matmul.default


@_matmul_op.register_fake
def _matmul_fake(a, b, *, sb=12, scheme="auto", scale="auto", order="termwise", accumulate=None, backend="auto",
                 fixup=True):
    make_request(sb, scheme, scale, order, accumulate, backend, fixup)  # traced calls refuse what eager refuses
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


def matmul(a: torch.Tensor, b: torch.Tensor, sb: int = 12, *, scheme: Scheme = "auto", scale: Scale = "auto",
           order: Order = "termwise", accumulate: Accumulate = None, backend: BackendName = "auto",
           fixup: bool = True) -> torch.Tensor:
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
        Scaling exponent of the FP16 residuals, ``0 <= sb <= 24`` (an integer: the schema's type).
    scheme, scale, order, accumulate, backend, fixup : keyword-only
        As in :func:`sgemm_cube.matmul`, with the same defaults, validated by
        the same function (:func:`sgemm_cube.plan.make_request`).

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
    return OP(a, b, sb=sb, scheme=scheme, scale=scale, order=order, accumulate=accumulate, backend=backend,
              fixup=fixup)


def linear(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *, sb: int = 12,
           scheme: Scheme = "auto", scale: Scale = "auto", order: Order = "termwise", backend: BackendName = "auto",
           fixup: bool = True) -> torch.Tensor:
    """``input @ weight.T + bias`` with the product computed by :func:`matmul`.

    The float32 counterpart of :func:`torch.nn.functional.linear`.

    Parameters
    ----------
    input : Tensor, shape (..., in_features), float32
    weight : Tensor, shape (out_features, in_features) or (in_features,), float32
    bias : Tensor, shape (out_features,) or (), float32, optional
        Added in FP32 after the product.
    sb, scheme, scale, order, backend, fixup
        As in :func:`matmul` (keyword-only).

    Returns
    -------
    Tensor, shape (..., out_features), float32
    """
    out = matmul(input, weight.t(), sb, scheme=scheme, scale=scale, order=order, backend=backend, fixup=fixup)
    return out if bias is None else out + bias


# DTensor operands: sharding rules registered when torch.distributed.tensor is (or gets) imported.
_distributed.install()
