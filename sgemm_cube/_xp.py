"""The few array operations the API layer needs, for NumPy arrays and torch tensors alike.

(A full array-API layer would be overkill: these are the operations whose
spelling differs between the two libraries.)
"""
from __future__ import annotations

import numpy as np

__all__ = ["Ops"]


class Ops:
    """Array operations dispatched on the kind of ``like`` (NumPy array or torch tensor)."""

    def __init__(self, like):
        self.np = isinstance(like, np.ndarray)

    def f32(self, mask):
        return mask.astype(np.float32) if self.np else mask.float()

    def any(self, mask, axis):
        return mask.any(axis=axis) if self.np else mask.any(dim=axis)

    def amax(self, x, axis):
        return x.max(axis=axis, initial=0) if self.np else x.amax(dim=axis)

    def amin(self, x, axis):
        return x.min(axis=axis, initial=np.inf) if self.np else x.amin(dim=axis)

    def nonzero(self, mask):
        return np.nonzero(mask)[0] if self.np else mask.nonzero().flatten()

    def to_numpy(self, x) -> np.ndarray:
        return np.asarray(x) if self.np else x.detach().cpu().numpy()

    def from_numpy(self, x, like):
        if self.np:
            return x
        import torch

        return torch.as_tensor(x, device=like.device)

    def full_like(self, x, value):
        if self.np:
            return np.full_like(x, value)
        import torch

        return torch.full_like(x, value)

    def where(self, cond, x, y):
        if self.np:
            return np.where(cond, x, y)
        import torch

        return torch.where(cond, x, y)

    def special_mask(self, x):
        """True where x is NaN or infinite."""
        return (x != x) | (x == np.inf) | (x == -np.inf)

    def ldexp(self, x, e):
        """``x * 2**e`` exactly (unless the result under/overflows); ``e`` an integer array.

        torch builds ``2**e`` in the tensor's dtype, which overflows FP32 past
        ``|e| > 127``, so large exponents are applied in steps of at most 100.
        """
        if self.np:
            with np.errstate(over="ignore"):  # overflow to +-inf is the IEEE answer here
                return np.ldexp(x, e).astype(x.dtype)
        import torch

        e = torch.as_tensor(e, device=x.device)
        out = x
        while True:
            part = e.clamp(-100, 100)
            out = out * torch.exp2(part.to(x.dtype))
            e = e - part
            if not bool((e != 0).any()):
                return out
