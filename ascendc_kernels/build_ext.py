"""setup.py support: build the AscendC extension only where a CANN toolkit exists.

``setup.py`` calls :func:`npu_extension`; on a machine without CANN it gets no
extension and one line on stderr, so the pure-Python package installs as usual::

    import os, sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from ascendc_kernels.build_ext import npu_extension

    ext_modules, cmdclass = npu_extension()
    setup(..., ext_modules=ext_modules, cmdclass=cmdclass)

With CANN (``ASCEND_HOME_PATH`` set by ``<CANN>/set_env.sh``) the extension
``sgemm_cube.backends._npu_ext`` is built by CMake from
``ascendc_kernels/CMakeLists.txt`` for the SoC named by
``SGEMM_CUBE_SOC_VERSION`` (e.g. ``Ascend910B3``, ``Ascend910A``) or, when that
is unset, the SoC of NPU 0 as ``npu-smi`` / torch_npu report it.  Set
``SGEMM_CUBE_NO_NPU=1`` to skip the extension even where CANN exists.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from setuptools import Extension
from setuptools.command.build_ext import build_ext

__all__ = ["npu_extension", "cann_toolkit", "soc_version", "CMakeExtension", "CMakeBuild"]

_HERE = Path(__file__).resolve().parent
_EXT_NAME = "sgemm_cube.backends._npu_ext"


def cann_toolkit() -> Path | None:
    """The CANN toolkit root named by ``ASCEND_HOME_PATH``, if it holds the kernel CMake flow."""
    home = os.environ.get("ASCEND_HOME_PATH", "")
    if not home:
        return None
    root = Path(home)
    for sub in ("compiler/tikcpp/ascendc_kernel_cmake", "tools/tikcpp/ascendc_kernel_cmake"):
        if (root / sub).is_dir():
            return root
    return None


def soc_version() -> str:
    """SoC to build for: ``SGEMM_CUBE_SOC_VERSION``, else the first NPU's chip name."""
    explicit = os.environ.get("SGEMM_CUBE_SOC_VERSION", "").strip()
    if explicit:
        return explicit
    # Ask torch_npu in a child process: a failing import must not break setup.py.
    probe = "import torch, torch_npu; print(torch_npu.npu.get_device_name(0))"
    try:
        res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
        name = res.stdout.strip().splitlines()[-1] if res.returncode == 0 and res.stdout.strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        name = ""
    match = re.search(r"Ascend910\w*", name)
    if not match:
        raise RuntimeError("cannot tell which Ascend SoC to build for: set SGEMM_CUBE_SOC_VERSION "
                           "(Ascend910A, Ascend910B1 ... Ascend910B4)")
    return match.group(0)


class CMakeExtension(Extension):
    """An extension whose only source is a CMake project directory."""

    def __init__(self, name: str, sourcedir: Path):
        super().__init__(name, sources=[])
        self.sourcedir = str(sourcedir)


class CMakeBuild(build_ext):
    """Configure and build :class:`CMakeExtension` modules with CMake."""

    def build_extension(self, ext):
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)
        out_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = Path(self.build_temp).resolve() / "ascendc"
        build_dir.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake", "-S", ext.sourcedir, "-B", str(build_dir),
            f"-DSOC_VERSION={soc_version()}",
            f"-DASCEND_CANN_PACKAGE_PATH={os.environ['ASCEND_HOME_PATH']}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
            "-DCMAKE_BUILD_TYPE=Release",
        ]
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_npu_ext", "-j"], check=True)


def npu_extension() -> tuple[list[Extension], dict[str, type]]:
    """``(ext_modules, cmdclass)`` for ``setup()``: the extension with CANN, nothing without.

    Without a toolkit it prints one notice line and returns ``([], {})``.
    """
    if os.environ.get("SGEMM_CUBE_NO_NPU"):
        print("sgemm_cube: SGEMM_CUBE_NO_NPU is set; installing without the AscendC extension", file=sys.stderr)
        return [], {}
    if cann_toolkit() is None:
        where = os.environ.get("ASCEND_HOME_PATH")
        reason = f"no CANN toolkit at ASCEND_HOME_PATH={where}" if where else "ASCEND_HOME_PATH is not set"
        print(f"sgemm_cube: {reason}; installing the pure-Python package (no AscendC extension)", file=sys.stderr)
        return [], {}
    return [CMakeExtension(_EXT_NAME, _HERE)], {"build_ext": CMakeBuild}
