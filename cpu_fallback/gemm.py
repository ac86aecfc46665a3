"""The SGEMM-cube algorithm on the NumPy arithmetic model.

This file is the algorithm, start to end, for one 2-D product of finite
FP32 matrices (the public :func:`sgemm_cube.matmul` adds batching, ``out=``,
the line bookkeeping of :mod:`.guard` (scaling, fix-up lines, NaN/Inf) around it).  For the default
scheme ``fp16x3``::

    A_hi, A_lo = split(A, sb)          # A ~= A_hi + A_lo * 2**-sb   (split.py)
    B_hi, B_lo = split(B, sb)
    HH = A_hi @ B_hi                   # FP16 products, FP32 accumulation
    LH = A_lo @ B_hi                   #   under an accumulation model
    HL = A_hi @ B_lo                   #   (accumulate.py)
    C  = (LH + HL) * 2**-sb + HH

Other schemes (``schemes.py``: ``fp16x4`` adds ``LL = A_lo @ B_lo``;
``bf16x9`` / ``bf16x6`` use three BF16 slices) follow the same pattern:
product ``(i, j)`` of slice ``i`` of A and slice ``j`` of B has *level*
``i + j`` and carries a factor ``2**(-sb * (i + j))`` for FP16 (1 for BF16).

Two orders of combination (SGEMM-cube Fig. 7):

``"termwise"`` (Fig. 7b, the default)
    Each product has its own FP32 accumulator over the whole K, in two
    levels as the NPU kernel runs it: the cube's accumulator restarts every
    ``k_group`` elements of K (:data:`~sgemm_cube.cpu_fallback.accumulate.K_GROUP`,
    1,024, by default) and each group's partial sum is added into the
    product's FP32 total in K order (the first stored, later ones added with
    ``arithmetic.atomic``'s rounding); ``k_group=None``: one accumulator over
    all of K, whose error grows with K on same-sign data.  Then the
    levels are summed from the smallest up: ``total`` starts as the first
    product of the top level; each further product of the level is added;
    going down a level, ``total = fl(total * 2**-sb)`` and the level's
    products are added in turn.  For fp16x3 that is
    ``C = fl(fl(fl(LH + HL) * 2**-sb) + HH)``; for fp16x4
    ``corr = fl(fl(fl(LL * 2**-sb) + LH) + HL)``, ``C = fl(fl(corr * 2**-sb) + HH)``.
``"elementwise"`` (Fig. 7a)
    One FP32 accumulator takes every product chunk by chunk: for each K
    chunk, for each product in level order (HH, LH, HL[, LL]),
    ``acc = fl(acc + fl(P_c) * 2**(-sb * level))``, where ``P_c`` is the
    chunk's exact dot product.

``fl`` is FP32 round-to-nearest-even; a power-of-two scaling is exact
unless it underflows.  Under the ``"truncate"`` accumulation model the
accumulators' adds (and, in the elementwise order, the scaled chunk sums)
round toward zero instead; the termwise combination is the vector unit's and
stays round-to-nearest.  ``arithmetic=`` (:mod:`sgemm_cube.cpu_fallback.arithmetic`)
selects the split's conversions and, unless ``accumulate`` is given, the
accumulation model.  Every result of this module is checked bit for bit
against the scalar reference in :mod:`sgemm_cube.cpu_fallback.reference`, and for
accuracy against float64 with native FP32 measured beside it.
"""
from __future__ import annotations

import numpy as np

from .accumulate import (K_GROUP, ROUNDING, accumulate_product, add_toward_zero, chunk_length, mul_toward_zero,
                         panel_sums, to_f32_toward_zero)
from .arithmetic import as_arithmetic
from .schemes import get_scheme, split_slices

__all__ = ["emulated_matmul", "ProductAccumulator", "ORDERS"]

ORDERS = ("termwise", "elementwise")


def _check_order(order: str) -> None:
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; choose one of {list(ORDERS)}")


def _accumulation(accumulate, arithmetic):
    """The accumulation model: ``accumulate`` if given (it must agree with a non-default
    ``arithmetic.accumulate``), else the arithmetic's."""
    ar = as_arithmetic(arithmetic)
    if accumulate is None:
        return ar, ar.accumulate
    if arithmetic is not None and ar.accumulate != "cube16" and ar.accumulate != accumulate:
        raise ValueError(f"accumulate={accumulate!r} contradicts arithmetic {ar} (accumulate={ar.accumulate!r})")
    return ar, accumulate


