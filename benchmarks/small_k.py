"""The emulation at short K against cuBLAS SGEMM, on random normal data and on Vandermonde features.

Times (``triton.testing.do_bench``, best of two medians per method) ``sgemm_cube.matmul(a, b,
backend="cuda")`` -- the emulation with default options, whatever the hybrid rule says -- beside cuBLAS
SGEMM (TF32 off) at K = 64 ... 256, and reports the relative Frobenius error of each against float64.
Prints a line per case and the smallest K from which the emulation won on normal data at every measured
K (the H100's hybrid rule ``min_k``, ``configs/h100.json``); writes JSON (device, versions, command) to
``benchmarks/results/``.

    python benchmarks/small_k.py [--ks 64 96 128 160 192 256]
"""
from __future__ import annotations

import argparse
import functools
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._record import add_out_argument, best_ms, cuda_setup, write_record  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[64, 96, 128, 160, 192, 256], help="the K to time")
    add_out_argument(parser)
    args = parser.parse_args(argv)

    import torch

    import sgemm_cube
    from sgemm_cube.cli.bench_gpu import make_wide_range
    from sgemm_cube.metrics import relative_error

    gen = cuda_setup()
    timed = functools.partial(best_ms, runs=2, rep=100)

    rows = []
    for m, n in ((8192, 4096), (8192, 8192)):
        for k in args.ks:
            for data in ("normal", "vandermonde") if n == 4096 else ("normal",):
                if data == "normal":
                    a = torch.randn(m, k, device="cuda", generator=gen)
                    b = torch.randn(k, n, device="cuda", generator=gen)
                else:
                    a, b = make_wide_range("vandermonde", (m, k), (k, n), generator=gen)
                ref = a.double() @ b.double()
                row = dict(m=m, n=n, k=k, data=data,
                           sgemm_ms=timed(lambda: torch.matmul(a, b)),
                           cuda_ms=timed(lambda: sgemm_cube.matmul(a, b, backend="cuda")),
                           rel_err=relative_error(sgemm_cube.matmul(a, b, backend="cuda"), ref),
                           rel_err_sgemm=relative_error(torch.matmul(a, b), ref))
                row["speedup"] = row["sgemm_ms"] / row["cuda_ms"]
                rows.append(row)
                print(f"{m}x{n} k{k:4d} {data:12s} sgemm {row['sgemm_ms']:.3f} ms cuda {row['cuda_ms']:.3f} ms "
                      f"{row['speedup']:.2f}x  err {row['rel_err']:.1e} (sgemm {row['rel_err_sgemm']:.1e})", flush=True)
    wins = [k for k in args.ks
            if all(r["speedup"] >= 1.0 for r in rows if r["data"] == "normal" and r["k"] >= k)]
    print("smallest K from which the emulation wins on normal data:", min(wins) if wins else None)
    print(f"wrote {write_record(args.out, 'small_k', rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
