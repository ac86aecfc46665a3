"""The NPU path's listed lines: exponent bands against the vector unit's FP32 fix-up, on the CPU model.

For every kind of :data:`sgemm_cube.cli.bench_gpu.WIDE_RANGE_KINDS` (built by ``make_wide_range`` on the CPU,
fixed seed), runs :func:`sgemm_cube.backends.npu_model.guarded_product` (what the executed NPU kernels compute,
bit for bit) on the 910A with the unprobed design, once with the listed lines by exponent bands (today's
design) and once by recursive FP32 summation (the former), checks SGEMM's componentwise bound on both, and
reports the relative Frobenius error of each against float64 with native FP32 (recursive summation) beside,
and the fractions of listed rows and columns.  Prints a Markdown table and writes JSON (versions, command)
to ``benchmarks/results/``.  No NPU involved: a model measurement.

    python benchmarks/npu_bands_accuracy.py [--out benchmarks/results]
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import platform
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmarks") / "results")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    from sgemm_cube.backends import npu_model, npu_schedule
    from sgemm_cube.cli.bench_gpu import WIDE_RANGE_KINDS, make_wide_range
    from sgemm_cube.cpu_fallback.arithmetic import DEFAULT, WORST
    from sgemm_cube.cpu_fallback.guard import fixup_min_class, line_meta
    from tests.guarantee_data import check_guarantee, references

    gen = torch.Generator().manual_seed(args.seed)
    tiling = npu_schedule.Tiling(32, 32, 32, 1)
    rows = []
    for kind in WIDE_RANGE_KINDS:
        m, k, n = (128, 96, 128) if kind == "vandermonde" else (96, 256, 96)
        a, b = (x.numpy() for x in make_wide_range(kind, (m, k), (k, n), device="cpu", generator=gen))
        ref = references(a, b)
        norm = np.linalg.norm(ref.c64)
        errors = {}
        for name, bands in (("bands", True), ("fp32_fixup", False)):
            c = npu_model.guarded_product(a, b, soc="910a", arithmetic=DEFAULT, design=WORST, tiling=tiling,
                                          bands=bands)
            msg = check_guarantee(c, a, b, frobenius=False, refs=ref)
            if msg:
                raise AssertionError(f"{kind} ({name}): {msg}")
            errors[name] = float(np.linalg.norm(c - ref.c64) / norm)
        listed = fixup_min_class(True)
        rows.append({"kind": kind, "shape": [m, k, n],
                     "listed_rows": float(np.mean(line_meta(a, -1, arithmetic=WORST).cls >= listed)),
                     "listed_cols": float(np.mean(line_meta(b, -2, arithmetic=WORST).cls >= listed)),
                     **errors, "native_fp32": float(np.linalg.norm(ref.fp32 - ref.c64) / norm)})
    lines = ["| data | listed rows, columns | bands | FP32 fix-up | native FP32 | bands / native |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['listed_rows']:.2f}, {r['listed_cols']:.2f} | {r['bands']:.2e} | "
                     f"{r['fp32_fixup']:.2e} | {r['native_fp32']:.2e} | {r['bands'] / r['native_fp32']:.2f}x |")
    print("\n".join(lines))
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    record = {"what": "NPU path's CPU model: listed lines by exponent bands vs the FP32 fix-up",
              "device": "CPU model of the 910A path (no NPU)", "command": " ".join(["python"] + sys.argv),
              "python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
              "design": "unprobed (WORST's split range)", "hardware_arithmetic": "default", "rows": rows}
    path = args.out / f"npu_bands_accuracy_{stamp}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
