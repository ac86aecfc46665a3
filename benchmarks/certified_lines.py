"""Feasibility, not a feature: every wide line on fp16x3, each output involving one certified after the GEMM.

Today a line (a row of A, a column of B) whose entries reach below the FP16 split's range once it is
scaled (``2**-15`` at ``sb = 12``, its largest in ``[2**14, 2**15)``: about 29 binades) is emulated only where
its partners allow it a priori (``cpu_fallback.guard.fp16_rule``), else listed for the FP64 fix-up, or the
product runs on BF16 slices (bf16x6, six products): log-normal data on both operands runs at 1.64-1.74x
SGEMM on an H200, against 3.3-3.7x for fp16x3.  Here every line is scaled to the top and emulated, and
the output itself is the witness of ``|A| @ |B|`` that an a priori rule has to guess.

**The bound** (the scaled operands ``a'``, ``b'``, every line's largest in ``[2**14, 2**15)``; ``u = 2**-24``;
``S = sum_k |a'_k b'_k|``).  An entry below ``2**-15`` has ``hi`` subnormal or zero, ``|x - hi| <= 2**-25``,
and ``lo = fp16((x - hi) 2**12)`` leaves ``|x - hi - lo 2**-12| <= 2**-37``.  A product with such an entry
on one side then differs from its three-product emulation by at most ``(2**-36 + 2**-37)`` times the other
side's entry, below ``2**-35 * 2**15 = 2**-20`` (the other side's rounding is the usual relative one), and
its slices' products, which go to the truncating correction accumulator in full, exceed the exact
product by as much: over K terms the extra error is within

    E_K = K 2**-19 + K**2 2**-31

(the first term the split, doubled; the second the correction accumulator's truncation, ``K u`` of at most
``K 2**-10`` of such products there, doubled), beside the emulation's own ``(K + 14) u S`` (README). The
guarantee allows ``3 K u S``, so it holds where ``E_K <= (2K - 14) u S``; and ``S >= (|c'| - E_K) / (1 + (K + 14) u)``
for the emulated output ``c'``, because ``|exact| <= S``. An output whose row or column reaches below the
range is therefore *certified* where

    |c'| >= T_K = E_K (1 + (1 + (K + 14) u) / ((2K - 14) u)),

taken here four times larger and rounded up to a power of two (:func:`certificate_threshold`: 128 at
K = 16, 256 at K = 4096 and 8192). A product of two lines that fit needs no certificate.  On positive data
(log-normal, kernel matrices, probabilities) ``c' = S``, in the thousands to billions; an output fails only
where its terms cancel to below T_K, a few in ``2**14`` of a line's largest squared. Such outputs would be
computed again in FP64 (the GEMM's epilogue lists their tiles, as it lists overflowing ones today for
``fixup_kernel.overflow_recheck_kernel``). That derivation is a sketch, not a proof: the tests
(``tests/benchmarks/test_certified_lines.py``) check it on the CPU model, where outputs the certificate
passes stay within the guarantee on adversarial data and the outputs it fails include planted ones that
break it.

**What the script measures** per data kind (``sgemm_cube.cli.bench_gpu`` kinds, n x n x n, seeded on the
device), beside cuBLAS SGEMM (TF32 off) and the default ``sgemm_cube.matmul`` in the same process, best
of three ``do_bench`` medians:

* ``proxy``: ``sgemm_cube.matmul(a, b, scheme="fp16x3", scale="rows", fixup=False)``: the library's own
  split passes and GEMM with every line scaled to the top and every wide line emulated, which is the
  certified product before its certificate; ``fixup=False`` drops the guarantee, so this output is only
  what the certified product would store where its certificate passes (where ``backend="auto"`` routes the
  shape to native FP32, 1024^3 on an H200, the proxy is native FP32 and says nothing);
* the certificate of every output, evaluated on that output (``|c| 2**(t_a + t_b)``, the line meta of
  :func:`line_meta`, the library's own): the fraction of outputs and of 128 x 128 tiles that fail it;
* ``projected``: ``proxy`` plus the failing tiles' share of a float64 GEMM of the same shape (the recheck,
  at FP64 speed); the epilogue's comparison is not timed (a few instructions a tile);
* errors against float64: the relative Frobenius error and the largest fraction of SGEMM's bound
  ``K 2**-24 |A||B|`` used, over the certified outputs and over the failing ones (the guarantee allows 3).

    python benchmarks/certified_lines.py [--size 4096] [--kinds "log-normal both s=3" normal ...]
"""
from __future__ import annotations

