"""setup.py support: build the AscendC extension only where a CANN toolkit exists.

``setup.py`` calls :func:`npu_extension`; on a machine without CANN it gets no
extension and one line on stderr, so the pure-Python package installs as usual.

With CANN (``ASCEND_HOME_PATH`` set by ``<CANN>/set_env.sh``) the extension
``sgemm_cube.backends._npu_ext`` is built by CMake from
``ascendc_kernels/CMakeLists.txt``, and the build has to see the user's
torch, torch_npu and pybind11.  pip builds in an isolated environment by
default, which hides them, so the install command on an Ascend host is::

    pip install --no-build-isolation -v .

Before anything is configured, :func:`preflight` checks what the build needs
and :func:`npu_extension` stops with one message naming every problem and the
command that fixes it: torch / torch_npu / pybind11 not visible (and whether
pip's isolated build is the reason), CMake missing or older than the
``cmake_minimum_required`` of ``CMakeLists.txt``, the SoC unknown.

The SoC (:func:`soc_version`) is, in this order: ``SGEMM_CUBE_SOC_VERSION``
(one of :data:`SOC_VERSIONS`, any case); NPU 0's chip as ``npu-smi info``
names it (``910B3`` -> ``Ascend910B3``; Atlas A3 boards, which show
``Ascend910`` there, through ``npu-smi info -t board -i 0 -c 0``: ``Chip Name``
+ ``_`` + ``NPU Name``, e.g. ``Ascend910_9391``); torch_npu's
``torch.npu.get_device_name(0)`` in a child process.  ``SGEMM_CUBE_NO_NPU=1``
skips the extension even where CANN exists.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension
from setuptools.command.build_ext import build_ext

__all__ = [
    "SOC_VERSIONS_910A", "SOC_VERSIONS_910B", "SOC_VERSIONS", "INSTALL_COMMAND", "NpuBuildError",
    "npu_extension", "preflight", "cann_toolkit", "soc_version", "find_soc", "detect_soc", "canonical_soc", "soc_family",
    "parse_npu_smi_info", "parse_npu_smi_board", "isolated_build_env", "python_packages", "cmake_minimum",
    "cmake_version", "cmake_problem", "CMakeExtension", "CMakeBuild",
]

_HERE = Path(__file__).resolve().parent
_EXT_NAME = "sgemm_cube.backends._npu_ext"

#: The command that installs the package with the extension on an Ascend host.
INSTALL_COMMAND = "pip install --no-build-isolation -v ."
#: First Ascend 910 generation (DaVinci v100, dav-c100): the L0C -> UB -> GM path.  Plain
#: ``Ascend910B`` is a bin of this generation, not an Atlas A2 part.
SOC_VERSIONS_910A = ("Ascend910A", "Ascend910ProA", "Ascend910B", "Ascend910ProB", "Ascend910PremiumA")
#: Atlas A2 (Ascend910B1..B4) and A3 (Ascend910_93xx) parts, dav-c220: the Fixpipe path.
SOC_VERSIONS_910B = ("Ascend910B1", "Ascend910B2", "Ascend910B2C", "Ascend910B3", "Ascend910B4", "Ascend910B4-1",
                     "Ascend910_9391", "Ascend910_9381", "Ascend910_9372", "Ascend910_9392", "Ascend910_9382",
                     "Ascend910_9362")
#: Every value ``SGEMM_CUBE_SOC_VERSION`` / CMake's ``SOC_VERSION`` accepts (CANN's own spelling).
SOC_VERSIONS = SOC_VERSIONS_910A + SOC_VERSIONS_910B
_PACKAGES = ("torch", "torch_npu", "pybind11")


class NpuBuildError(RuntimeError):
    """The AscendC extension cannot be built as things are; the message says what to do."""


# ----------------------------------------------------------------------- SoC
def canonical_soc(name: str | None) -> str | None:
    """``name`` in CANN's spelling if it is one of :data:`SOC_VERSIONS` (case, spaces and a missing
    ``Ascend`` prefix ignored: ``"910B3"``, ``"ascend 910b3"`` -> ``"Ascend910B3"``), else None."""
    if not name:
        return None
    key = re.sub(r"\s+", "", name).lower()
    if not key.startswith("ascend"):
        key = "ascend" + key
    return {s.lower(): s for s in SOC_VERSIONS}.get(key)


def soc_family(name: str) -> str:
    """``"910a"``, ``"910b"`` or ``""``: which kernel build ``name`` needs (as ``host/soc_name.hpp``)."""
    soc = canonical_soc(name)
    if soc is None:
        return ""
    return "910a" if soc in SOC_VERSIONS_910A else "910b"


def parse_npu_smi_info(text: str) -> list[tuple[int, str]]:
    """``(NPU id, Name)`` of every chip row of ``npu-smi info``'s table, in order.

    The table's first row per chip is ``| <NPU>  <Name>  | <Health> | ...``
    (``| 0     910B3               | OK  ...``); the second row of the pair
    starts with the chip number (and the physical id on A3), no name.
    """
    rows = []
    for line in text.splitlines():
        cells = line.strip().split("|")
        if len(cells) < 3 or cells[0] != "":
            continue
        m = re.fullmatch(r"\s*(\d+)\s+([A-Za-z][\w.-]*|\d+[A-Za-z][\w.-]*)\s*", cells[1])
        if m:
            rows.append((int(m.group(1)), m.group(2)))
    return rows


def parse_npu_smi_board(text: str) -> str | None:
    """The SoC name from ``npu-smi info -t board -i <id> -c <chip>``: ``Chip Name`` (prefixed with
    ``Chip Type``, "Ascend", where it lacks it) and ``_<NPU Name>`` where that field exists (Atlas
    A3: ``Ascend910`` + ``9391`` -> ``Ascend910_9391``); None without a ``Chip Name``."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    chip = fields.get("chip name", "").replace(" ", "")
    if not chip or chip.upper() == "NA":
        return None
    if not chip.lower().startswith("ascend"):
        chip = (fields.get("chip type") or "Ascend") + chip
    npu_name = fields.get("npu name", "").replace(" ", "")
    if npu_name and npu_name.upper() != "NA":
        chip += "_" + npu_name
    return chip


