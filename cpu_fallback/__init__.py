"""NumPy arithmetic model of SGEMM-cube: the exact CPU mirror of the kernels.

Everything the hardware backends compute is defined here, in NumPy, so that
every result can be tested without the hardware:

* :func:`split` / :func:`split_limits` -- the FP32 -> FP16 (hi, lo) split
  (``split.py``);
* :func:`accumulate_product` -- FP32 accumulation of one FP16 product under
  the ``"cube16"``, ``"sequential"`` or ``"truncate"`` model (``accumulate.py``), and
  :data:`K_GROUP`, the K group after which the NPU kernel adds the cube's partial sum into a
  second FP32 accumulator;
* :mod:`sgemm_cube.cpu_fallback.arithmetic` -- the hardware behaviours the AscendC
  docs leave open, as named alternatives; the split, the accumulation and
  :func:`emulated_matmul` take one as ``arithmetic=`` and model it bit for bit;
* :func:`emulated_matmul` -- the whole algorithm for one 2-D product
  (``gemm.py``: read this file first), and :class:`ProductAccumulator`,
  the same product added up K slab by K slab;
* :data:`SCHEMES` / :func:`split_slices` -- fp16x3 (SGEMM-cube), fp16x4,
  bf16x9 and bf16x6 (``schemes.py``, formats in ``formats.py``);
* :mod:`sgemm_cube.cpu_fallback.reference` -- a slow scalar reference that the fast
  model matches bit for bit;
* :mod:`sgemm_cube.cpu_fallback.bands` -- the NPU's listed lines as exponent bands on the cube.
"""

from .accumulate import ACCUMULATION_MODELS, K_GROUP, accumulate_product
from .gemm import ORDERS, ProductAccumulator, emulated_matmul
from .schemes import SCHEMES, get_scheme, split_slices
from .split import SplitLimits, split, split_limits

__all__ = ["split", "split_limits", "SplitLimits", "accumulate_product", "emulated_matmul", "ProductAccumulator",
           "split_slices", "get_scheme", "SCHEMES", "ACCUMULATION_MODELS", "K_GROUP", "ORDERS"]
