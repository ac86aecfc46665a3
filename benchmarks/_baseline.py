"""What the GEMM-only feasibility scripts (``block_scaled.py``, ``sparse_tails.py``) measure beside their
kernels, on the same data: cuBLAS SGEMM and the default ``sgemm_cube.matmul``, timed, and their errors
against float64."""
from __future__ import annotations

import math


def operands(kind: str, n: int, generator):
    """Two n x n float32 CUDA operands of ``kind``: "normal", "uniform" [0, 1), or a
    ``sgemm_cube.cli.bench_gpu.WIDE_RANGE_KINDS`` kind."""
    import torch

    from sgemm_cube.cli.bench_gpu import make_wide_range

    if kind == "normal":
        return tuple(torch.randn(n, n, device="cuda", generator=generator) for _ in range(2))
    if kind == "uniform":
        return tuple(torch.rand(n, n, device="cuda", generator=generator) for _ in range(2))
    return make_wide_range(kind, (n, n), (n, n), generator=generator)


def baseline(kind: str, a, b, timed):
    """SGEMM and ``sgemm_cube.matmul`` (default options) on ``a @ b``: the record's row (kind, size, times,
    multiple of SGEMM, relative Frobenius errors, largest fractions of the bound used); ``rel_err(c)``, the
    relative Frobenius error of an output ``c`` against float64; and ``bound_used(c, rows_in=None,
    cols_in=None)``, the largest ``|c - C64| / (K 2**-24 |A||B|)`` of an output ``c`` (NaN counted as
    infinite), over the outputs of rows ``rows_in`` and columns ``cols_in`` where given."""
    import sgemm_cube
    from sgemm_cube.metrics import relative_error

    ref = a.double() @ b.double()
    bound = (a.double().abs() @ b.double().abs()) * (a.shape[1] * 2.0 ** -24)

    def bound_used(c, rows_in=None, cols_in=None):
        used = (c.double() - ref).abs() / bound
        if rows_in is not None:
            used = used[rows_in][:, cols_in]
        return used.nan_to_num(nan=math.inf).max().item() if used.numel() else 0.0

    sgemm_ms = timed(lambda: a @ b)
    api_ms = timed(lambda: sgemm_cube.matmul(a, b))
    api = sgemm_cube.matmul(a, b)
    row = dict(kind=kind, n=a.shape[0], sgemm_ms=sgemm_ms, api_ms=api_ms, api_x=sgemm_ms / api_ms,
               rel_err=dict(sgemm=relative_error(a @ b, ref), api=relative_error(api, ref)),
               bound_used=dict(sgemm=bound_used(a @ b), api=bound_used(api)))
    return row, (lambda c: relative_error(c, ref)), bound_used


def describe(row) -> str:
    """The printed line of :func:`baseline`'s row."""
    return (f"  {row['kind']}: SGEMM {row['sgemm_ms']:.3f} ms (err {row['rel_err']['sgemm']:.1e}, bound used "
            f"{row['bound_used']['sgemm']:.3f}); sgemm_cube.matmul {row['api_x']:.2f}x (err "
            f"{row['rel_err']['api']:.1e}, bound used {row['bound_used']['api']:.3f})")