def _tool_output(cmd: list[str], timeout: float = 60) -> str | None:
    """stdout of ``cmd``, or None when it is missing, fails or hangs."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 else None


def _from_npu_smi(notes: list[str]) -> str | None:
    text = _tool_output(["npu-smi", "info"])
    if text is None:
        notes.append("`npu-smi info`: not found or failed")
        return None
    rows = parse_npu_smi_info(text)
    if not rows:
        notes.append("`npu-smi info`: no NPU row in its output")
        return None
    npu_id, name = rows[0]
    soc = canonical_soc(name)
    if soc is None and name.lower() in ("ascend910", "910"):  # Atlas A3 shows the family only
        board = _tool_output(["npu-smi", "info", "-t", "board", "-i", str(npu_id), "-c", "0"])
        name = (parse_npu_smi_board(board) if board else None) or name
        soc = canonical_soc(name)
    if soc is None:
        notes.append(f"`npu-smi info`: NPU {npu_id} is {name!r}, not a chip these kernels support")
    return soc


def _from_torch_npu(notes: list[str]) -> str | None:
    # A child process: a failing torch_npu import must not break setup.py.
    probe = "import torch, torch_npu; print(torch.npu.get_device_name(0))"
    try:
        res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        notes.append("torch_npu: the probe did not finish")
        return None
    lines = res.stdout.strip().splitlines()
    if res.returncode != 0 or not lines:
        notes.append("torch_npu: `torch.npu.get_device_name(0)` failed in " + sys.executable)
        return None
    soc = canonical_soc(lines[-1])
    if soc is None:
        notes.append(f"torch_npu: device 0 is {lines[-1]!r}, not a chip these kernels support")
    return soc


def detect_soc() -> tuple[str | None, str]:
    """``(SoC, how it was found)`` or ``(None, what was tried)``, without ``SGEMM_CUBE_SOC_VERSION``."""
    notes: list[str] = []
    for source, probe in (("npu-smi", _from_npu_smi), ("torch_npu", _from_torch_npu)):
        soc = probe(notes)
        if soc:
            return soc, f"NPU 0, from {source}"
    return None, "; ".join(notes)


def _accepted() -> str:
    return ("910A family: " + ", ".join(SOC_VERSIONS_910A) + "; 910B family (Atlas A2/A3): "
            + ", ".join(SOC_VERSIONS_910B))


def soc_version() -> str:
    """SoC to build for: ``SGEMM_CUBE_SOC_VERSION``, else NPU 0's chip (:func:`detect_soc`).

    Raises :class:`NpuBuildError` naming the accepted values when the variable
    holds something else or nothing can be detected.
    """
    return find_soc()[0]


def find_soc() -> tuple[str, str]:
    explicit = os.environ.get("SGEMM_CUBE_SOC_VERSION", "").strip()
    if explicit:
        soc = canonical_soc(explicit)
        if soc is None:
            raise NpuBuildError(f"SGEMM_CUBE_SOC_VERSION={explicit!r} is not a SoC these kernels are built for. "
                                f"Accepted values: {_accepted()}.")
        return soc, "SGEMM_CUBE_SOC_VERSION"
    soc, how = detect_soc()
    if soc is None:
        raise NpuBuildError(f"cannot tell which Ascend SoC to build for ({how}). Set it, e.g. "
                            f"`export SGEMM_CUBE_SOC_VERSION=Ascend910B3` (`npu-smi info` shows the chip "
                            f"as 910B3; prefix it with Ascend). Accepted values: {_accepted()}.")
    return soc, how


# ------------------------------------------------- build environment checks
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


def isolated_build_env() -> tuple[str, str] | None:
    """``(front end, path)`` of the isolated build environment running this process (``"pip"``,
    ``"build"``, ``"uv"``), judged from ``sys.prefix`` / ``sys.path`` / ``PYTHONPATH``; None if none is seen."""
    places = [sys.prefix, *sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    for marker, frontend in (("pip-build-env-", "pip"), ("build-env-", "build"), ("builds-v", "uv")):
        for place in places:
            if marker in place:
                return frontend, place
    return None


def python_packages() -> dict[str, Path | None]:
    """Directory of each of torch, torch_npu, pybind11 as this Python finds it (None: not found).

    Found with ``importlib.util.find_spec``, never imported: torch_npu's import
    needs the device runtime, torch's may load torch_npu.
    """
    found: dict[str, Path | None] = {}
    for name in _PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        found[name] = Path(spec.origin).parent if spec is not None and spec.origin else None
    return found


def _packages_problem(found: dict[str, Path | None]) -> str:
    missing = [name for name, where in found.items() if where is None]
    if not missing:
        return ""
    what = ", ".join(missing)
    isolated = isolated_build_env()
    if isolated is not None or set(missing) == set(_PACKAGES):
        why = (f"{isolated[0]}'s isolated build environment ({isolated[1]}) hides the packages of your own "
               "environment" if isolated else
               "if you ran plain `pip install .`, pip built in an isolated environment that hides your packages")
        return (f"{what} not importable by the Python running this build ({sys.executable}): {why}. "
                f"Install torch, the torch-npu of the same version and pybind11 in your environment, then run "
                f"from the repository root: `{INSTALL_COMMAND}`")
    return (f"{what} not installed in {sys.executable}: `pip install torch==X.Y.Z torch-npu==X.Y.Z pybind11` "
            f"(torch-npu's version must match torch's), then `{INSTALL_COMMAND}`")


def cmake_minimum(cmakelists: Path = _HERE / "CMakeLists.txt") -> tuple[int, ...]:
    """The ``cmake_minimum_required(VERSION ...)`` of ``CMakeLists.txt``."""
    m = re.search(r"cmake_minimum_required\s*\(\s*VERSION\s+([0-9.]+)", cmakelists.read_text(encoding="utf-8"))
    if not m:
        raise NpuBuildError(f"no cmake_minimum_required in {cmakelists}")
    return tuple(int(x) for x in m.group(1).split("."))


def cmake_version(cmake: str = "cmake") -> tuple[int, ...] | None:
    """``cmake --version``'s version, or None when it is missing or unreadable."""
    out = _tool_output([cmake, "--version"], timeout=30)
    m = re.search(r"cmake version (\d+)\.(\d+)(?:\.(\d+))?", out or "")
    return tuple(int(x) for x in m.groups(default="0")) if m else None


