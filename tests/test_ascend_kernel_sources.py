"""What can be checked of the AscendC device and host sources without CANN.

* The device sources (kernel/, include/sgemm_cube/{tile,block,kernel}/) are
  compiled with ``g++ -fsyntax-only`` against ``tests/mock_ascendc/``, a
  declarations-only stand-in for the AscendC basic API with the documented
  signatures and struct fields, for both SoC builds.  This catches C++ and
  API-usage mistakes; it is not a bisheng compile (none is possible here).
* The CI stand-ins of the generated launch headers (``ci/stubs/``) declare
  exactly the kernels' parameters, so the host-glue compile
  (``ci/compile_host_glue.sh``) checks the real call sites.
* That host-glue compile itself, when the torch-npu wheel's headers are
  unpacked in ``SGEMM_CUBE_TORCH_NPU_DIR`` (CI runs the script directly).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "ascendc_kernels"
ENTRY = KERNELS / "kernel" / "sgemm_cube_kernels.cpp"


def _gxx() -> str:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found")
    return gxx


@pytest.mark.parametrize("soc", ["910A", "910B"])
def test_device_sources_compile_against_the_documented_api(soc):
    cmd = [_gxx(), "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", f"-DSGEMM_CUBE_SOC_{soc}",
           "-I", str(KERNELS / "tests" / "mock_ascendc"), "-I", str(KERNELS / "include"), str(ENTRY)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_device_sources_refuse_a_build_without_a_soc():
    cmd = [_gxx(), "-std=c++17", "-fsyntax-only", "-I", str(KERNELS / "tests" / "mock_ascendc"), "-I",
           str(KERNELS / "include"), str(ENTRY)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode != 0 and "SGEMM_CUBE_SOC_910A" in res.stderr


def _params(text: str) -> list[tuple[str, str]]:
    out = []
    for p in " ".join(text.split()).split(","):
        p = p.strip().replace("GM_ADDR", "void*")
        typ, name = p.rsplit(None, 1) if "*" not in p.split()[-1] else (p[: p.rfind(" ")], p.split()[-1])
        if name.startswith("*"):
            typ, name = typ + "*", name[1:]
        out.append((typ.replace(" *", "*").strip(), name))
    return out


def test_ci_launch_stubs_match_the_kernel_signatures():
    src = ENTRY.read_text()
    kernels = dict(re.findall(r'extern "C" __global__ __aicore__ void (\w+)\((.*?)\)\s*\{', src, re.S))
    assert set(kernels) == {"sgemm_cube_split", "sgemm_cube_gemm", "sgemm_cube_combine"}
    for name, params in kernels.items():
        stub = (KERNELS / "ci" / "stubs" / f"aclrtlaunch_{name}.h").read_text()
        decl = re.search(rf"uint32_t aclrtlaunch_{name}\((.*?)\);", stub, re.S).group(1)
        stub_params = _params(decl)
        assert stub_params[:2] == [("uint32_t", "blockDim"), ("aclrtStream", "stream")]
        assert stub_params[2:] == _params(params), name


def test_host_glue_compiles_against_torch_npu_headers():
    wheel = os.environ.get("SGEMM_CUBE_TORCH_NPU_DIR")
    if not wheel or not (Path(wheel) / "torch_npu" / "include").is_dir():
        pytest.skip("set SGEMM_CUBE_TORCH_NPU_DIR to an unpacked torch-npu wheel (or run "
                    "ascendc_kernels/ci/compile_host_glue.sh, which CI does)")
    res = subprocess.run(["bash", str(KERNELS / "ci" / "compile_host_glue.sh")], capture_output=True, text=True,
                         env={**os.environ, "PYTHON": os.environ.get("PYTHON", "python3")}, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