def emulated_matmul(a, b, *, sb: int = 12, order: str = "termwise", accumulate: str | None = None,
                    keep_lo_lo: bool = False, scheme: str = "fp16x3", arithmetic=None,
                    k_group: int | None = K_GROUP) -> np.ndarray:
    """FP32 product of two finite FP32 matrices from low-precision products.

    Parameters
    ----------
    a : array_like, shape (M, K), float32
    b : array_like, shape (K, N), float32
        Finite values; for FP16 schemes inside
        :func:`sgemm_cube.cpu_fallback.split_limits` ``(sb)`` for FP32 accuracy (this
        function does not check; ``sgemm_cube.matmul`` does).
    sb : int
        Scaling exponent of the FP16 residuals (``sf = 2**sb``); unused by
        the BF16 schemes.
    order : {"termwise", "elementwise"}
        How the products are combined (module docstring).
    accumulate : {"cube16", "sequential", "truncate"} or None
        FP32 accumulation model of each product (:mod:`sgemm_cube.cpu_fallback.accumulate`);
        None: ``arithmetic``'s (``"cube16"`` by default).
    keep_lo_lo : bool
        Shorthand for ``scheme="fp16x4"`` (add ``A_lo @ B_lo * 2**-2sb``).
    scheme : {"fp16x3", "fp16x4", "bf16x9", "bf16x6"}
        The split scheme (:mod:`sgemm_cube.cpu_fallback.schemes`).
    arithmetic : Arithmetic, str or None
        The hardware arithmetic modelled (:mod:`sgemm_cube.cpu_fallback.arithmetic`): the FP16
        split's conversions (:func:`sgemm_cube.cpu_fallback.split`) and the accumulation model
        (when ``accumulate`` is None).  None: the default, what the kernels were written for.
    k_group : int or None
        ``"termwise"``: elements of K per cube accumulation before its partial sum is added into the
        product's second FP32 accumulator (a positive multiple of 16; default
        :data:`~sgemm_cube.cpu_fallback.accumulate.K_GROUP`, the NPU kernel's).  None: one
        accumulator over all of K.  Unused by ``"elementwise"``.

    Returns
    -------
    ndarray, shape (M, N), float32
    """
    a, b = np.asarray(a), np.asarray(b)
    acc = ProductAccumulator((a.shape[0], b.shape[1]), sb=sb, order=order, accumulate=accumulate,
                             keep_lo_lo=keep_lo_lo, scheme=scheme, arithmetic=arithmetic, k_group=k_group)
    acc.add(a, b)
    return acc.result()