def cmake_problem(cmake: str = "cmake") -> str:
    """"" if ``cmake`` is at least the version ``CMakeLists.txt`` requires, else what to do."""
    need = ".".join(map(str, cmake_minimum()))
    have = cmake_version(cmake)
    if have is None:
        where = shutil.which(cmake)
        state = f"`{cmake} --version` failed ({where})" if where else f"`{cmake}` is not on PATH"
        return f"CMake >= {need} is needed and {state}: `pip install cmake` or install it from your distribution"
    if have < cmake_minimum():
        return (f"CMake >= {need} is needed, found {'.'.join(map(str, have))} at {shutil.which(cmake)}: "
                "`pip install cmake` (in the environment you build from) or a newer system package")
    return ""


def preflight() -> dict:
    """Check everything the CMake build needs; return its settings or raise :class:`NpuBuildError`.

    Returns ``{"soc": ..., "soc_source": ..., "packages": {name: dir}}``.
    The error lists every problem found, one per line, each with its fix.
    """
    problems = []
    root = cann_toolkit()
    if root is None:
        home = os.environ.get("ASCEND_HOME_PATH")
        where = f"no CANN kernel CMake flow under ASCEND_HOME_PATH={home}" if home else "ASCEND_HOME_PATH is not set"
        problems.append(f"{where} (source <CANN>/set_env.sh)")
    found = python_packages()
    problems.append(_packages_problem(found))
    problems.append(cmake_problem())
    soc = source = None
    try:
        soc, source = find_soc()
    except NpuBuildError as exc:
        problems.append(str(exc))
    problems = [p for p in problems if p]
    if problems:
        raise NpuBuildError("sgemm_cube: cannot build the AscendC extension:\n"
                            + "\n".join(f"  * {p}" for p in problems)
                            + "\n  (to install without it: SGEMM_CUBE_NO_NPU=1 pip install .)")
    return {"soc": soc, "soc_source": source, "packages": found, "cann": root}


