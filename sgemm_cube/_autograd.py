"""Gradients of a matrix product computed with the product itself.

For ``C = a @ b`` (:func:`torch.matmul` shapes and broadcasting),
``dA = dC @ b^T`` and ``dB = a^T @ dC``, summed over the batch dimensions
that were broadcast.  The formula is two steps with no callback between
them, so that a caller computes the products itself and no call comes back
up into the caller's module: :func:`gradient_operands` gives the operand
pairs of the products, :func:`gradients` turns the products into ``(dA,
dB)``.  Both callers use them: :func:`differentiable` (the path of
:func:`sgemm_cube.matmul` on tensors that require grad, products by
:func:`sgemm_cube.product.compute`) and the ``sgemm_cube::matmul``
operator's autograd formula (:mod:`sgemm_cube.torch_ops`, products by the
operator), so both compute their gradients with the emulated product and the
forward's options.
"""
from __future__ import annotations

import math

import torch

from .product import compute

__all__ = ["gradient_operands", "gradients", "differentiable"]


def _matrix_forms(a, b, grad):
    """``a``, ``b``, ``grad`` as (..., M, K), (..., K, N), (..., M, N): 1-D operands get their dimension back."""
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    g2 = grad.unsqueeze(-1) if b.dim() == 1 else grad
    g2 = g2.unsqueeze(-2) if a.dim() == 1 else g2
    return a2, b2, g2


def gradient_operands(a, b, grad, need_a: bool = True, need_b: bool = True):
    """The products whose results give ``(dA, dB)``: ``((x, y) or None, (x, y) or None)``.

    ``x @ y`` (:func:`torch.matmul` shapes) is computed by the caller and
    passed to :func:`gradients`.  A 2-D operand against a batched one gets
    its gradient from one product over the folded batch (K' = batch * N or
    batch * M) instead of a batch of small ones.
    """
    a2, b2, g2 = _matrix_forms(a, b, grad)
    m, k, n = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    batch = math.prod(g2.shape[:-2])  # sizes spelled out: reshape(-1, 0) is ambiguous for empty tensors
    pair_a = pair_b = None
    if need_a:
        if a2.dim() == 2 and g2.dim() > 2:  # dA = sum_batch dC_i B_i^T
            pair_a = (g2.movedim(-2, 0).reshape(m, batch * n),
                      b2.expand(*g2.shape[:-2], k, n).mT.reshape(batch * n, k))
        else:
            pair_a = (g2, b2.mT)
    if need_b:
        if b2.dim() == 2 and g2.dim() > 2:  # dB = sum_batch A_i^T dC_i
            pair_b = (a2.expand(*g2.shape[:-2], m, k).reshape(batch * m, k).mT, g2.reshape(batch * m, n))
        else:
            pair_b = (a2.mT, g2)
    return pair_a, pair_b


def gradients(a, b, product_a, product_b):
    """``(dA, dB)`` from the products of :func:`gradient_operands` (None where not needed)."""
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    grad_a = None if product_a is None else product_a.sum_to_size(a2.shape).reshape(a.shape)
    grad_b = None if product_b is None else product_b.sum_to_size(b2.shape).reshape(b.shape)
    return grad_a, grad_b


class _Product(torch.autograd.Function):
    """``a @ b`` by :func:`~sgemm_cube.product.compute` with the options ``req``, recorded for autograd.

    The backward's products go through :func:`differentiable` again, so
    double backward works.
    """

    @staticmethod
    def forward(ctx, a, b, req):
        ctx.save_for_backward(a, b)
        ctx.req = req
        return compute(req, a, b)  # grad mode is off here: nothing records

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        pair_a, pair_b = gradient_operands(a, b, grad, *ctx.needs_input_grad[:2])
        product_a = None if pair_a is None else differentiable(ctx.req, *pair_a)
        product_b = None if pair_b is None else differentiable(ctx.req, *pair_b)
        grad_a, grad_b = gradients(a, b, product_a, product_b)
        return grad_a, grad_b, None


def _needs_grad(a, b) -> bool:
    """Whether ``a @ b`` must be recorded: torch tensors, one of them requiring grad, grad mode on."""
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and (a.requires_grad or b.requires_grad)
            and torch.is_grad_enabled())


def differentiable(req, a, b, out=None):
    """``a @ b`` with the validated options ``req``, recorded for autograd where the operands need it.

    Raises
    ------
    RuntimeError
        ``out=`` with operands that require grad, or an ``out`` that requires grad, in grad mode (as
        :func:`torch.matmul`).
    """
    out_needs_grad = isinstance(out, torch.Tensor) and out.requires_grad and torch.is_grad_enabled()
    if not (_needs_grad(a, b) or out_needs_grad):
        return compute(req, a, b, out)
    if out is not None:
        raise RuntimeError("matmul(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    return _Product.apply(a, b, req)
