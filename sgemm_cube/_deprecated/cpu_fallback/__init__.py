"""Deprecated top-level name: use ``sgemm_cube.cpu_fallback`` (this shim goes away in sgemm_cube 0.2)."""
from sgemm_cube._compat import alias_package

alias_package("cpu_fallback", "sgemm_cube.cpu_fallback")
