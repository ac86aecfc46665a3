#!/usr/bin/env python3
"""TransformerEncoder benchmark: native FP32 against ``sgemm_cube.enabled()``, errors vs float64.

The implementation is :mod:`sgemm_cube.cli.bench_model` (also ``sgemm-cube bench --model``);
this script runs it from a checkout without installing the package::

    python benchmarks/model_bench.py                        # 6 x 768 encoder, 16 x 512 tokens, CUDA
    python benchmarks/model_bench.py --tiny --device cpu    # smoke test
    python benchmarks/model_bench.py --help
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from sgemm_cube.cli.bench_model import main  # noqa: E402  (after the path set-up)

if __name__ == "__main__":
    sys.exit(main())
