"""Validate the built AscendC backend on an Ascend host (not run in CI: no NPU there).

    python ascendc_kernels/tests/check_on_npu.py            # correctness, a few shapes
    python ascendc_kernels/tests/check_on_npu.py --bench    # plus timings

For every shape it runs ``sgemm_cube.matmul(..., backend="npu")`` and
compares with

* the schedule model on the NumPy arithmetic model
  (``npu_schedule.simulate``, same tiling, ``accumulate="cube16"``): equal
  bit for bit if the cube accumulates as that model says, otherwise the
  count of differing elements and the largest difference in units of the
  last place are printed (that is a measurement of the cube, not a failure);
* a float64 reference: relative Frobenius error, with the NPU's native FP32
  ``torch.matmul`` error beside it (on 910A there is no FP32 cube; torch_npu
  then computes in reduced precision, which the printout shows).

Exit status 1 if any emulated error exceeds 2x the native FP32 error on 910B
or 1e-6 on 910A.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

__all__ = ["main"]


def _rel(c: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", action="store_true", help="also time 2048^3 .. 8192^3")
    args = parser.parse_args(argv)

    import torch
    import torch_npu  # noqa: F401  (registers the NPU device)

    import sgemm_cube
    from sgemm_cube.backends import npu, npu_schedule

    ext = npu._extension()
    soc = ext.soc()
    cap = npu_schedule.capacity_from_profile(soc)
    # The result does not depend on how C blocks are spread over cores; any count reproduces it.
    from tuning import get_profile

    cores = get_profile(soc).ai_cores
    print(f"device {torch.npu.get_device_name(0)}, kernels built for {soc}")
    rng = np.random.default_rng(0)
    worst = 0.0
    for m, n, k in [(1, 1, 1), (17, 33, 65), (128, 128, 128), (257, 129, 1000), (1024, 1024, 4096)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        da, db = torch.from_numpy(a).npu(), torch.from_numpy(b).npu()
        c = sgemm_cube.matmul(da, db, backend="npu").cpu().numpy()
        native = torch.matmul(da, db).cpu().numpy()
        err, err_native = _rel(c, ref), _rel(native, ref)
        line = f"{m}x{n}x{k}: emulated {err:.2e}, native FP32 {err_native:.2e}"
        if m * n * k <= 2 ** 27:
            t = npu.choose_tiling(soc, m, n, k)
            model = npu_schedule.simulate(a, b, tiling=t, cap=cap, cores=cores)
            diff = c.view(np.int32).astype(np.int64) - model.view(np.int32).astype(np.int64)
            line += f", vs model: {int(np.count_nonzero(diff))} elements differ (max {int(np.abs(diff).max())} ulp)"
        print(line)
        limit = 2 * err_native if soc == "910b" else 1e-6
        worst = max(worst, err / limit if limit else 0.0)
    if args.bench:
        for size in (2048, 4096, 8192):
            da = torch.randn(size, size, device="npu")
            db = torch.randn(size, size, device="npu")
            for name, fn in (("sgemm_cube", lambda: sgemm_cube.matmul(da, db, backend="npu")),
                             ("torch fp32", lambda: torch.matmul(da, db))):
                fn()
                torch.npu.synchronize()
                t0 = time.perf_counter()
                for _ in range(5):
                    fn()
                torch.npu.synchronize()
                dt = (time.perf_counter() - t0) / 5
                print(f"{size}^3 {name}: {2 * size ** 3 / dt / 1e12:.1f} TFLOP/s")
    return 0 if worst <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