import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._baseline import baseline, describe, operands, parse_arguments  # noqa: E402
from benchmarks._record import best_ms, cuda_setup, write_record  # noqa: E402

#: The split's residual exponent, and the tile whose outputs a recheck would compute together.
SB, TILE = 12, 128
METHOD = ("sgemm_cube.matmul(a, b, scheme='fp16x3', scale='rows', fixup=False) timed as the certified product "
          "before its certificate (every line scaled to [2**14, 2**15) and emulated); the certificate "
          "|c| 2**(t_a + t_b) >= certificate_threshold(K) evaluated on its output for every output whose row or "
          "column reaches below 2**-15 once scaled; projected = proxy + (failing 128 x 128 tiles / all) x a "
          "float64 torch matmul of the same shape; cuBLAS SGEMM (TF32 off) and the default sgemm_cube.matmul in "
          "the same process; best of three triton.testing.do_bench medians")


def certificate_threshold(k: int) -> float:
    """``T_K`` of the module docstring, four times larger, rounded up to a power of two: an output of a
    wide line (scaled domain) is certified where its magnitude is at least this."""
    u = 2.0 ** -24
    extra = k * 2.0 ** -19 + k * k * 2.0 ** -31
    t = 4 * extra * (1 + (1 + (k + 14) * u) / ((2 * k - 14) * u))
    return math.ldexp(1.0, math.frexp(t)[1])


def line_meta(x, lines_axis: int):
    """``(t, wide)`` of the lines of a 2-D tensor (rows: ``lines_axis=0``, columns: 1) under
    ``scale="rows"``, as the library computes them (``cpu_fallback.guard.line_meta``, without a partner
    rule): ``t`` the exponent that brings a line's largest entry into ``[2**14, 2**15)``, ``wide`` whether
    an entry then lies below the split's range (class 1)."""
    import torch

    from sgemm_cube.cpu_fallback import guard

    xn = x.detach().cpu().numpy()[None]
    meta = guard.line_meta(xn, -1 if lines_axis == 0 else -2, scheme="fp16x3", sb=SB, scale="rows", fixup=False)
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
    args, kinds = parse_arguments(__doc__, argv)

    import torch

    import sgemm_cube

    gen = cuda_setup()
    n = args.size
    threshold = certificate_threshold(n)
    timed = lambda fn: best_ms(fn, runs=3, rep=100)  # noqa: E731
    rows, fp64_ms = [], None
    for kind in kinds:
        a, b = operands(kind, n, gen)
        row, rel_err, bound_used = baseline(kind, a, b, timed)
        if fp64_ms is None:
            fp64_ms = timed(lambda: a.double() @ b.double())
        proxy = lambda: sgemm_cube.matmul(a, b, scheme="fp16x3", scale="rows", fixup=False)  # noqa: E731
        proxy_ms = timed(proxy)
        c = proxy()
        a_meta, b_meta = line_meta(a, 0), line_meta(b, 1)
        fail = uncertified(c, a_meta, b_meta, threshold)
        tiles = failing_tiles(fail)
        projected_ms = proxy_ms + tiles.double().mean().item() * fp64_ms
        row.update(threshold=threshold, fp64_ms=fp64_ms, proxy_ms=proxy_ms, proxy_x=row["sgemm_ms"] / proxy_ms,
                   wide_rows=a_meta[1].double().mean().item(), wide_cols=b_meta[1].double().mean().item(),
                   failing_outputs=int(fail.sum()), failing_tiles=int(tiles.sum()), tiles=tiles.numel(),
                   projected_ms=projected_ms, projected_x=row["sgemm_ms"] / projected_ms,
                   proxy_rel_err=rel_err(c),
                   bound_used_certified=bound_used(c, where=~fail), bound_used_failing=bound_used(c, where=fail))
        print(f"{describe(row)}\n    wide lines: rows {row['wide_rows']:.3f}, cols {row['wide_cols']:.3f}; proxy "
              f"{proxy_ms:.3f} ms = {row['proxy_x']:.2f}x; failing outputs {row['failing_outputs']}, tiles "
              f"{row['failing_tiles']}/{row['tiles']} (T = {threshold:g}); projected {row['projected_x']:.2f}x; "
              f"err {row['proxy_rel_err']:.2e}; bound used: certified {row['bound_used_certified']:.4f}, "
              f"failing {row['bound_used_failing']:.4g}", flush=True)
        rows.append(row)
        del a, b, c, fail
        torch.cuda.empty_cache()
    print(f"wrote {write_record(args.out, 'certified_lines', rows, method=METHOD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
