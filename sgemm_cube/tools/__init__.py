"""Tooling beside the library: accuracy studies, benchmarks and the demo.

* :mod:`sgemm_cube.tools.accuracy` - the papers' accuracy experiments (``sgemm-cube accuracy``);
* :mod:`sgemm_cube.tools.bench_cpu`, :mod:`sgemm_cube.tools.bench_gpu`,
  :mod:`sgemm_cube.tools.bench_model` - speed against native FP32 through the public API
  (``sgemm-cube bench-cpu``, ``sgemm-cube bench``);
* :mod:`sgemm_cube.tools.demo` - ``sgemm-cube demo``.

None of it is imported by ``import sgemm_cube``.
"""
