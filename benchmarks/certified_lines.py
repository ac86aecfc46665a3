"""The certified product (``scale="rows"``): every wide line on fp16x3, each of its outputs certified after the GEMM.

A line (a row of A, a column of B) whose entries reach below the FP16 split's range once it is scaled
(``2**-15`` at ``sb = 12``, its largest in ``[2**14, 2**15)``: about 29 binades) is emulated by default only
where its partners allow it a priori (``cpu_fallback.guard.fp16_rule``), else listed for the FP64 fix-up, or
the product runs on BF16 slices (bf16x6, six products): log-normal data on both operands runs at 1.6-1.7x
SGEMM on an H200, against 3.3-3.7x for fp16x3.  Under ``scale="rows"`` every line is scaled to the top and
emulated, and an output of a wide line is kept where its scaled magnitude reaches
``guard.certificate_threshold(K)`` (the emulated output is the witness of ``|A| @ |B|``; the bound and why
it holds: ``cpu_fallback/guard.py``, "Certified outputs"); the others are computed again from the
unscaled operands (the GEMM's epilogue lists their tiles for the overflow recheck, which computes its NaN
markers again).

What the script measures per data kind (``sgemm_cube.cli.bench_gpu`` kinds, n x n x n, seeded on the
device), beside cuBLAS SGEMM (TF32 off) and the default ``sgemm_cube.matmul`` in the same process, best
of three ``do_bench`` medians:

* ``certified``: ``sgemm_cube.matmul(a, b, scale=SCALE)`` (``--scale rows``, the default here: the
  certified product; ``--scale auto``: the default product again), its time and errors;
* ``proxy``: ``sgemm_cube.matmul(a, b, scheme="fp16x3", scale=SCALE, fixup=False)``: the same split passes
  and GEMM with no output recomputed (``fixup=False`` drops the guarantee);
* the certificate of every output of the proxy, evaluated on its stored value (``|c| 2**(t_a + t_b)``,
  the line meta of :func:`line_meta`, the library's own): the fraction of outputs and of 128 x 128 tiles
  that fail it.  Under ``--scale auto`` the certificate is evaluated as if it applied: small unscaled
  lines are smaller witnesses, which is why the library certifies under ``"rows"`` only;
* ``projected``: ``proxy`` plus the failing tiles' share of a float64 GEMM of the same shape;
* errors against float64: the relative Frobenius error and the largest fraction of SGEMM's bound
  ``K 2**-24 |A||B|`` used (the guarantee allows 3), over the certified outputs and over the failing ones.

Where ``backend="auto"`` routes the shape to native FP32 (1024^3 on an H200) every call here is native.

    python benchmarks/certified_lines.py [--size 4096] [--scale rows] [--kinds "log-normal both s=3" normal ...]
"""
from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._baseline import baseline, describe, operands, parse_arguments  # noqa: E402
from benchmarks._record import best_ms, cuda_setup, write_record  # noqa: E402

#: The split's residual exponent, and the tile whose outputs a recheck would compute together.
SB, TILE = 12, 128
METHOD = ("sgemm_cube.matmul(a, b, scale=SCALE) timed (certified); sgemm_cube.matmul(a, b, scheme='fp16x3', "
          "scale=SCALE, fixup=False) timed as its proxy (every line emulated, nothing recomputed; scale 'rows': every "
          "line's largest scaled into [2**14, 2**15), 'auto': the lines that do not fit the split's range); the certificate "
          "|c| 2**(t_a + t_b) >= certificate_threshold(K) evaluated on its output for every output whose row or "
          "column reaches below 2**-15 once scaled; projected = proxy + (failing 128 x 128 tiles / all) x a "
          "float64 torch matmul of the same shape; cuBLAS SGEMM (TF32 off) and the default sgemm_cube.matmul in "
          "the same process; best of three triton.testing.do_bench medians")


def line_meta(x, lines_axis: int, scale: str = "rows"):
    """``(t, wide)`` of the lines of a 2-D tensor (rows: ``lines_axis=0``, columns: 1) under ``scale``
    (``"rows"`` or ``"auto"``), as the library computes them (``cpu_fallback.guard.line_meta``, without a
    partner rule): ``t`` the exponent applied to the line (``"rows"``: its largest entry into
    ``[2**14, 2**15)``), ``wide`` whether an entry then lies below the split's range (class 1)."""
    import torch

    from sgemm_cube.cpu_fallback import guard

    xn = x.detach().cpu().numpy()[None]
    meta = guard.line_meta(xn, -1 if lines_axis == 0 else -2, scheme="fp16x3", sb=SB, scale=scale, fixup=False)
    t = torch.from_numpy(meta.t[0].astype("int64")).to(x.device)
    wide = torch.from_numpy(meta.cls[0] == int(guard.LineClass.LOSES_BITS)).to(x.device)
    return t, wide