class ProductAccumulator:
    """The FP32 accumulator(s) of one emulated product, carried across K slabs.

    ``emulated_matmul(a, b)`` is ``add(a, b)`` then ``result()``.  Cutting K
    into slabs ``a[:, k0:k1]``, ``b[k0:k1]`` and adding them in K order gives
    the same result bit for bit, provided every slab but the last has a
    length that is a multiple of the accumulation model's chunk length
    (16 for ``"cube16"``: a slab boundary must not cut a chunk, whose sum is
    rounded once).  The split is elementwise, so splitting slab by slab
    gives the same slices.  State carried between slabs:

    ``"termwise"``
        per product, the cube's accumulator of the current K group
        (:func:`accumulate_product` continues it) and the FP32 total of the
        finished groups; the levels are combined once, by :meth:`result`.
    ``"elementwise"``
        the one FP32 accumulator that takes every product's chunk sums.

    Parameters are those of :func:`emulated_matmul`; ``shape`` is (M, N).
    """

    def __init__(self, shape, *, sb: int = 12, order: str = "termwise", accumulate: str | None = None,
                 keep_lo_lo: bool = False, scheme: str = "fp16x3", arithmetic=None,
                 k_group: int | None = K_GROUP):
        _check_order(order)
        if k_group is not None and (int(k_group) != k_group or k_group <= 0 or k_group % 16):
            raise ValueError(f"k_group must be a positive multiple of 16 or None, got {k_group!r}")
        self.arithmetic, accumulate = _accumulation(accumulate, arithmetic)
        if keep_lo_lo:
            if scheme not in ("fp16x3", "fp16x4"):
                raise ValueError(f"keep_lo_lo applies to the fp16x3 scheme, not {scheme!r}")
            scheme = "fp16x4"
        self.scheme = get_scheme(scheme)
        self.sb, self.order, self.accumulate = sb, order, accumulate
        self.chunk = chunk_length(accumulate)
        self.rounding = ROUNDING[accumulate]
        self.shape = tuple(shape)
        n_acc = len(self.scheme.products) if order == "termwise" else 1
        self._acc = [np.zeros(self.shape, np.float32) for _ in range(n_acc)]
        # Termwise, two levels: the current group's accumulators (None before its first slab), K consumed,
        # finished groups; the second level adds with the atomic add's rounding.
        self.k_group = None if order != "termwise" else k_group
        self._group: list | None = None
        self._k = 0
        self._groups_done = 0
        self._atomic_add = add_toward_zero if self.arithmetic.atomic == "trunc" else np.add
        self._ragged = False  # a slab that ended inside a chunk was added: it must be the last

    def add(self, a, b) -> None:
        """Accumulate the slab ``a @ b``: a (M, Ks) and b (Ks, N) finite float32, the next Ks of K."""
        if self._ragged:
            raise ValueError(f"only the last K slab may have a length that is not a multiple of {self.chunk}")
        a, b = np.asarray(a), np.asarray(b)
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or (a.shape[0], b.shape[1]) != self.shape:
            raise ValueError(f"shapes {a.shape} and {b.shape} are not (M, K) and (K, N) "
                             f"with (M, N) = {self.shape}")
        self._ragged = a.shape[1] % self.chunk != 0
        a_slices = split_slices(a, self.scheme, self.sb, arithmetic=self.arithmetic)
        b_slices = split_slices(b, self.scheme, self.sb, arithmetic=self.arithmetic)
        if self.order == "termwise":
            if self.k_group is None:
                for (i, j), acc in zip(self.scheme.products, self._acc):
                    accumulate_product(a_slices[i], b_slices[j], accumulate=self.accumulate, acc=acc)
                return
            k0, ks = 0, a.shape[1]
            while k0 < ks:  # the slab's pieces, cut at the K groups' boundaries
                k1 = min(ks, k0 + self.k_group - self._k % self.k_group)
                group = self._group or [None] * len(self.scheme.products)  # None: the group starts here
                self._group = [accumulate_product(a_slices[i][:, k0:k1], b_slices[j][k0:k1],
                                                  accumulate=self.accumulate, acc=g)
                               for (i, j), g in zip(self.scheme.products, group)]
                self._k += k1 - k0
                if self._k % self.k_group == 0:
                    self._end_group()
                k0 = k1
            return
        (acc,) = self._acc
        if 0 in a_slices[0].shape or 0 in b_slices[0].shape:
            return
        pairs = [(a_slices[i], b_slices[j]) for i, j in self.scheme.products]
        scales = [np.float32(self.scheme.level_scale(self.sb) ** (i + j)) for i, j in self.scheme.products]
        truncate = self.rounding == "trunc"
        for rows, cols, sums in panel_sums(pairs, self.chunk, self.rounding):
            tile = acc[rows, cols]
            for c in range(sums[0].shape[0]):  # one K chunk of every product at a time
                for s, scale in zip(sums, scales):
                    if truncate:  # each of the three roundings toward zero
                        tile[...] = add_toward_zero(tile, mul_toward_zero(to_f32_toward_zero(s[c]), scale))
                    else:
                        tile += s[c].astype(np.float32) * scale  # fl32(chunk sum), scaled exactly, then added

    def _end_group(self) -> None:
        """Add the current group's partial sums into the totals (the first group's are stored)."""
        for total, part in zip(self._acc, self._group):
            if self._groups_done == 0:
                total[...] = part
            else:
                total[...] = self._atomic_add(total, part)
        self._group = None
        self._groups_done += 1

    def result(self) -> np.ndarray:
        """The product, shape (M, N) float32 (termwise: the levels combined, smallest first).

        Call it once, after the last slab: termwise combination works in the
        accumulators' memory.
        """
        if self.order == "elementwise":
            return self._acc[0]
        if self._group is not None:  # the last, partial K group
            self._end_group()
        accs = dict(zip(self.scheme.products, self._acc))
        step = np.float32(self.scheme.level_scale(self.sb))
        total = None
        for level in reversed(self.scheme.levels):
            if total is not None:
                total *= step  # in place: the same FP32 operations, no new arrays
            for p in level:
                if total is None:
                    total = accs[p]
                else:
                    total += accs[p]
        return total