# --------------------------------------------------------------- the build
class CMakeExtension(Extension):
    """An extension whose only source is a CMake project directory; ``settings`` from :func:`preflight`."""

    def __init__(self, name: str, sourcedir: Path, settings: dict):
        super().__init__(name, sources=[])
        self.sourcedir = str(sourcedir)
        self.settings = settings


def cmake_configure_args(settings: dict, build_dir: Path, out_dir: Path, sourcedir: Path = _HERE) -> list[str]:
    """The ``cmake`` configure command for :class:`CMakeBuild` (paths found here, so CMake imports nothing)."""
    pkgs = settings["packages"]
    return [
        "cmake", "-S", str(sourcedir), "-B", str(build_dir),
        f"-DSOC_VERSION={settings['soc']}",
        f"-DASCEND_CANN_PACKAGE_PATH={settings['cann']}",
        f"-DPython3_EXECUTABLE={sys.executable}",
        f"-DSGEMM_CUBE_TORCH_PATH={pkgs['torch']}",
        f"-DSGEMM_CUBE_TORCH_NPU_PATH={pkgs['torch_npu']}",
        f"-DSGEMM_CUBE_PYBIND11_PATH={pkgs['pybind11']}",
        f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
        "-DCMAKE_BUILD_TYPE=Release",
    ]


class CMakeBuild(build_ext):
    """Configure and build :class:`CMakeExtension` modules with CMake."""

    def build_extension(self, ext):
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)
        out_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = Path(self.build_temp).resolve() / "ascendc"
        build_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(cmake_configure_args(ext.settings, build_dir, out_dir, Path(ext.sourcedir)), check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_npu_ext", "-j"], check=True)


def npu_extension() -> tuple[list[Extension], dict[str, type]]:
    """``(ext_modules, cmdclass)`` for ``setup()``: the extension with CANN, nothing without.

    Without a toolkit it prints one notice line and returns ``([], {})``.  With
    one it runs :func:`preflight` and exits with its message (naming the fix,
    e.g. ``pip install --no-build-isolation -v .``) if the build cannot work.
    """
    if os.environ.get("SGEMM_CUBE_NO_NPU"):
        print("sgemm_cube: SGEMM_CUBE_NO_NPU is set; installing without the AscendC extension", file=sys.stderr)
        return [], {}
    if cann_toolkit() is None:
        where = os.environ.get("ASCEND_HOME_PATH")
        reason = f"no CANN toolkit at ASCEND_HOME_PATH={where}" if where else "ASCEND_HOME_PATH is not set"
        print(f"sgemm_cube: {reason}; installing the pure-Python package (no AscendC extension)", file=sys.stderr)
        return [], {}
    try:
        settings = preflight()
    except NpuBuildError as exc:
        raise SystemExit(str(exc)) from None
    print(f"sgemm_cube: building the AscendC extension for {settings['soc']} ({settings['soc_source']})",
          file=sys.stderr)
    return [CMakeExtension(_EXT_NAME, _HERE, settings)], {"build_ext": CMakeBuild}
