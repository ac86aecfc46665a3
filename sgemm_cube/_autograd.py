"""Gradients of a matrix product computed with the product itself.

For ``C = a @ b`` (:func:`torch.matmul` shapes and broadcasting),
``dA = dC @ b^T`` and ``dB = a^T @ dC``, summed over the batch dimensions
that were broadcast.  :func:`matmul_grads` is shared by
:func:`sgemm_cube.matmul` on tensors that require grad (through
:func:`differentiable_matmul`) and by the ``sgemm_cube::matmul`` operator
(:mod:`sgemm_cube.torch_ops`), so both compute their gradients with the
emulated product and the same options as the forward.
"""
from __future__ import annotations

import torch

__all__ = ["matmul_grads", "differentiable_matmul"]


def matmul_grads(product, a, b, grad, need_a: bool = True, need_b: bool = True):
    """``(dA, dB)`` of ``a @ b`` given ``grad`` = dC, each product computed by ``product(x, y)``.

    ``product`` takes two tensors with :func:`torch.matmul`'s shapes; a
    gradient that is not needed is None.  A 2-D operand against a batched
    one gets its gradient from one product over the folded batch
    (K' = batch * N or batch * M) instead of a batch of small ones.
    """
    # Work on the matrix forms (..., M, K) x (..., K, N) -> (..., M, N).
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    g2 = grad.unsqueeze(-1) if b.dim() == 1 else grad
    g2 = g2.unsqueeze(-2) if a.dim() == 1 else g2
    m, k, n = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    grad_a = grad_b = None
    if need_a:
        if a2.dim() == 2 and g2.dim() > 2:
            # dA = sum_batch dC_i B_i^T as one product over K' = batch * N.
            grad_a = product(g2.movedim(-2, 0).reshape(m, -1), b2.expand(*g2.shape[:-2], k, n).mT.reshape(-1, k))
        else:
            grad_a = product(g2, b2.mT).sum_to_size(a2.shape)
        grad_a = grad_a.reshape(a.shape)
    if need_b:
        if b2.dim() == 2 and g2.dim() > 2:
            # dB = sum_batch A_i^T dC_i as one product over K' = batch * M.
            grad_b = product(a2.expand(*g2.shape[:-2], m, k).reshape(-1, k).mT, g2.reshape(-1, n))
        else:
            grad_b = product(a2.mT, g2).sum_to_size(b2.shape)
        grad_b = grad_b.reshape(b.shape)
    return grad_a, grad_b


class _Product(torch.autograd.Function):
    """``product(a, b)`` recorded for autograd; backward uses ``product`` again (double backward works)."""

    @staticmethod
    def forward(ctx, a, b, product):
        ctx.save_for_backward(a, b)
        ctx.product = product
        return product(a, b)  # grad mode is off here: product does not record

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a, grad_b = matmul_grads(ctx.product, a, b, grad, *ctx.needs_input_grad[:2])
        return grad_a, grad_b, None


def differentiable_matmul(product, a, b):
    """``product(a, b)`` with a ``grad_fn`` whose gradients are computed by ``product``."""
    return _Product.apply(a, b, product)