def uncertified(c, a_meta, b_meta, threshold: float):
    """The outputs of ``c`` (m x n) the certificate fails: a row or column reaching below the range, and
    ``|c| 2**(t_a + t_b)`` (float64) below ``threshold``.  NaN outputs fail."""
    import torch

    (ta, wa), (tb, wb) = a_meta, b_meta
    scaled = torch.ldexp(c.double().abs(), (ta[:, None] + tb[None, :]).double())
    return (wa[:, None] | wb[None, :]) & ~(scaled >= threshold)


def failing_tiles(fail, tile: int = TILE):
    """Which ``tile`` x ``tile`` output tiles hold a failing output (bool, rounded-up grid)."""
    import torch

    m, n = fail.shape
    padded = torch.zeros(-(-m // tile) * tile, -(-n // tile) * tile, dtype=torch.bool, device=fail.device)
    padded[:m, :n] = fail
    return padded.reshape(padded.shape[0] // tile, tile, padded.shape[1] // tile, tile).any(3).any(1)


def main(argv=None) -> int:
    more = lambda parser: parser.add_argument(  # noqa: E731
        "--scale", choices=("rows", "auto"), default="rows", help="the lines' scaling (default rows)")
    args, kinds = parse_arguments(__doc__, argv, more=more)

    import torch

    import sgemm_cube
    from sgemm_cube.cpu_fallback import guard

    gen = cuda_setup()
    n = args.size
    threshold = guard.certificate_threshold(n)
    timed = lambda fn: best_ms(fn, runs=3, rep=100)  # noqa: E731
    rows, fp64_ms = [], None
    for kind in kinds:
        a, b = operands(kind, n, gen)
        row, rel_err, bound_used = baseline(kind, a, b, timed)
        if fp64_ms is None:
            fp64_ms = timed(lambda: a.double() @ b.double())
        proxy = lambda: sgemm_cube.matmul(a, b, scheme="fp16x3", scale=args.scale, fixup=False)  # noqa: E731
        proxy_ms = timed(proxy)
        c = proxy()
        certified = lambda: sgemm_cube.matmul(a, b, scale=args.scale)  # noqa: E731
        certified_ms = timed(certified)
        cc = certified()
        a_meta, b_meta = line_meta(a, 0, args.scale), line_meta(b, 1, args.scale)
        fail = uncertified(c, a_meta, b_meta, threshold)
        tiles = failing_tiles(fail)
        projected_ms = proxy_ms + tiles.double().mean().item() * fp64_ms
        row.update(scale=args.scale, threshold=threshold, fp64_ms=fp64_ms, proxy_ms=proxy_ms, proxy_x=row["sgemm_ms"] / proxy_ms,
                   wide_rows=a_meta[1].double().mean().item(), wide_cols=b_meta[1].double().mean().item(),
                   failing_outputs=int(fail.sum()), failing_tiles=int(tiles.sum()), tiles=tiles.numel(),
                   projected_ms=projected_ms, projected_x=row["sgemm_ms"] / projected_ms,
                   proxy_rel_err=rel_err(c), certified_ms=certified_ms, certified_x=row["sgemm_ms"] / certified_ms,
                   certified_rel_err=rel_err(cc), certified_bound_used=bound_used(cc),
                   bound_used_certified=bound_used(c, where=~fail), bound_used_failing=bound_used(c, where=fail))
        print(f"{describe(row)}\n    wide lines: rows {row['wide_rows']:.3f}, cols {row['wide_cols']:.3f}; proxy "
              f"{proxy_ms:.3f} ms = {row['proxy_x']:.2f}x; failing outputs {row['failing_outputs']}, tiles "
              f"{row['failing_tiles']}/{row['tiles']} (T = {threshold:g}); projected {row['projected_x']:.2f}x; "
              f"err {row['proxy_rel_err']:.2e}; bound used: certified {row['bound_used_certified']:.4f}, "
              f"failing {row['bound_used_failing']:.4g}\n    sgemm_cube.matmul(a, b, scale={args.scale!r}): "
              f"{row['certified_x']:.2f}x (err {row['certified_rel_err']:.2e}, bound used "
              f"{row['certified_bound_used']:.4f})", flush=True)
        rows.append(row)
        del a, b, c, cc, fail
        torch.cuda.empty_cache()
    print(f"wrote {write_record(args.out, 'certified_lines', rows, method=METHOD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
