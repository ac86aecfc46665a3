"""Split schemes: how an FP32 value becomes low-precision slices, and which slice products are kept.

=========  ======  ======  ========  ==========================================================
scheme     format  slices  products  what it is
=========  ======  ======  ========  ==========================================================
fp16x3     FP16    2       3         SGEMM-cube (the default): hi, lo * 2**sb; drops lo*lo
fp16x4     FP16    2       4         SGEMM-cube with the fourth term lo*lo
bf16x9     BF16    3       9         BF16x9 (NVIDIA): three BF16 slices, all nine products;
                                     FP32's whole exponent range, no scaling needed
bf16x6     BF16    3       6         BF16x6: bf16x9 without the three smallest products
=========  ======  ======  ========  ==========================================================

Slice ``i`` of a value is about ``2**(-step * i)`` times its size (``step`` =
``sb`` for FP16 after the explicit ``2**sb`` scaling of the residual, 8 for
BF16), so product ``(i, j)`` (slice ``i`` of A times slice ``j`` of B) is of
*level* ``i + j``.  The products are listed level by level; termwise
combination sums the levels from the smallest up (:mod:`sgemm_cube.cpu_fallback.gemm`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .formats import BF16, FP16, Format, round_to_bf16
from .split import split

__all__ = ["Scheme", "SCHEMES", "get_scheme", "split_slices"]


class Scheme(NamedTuple):
    """A split scheme.

    Attributes
    ----------
    name : str
    format : Format
        Format of the slices (FP16 or BF16).
    slices : int
        Number of slices per FP32 value.
    products : tuple of (i, j)
        Slice products kept, ordered by level ``i + j`` (largest first).
    scaled : bool
        Whether slices below the first are scaled by ``2**sb`` (FP16 needs
        it to keep the residual out of its subnormal range; BF16 has FP32's
        exponent range and needs none).
    """

    name: str
    format: Format
    slices: int
    products: tuple
    scaled: bool

    @property
    def levels(self) -> list[list[tuple[int, int]]]:
        """Products grouped by level ``i + j``, level 0 first."""
        top = max(i + j for i, j in self.products)
        return [[p for p in self.products if sum(p) == level] for level in range(top + 1)]

    def level_scale(self, sb: int) -> float:
        """Factor between consecutive levels after the products: ``2**-sb`` or 1."""
        return 2.0 ** -sb if self.scaled else 1.0


def _by_level(pairs):
    return tuple(sorted(pairs, key=lambda p: (p[0] + p[1], -p[0])))


SCHEMES = {
    "fp16x3": Scheme("fp16x3", FP16, 2, ((0, 0), (1, 0), (0, 1)), True),
    "fp16x4": Scheme("fp16x4", FP16, 2, ((0, 0), (1, 0), (0, 1), (1, 1)), True),
    "bf16x9": Scheme("bf16x9", BF16, 3, _by_level([(i, j) for i in range(3) for j in range(3)]), False),
    "bf16x6": Scheme("bf16x6", BF16, 3, _by_level([(i, j) for i in range(3) for j in range(3) if i + j <= 2]), False),
}


def get_scheme(name: str) -> Scheme:
    """The scheme called ``name``; an unknown name raises ValueError listing the valid ones."""
    try:
        return SCHEMES[name]
    except KeyError:
        raise ValueError(f"unknown scheme {name!r}; choose one of {sorted(SCHEMES)} (or 'auto' in sgemm_cube.matmul)") from None


def split_slices(x: np.ndarray, scheme: Scheme, sb: int, *, arithmetic=None) -> list[np.ndarray]:
    """Split FP32 ``x`` into the scheme's slices.

    FP16 schemes: ``[hi, lo]`` from :func:`sgemm_cube.cpu_fallback.split` (``lo`` scaled
    by ``2**sb``; its conversions under ``arithmetic``, :mod:`sgemm_cube.cpu_fallback.arithmetic`).
    BF16 schemes: ``s0 = bf16(x)``, ``s1 = bf16(x - s0)``,
    ``s2 = bf16(x - s0 - s1)`` (each residual exact in FP32, so
    ``s0 + s1 + s2 == x`` for every FP32 value with ``|x| >= 2**-110``;
    below, bits under BF16's subnormal step ``2**-133`` are lost, an absolute
    error of at most ``2**-134``; ``sb`` and ``arithmetic``, whose fields are the FP16
    conversions', are unused).  NaN/Inf stay in the first slice, the others are 0.
    """
    if scheme.format is FP16:
        return list(split(x, sb, arithmetic=arithmetic))
    x = np.asarray(x, dtype=np.float32)
    finite = np.isfinite(x)
    rest = np.where(finite, x, np.float32(0))
    slices = []
    for _ in range(scheme.slices):
        s = round_to_bf16(rest)
        slices.append(s)
        rest = rest - s  # exact: s is rest rounded to 8 bits
    slices[0] = np.where(finite, slices[0], x)
    return slices
