"""The switch's C++ kernels: built once where a C++ compiler and torch are present, else the Python ones.

:mod:`sgemm_cube.switch` registers a Python kernel for each operator it
replaces.  On a small product that its plan runs in PyTorch's own kernel,
the crossing into Python and back is the switch's whole cost (several
microseconds a call).  ``csrc/switch_kernels.cpp`` registers a C++ kernel in
front of each Python kernel (CPU and CUDA dispatch keys) that sends such
calls to PyTorch's kernel without entering Python, and every other call to
the Python kernel; the decision stays the Python plan's (the C++ kernel
remembers which shapes it planned native).

The library is compiled on the first :func:`sgemm_cube.enable` for the CPU
or CUDA, against the torch of this process, with the C++ compiler that
``$CXX`` names or ``c++`` on the ``PATH`` (about 15 s, once), and
cached under ``$SGEMM_CUBE_CACHE`` (default ``~/.cache/sgemm_cube``) per
source, torch version and compiler.  Where it cannot be built or loaded (no
compiler, not Linux or macOS, a failed build), the switch runs its Python
kernels, with the same results, and :func:`status` says why.
``SGEMM_CUBE_SWITCH_KERNELS=python`` in the environment asks for the Python
kernels (read when the switch registers its kernels) and for
:mod:`sgemm_cube.fast_path`'s Python lookup.  :func:`build` compiles both
C++ sources of ``sgemm_cube/csrc``, with one compiler rule and one cache.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
from typing import NamedTuple

__all__ = ["ENV_VAR", "DEVICES", "SOURCE", "KernelsStatus", "Unavailable", "find_compiler", "build", "load", "status", "requested"]

#: Environment variable: ``python`` makes the switch register only its Python kernels.
ENV_VAR = "SGEMM_CUBE_SWITCH_KERNELS"

#: The device types whose dispatch keys get the C++ kernels (the NPU's are not tried without an NPU).
DEVICES = ("cpu", "cuda")

SOURCE = pathlib.Path(__file__).with_name("csrc") / "switch_kernels.cpp"


class KernelsStatus(NamedTuple):
    """Which kernels the switch registers: ``language`` is ``"c++"`` or ``"python"``; ``detail`` the
    library's path, or why the Python kernels run."""

    language: str
    detail: str


class Unavailable(Exception):
    """A C++ library cannot be built here (the message says why)."""


_library: ctypes.CDLL | None = None
_reason = ""  # why _library is None once load() was called


def requested() -> bool:
    """Whether the environment leaves the C++ kernels on (``SGEMM_CUBE_SWITCH_KERNELS`` is not ``python``)."""
    return os.environ.get(ENV_VAR, "").strip().lower() != "python"


def status() -> KernelsStatus:
    """Which kernels :func:`sgemm_cube.enable` registers for the CPU and CUDA, and why (builds the library
    if it was not built yet: see the module's docstring).  :func:`sgemm_cube.switch.kernels` returns it."""
    if not requested():
        return KernelsStatus("python", f"{ENV_VAR}={os.environ[ENV_VAR]} asks for the Python kernels")
    library = load()
    if library is None:
        return KernelsStatus("python", _reason)
    return KernelsStatus("c++", library._name)


def load() -> ctypes.CDLL | None:
    """The C++ kernels' library, built and loaded once per process; None where it cannot be (the reason
    is :func:`status`'s detail)."""
    global _library, _reason
    if _library is not None or _reason:
        return _library
    try:
        import torch  # noqa: F401  (loads libtorch, whose symbols the library resolves)

        _library = _declare(ctypes.CDLL(str(build(SOURCE))))
    except Unavailable as exc:
        _reason = str(exc)
    except OSError as exc:  # the cache cannot be written, or the library does not load
        _reason = f"the C++ kernels could not be built or loaded: {exc}"
    return _library


def find_compiler() -> str | None:
    """The C++ compiler :func:`build` uses: ``$CXX``, else ``c++``, ``g++`` or ``clang++`` on the PATH."""
    return os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


