"""Block-size tuning for SGEMM-cube kernels.

* :mod:`tuning.hardware` - hardware profiles (Ascend table, user files, CUDA devices).
* :mod:`tuning.model` - the L1-aware blocking model of the paper (Eq. 8-11),
  enumeration and ranking of feasible blocks, :func:`choose_tiling`.
* :mod:`tuning.table` - measured tuning tables (JSON per device and shape bucket).
* :mod:`tuning.gpu`, :mod:`tuning.npu` - measured tuning drivers.
* :mod:`tuning.plots` - Fig. 5 of the paper.
* :mod:`tuning.cli` - ``sgemm-cube tune``.
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
