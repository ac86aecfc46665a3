"""Feasibility, not a feature: fp16x3 on wide lines whose few smallest entries are added exactly, as sparse tails.

A line (a row of A, a column of B) is emulated in FP16 when every nonzero entry, once the line is scaled
so that its largest lies in ``[2**14, 2**15)``, is at or above ``2**lower`` (``2**-15`` at ``sb = 12``:
about 29 binades).  Log-normal data (sigma 3) on both operands misses that by a few entries a line (at
8192^3 18 of 8192 on average, measured, but hundreds in some lines), so today it runs on BF16 slices
(bf16x6, six products, 1.67-1.74x SGEMM on an H200).  Here those entries (the line's *tail*) are taken
out of the split planes (zero there) and added in FP32 after the GEMM, the partition exact:

    A B = A' B' + A_tail B' + A B_tail,

``A'``, ``B'`` the operands with their tails zeroed (the fp16x3 GEMM's input), ``A_tail``, ``B_tail`` the
tails.  ``A_tail B'`` gathers the rows of ``B'`` that a row's tail entries select (contiguous along
``j``); ``A B_tail`` gathers the columns of ``A`` a column's tail entries select, which are contiguous in
``A``'s transpose (a copy, timed).  Each output gets one more FP32 FMA per tail entry of its row and
column, in its own order, so its error stays within the componentwise bound (within
``(K + 14 + tails) 2**-24 |A||B|`` against the guarantee's ``3K``): no partner rule is needed.

Timed per data kind (``sgemm_cube.cli.bench_gpu`` kinds, seeded on the device) next to cuBLAS SGEMM (TF32
off) and the default ``sgemm_cube.matmul`` in the same process (best of three ``do_bench`` medians):

* ``gemm``: the fp16x3 K loop of ``benchmarks/block_scaled.py`` (one scale per line) on the tail-free planes;
* ``tails``: the kernel that unscales the GEMM's output and adds both operands' tails, in one launch over
  consecutive lines (``consecutive``), or in two launches, A's row tails over A's rows ordered by the
  length of their tail, then B's column tails over B's columns so ordered (``sorted``: a tile's lines then
  have tails of about one length, and it writes the output's columns out of order);
* ``transpose``: ``A``'s transposed copy;
* ``projected``: gemm + tails + transpose + the default call's own cost beyond the same GEMM on normal
  data in the same process (its split passes, line meta and epilogue: what production adds).

The split and the tail lists are made on the host with torch (not timed; production would make them in
its split passes, whose cost the projection carries).  Also reported: how many tail entries the lines
hold (largest, mean, and the mean over blocks of 128 lines of the block's largest: the tails kernel's
iterations) and the fraction of lines within caps of 8, 16, 32 and 64; the relative Frobenius
error against float64 and the largest fraction of the componentwise bound ``K 2**-24 |A||B|`` used.
The tails kernel loops to the largest tail of a row (column) block, so
one long tail costs its whole block; kinds with a line of more than 2048 tail entries are reported without
times.

    python benchmarks/sparse_tails.py [--size 4096] [--kinds "log-normal both s=3" normal ...]
"""
from __future__ import annotations

import pathlib
import sys

import triton
import triton.language as tl

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._baseline import baseline, describe, operands, parse_arguments  # noqa: E402
from benchmarks._record import best_ms, cuda_setup, write_record  # noqa: E402
from benchmarks.block_scaled import LOWER, SB, TOP, block_scaled_gemm  # noqa: E402

METHOD = ("fp16x3 GEMM-only Triton kernel (benchmarks/block_scaled.py 'line': 128 x 128 x 64 tiles, 8 warps, "
          "3 stages, TMA) on planes split by torch on the host with each line's tail entries (nonzero, below "
          "2**-15 once the line's largest is in [2**14, 2**15)) zeroed, then a Triton kernel unscaling the output "
          "and adding the tails in FP32 (gathers of B's rows and of A's transposed copy), in one launch over "
          "consecutive lines or two over lines sorted by tail length; cuBLAS SGEMM (TF32 off) "
          "and sgemm_cube.matmul default options in the same process; best of three triton.testing.do_bench "
          "medians (rep 100 ms); errors against float64")
CAPS = (8, 16, 32, 64)
#: How the tails kernel walks the lines: one launch over consecutive lines, or a launch per operand over its
#: lines ordered by tail length (:func:`tails_product`).
VARIANTS = ("consecutive", "sorted")
#: Kinds with a line of more tail entries than this are reported without times.
MOST = 2048


