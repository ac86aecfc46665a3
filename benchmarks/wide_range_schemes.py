"""Each scheme of the CUDA backend on the wide-range data of ``sgemm-cube bench --matrix``, in one run.

For every kind of :data:`sgemm_cube.cli.bench_gpu.WIDE_RANGE_KINDS` (built by ``make_wide_range``, seeded
on the device), times (``triton.testing.do_bench`` medians) ``sgemm_cube.matmul(a, b, scheme=...)``
through the public API with each scheme beside cuBLAS SGEMM (TF32 off), and reports the relative
Frobenius error of each against float64 and the fractions of rows of A and columns of B that scheme
lists for the fix-up (``bench_gpu.fixup_fractions``).  Prints a line per case and writes
JSON (device, versions, command) to ``benchmarks/results/``.

    python benchmarks/wide_range_schemes.py [--schemes fp16x3 bf16x6 bf16x9] [--size 4096]
"""
from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._record import add_out_argument, cuda_setup, write_record  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schemes", nargs="+", default=["auto", "fp16x3", "bf16x6", "bf16x9"],
                        help="schemes to time ('auto', the default, is the GPU's choice per call)")
    parser.add_argument("--size", type=int, default=4096, help="m = n = k of the square kinds (default 4096)")
    add_out_argument(parser)
    args = parser.parse_args(argv)

    import torch
    import triton
    import triton.testing

    import sgemm_cube
    from sgemm_cube.backends.cuda import launch
    from sgemm_cube.cli.bench_gpu import WIDE_RANGE_KINDS, fixup_fractions, make_wide_range
    from sgemm_cube.cpu_fallback.guard import choose_scheme
    from sgemm_cube.metrics import relative_error

    gen = cuda_setup()
    n = args.size
    rows = []
    for kind in WIDE_RANGE_KINDS:
        shapes = ((8192, 96), (96, n)) if kind == "vandermonde" else ((n, n), (n, n))
        a, b = make_wide_range(kind, *shapes, generator=gen)
        ref = torch.matmul(a.double(), b.double())
        ms_sgemm = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=10, rep=60)
        err_sgemm = relative_error(torch.matmul(a, b), ref)
        for scheme in args.schemes:
            err = relative_error(sgemm_cube.matmul(a, b, scheme=scheme), ref)
            ms = triton.testing.do_bench(lambda: sgemm_cube.matmul(a, b, scheme=scheme), warmup=10, rep=60)
            runs = scheme
            if scheme == "auto":  # what the GPU chose: the plan says "auto" from its size on, the rule which
                planned = sgemm_cube.explain(a, b).scheme
                runs = planned if planned != "auto" else choose_scheme(
                    a.cpu().numpy()[None], b.cpu().numpy()[None], margin=launch.AUTO_MARGIN)
            listed = fixup_fractions(a, b, scheme=runs)
            row = dict(kind=kind, shape=[a.shape[0], b.shape[1], a.shape[1]], scheme=scheme, runs=runs, ms=ms,
                       ms_sgemm=ms_sgemm, x_sgemm=ms_sgemm / ms, err=err, err_sgemm=err_sgemm,
                       rows_listed=listed["rows"], cols_listed=listed["cols"])
            rows.append(row)
            print(f"{kind:22s} {scheme:7s} ({runs}) x{row['x_sgemm']:5.2f} SGEMM  err {err:.2e} (SGEMM {err_sgemm:.2e})  "
                  f"listed rows {row['rows_listed']:.2f} cols {row['cols_listed']:.2f}", flush=True)
    path = write_record(args.out, "wide_range_schemes", rows)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
