#!/usr/bin/env python3
"""The cost of exact fix-up outputs (issue 33's silent answers): the fix-up before and after.

``cpu``: ``cpu_fallback.guard.fixup_dot`` at 1024^3 on all-fix-up data against the former design (the
float64 sum rounded to FP32, written out here), and ``sgemm_cube.matmul(backend="cpu")`` with each; the
minimum and median of several runs, both in the same process::

    python benchmarks/fixup_exact.py cpu

``gpu``: ``sgemm_cube.matmul(backend="cuda")`` at 4096^3 (and the exact path at 1024^3) on data whose
every row and column is a fix-up line, cuBLAS SGEMM (TF32 off) in the same run, CUDA-event medians, and
the GEMM kernel's registers and spills.  Run it once per version of ``fixup_kernel.py`` on the same
machine, alternating the versions (a copy of the package with the other ``fixup_kernel.py`` first on
``PYTHONPATH``), and compare; ``--quick`` times the fast-path cases only::

    python benchmarks/fixup_exact.py gpu --label new

Measured (2026-11-26).  CPU, 2 shared cores, 1024^3, min / median of 7: ``fixup_dot`` 0.019-0.021 s
former, 0.057-0.074 s exact (two float64 BLAS products and the check; log-normal, row_span_120 and
full_range_rows data); ``matmul(backend="cpu")`` 0.96 -> 0.99 s (row_span_120), 0.61 -> 0.74 s
(full_range_rows).  H100, median of 30, former / exact, alternating: log-normal (sigma 3) 5.55-5.71 /
5.77-5.92 ms; rows holding 3e38 2.77-2.87 / 2.88-3.04 ms; no fix-up line 0.84-0.96 / 0.85-0.96 ms;
full_range_rows 5.6 / 32 ms; cancelling_huge_terms 1024^3 (every tile exact) 116 ms.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np


def _lognormal(rng, shape, sigma=3.0):
    return (rng.standard_normal(shape) * np.exp(sigma * rng.standard_normal(shape))).astype(np.float32)


def _span(rng, shape):
    return (rng.standard_normal(shape) * 2.0 ** rng.integers(-60, 61, shape)).astype(np.float32)


def _times(fn, reps):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out), statistics.median(out)


def cpu(reps: int) -> dict:
    import sgemm_cube
    import sgemm_cube.backends.cpu as cpu_backend
    from sgemm_cube.cpu_fallback.guard import fixup_dot
    from tests.guarantee_data import GENERATORS

    def former(x, y, alpha=1.0):
        with np.errstate(over="ignore", invalid="ignore"):
            c64 = np.matmul(x.astype(np.float64), y.astype(np.float64))
            if alpha != 1:
                c64 *= np.float64(np.float32(alpha))
            return c64.astype(np.float32)

    rng = np.random.default_rng(0)
    n = 1024
    data = {"lognormal_sigma3": (_lognormal(rng, (n, n)), _lognormal(rng, (n, n))),
            "row_span_120": (_span(rng, (n, n)), _span(rng, (n, n))),
            "full_range_rows": GENERATORS["full_range_rows"](rng, n, n, n)}
    res = {}
    for name, (a, b) in data.items():
        row = {"fixup_dot_former_s": _times(lambda: former(a, b), reps),
               "fixup_dot_exact_s": _times(lambda: fixup_dot(a, b), reps)}
        if name != "lognormal_sigma3":  # its emulated lines make the CPU model's call take ~40 s
            saved = cpu_backend.fixup_dot
            try:
                cpu_backend.fixup_dot = former
                row["matmul_cpu_former_s"] = _times(lambda: sgemm_cube.matmul(a, b, backend="cpu"), 2)
            finally:
                cpu_backend.fixup_dot = saved
            row["matmul_cpu_exact_s"] = _times(lambda: sgemm_cube.matmul(a, b, backend="cpu"), 2)
        res[name] = row
        print(name, {k: f"{v[0]:.3f} / {v[1]:.3f}" for k, v in row.items()}, flush=True)
    return res


def gpu(label: str, quick: bool = False) -> dict:
    import torch

    import sgemm_cube
    from tests.guarantee_data import GENERATORS, cancelling_huge_terms

    torch.backends.cuda.matmul.allow_tf32 = False

    def bench(fn, reps=30):
        fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            ts.append(s.elapsed_time(e))
        return statistics.median(ts)

    rng = np.random.default_rng(0)
    n = 4096
    sentinel = _lognormal(rng, (n, n), 1.0)
    sentinel[:, 7] = 3.0e38  # every row holds an entry near FP32's top
    cases = {"normal (no fix-up line)": (rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)),
             "lognormal_sigma3": (_lognormal(rng, (n, n)), _lognormal(rng, (n, n))),
             "rows_with_3e38": (sentinel, _lognormal(rng, (n, n), 1.0) * np.float32(1e-30)),
             "full_range_rows": GENERATORS["full_range_rows"](rng, n, n, n)}
    res = {"label": label, "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    if quick:
        cases.pop("full_range_rows")
    for name, (a, b) in cases.items():
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        t_emu = bench(lambda: sgemm_cube.matmul(ta, tb, backend="cuda"))
        t_ref = bench(lambda: torch.matmul(ta, tb))
        res[name] = {"sgemm_cube_ms": t_emu, "cublas_sgemm_ms": t_ref, "x_sgemm": t_ref / t_emu}
        print(f"{label} {name} 4096^3: sgemm_cube {t_emu:.2f} ms, cuBLAS SGEMM {t_ref:.2f} ms, "
              f"{t_ref / t_emu:.2f}x SGEMM", flush=True)
    if quick:
        return res
    a, b = cancelling_huge_terms(rng, 1024, 1024, 1024)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    t = bench(lambda: sgemm_cube.matmul(ta, tb, backend="cuda"), reps=3)
    res["cancelling_1024"] = {"sgemm_cube_ms": t}
    print(f"{label} cancelling_huge_terms 1024^3 (every tile exact): {t:.1f} ms", flush=True)
    kernels = {}
    import importlib
    for mod_name in ("gemm_kernel", "gemm_fp16_kernel"):
        try:
            mod = importlib.import_module(f"sgemm_cube.backends.cuda.{mod_name}")
        except ImportError:
            continue
        for name, obj in vars(mod).items():
            for entry in (getattr(obj, "device_caches", None) or {}).values():
                for i, ck in enumerate(entry[0].values()):
                    kernels[f"{name}[{i}]"] = {"n_regs": getattr(ck, "n_regs", None),
                                               "n_spills": getattr(ck, "n_spills", None)}
    res["kernels"] = kernels
    print(label, "registers/spills:", kernels, flush=True)
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["cpu", "gpu"])
    p.add_argument("--label", default="")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="gpu: the fast-path cases only")
    p.add_argument("--json", default=None, help="write the figures here")
    args = p.parse_args()
    res = cpu(args.reps) if args.what == "cpu" else gpu(args.label, args.quick)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
