"""AscendC kernels of sgemm_cube: device sources, host glue and build support.

Not an installed package: ``setup.py`` imports :mod:`ascendc_kernels.build_ext`
from the source tree to build the extension ``sgemm_cube.backends._npu_ext``
where a CANN toolkit exists.  See ``ascendc_kernels/README.md``.
"""
__all__: list[str] = []
