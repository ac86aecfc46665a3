"""Deprecated top-level name: use ``sgemm_cube.tuning`` (this shim goes away in sgemm_cube 0.2)."""
from sgemm_cube._compat import alias_package

alias_package("tuning", "sgemm_cube.tuning")
