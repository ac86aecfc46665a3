"""Shims installed at the old top-level names ``cpu_fallback`` and ``tuning`` (see :mod:`sgemm_cube._compat`)."""
