"""Block-size tuning for SGEMM-cube kernels.

* :mod:`sgemm_cube.tuning.hardware` - hardware profiles (Ascend table, user files, CUDA devices).
* :mod:`sgemm_cube.tuning.model` - the L1-aware blocking model of the paper (Eq. 8-11),
  enumeration and ranking of feasible blocks, :func:`choose_tiling`.
* :mod:`sgemm_cube.tuning.table` - measured tuning tables (JSON per device and shape bucket).
* :mod:`sgemm_cube.tuning.tilings` - writes the NPU backend's tiling tables (model and measured rows).
* :mod:`sgemm_cube.tuning.gpu`, :mod:`sgemm_cube.tuning.npu` - measured tuning drivers.
* :mod:`sgemm_cube.tuning.plots` - Fig. 5 of the paper.
* :mod:`sgemm_cube.tuning.cli` - ``sgemm-cube tune``.
"""

from .hardware import Blocking, Profile, ProfileError, cuda_profile, get_profile, list_profiles, load_profiles
from .model import Tiling, choose_tiling, rank
from .table import lookup

__all__ = [
    "Blocking",
    "Profile",
    "ProfileError",
    "Tiling",
    "choose_tiling",
    "cuda_profile",
    "get_profile",
    "list_profiles",
    "load_profiles",
    "lookup",
    "rank",
]
