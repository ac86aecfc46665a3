"""Time every split scheme of the CUDA backend against cuBLAS SGEMM, in one run.

For square sizes (default 4096 and 8192) and random normal FP32 data, times
(``triton.testing.do_bench`` medians) ``sgemm_cube.matmul`` through the public
API for each scheme the CUDA backend implements, ``scheme="auto"`` on
in-range data, on data at 1e30 / 1e-30 (power-of-two scaling) and on data
whose rows span more than 29 binades, beside cuBLAS SGEMM (TF32 off); and
the relative Frobenius error of each against float64.  Prints a table and
writes JSON (device, versions, command) to ``benchmarks/results/``.

    python benchmarks/schemes_gpu.py [--sizes 4096 8192]
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import platform
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--reps-ms", type=float, default=100.0)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmarks") / "results")
    parser.add_argument("--bf16-configs", action="store_true",
                        help="also time BF16 kernel configs at the largest size (backend level)")
    args = parser.parse_args(argv)

    import torch
    import triton
    import triton.testing

    import sgemm_cube
    from sgemm_cube.backends import cuda

    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for n in args.sizes:
        a = torch.randn(n, n, device="cuda", generator=gen)
        b = torch.randn(n, n, device="cuda", generator=gen)
        wide_a = a.clone()
        wide_a[:, :64] *= 1e-12  # rows spanning > 29 binades: auto wants bf16x9
        cases = [("sgemm (cuBLAS FP32)", a, b, lambda x, y: torch.matmul(x, y))]
        for scheme in getattr(cuda, "SCHEMES", ("fp16x3", "fp16x4")):
            cases.append((f"scheme={scheme}", a, b, lambda x, y, s=scheme: sgemm_cube.matmul(x, y, scheme=s, backend="cuda")))
        cases += [
            ("scheme=auto (in range)", a, b, lambda x, y: sgemm_cube.matmul(x, y, scheme="auto", backend="cuda")),
            ("scheme=auto (1e30 x 1e-30)", a * 1e30, b * 1e-30,
             lambda x, y: sgemm_cube.matmul(x, y, scheme="auto", backend="cuda")),
            ("sgemm (1e30 x 1e-30)", a * 1e30, b * 1e-30, lambda x, y: torch.matmul(x, y)),
            ("scheme=auto (rows span > 29 binades)", wide_a, b,
             lambda x, y: sgemm_cube.matmul(x, y, scheme="auto", backend="cuda")),
            ("sgemm (rows span > 29 binades)", wide_a, b, lambda x, y: torch.matmul(x, y)),
        ]
        for name, x, y, fn in cases:
            ref = torch.matmul(x.double(), y.double())
            c = fn(x, y)
            err = float((c.double() - ref).norm() / ref.norm())
            ms = float(triton.testing.do_bench(lambda: fn(x, y), warmup=25, rep=args.reps_ms, return_mode="median"))
            plan = sgemm_cube.explain(x, y, scheme="auto", backend="cuda") if "auto" in name else None
            rows.append({"n": n, "method": name, "ms": ms, "tflops": 2.0 * n ** 3 / ms * 1e-9, "rel_error": err,
                         "plan": plan._asdict() if plan else None})
            print(f"{n:6d}  {name:40s} {ms:8.3f} ms {rows[-1]['tflops']:7.1f} TFLOP/s  err {err:.2e}"
                  + (f"  -> {plan.scheme}{'+' + plan.scale if plan.scale else ''}" if plan else ""), flush=True)
            del ref, c
    if args.bf16_configs:
        n = max(args.sizes)
        a = torch.randn(n, n, device="cuda", generator=gen)
        b = torch.randn(n, n, device="cuda", generator=gen)
        ref = torch.matmul(a.double(), b.double())
        out = torch.empty(1, n, n, device="cuda")
        candidates = [None, {"num_stages": 3}, {"merge_levels": True, "BLOCK_M": 128, "BLOCK_N": 128},
                      {"merge_levels": True, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 3}]
        for scheme in ("bf16x9", "bf16x6"):
            for cfg in candidates:
                def fn(cfg=cfg, scheme=scheme):
                    return cuda.matmul(a[None], b[None], sb=12, order="termwise", keep_lo_lo=False, out=out,
                                       config=cfg, scheme=scheme)
                try:
                    fn()
                    err = float((out[0].double() - ref).norm() / ref.norm())
                    ms = float(triton.testing.do_bench(fn, warmup=25, rep=args.reps_ms, return_mode="median"))
                except Exception as exc:  # a config that does not compile: record it
                    rows.append({"n": n, "method": f"{scheme} config={cfg}", "failed": repr(exc)[:300]})
                    print(f"{n:6d}  {scheme} config={cfg}: FAILED {exc!r}"[:300], flush=True)
                    continue
                rows.append({"n": n, "method": f"{scheme} config={cfg}", "ms": ms,
                             "tflops": 2.0 * n ** 3 / ms * 1e-9, "rel_error": err})
                print(f"{n:6d}  {scheme} config={cfg}  {ms:8.3f} ms {rows[-1]['tflops']:7.1f} TFLOP/s  err {err:.2e}",
                      flush=True)
    env = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "python": platform.python_version(), "command": " ".join(["python"] + sys.argv),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    args.out.mkdir(parents=True, exist_ok=True)
    key = env["device"].replace("NVIDIA ", "").split()[0].lower()
    path = args.out / f"schemes_{key}_{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(dict(env, rows=rows), indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
