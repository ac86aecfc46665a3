"""sgemm_cube inside ``torch.distributed``: the operator's sharding rules for ``DTensor``.

sgemm_cube has no communication of its own.  A product of ``DTensor``s
through ``torch.ops.sgemm_cube.matmul`` (:mod:`sgemm_cube.torch_ops`, and so
:class:`sgemm_cube.nn.Linear`) is planned by DTensor with the rules below:
each rank computes its local product with sgemm_cube, and DTensor moves the
data (redistributing inputs that match no rule, reducing partial sums).
With the drop-in switch on (:func:`sgemm_cube.enable`), ``torch.matmul``,
``F.linear`` and the tensor-parallel layers of
``torch.distributed.tensor.parallel`` on DTensors reach PyTorch's own
sharding rules first and then the switch on every rank's local product, so
nothing here is needed for them.

The rules, for ``a`` of shape (..., M, K) and ``b`` of shape (..., K, N) on
each mesh dimension (1-D operands as in :func:`torch.matmul`):

=====================  =====================  ==============================
``a``                  ``b``                  result
=====================  =====================  ==============================
Replicate              Replicate              Replicate
Shard(M)               Replicate              Shard(M): rows
Replicate              Shard(N)               Shard(N): columns
Shard(K)               Shard(K)               Partial(sum): each rank's
                                              product over its K slice
Shard(batch dim)       Shard(same batch dim)  Shard(that dim) (also with
                       (or not batched)       the other operand Replicate)
=====================  =====================  ==============================

K-sharded products.  Each rank's partial product keeps the guarantee over
its own K/P terms (``3 (K/P) 2**-24 (|a| @ |b|)`` for its slice); DTensor
sums the P partials in FP32 when the result is needed (an all-reduce in the
collective's order: ring or tree for NCCL, the backend's for gloo), which
adds at most ``P - 1`` roundings of the running sum.  So the whole error is
at most ``(3 K / P + P - 1) 2**-24 (|a| @ |b|)`` (plus underflow), within
the single-device bound ``3 K 2**-24 (|a| @ |b|)`` whenever
``P - 1 <= 3 K (1 - 1/P)``, which holds for every ``K >= 1``.  The order of
the reduction changes the rounding of the last ``P - 1`` additions only;
``tests/distributed`` measures it against float64 beside native FP32 on the
same sharding.

The rules are registered when ``torch.distributed.tensor`` is imported
(before or after sgemm_cube: :func:`install`), not by importing it here,
which would cost about half a second on every ``import sgemm_cube.torch_ops``.
"""
from __future__ import annotations

import sys
import threading

from ._after_import import after_import

__all__ = ["sharding_rules", "register", "install", "registered"]

_DTENSOR = "torch.distributed.tensor"
_lock = threading.Lock()
_registered = False


def _batch_dims(a_shape, b_shape) -> list[tuple[int | None, int | None, int]]:
    """``(dim of a or None, dim of b or None, dim of the result)`` of every batch dimension sharded alike.

    A batch dimension qualifies where the operand(s) holding it have it at full
    size (a size-1 dimension broadcast against a larger one cannot be split).
    """
    ra, rb = len(a_shape), len(b_shape)
    na, nb = max(ra - 2, 0), max(rb - 2, 0)
    nbatch = max(na, nb)
    dims = []
    for i in range(nbatch):  # i counts result batch dimensions from the left
        ia = i - (nbatch - na) if i >= nbatch - na else None
        ib = i - (nbatch - nb) if i >= nbatch - nb else None
        size_a = a_shape[ia] if ia is not None else None
        size_b = b_shape[ib] if ib is not None else None
        if ia is not None and ib is not None and size_a != size_b:
            continue  # broadcast: one of them is 1
        dims.append((ia, ib, i))
    return dims


def sharding_rules(a_shape, b_shape):
    """The acceptable placements of one mesh dimension: ``[(result placements, [a's, b's]), ...]``.

    Shapes as :func:`torch.matmul` takes them (1-D operands included); see the
    module docstring for the table.
    """
    from torch.distributed.tensor import Partial, Replicate, Shard

    ra, rb = len(a_shape), len(b_shape)
    nbatch = max(ra - 2, rb - 2, 0)
    out_rows = nbatch if ra >= 2 else None              # the result's M dimension
    out_cols = nbatch + (ra >= 2) if rb >= 2 else None  # the result's N dimension
    rules = [([Replicate()], [Replicate(), Replicate()])]
    if out_rows is not None:
        rules.append(([Shard(out_rows)], [Shard(ra - 2), Replicate()]))
    if out_cols is not None:
        rules.append(([Shard(out_cols)], [Replicate(), Shard(rb - 1)]))
    rules.append(([Partial()], [Shard(ra - 1), Shard(rb - 2 if rb >= 2 else 0)]))
    for ia, ib, out in _batch_dims(a_shape, b_shape):
        rules.append(([Shard(out)], [Shard(ia) if ia is not None else Replicate(),
                                     Shard(ib) if ib is not None else Replicate()]))
    return rules


def register() -> None:
    """Register :func:`sharding_rules` for ``torch.ops.sgemm_cube.matmul`` with DTensor (once; imports DTensor).

    :mod:`sgemm_cube.torch_ops` defines the operator and calls :func:`install`,
    which calls this at the right time: there is no need to call it.
    """
    global _registered
    with _lock:
        if _registered:
            return
        import torch
        from torch.distributed.tensor.experimental import register_sharding

        if "sgemm_cube.torch_ops" not in sys.modules:
            raise RuntimeError("import sgemm_cube.torch_ops first: it defines torch.ops.sgemm_cube.matmul")

        @register_sharding(torch.ops.sgemm_cube.matmul.default)
        def _rules(a, b, **options):  # a, b: DTensor's tensor specs (shape and ndim)
            return sharding_rules(tuple(a.shape), tuple(b.shape))

        _registered = True


def registered() -> bool:
    """Whether the rules are registered (``torch.distributed.tensor`` was imported with the operator defined)."""
    return _registered


def install() -> None:
    """Register the rules now if ``torch.distributed.tensor`` is imported, or as soon as it is.

    Called by :mod:`sgemm_cube.torch_ops` at import; does nothing where
    ``torch.distributed`` is not built in.
    """
    import torch.distributed

    if not torch.distributed.is_available():
        return
    after_import(_DTENSOR, register)
