"""How close the default product comes to its ceiling: three FP16 tensor-core products (issue 33, item 3).

For each size n (M = N = K), on random normal FP32 data, times (``triton.testing.do_bench``, best of three
medians):

* the ceiling: cuBLAS FP16 x FP16 -> FP32 (``torch.mm(..., out_dtype=torch.float32)``) on random FP16 data
  of the same shape, times three (the emulation's three products);
* cuBLAS SGEMM (TF32 off);
* ``sgemm_cube.matmul(a, b)`` with default options, called eagerly, and the same call captured in a CUDA
  graph and replayed (the difference is host time the GPU waits for);
* the SM clock and power draw while the ceiling and the call were timed (``nvidia-smi``, medians: the H200
  runs both at its power limit);
* per launch, the GPU time of one call (``torch.profiler``, mean of 10 calls): the split passes
  (statistics, line meta, scaled split) and the GEMM.

Reports the fraction of the ceiling reached (``ceiling_ms / api_ms``) and the relative Frobenius errors of
sgemm_cube and SGEMM against float64; writes JSON (device, versions, command, method) to
``benchmarks/results/``.

    python benchmarks/ceiling.py [--sizes 4096 8192]
"""
from __future__ import annotations

import argparse
import functools
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._record import add_out_argument, best_ms, cuda_setup, gpu_clocks, write_record  # noqa: E402

METHOD = ("ceiling_ms = 3 x cuBLAS FP16xFP16->FP32 on random FP16 data of the same shape; api_ms = "
          "sgemm_cube.matmul(a, b) default options on random normal FP32 data; fraction = ceiling_ms / api_ms; "
          "each time the best of three triton.testing.do_bench medians, in the same process; per-launch times "
          "from torch.profiler (CUDA activity), mean of 10 calls; SM clock and power medians from nvidia-smi every "
          "50 ms while the ceiling and the call were timed")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192], help="M = N = K to time")
    add_out_argument(parser)
    args = parser.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile

    import sgemm_cube
    from sgemm_cube.metrics import relative_error

    gen = cuda_setup()
    timed = functools.partial(best_ms, runs=3, rep=200)

    def launch_us(fn, reps=10):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
        times = {}
        for event in prof.events():
            if event.device_type.name == "CUDA":
                times[event.name] = times.get(event.name, 0.0) + event.device_time / reps
        return times

    rows = []
    for n in args.sizes:
        a = torch.randn(n, n, device="cuda", generator=gen)
        b = torch.randn(n, n, device="cuda", generator=gen)
        a16 = torch.randn(n, n, device="cuda", generator=gen).half()
        b16 = torch.randn(n, n, device="cuda", generator=gen).half()
        out = torch.empty(n, n, device="cuda")

        def call():
            return sgemm_cube.matmul(a, b, out=out)

        call()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm the caches on a side stream before the capture
            call()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        with gpu_clocks() as fp16_clocks:
            fp16_ms = timed(lambda: torch.mm(a16, b16, out_dtype=torch.float32))
        with gpu_clocks() as api_clocks:
            api_ms = timed(call)
        row = dict(n=n, fp16_fp32_ms=fp16_ms, sgemm_ms=timed(lambda: torch.matmul(a, b)), api_ms=api_ms,
                   graph_ms=timed(graph.replay), clocks=dict(fp16_fp32=fp16_clocks, api=api_clocks))
        row["ceiling_ms"] = 3 * row["fp16_fp32_ms"]
        row["fraction"] = row["ceiling_ms"] / row["api_ms"]
        row["speedup"] = row["sgemm_ms"] / row["api_ms"]
        launches = launch_us(call)
        row["launch_us"] = {name: round(t, 1) for name, t in sorted(launches.items(), key=lambda kv: -kv[1])}
        row["split_us"] = sum(t for name, t in launches.items() if "gemm" not in name and "recheck" not in name)
        row["gemm_us"] = sum(t for name, t in launches.items() if name.startswith("gemm_kernel"))
        ref = a.double() @ b.double()
        row["rel_err"] = relative_error(call(), ref)
        row["rel_err_sgemm"] = relative_error(torch.matmul(a, b), ref)
        rows.append(row)
        print(f"{n}^3: {row['api_ms']:.3f} ms (graph {row['graph_ms']:.3f}) = {row['speedup']:.2f}x SGEMM "
              f"({row['sgemm_ms']:.3f}), {row['fraction']:.3f} of the ceiling ({row['ceiling_ms']:.3f} ms, "
              f"{2 * n ** 3 / row['fp16_fp32_ms'] * 1e-9:.0f} TFLOP/s FP16->FP32); split {row['split_us']:.0f} us, "
              f"GEMM {row['gemm_us']:.0f} us ({row['ceiling_ms'] * 1e3 / row['gemm_us']:.3f} of the ceiling alone); "
              f"err {row['rel_err']:.1e} (sgemm {row['rel_err_sgemm']:.1e}); SM clock (MHz) / power (W) medians: "
              f"FP16 {fp16_clocks.get('sm_mhz_median')} / {fp16_clocks.get('power_w_median')}, "
              f"sgemm_cube {api_clocks.get('sm_mhz_median')} / {api_clocks.get('power_w_median')}", flush=True)
    print(f"wrote {write_record(args.out, 'ceiling', rows, method=METHOD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
