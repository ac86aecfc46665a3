"""What ``scheme="auto"`` (the default) costs where it changes nothing: normal data, through the public API.

On random normal data no line is listed, so the GPU chooses fp16x3: ``sgemm_cube.matmul(a, b)`` gives
``scheme="fp16x3"``'s bits, and what it adds is the launches that make the choice (a second line-meta
pass, the choice, a bf16x6 GEMM launch that returns at once) and a third 16-bit plane per operand in the
workspace.  For square sizes from 1024 to 8192, times (``triton.testing.do_bench`` medians) the default,
``scheme="fp16x3"`` and cuBLAS SGEMM (TF32 off) in the same run, checks the bits, and measures the peak
memory of each call beyond its inputs, in units of one FP32 output.  The wide-range data kinds are
``benchmarks/wide_range_schemes.py``'s.  Prints a line per size and writes JSON (device, versions,
command) to ``benchmarks/results/``.

    python benchmarks/auto_scheme.py [--sizes 1024 2048 4096 8192]
"""
from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._record import add_out_argument, cuda_setup, write_record  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1024, 2048, 3072, 4096, 8192])
    add_out_argument(parser)
    args = parser.parse_args(argv)

    import torch
    import triton
    import triton.testing

    import sgemm_cube

    gen = cuda_setup()
    rows = []
    for n in args.sizes:
        a = torch.randn(n, n, device="cuda", generator=gen)
        b = torch.randn(n, n, device="cuda", generator=gen)
        ms_sgemm = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=10, rep=80)
        ms_auto = triton.testing.do_bench(lambda: sgemm_cube.matmul(a, b), warmup=10, rep=80)
        ms_fp16x3 = triton.testing.do_bench(lambda: sgemm_cube.matmul(a, b, scheme="fp16x3"), warmup=10, rep=80)
        same = torch.equal(sgemm_cube.matmul(a, b).view(torch.int32),
                           sgemm_cube.matmul(a, b, scheme="fp16x3").view(torch.int32))
        memory = {}
        for scheme in ("auto", "fp16x3"):
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            c = sgemm_cube.matmul(a, b, scheme=scheme)
            torch.cuda.synchronize()
            memory[scheme] = (torch.cuda.max_memory_allocated() - base) / (n * n * 4)
            del c
        row = dict(n=n, plan=sgemm_cube.explain(a, b).scheme, ms_sgemm=ms_sgemm, ms_auto=ms_auto,
                   ms_fp16x3=ms_fp16x3, x_sgemm_auto=ms_sgemm / ms_auto, x_sgemm_fp16x3=ms_sgemm / ms_fp16x3,
                   auto_over_fp16x3=ms_auto / ms_fp16x3, same_bits=same, memory_auto=memory["auto"],
                   memory_fp16x3=memory["fp16x3"])
        rows.append(row)
        print(f"{n:6d} plan {row['plan']:7s} default x{row['x_sgemm_auto']:5.2f} SGEMM, fp16x3 "
              f"x{row['x_sgemm_fp16x3']:5.2f}: default/fp16x3 time {row['auto_over_fp16x3']:.3f}, same bits {same}, "
              f"memory {memory['auto']:.2f} / {memory['fp16x3']:.2f} outputs", flush=True)
    path = write_record(args.out, "auto_scheme", rows)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
