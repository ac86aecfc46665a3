"""``sgemm-cube bench-cpu``: speed of the CPU arithmetic model.

Times the default model (termwise, ``cube16``, sb=12) and ``numpy.matmul``
in float32 on the same data in the same run and reports the ratio, with the
relative error vs float64 of both.  The accuracy studies run on this model,
so its speed decides how large they can be.
"""
from __future__ import annotations

import json
import os
import platform
import sys

import numpy as np

from ..api import matmul
from .demo import best_time, format_table
from ..metrics import reference_matmul64, relative_error

__all__ = ["run_cpu_benchmark"]


def run_cpu_benchmark(*, size: int = 1024, repeats: int = 3, out_dir: str | None = None, seed: int = 0,
                      print_fn=print) -> dict:
    """Time the CPU model against float32 ``numpy.matmul``; optionally write JSON to ``out_dir``.

    ``size`` (M = N = K) and ``repeats`` must be positive integers (ValueError otherwise).
    """
    for name, value in (("size", size), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    ref = reference_matmul64(a, b)
    c32, t32 = best_time(lambda: np.matmul(a, b), max(repeats, 5))
    cem, tem = best_time(lambda: matmul(a, b, 12, backend="cpu"), repeats)
    record = {
        "benchmark": "cpu_model_vs_numpy_float32",
        "shape": [size, size, size],
        "numpy_float32_s": t32, "sgemm_cube_cpu_model_s": tem, "ratio": tem / t32,
        "rel_error_numpy_float32": relative_error(c32, ref), "rel_error_sgemm_cube": relative_error(cem, ref),
        "machine": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
        "numpy": np.__version__, "python": platform.python_version(),
        "command": " ".join(["sgemm-cube", *sys.argv[1:]]) if sys.argv else "",
    }
    rows = [{"method": "numpy.matmul float32", "time_ms": f"{t32 * 1e3:.1f}", "ratio": "1.0",
             "rel_error_vs_fp64": f"{record['rel_error_numpy_float32']:.2e}"},
            {"method": "sgemm_cube cpu model (termwise, cube16, sb=12)", "time_ms": f"{tem * 1e3:.1f}",
             "ratio": f"{record['ratio']:.1f}", "rel_error_vs_fp64": f"{record['rel_error_sgemm_cube']:.2e}"}]
    print_fn(f"CPU model benchmark, {size}^3, {os.cpu_count()} cores")
    print_fn(format_table(rows, ["method", "time_ms", "ratio", "rel_error_vs_fp64"]))
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, f"cpu_model_{size}.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(record, fh, indent=2)
        print_fn(f"wrote {path}")
    return record
