"""Deprecated name: use ``sgemm_cube.tools.accuracy`` (goes away in sgemm_cube 0.2)."""
from sgemm_cube._compat import alias_package

alias_package(__name__, "sgemm_cube.tools.accuracy")
