"""Build script for sgemm_cube.

The pure-Python package ``sgemm_cube`` (with ``sgemm_cube.cpu_fallback`` and
``sgemm_cube.tuning`` from the folders of those names) always installs.  The AscendC extension in ``ascendc_kernels/`` is built only when a
CANN toolkit is found (``ASCEND_HOME_PATH``), and then the build must see the
installed torch / torch_npu / pybind11: ``pip install --no-build-isolation -v .``
(the hook stops with that command when pip's isolated build hides them); see
``ascendc_kernels/README.md``.
"""
import os
import sys

from setuptools import find_packages, setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ascendc_kernels.build_ext import npu_extension  # noqa: E402  (CMake build, only where CANN exists)

ext_modules, cmdclass = npu_extension()

setup(
    name="sgemm_cube",
    version="0.1.0",
    description="FP32-accurate matrix multiply from FP16 matrix engines (SGEMM-cube)",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    # The checkout's top-level cpu_fallback/ and tuning/ are installed inside the package, as
    # sgemm_cube.cpu_fallback and sgemm_cube.tuning: the wheel installs sgemm_cube and nothing else.
    # A source checkout runs through the editable install (README's test command), which maps them too.
    packages=[*find_packages(include=["sgemm_cube", "sgemm_cube.*"]), "sgemm_cube.cpu_fallback", "sgemm_cube.tuning"],
    package_dir={"sgemm_cube.cpu_fallback": "cpu_fallback", "sgemm_cube.tuning": "tuning"},
    package_data={"sgemm_cube": ["py.typed", "csrc/*.cpp", "csrc/*.h", "backends/cuda/configs/*.json", "backends/npu_tilings/*.json"],
                  "sgemm_cube.tuning": ["profiles/*.json", "tables/*.json"]},
    license="BSD-3-Clause",
    # tqdm: the progress bars of the command line's long runs (tuning, accuracy studies); small, pure Python.
    install_requires=["numpy>=1.24", "tqdm>=4.60"],
    extras_require={
        "torch": ["torch>=2.4"],
        "cuda": ["torch>=2.4", "triton>=3.0"],
        "plot": ["matplotlib>=3.7"],
        "test": ["pytest>=7", "pytest-xdist>=3", "hypothesis>=6", "matplotlib>=3.7", "tqdm>=4.60", "triton>=3.0", "pybind11>=2.10"],
    },
    entry_points={"console_scripts": ["sgemm-cube = sgemm_cube.cli:main"]},
    ext_modules=ext_modules,
    cmdclass=cmdclass,
)
