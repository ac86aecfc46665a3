"""What the feasibility scripts (``block_scaled.py``, ``sparse_tails.py``, ``certified_lines.py``) share: their
command line, and what they measure beside their kernels on the same data: cuBLAS SGEMM and the default
``sgemm_cube.matmul``, timed, and their errors against float64."""
from __future__ import annotations

import argparse
import math

from benchmarks._record import add_out_argument


def parse_arguments(doc: str, argv=None, extra_kinds=(), more=None):
    """``(args, kinds)`` of a feasibility script's command line: ``--size`` (m = n = k, default 4096),
    ``--kinds`` (default: normal, ``extra_kinds``, then every ``WIDE_RANGE_KINDS`` kind), ``--out``, and what
    ``more(parser)`` adds; ``doc``'s first paragraph describes the script."""
    from sgemm_cube.cli.bench_gpu import WIDE_RANGE_KINDS

    default = ["normal", *extra_kinds, *WIDE_RANGE_KINDS]
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=4096, help="m = n = k (a multiple of 128; default 4096)")
    parser.add_argument("--kinds", nargs="+", default=None, help=f"data kinds (default: {', '.join(default)})")
    add_out_argument(parser)
    if more is not None:
        more(parser)
    args = parser.parse_args(argv)
    return args, list(args.kinds or default)


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
    cols_in=None, where=None)``, the largest ``|c - C64| / (K 2**-24 |A||B|)`` of an output ``c`` (NaN counted
    as infinite), over the outputs of rows ``rows_in`` and columns ``cols_in``, or where the boolean mask
    ``where`` is set, where given (0 over no outputs)."""
    import sgemm_cube
    from sgemm_cube.metrics import relative_error

    ref = a.double() @ b.double()
    bound = (a.double().abs() @ b.double().abs()) * (a.shape[1] * 2.0 ** -24)

    def bound_used(c, rows_in=None, cols_in=None, where=None):
        used = (c.double() - ref).abs() / bound
        if rows_in is not None:
            used = used[rows_in][:, cols_in]
        if where is not None:
            used = used[where]
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
