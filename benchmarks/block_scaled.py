"""Feasibility, not a feature: fp16x3 with a power-of-two scale per (line, K block) on the wide-range data.

Today a line (a row of A, a column of B) has one power-of-two scale; a line whose entries span more than
the FP16 split holds below its largest (about 29 binades at ``sb = 12``) is emulated on BF16 slices
(bf16x6, six products) or listed for the FP64 fix-up.  With one scale per line *and per block of K*
(as the MX formats do), a line only has to fit block by block, and the flush of the level-0 partial that
the GEMM does every K step anyway applies the block's factor ``2**-(s_a + s_b)`` (a power of two: exact
barring underflow).  This script measures what that would give, GEMM alone, before anyone builds it:

* ``line``: today's K loop (level-0 partial flushed every step, level 1 accumulated in the tensor
  cores), one scale per line: the split of :func:`split` with ``block_k = K``;
* ``block 32`` / ``block 64`` / ``block 128``: per block of 32 (64, 128) elements of K (K steps of 32 with four
  stages for blocks of 32, else of 64 with three), ``t = fma(corr, 2**-12, part)``
  and ``hh = fma(t, fa[i] * fb[j], hh)``, then both partials restart (a flush every block).

The split is done on the host with torch (not timed: the production split passes cost about 0.5 ms at
8192^3 today, ``benchmarks/ceiling.py``); there is no line meta, fix-up or epilogue unscaling, so the
times are of the GEMM's K loop only.  Per data kind (``sgemm_cube.cli.bench_gpu`` kinds, seeded on the
device; plus normal and uniform [0, 1) data for the flush interval's accuracy) it reports, next to cuBLAS
SGEMM (TF32 off) and ``sgemm_cube.matmul`` with default options in the same process:

* times (best of three ``triton.testing.do_bench`` medians) and multiples of SGEMM;
* the relative Frobenius error against float64, and the componentwise bound's largest fraction used,
  ``max |C - C64| / (K 2**-24 |A||B|)``, over the outputs whose row and column fit the split;
* the fraction of A's rows and of B's columns that fit: every nonzero entry at or above
  ``2**lower`` once scaled (``cpu_fallback.guard.line_range("fp16x3", 12)``), per line or per block
  (the FP16 partner rule of ``guard.fp16_rule`` is not applied: "fit" here is the strict test).

    python benchmarks/block_scaled.py [--size 4096] [--kinds normal "log-normal both s=3" ...]
"""
from __future__ import annotations

import pathlib
import sys

import triton
import triton.language as tl

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._baseline import baseline, describe, operands, parse_arguments  # noqa: E402
from benchmarks._record import best_ms, cuda_setup, write_record  # noqa: E402

METHOD = ("GEMM-only Triton kernels (128 x 128 x 64 tiles, 8 warps, 3 stages, TMA; 128 x 128 x 32 with 4 stages for "
          "'block 32') on slices split by torch on the host, one power-of-two scale per line ('line') or per "
          "(line, K block) ('block 32', 'block 64', 'block 128'); "
          "cuBLAS SGEMM (TF32 off) and sgemm_cube.matmul default options in the same process; times are the best "
          "of three triton.testing.do_bench medians (rep 100 ms); errors against float64")
#: The residual exponent and the split's range at sb = 12 (cpu_fallback.guard.line_range("fp16x3", 12)):
#: a scaled line's largest entry lies in [2**TOP, 2**(TOP + 1)), every nonzero entry must be >= 2**LOWER.
SB = 12
TOP = 14
LOWER = -15