def build(source: pathlib.Path, *, python_extension: bool = False) -> pathlib.Path:
    """Compile a C++ source of ``sgemm_cube/csrc`` against this process's torch into the cache unless it is
    there; returns the library's path.  ``python_extension``: a CPython extension module (links torch's
    Python bindings).  Raises ``Unavailable`` (no compiler, not Linux or macOS, a failed build) or
    OSError (the cache cannot be written)."""
    import sysconfig

    import torch
    from torch.utils import cpp_extension

    if sys.platform not in ("linux", "darwin"):
        raise Unavailable(f"the C++ kernels are built on Linux and macOS only (this is {sys.platform})")
    compiler = find_compiler()
    if not compiler:
        raise Unavailable("no C++ compiler found (install one, or name it in $CXX)")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    includes = list(cpp_extension.include_paths())
    libraries = ["c10", "torch_cpu"]
    if python_extension:
        includes.append(sysconfig.get_paths()["include"])
        libraries += ["torch", "torch_python"]
    headers = [path.read_bytes() for path in sorted(source.parent.glob("*.h"))]  # a changed header rebuilds
    tag = hashlib.sha256(b"\0".join([source.read_bytes(), *headers, torch.__version__.encode(), compiler.encode(),
                                     bytes([abi]), sys.version.encode() if python_extension else b""]))
    cache = pathlib.Path(os.environ.get("SGEMM_CUBE_CACHE")
                         or pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
                         / "sgemm_cube")
    target = cache / f"{source.stem}-{tag.hexdigest()[:16]}.so"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f"{target.name}.lock"):
        if target.exists():  # another process built it meanwhile
            return target
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        paths = cpp_extension.library_paths()
        command = [compiler, "-O2", "-std=c++20", "-fPIC", "-shared", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
                   *(f"-I{path}" for path in includes), str(source), "-o", str(partial),
                   *(f"-L{path}" for path in paths), *(f"-Wl,-rpath,{path}" for path in paths),
                   *(f"-l{name}" for name in libraries)]
        if sys.platform == "darwin":  # Python's own symbols resolve when the interpreter loads the module
            command[1:1] = ["-undefined", "dynamic_lookup"]
        print(f"sgemm_cube: building {source.name} into {target} (once per torch version, about "
              f"{'half a minute' if python_extension else '15 s'})", file=sys.stderr, flush=True)
        try:
            done = subprocess.run(command, capture_output=True, text=True)
        except OSError as exc:
            raise Unavailable(f"the C++ compiler {compiler} could not run: {exc}") from exc
        if done.returncode:
            partial.unlink(missing_ok=True)
            raise Unavailable(f"{source.name} did not build ({' '.join(command)}):\n{done.stderr[-2000:]}")
        os.replace(partial, target)
    return target


class _locked:
    """An exclusive lock on a file while the block runs (processes building at once build once)."""

    def __init__(self, path: pathlib.Path):
        self._path = path

    def __enter__(self):
        self._file = open(self._path, "w")
        try:
            import fcntl

            fcntl.flock(self._file, fcntl.LOCK_EX)
        except ImportError:  # not POSIX: no lock, each process builds its own copy and replaces the file
            pass
        return self

    def __exit__(self, *exc):
        self._file.close()  # releases the lock
        return False


def _declare(library: ctypes.CDLL) -> ctypes.CDLL:
    """Give the library's functions their C signatures (``csrc/switch_kernels.cpp``, extern "C")."""
    c_int, c_int64, c_char_p = ctypes.c_int, ctypes.c_int64, ctypes.c_char_p
    signatures = {
        "sgemm_cube_switch_device_type": (c_int, [c_char_p]),
        "sgemm_cube_switch_last_error": (c_char_p, []),
        "sgemm_cube_switch_keep_original": (c_int, [c_char_p, c_int]),
        "sgemm_cube_switch_register": (c_int, [c_char_p, c_int]),
        "sgemm_cube_switch_unregister": (c_int, []),
        "sgemm_cube_switch_route": (None, [c_int, c_int]),
        "sgemm_cube_switch_remember_native": (None, [c_int, c_int, c_int64, c_int64, c_int64, c_int64]),
        "sgemm_cube_switch_forget_plans": (None, []),
        "sgemm_cube_switch_enter_own": (None, []),
        "sgemm_cube_switch_exit_own": (None, []),
        "sgemm_cube_switch_native_calls": (c_int64, []),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(library, name)
        function.restype, function.argtypes = restype, argtypes
    return library
