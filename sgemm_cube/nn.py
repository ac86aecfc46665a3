"""Explicit modules: :class:`Linear` and :func:`convert`.

For users who prefer naming the layers that use sgemm_cube over the
process-wide switch (:func:`sgemm_cube.switch.enable`).  :class:`Linear` is a
:class:`torch.nn.Linear` (same parameters, same ``state_dict``, passes
``isinstance`` checks) whose float32 forward and backward products are
:func:`sgemm_cube.torch_ops.linear`; other dtypes run as in torch.
"""
from __future__ import annotations

import torch

from . import torch_ops
from .plan import Order, Scale, Scheme, make_request

__all__ = ["Linear", "convert"]


class Linear(torch.nn.Linear):
    """:class:`torch.nn.Linear` computing ``x @ W.T + b`` with sgemm_cube.

    Parameters
    ----------
    in_features, out_features, bias, device, dtype
        As in :class:`torch.nn.Linear`.
    sb, scheme, scale, order, fixup
        Options of the product (keyword-only), as in :func:`sgemm_cube.matmul`
        (same names, defaults and validation).

    Shape
    -----
    input (..., in_features) -> output (..., out_features).  Float32 inputs
    and weights go through sgemm_cube (forward and both gradients); any
    other dtype runs :func:`torch.nn.functional.linear` unchanged.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 sb: int = 12, scheme: Scheme = "auto", scale: Scale = "auto", order: Order = "termwise",
                 fixup: bool = True):
        make_request(sb, scheme, scale, order, fixup=fixup)  # refuse bad options now, not at the first forward
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.sb, self.scheme, self.scale, self.order, self.fixup = sb, scheme, scale, order, fixup

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.dtype == torch.float32 and self.weight.dtype == torch.float32:
            return torch_ops.linear(input, self.weight, self.bias, sb=self.sb, scheme=self.scheme, scale=self.scale,
                                    order=self.order, fixup=self.fixup)
        return torch.nn.functional.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        defaults = dict(scheme="auto", scale="auto", order="termwise", fixup=True)
        changed = "".join(f", {k}={getattr(self, k)!r}" for k, v in defaults.items() if getattr(self, k) != v)
        return f"{super().extra_repr()}, sb={self.sb}{changed}"

    @classmethod
    def from_linear(cls, module: torch.nn.Linear, **options) -> "Linear":
        """A :class:`Linear` sharing ``module``'s parameters (the same Parameter objects).

        Optimizers built over the original keep working; forward/backward
        hooks registered on ``module`` are not carried over.
        """
        with torch.device("meta"):  # no throwaway initialisation
            new = cls(module.in_features, module.out_features, bias=module.bias is not None, **options)
        new.weight = module.weight
        new.bias = module.bias
        new.train(module.training)
        return new


def convert(module: torch.nn.Module, *, sb: int = 12, scheme: Scheme = "auto", scale: Scale = "auto",
            order: Order = "termwise", fixup: bool = True) -> torch.nn.Module:
    """Replace every :class:`torch.nn.Linear` in ``module`` by a :class:`Linear`.

    Submodules are replaced in place (their parameters are shared, not
    copied), so ``model = convert(model)`` and an optimizer made before the
    call both keep working.  Subclasses of ``torch.nn.Linear`` other than
    plain ``torch.nn.Linear`` (and existing :class:`Linear` modules) are
    left alone: they may override ``forward``.

    Parameters
    ----------
    module : torch.nn.Module
    sb, scheme, scale, order, fixup
        Options given to every new :class:`Linear` (keyword-only), as in :func:`sgemm_cube.matmul`.

    Returns
    -------
    torch.nn.Module
        ``module`` itself, or a new :class:`Linear` if ``module`` is a
        ``torch.nn.Linear``.

    Examples
    --------
    >>> import torch, sgemm_cube.nn
    >>> model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    >>> model = sgemm_cube.nn.convert(model)
    >>> type(model[0]).__module__
    'sgemm_cube.nn'
    """
    options = dict(sb=sb, scheme=scheme, scale=scale, order=order, fixup=fixup)
    if type(module) is torch.nn.Linear:
        return Linear.from_linear(module, **options)
    for name, child in module.named_children():
        new = convert(child, **options)
        if new is not child:
            setattr(module, name, new)
    return module