@triton.jit
def block_scaled_gemm(a_hi, a_lo, b_hi, b_lo, fa_ptr, fb_ptr, c_ptr, M, N, K,
                      BLOCK_STEPS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C = sum over K blocks of fa * fb * (A_hi B_hi + 2**-12 (A_lo B_hi + A_hi B_lo)), the block's three
    products in the tensor cores, one flush per block of BLOCK_STEPS K steps; BLOCK_STEPS 0: the line
    scale's K loop (level 0 flushed every step, level 1 in the tensor cores throughout, no factors)."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    row = (first_m + (pid % in_group) % group_m) * BLOCK_M
    col = ((pid % in_group) // group_m) * BLOCK_N
    offs_m = row + tl.arange(0, BLOCK_M)
    offs_n = col + tl.arange(0, BLOCK_N)
    hh = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    corr = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ks in tl.range(0, K // BLOCK_K):
        k = ks * BLOCK_K
        a0 = a_hi.load([row, k])
        a1 = a_lo.load([row, k])
        b0 = b_hi.load([k, col])
        b1 = b_lo.load([k, col])
        part = tl.dot(a0, b0, part)
        corr = tl.dot(a1, b0, corr)
        corr = tl.dot(a0, b1, corr)
        if BLOCK_STEPS == 0:
            hh = tl.fma(part, 1.0, hh)  # fma: Triton would fuse a plain add back into the MMA
            part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        elif ks % BLOCK_STEPS == BLOCK_STEPS - 1:
            block = ks // BLOCK_STEPS
            fa = tl.load(fa_ptr + block * M + offs_m)  # (K blocks, M): 2**-s of A's blocks
            fb = tl.load(fb_ptr + block * N + offs_n)
            hh = tl.fma(tl.fma(corr, 1.0 / 4096.0, part), fa[:, None] * fb[None, :], hh)
            part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            corr = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if BLOCK_STEPS == 0:
        hh = corr * (1.0 / 4096.0) + hh
    tl.store(c_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :], hh)


def split(x, lines_axis: int, block_k: int):
    """(hi, lo, factors, fits) of ``x`` scaled per (line, block of ``block_k`` along K) so that the block's
    largest entry lies in [2**TOP, 2**(TOP + 1)); hi = fp16(x'), lo = fp16((x' - hi) 2**SB), in x's layout;
    factors (K / block_k, lines) float32, 2**-s; fits (lines,) bool: every block's nonzero entries >= 2**LOWER
    once scaled."""
    import torch

    xk = x if lines_axis == 0 else x.t()  # (lines, K)
    lines, k = xk.shape
    blocks = xk.reshape(lines, k // block_k, block_k)
    mag = blocks.abs()
    _, e_big = torch.frexp(mag.amax(-1))  # largest = m 2**e_big, m in [0.5, 1)
    shift = (TOP + 1 - e_big).to(torch.float32)
    smallest = torch.where(mag > 0, mag, torch.inf).amin(-1)
    fits = ((torch.ldexp(smallest, shift) >= 2.0 ** LOWER) | torch.isinf(smallest)).all(-1)
    scaled = torch.ldexp(blocks, shift[..., None]).reshape(lines, k)
    hi = scaled.half()
    lo = ((scaled - hi.float()) * 2.0 ** SB).half()
    factors = torch.ldexp(torch.ones_like(shift), -shift).t().contiguous()
    if lines_axis == 1:
        hi, lo = hi.t(), lo.t()
    return hi.contiguous(), lo.contiguous(), factors, fits


def gemm(a, b, block_k: int | None):
    """A launcher of :func:`block_scaled_gemm` on a's and b's split (``block_k`` None: one scale per line),
    its output, and which of A's rows and B's columns fit (bool)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    tile_m, tile_n, tile_k = 128, 128, min(64, block_k or 64)
    stages = 3 if tile_k == 64 else 4  # 64 KiB of shared memory per stage at BLOCK_K 64
    m, k = a.shape
    n = b.shape[1]
    a_hi, a_lo, fa, a_fits = split(a, 0, block_k or k)
    b_hi, b_lo, fb, b_fits = split(b, 1, block_k or k)
    if block_k is None:  # the factors go into an unscaling epilogue that this kernel does not have
        c_scale = fa[0][:, None] * fb[0][None, :]
    descs = [TensorDescriptor(t, list(t.shape), list(t.stride()), blk) for t, blk in
             ((a_hi, [tile_m, tile_k]), (a_lo, [tile_m, tile_k]), (b_hi, [tile_k, tile_n]), (b_lo, [tile_k, tile_n]))]
    c = torch.empty(m, n, device=a.device)
    grid = (triton.cdiv(m, tile_m) * triton.cdiv(n, tile_n),)

    def launch():
        block_scaled_gemm[grid](*descs, fa, fb, c, m, n, k, BLOCK_STEPS=(block_k or 0) // tile_k,
                                BLOCK_M=tile_m, BLOCK_N=tile_n, BLOCK_K=tile_k, GROUP_M=8, num_warps=8,
                                num_stages=stages)

    launch()
    out = c * c_scale if block_k is None else c
    return launch, out, a_fits, b_fits


def main(argv=None) -> int:
    args, kinds = parse_arguments(__doc__, argv, extra_kinds=("uniform",))

    import torch

    gen = cuda_setup()
    n = args.size
    timed = lambda fn: best_ms(fn, runs=3, rep=100)  # noqa: E731
    a16 = torch.randn(n, n, device="cuda", generator=gen).half()
    b16 = torch.randn(n, n, device="cuda", generator=gen).half()
    ceiling_ms = 3 * timed(lambda: torch.mm(a16, b16, out_dtype=torch.float32))
    print(f"{n}^3: three cuBLAS FP16->FP32 products {ceiling_ms:.3f} ms", flush=True)
    rows = []
    for kind in kinds:
        a, b = operands(kind, n, gen)
        row, rel_err, bound_used = baseline(kind, a, b, timed)
        row.update(ceiling_ms=ceiling_ms, variants={})
        print(describe(row), flush=True)
        for name, block_k in (("line", None), ("block 32", 32), ("block 64", 64), ("block 128", 128)):
            launch, c, a_fits, b_fits = gemm(a, b, block_k)
            a_fit, b_fit = a_fits.float().mean().item(), b_fits.float().mean().item()
            ms = timed(launch)
            finite = bool(torch.isfinite(c).all())
            var = dict(ms=ms, x_sgemm=row['sgemm_ms'] / ms, of_ceiling=ceiling_ms / ms, rows_fit=a_fit, cols_fit=b_fit,
                       outputs_not_fit=1.0 - a_fit * b_fit,
                       all_finite=finite, rel_err=rel_err(c) if finite else None,
                       bound_used_where_fit=bound_used(c, a_fits, b_fits))
            row["variants"][name] = var
            err = f"{var['rel_err']:.2e}" if finite else "not finite"
            print(f"    {name}: {ms:.3f} ms = {var['x_sgemm']:.2f}x SGEMM ({var['of_ceiling']:.3f} of the ceiling); "
                  f"rows / cols fit {a_fit:.3f} / {b_fit:.3f} (outputs not: {var['outputs_not_fit']:.3f}); err {err}, "
                  f"bound used where they fit {var['bound_used_where_fit']:.3f}", flush=True)
        rows.append(row)
    print(f"wrote {write_record(args.out, 'block_scaled', rows, method=METHOD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