@triton.jit
def add_tails(c_ptr, fa_ptr, fb_ptr, b_free_ptr, at_ptr, a_idx, a_val, a_most, b_idx, b_val, b_most, rows_ptr,
              cols_ptr, M, N, CAP_A: tl.constexpr, CAP_B: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, UNSCALE: tl.constexpr, ROW_TAILS: tl.constexpr, COL_TAILS: tl.constexpr,
              ROWS_SORTED: tl.constexpr, COLS_SORTED: tl.constexpr):
    """C = fa fb C_scaled + A_tail B' + A B_tail for one BLOCK_M x BLOCK_N tile (each term where asked): the
    row tails of the tile's rows (their entries' indices and FP32 values, padded with value 0) each gather a
    row of B' (B with its tails zeroed); the column tails each gather a row of A's transpose.  A tile's rows
    (columns) are consecutive, or, where sorted, the ones ``rows_ptr`` (``cols_ptr``) lists for its block
    (the lines ordered by the length of their tail, so that a tile's lines have tails of about one length);
    ``a_most`` (``b_most``) hold each block's longest tail, the loop's length."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if ROWS_SORTED:
        offs_m = tl.load(rows_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    else:
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    if COLS_SORTED:
        offs_n = tl.load(cols_ptr + pid_n * BLOCK_N + tl.arange(0, BLOCK_N))
    else:
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_offs = offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    acc = tl.load(c_ptr + c_offs)
    if UNSCALE:
        acc = acc * (tl.load(fa_ptr + offs_m)[:, None] * tl.load(fb_ptr + offs_n)[None, :])
    if ROW_TAILS:
        for r in range(0, tl.load(a_most + pid_m)):
            k = tl.load(a_idx + offs_m * CAP_A + r)
            v = tl.load(a_val + offs_m * CAP_A + r)
            acc = tl.fma(v[:, None], tl.load(b_free_ptr + k[:, None].to(tl.int64) * N + offs_n[None, :]), acc)
    if COL_TAILS:
        for r in range(0, tl.load(b_most + pid_n)):
            k = tl.load(b_idx + offs_n * CAP_B + r)
            v = tl.load(b_val + offs_n * CAP_B + r)
            acc = tl.fma(tl.load(at_ptr + k[None, :].to(tl.int64) * M + offs_m[:, None]), v[None, :], acc)
    tl.store(c_ptr + c_offs, acc)


def split_tails(x, lines_axis: int, cap: int):
    """(hi, lo, factors, counts, idx, val, freed) of ``x`` scaled per line (its largest in
    [2**TOP, 2**(TOP + 1))) with the line's tail (nonzero entries below 2**LOWER once scaled) zeroed before
    the split: hi, lo in x's layout; factors (lines,) 2**-shift; counts (lines,) the tail sizes; idx, val
    (lines, cap) the first ``cap`` tail entries' K indices and unscaled values (padding: 0, 0.0); freed: x
    with its tails zeroed (float32, x's layout)."""
    import torch

    xk = x if lines_axis == 0 else x.t()  # (lines, K)
    lines, _ = xk.shape
    mag = xk.abs()
    _, e_big = torch.frexp(mag.amax(-1))
    shift = (TOP + 1 - e_big).to(torch.float32)
    scaled = torch.ldexp(xk, shift[:, None])
    tail = (scaled != 0) & (scaled.abs() < 2.0 ** LOWER)
    counts = tail.sum(-1)
    kept = torch.where(tail, 0.0, scaled)
    hi = kept.half()
    lo = ((kept - hi.float()) * 2.0 ** SB).half()
    line, k = tail.nonzero(as_tuple=True)  # sorted by line, then k
    slot = torch.arange(line.numel(), device=x.device) - (torch.cumsum(counts, 0) - counts)[line]
    keep = slot < cap
    idx = torch.zeros(lines, cap, dtype=torch.int32, device=x.device)
    val = torch.zeros(lines, cap, dtype=torch.float32, device=x.device)
    idx[line[keep], slot[keep]] = k[keep].to(torch.int32)
    val[line[keep], slot[keep]] = xk[line[keep], k[keep]]
    freed = torch.where(tail, 0.0, xk)
    factors = torch.ldexp(torch.ones_like(shift), -shift)
    if lines_axis == 1:
        hi, lo, freed = hi.t(), lo.t(), freed.t()
    return hi.contiguous(), lo.contiguous(), factors, counts, idx, val, freed.contiguous()


def tail_counts(x, lines_axis: int):
    """The number of tail entries of each line of ``x`` (as :func:`split_tails` finds them)."""
    return split_tails(x, lines_axis, 1)[3]


def tails_product(a, b, cap: int, sort: bool = False):
    """Launchers of A's transpose, the GEMM and the tails on a's and b's split (each line's first ``cap``
    tail entries), in the order they run, and the output they write (the tails update it in place: run
    them all again before reading it).  ``sort``: the tails in two launches, rows then columns, each over
    its lines ordered by tail length (the output's columns then written out of order); else one launch
    over consecutive lines."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    tile_m, tile_n, tile_k = 128, 128, 64
    m, k = a.shape
    n = b.shape[1]
    a_hi, a_lo, fa, a_counts, a_idx, a_val, _ = split_tails(a, 0, cap)
    b_hi, b_lo, fb, b_counts, b_idx, b_val, b_free = split_tails(b, 1, cap)
    a_counts, b_counts = a_counts.clamp(max=cap), b_counts.clamp(max=cap)
    rows = torch.argsort(a_counts).to(torch.int32) if sort else torch.arange(m, device=a.device, dtype=torch.int32)
    cols = torch.argsort(b_counts).to(torch.int32) if sort else torch.arange(n, device=a.device, dtype=torch.int32)
    a_most = a_counts[rows].reshape(-1, tile_m).amax(-1).to(torch.int32)
    b_most = b_counts[cols].reshape(-1, tile_n).amax(-1).to(torch.int32)
    descs = [TensorDescriptor(t, list(t.shape), list(t.stride()), blk) for t, blk in
             ((a_hi, [tile_m, tile_k]), (a_lo, [tile_m, tile_k]), (b_hi, [tile_k, tile_n]), (b_lo, [tile_k, tile_n]))]
    c = torch.empty(m, n, device=a.device)
    at = torch.empty(k, m, device=a.device)

    def gemm():
        block_scaled_gemm[(triton.cdiv(m, tile_m) * triton.cdiv(n, tile_n),)](
            *descs, fa, fb, c, m, n, k, BLOCK_STEPS=0, BLOCK_M=tile_m, BLOCK_N=tile_n, BLOCK_K=tile_k, GROUP_M=8,
            num_warps=8, num_stages=3)

    def tails_kernel(**passes):
        add_tails[(m // tile_m, n // tile_n)](c, fa, fb, b_free, at, a_idx, a_val, a_most, b_idx, b_val, b_most, rows,
                                             cols, m, n, CAP_A=cap, CAP_B=cap, BLOCK_M=tile_m, BLOCK_N=tile_n,
                                             num_warps=8, **passes)

    def tails():
        if sort:
            tails_kernel(UNSCALE=True, ROW_TAILS=True, COL_TAILS=False, ROWS_SORTED=True, COLS_SORTED=False)
            tails_kernel(UNSCALE=False, ROW_TAILS=False, COL_TAILS=True, ROWS_SORTED=False, COLS_SORTED=True)
        else:
            tails_kernel(UNSCALE=True, ROW_TAILS=True, COL_TAILS=True, ROWS_SORTED=False, COLS_SORTED=False)

    def transpose():
        at.copy_(a.t())

    return dict(transpose=transpose, gemm=gemm, tails=tails), c


def main(argv=None) -> int:
    args, kinds = parse_arguments(__doc__, argv)
    gen = cuda_setup()
    n = args.size
    if "normal" in kinds:  # the projection's production overhead comes from normal data
        kinds = ["normal", *(kind for kind in kinds if kind != "normal")]
    timed = lambda fn: best_ms(fn, runs=3, rep=100)  # noqa: E731
    rows, overhead_ms = [], None
    for kind in kinds:
        a, b = operands(kind, n, gen)
        row, rel_err, bound_used = baseline(kind, a, b, timed)
        most = 0
        for name, counts in (("rows", tail_counts(a, 0)), ("cols", tail_counts(b, 1))):
            row[f"{name}_tail"] = dict(most=int(counts.max()), mean=counts.float().mean().item(),
                                       block_most_mean=counts.reshape(-1, 128).amax(-1).float().mean().item(),
                                       **{f"within_{cap}": (counts <= cap).float().mean().item() for cap in CAPS})
            most = max(most, int(counts.max()))
        print(f"{describe(row)}; tails: rows {row['rows_tail']}, cols {row['cols_tail']}", flush=True)
        row["variants"] = {}
        for variant in (VARIANTS if most <= MOST else ()):
            launchers, c = tails_product(a, b, cap=max(1, most), sort=variant == "sorted")
            times = {name: timed(fn) for name, fn in launchers.items()}
            for launch in launchers.values():  # the output of one call, after the timing's repeated updates
                launch()
            if kind == "normal" and overhead_ms is None:
                overhead_ms = row["api_ms"] - times["gemm"]
            total = sum(times.values())
            var = dict(times_ms=times, total_ms=total, total_x=row["sgemm_ms"] / total, rel_err=rel_err(c),
                       bound_used=bound_used(c))
            if overhead_ms is not None:
                var.update(overhead_ms=overhead_ms, projected_ms=total + overhead_ms,
                           projected_x=row["sgemm_ms"] / (total + overhead_ms))
            row["variants"][variant] = var
            print(f"    {variant}: gemm {times['gemm']:.3f} + tails {times['tails']:.3f} + transpose "
                  f"{times['transpose']:.3f} ms = {var['total_x']:.2f}x SGEMM; projected "
                  f"{var.get('projected_x', float('nan')):.2f}x; err {var['rel_err']:.2e}, bound used "
                  f"{var['bound_used']:.4f}", flush=True)
        rows.append(row)
    print(f"wrote {write_record(args.out, 'sparse_tails', rows, method=METHOD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
