"""The AscendC build hook (ascendc_kernels/build_ext.py), its CMake project, and the bring-up script.

No CANN or NPU exists here: ``npu-smi`` is a fake script on PATH printing
recorded outputs, the CANN kernel-launch flow a stub ``ascendc.cmake``, and
the bring-up checks run on the kernels' CPU model (``--dry-run``).
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "ascendc_kernels"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ascendc_kernels import build_ext as be  # noqa: E402

# ---------------------------------------------------------------- fixtures
NPU_SMI_A2 = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 24.1.1                   Version: 24.1.1                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 88.2        30                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3161 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | OK            | 87.0        30                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          3161 / 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| No running processes found in NPU 0                                                            |
+===========================+===============+====================================================+
"""
NPU_SMI_B4_1 = NPU_SMI_A2.replace("910B3", "910B4-1")
NPU_SMI_910A = NPU_SMI_A2.replace("910B3", "910ProB")
NPU_SMI_310P = NPU_SMI_A2.replace("910B3", "310P3")
# Atlas A3: two chips per NPU, the family name only, a Phy-ID column.
NPU_SMI_A3 = """\
+------------------------------------------------------------------------------------------------------------------+
| npu-smi 25.0.rc1                            Version: 25.0.rc1                                                    |
+---------------------------+---------------+----------------------------------------------------------------------+
| NPU   Name                | Health        | Power(W)             Temp(C)                 Hugepages-Usage(page)   |
| Chip  Phy-ID              | Bus-Id        | AICore(%)            Memory-Usage(MB)        HBM-Usage(MB)           |
+===========================+===============+======================================================================+
| 0     Ascend910           | OK            | 162.6                34                      0    / 0                |
| 0     0                   | 0000:9D:00.0  | 0                    0    / 0                3419 / 65536            |
+------------------------------------------------------------------------------------------------------------------+
| 0     Ascend910           | OK            | -                    34                      0    / 0                |
| 1     1                   | 0000:9F:00.0  | 0                    0    / 0                2874 / 65536            |
+===========================+===============+======================================================================+
"""
BOARD_A3 = """\
        NPU ID                         : 0
        Chip ID                        : 0
        Chip Type                      : Ascend
        Chip Name                      : 910
        NPU Name                       : 9391
        Chip Version                   : V1
"""
BOARD_A3_FULL_NAME = BOARD_A3.replace(": 910\n", ": Ascend910\n")
BOARD_A2 = """\
        NPU ID                         : 1
        Chip ID                        : 0
        Chip Type                      : Ascend
        Chip Name                      : 910B1
        Chip Version                   : V1
"""


def _fake_tool(dir_: Path, name: str, outputs: dict[str, str], default: str | None = None) -> None:
    """An executable ``name`` printing ``outputs[" ".join(args)]`` (exit 1 for unknown arguments)."""
    dir_.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(outputs.values()):
        (dir_ / f"{name}.out{i}").write_text(text)
    cases = "".join(f'  "{args}") cat "{dir_}/{name}.out{i}";;\n' for i, args in enumerate(outputs))
    script = dir_ / name
    script.write_text(f'#!/bin/sh\ncase "$*" in\n{cases}  *) exit 1;;\nesac\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """Install fake command-line tools first on PATH; torch_npu's probe is stubbed (no child Python)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SGEMM_CUBE_SOC_VERSION", raising=False)
    monkeypatch.setattr(be, "_from_torch_npu", lambda notes: notes.append("torch_npu: stubbed") or None)

    def install(name: str, outputs: dict[str, str]):
        _fake_tool(bindir, name, outputs)

    return install


# ------------------------------------------------------------------- SoC
def test_soc_names_are_canonicalised():
    assert be.canonical_soc("910B3") == "Ascend910B3"
    assert be.canonical_soc("ascend910b4-1") == "Ascend910B4-1"
    assert be.canonical_soc("Ascend 910ProA") == "Ascend910ProA"
    assert be.canonical_soc("ASCEND910_9391") == "Ascend910_9391"
    for bad in ("", None, "910", "Ascend910", "Ascend310P3", "Ascend950PR_9599", "910B9"):
        assert be.canonical_soc(bad) is None, bad
    assert all(be.canonical_soc(s) == s for s in be.SOC_VERSIONS)


def test_soc_families_match_the_host_rule():
    """host/soc_name.hpp: Ascend910B<digit>... and Ascend910_93... are 910b; the first generation 910a."""
    for soc in be.SOC_VERSIONS:
        rest = soc[len("Ascend910"):]
        want = "910b" if (rest[:1] == "B" and rest[1:2].isdigit()) or rest.startswith("_93") else "910a"
        assert be.soc_family(soc) == want, soc
    assert be.soc_family("Ascend910B") == "910a"  # a bin of the first generation, not Atlas A2
    assert be.soc_family("Ascend310P3") == ""


def test_cmake_lists_the_same_socs():
    text = (KERNELS / "CMakeLists.txt").read_text()

    def cmake_list(name):
        return tuple(re.search(rf"set\({name}\s+([^)]*)\)", text).group(1).split())

    assert cmake_list("SGEMM_CUBE_SOCS_910A") == be.SOC_VERSIONS_910A
    assert cmake_list("SGEMM_CUBE_SOCS_910B") == be.SOC_VERSIONS_910B


def test_npu_smi_table_is_parsed():
    assert be.parse_npu_smi_info(NPU_SMI_A2) == [(0, "910B3"), (1, "910B3")]
    assert be.parse_npu_smi_info(NPU_SMI_B4_1) == [(0, "910B4-1"), (1, "910B4-1")]
    assert be.parse_npu_smi_info(NPU_SMI_A3) == [(0, "Ascend910"), (0, "Ascend910")]
    assert be.parse_npu_smi_info("") == []
    assert be.parse_npu_smi_info("dcmi module initialize failed. ret is -8005\n") == []


def test_npu_smi_board_is_parsed():
    assert be.parse_npu_smi_board(BOARD_A3) == "Ascend910_9391"
    assert be.parse_npu_smi_board(BOARD_A3_FULL_NAME) == "Ascend910_9391"
    assert be.parse_npu_smi_board(BOARD_A2) == "Ascend910B1"
    assert be.parse_npu_smi_board("Chip Name : NA\n") is None
    assert be.parse_npu_smi_board("garbage") is None


@pytest.mark.parametrize("table,board,want", [
    (NPU_SMI_A2, None, "Ascend910B3"),
    (NPU_SMI_B4_1, None, "Ascend910B4-1"),
    (NPU_SMI_910A, None, "Ascend910ProB"),
    (NPU_SMI_A3, BOARD_A3, "Ascend910_9391"),
])
def test_soc_detected_from_npu_smi(tools, table, board, want):
    outputs = {"info": table}
    if board is not None:
        outputs["info -t board -i 0 -c 0"] = board
    tools("npu-smi", outputs)
    assert be.detect_soc() == (want, "NPU 0, from npu-smi")
    assert be.soc_version() == want


def test_unsupported_or_missing_npu_asks_for_the_variable(tools):
    tools("npu-smi", {"info": NPU_SMI_310P})
    with pytest.raises(be.NpuBuildError) as err:
        be.soc_version()
    msg = str(err.value)
    assert "NPU 0 is '310P3', not a chip these kernels support" in msg
    assert "export SGEMM_CUBE_SOC_VERSION=Ascend910B3" in msg
    assert all(s in msg for s in be.SOC_VERSIONS)
    tools("npu-smi", {})  # npu-smi present but failing (driver not loaded)
    with pytest.raises(be.NpuBuildError, match="`npu-smi info`: not found or failed; torch_npu: stubbed"):
        be.soc_version()


def test_soc_variable_wins_and_is_checked(tools, monkeypatch):
    tools("npu-smi", {"info": NPU_SMI_A2})
    monkeypatch.setenv("SGEMM_CUBE_SOC_VERSION", "ascend910a")
    assert be.find_soc() == ("Ascend910A", "SGEMM_CUBE_SOC_VERSION")
    monkeypatch.setenv("SGEMM_CUBE_SOC_VERSION", "Ascend310P3")
    with pytest.raises(be.NpuBuildError, match=r"SGEMM_CUBE_SOC_VERSION='Ascend310P3' is not a SoC .* "
                                               r"Accepted values: 910A family: Ascend910A, "):
        be.soc_version()


# ----------------------------------------------------- build environment
def test_isolated_build_is_recognised(monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(sys, "prefix", "/home/u/venv")
    assert be.isolated_build_env() is None
    monkeypatch.setattr(sys, "path", [*sys.path, "/tmp/pip-build-env-abc123/overlay/lib/python3.11/site-packages"])
    assert be.isolated_build_env() == ("pip", "/tmp/pip-build-env-abc123/overlay/lib/python3.11/site-packages")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "pip-build-env" not in p])
    monkeypatch.setattr(sys, "prefix", "/tmp/build-env-x1y2")  # python -m build
    assert be.isolated_build_env() == ("build", "/tmp/build-env-x1y2")


def test_missing_packages_name_the_install_command(monkeypatch):
    none = {name: None for name in ("torch", "torch_npu", "pybind11")}
    monkeypatch.setattr(sys, "path", [*sys.path, "/tmp/pip-build-env-abc123/site"])
    msg = be._packages_problem(none)
    assert "torch, torch_npu, pybind11 not importable" in msg
    assert "pip's isolated build environment (/tmp/pip-build-env-abc123/site) hides" in msg
    assert "`pip install --no-build-isolation -v .`" in msg
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "pip-build-env" not in p])
    monkeypatch.setattr(sys, "prefix", "/home/u/venv")
    msg = be._packages_problem({**none, "torch": Path("/t"), "pybind11": Path("/p")})
    assert msg.startswith("torch_npu not installed in ") and "torch-npu==X.Y.Z" in msg
    assert be._packages_problem({"torch": Path("/t"), "torch_npu": Path("/n"), "pybind11": Path("/p")}) == ""


def test_cmake_version_is_checked(tools, monkeypatch):
    need = be.cmake_minimum()
    assert need == (3, 18)  # torch's CMake package needs 3.18 (CheckLinkerFlag)
    tools("cmake", {"--version": "cmake version 3.16.3\n\nCMake suite maintained and supported by Kitware\n"})
    assert be.cmake_version() == (3, 16, 3)
    assert re.match(r"CMake >= 3\.18 is needed, found 3\.16\.3 at .*/bin/cmake: `pip install cmake`",
                    be.cmake_problem())
    tools("cmake", {"--version": "cmake version 3.18.0\n"})
    assert be.cmake_problem() == ""
    assert "`no-such-cmake` is not on PATH" in be.cmake_problem("no-such-cmake")


@pytest.fixture
def fake_cann(tmp_path, monkeypatch):
    root = tmp_path / "cann"
    flow = root / "compiler" / "tikcpp" / "ascendc_kernel_cmake"
    flow.mkdir(parents=True)
    (flow / "ascendc.cmake").write_text(
        "function(ascendc_library name type)\n    add_library(${name} INTERFACE)\nendfunction()\n"
        "function(ascendc_include_directories)\nendfunction()\n"
        "function(ascendc_compile_definitions)\nendfunction()\n")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(root))
    monkeypatch.delenv("SGEMM_CUBE_NO_NPU", raising=False)
    return root


def test_build_hook_stops_with_every_problem_and_the_fix(fake_cann, tools, monkeypatch):
    tools("cmake", {"--version": "cmake version 3.10.2\n"})
    monkeypatch.setattr(be, "python_packages", lambda: {"torch": None, "torch_npu": None, "pybind11": None})
    monkeypatch.setattr(sys, "path", [*sys.path, "/tmp/pip-build-env-q/site"])
    with pytest.raises(SystemExit) as exc:
        be.npu_extension()
    msg = str(exc.value.code)
    lines = msg.splitlines()
    assert lines[0] == "sgemm_cube: cannot build the AscendC extension:"
    assert "pip install --no-build-isolation -v ." in lines[1]
    assert "CMake >= 3.18 is needed, found 3.10.2" in lines[2]
    assert "cannot tell which Ascend SoC" in lines[3]
    assert lines[4] == "  (to install without it: SGEMM_CUBE_NO_NPU=1 pip install .)"


def test_build_hook_passes_what_it_found_to_cmake(fake_cann, tools, monkeypatch, tmp_path, capsys):
    tools("cmake", {"--version": "cmake version 3.25.1\n"})
    tools("npu-smi", {"info": NPU_SMI_A2})
    pkgs = {"torch": tmp_path / "torch", "torch_npu": tmp_path / "torch_npu", "pybind11": tmp_path / "pybind11"}
    monkeypatch.setattr(be, "python_packages", lambda: pkgs)
    (ext,), cmdclass = be.npu_extension()
    assert cmdclass == {"build_ext": be.CMakeBuild}
    assert ext.name == "sgemm_cube.backends._npu_ext"
    assert "building the AscendC extension for Ascend910B3 (NPU 0, from npu-smi)" in capsys.readouterr().err
    args = be.cmake_configure_args(ext.settings, tmp_path / "b", tmp_path / "o")
    assert "-DSOC_VERSION=Ascend910B3" in args and f"-DASCEND_CANN_PACKAGE_PATH={fake_cann}" in args
    assert f"-DSGEMM_CUBE_TORCH_NPU_PATH={pkgs['torch_npu']}" in args
    assert f"-DSGEMM_CUBE_PYBIND11_PATH={pkgs['pybind11']}" in args


def test_skip_variable(fake_cann, monkeypatch, capsys):
    monkeypatch.setenv("SGEMM_CUBE_NO_NPU", "1")
    assert be.npu_extension() == ([], {})
    assert "SGEMM_CUBE_NO_NPU is set" in capsys.readouterr().err


# ------------------------------------------------------- the CMake project
@pytest.fixture
def cmake():
    exe = shutil.which("cmake")
    have = be.cmake_version() if exe else None
    if have is None or have < be.cmake_minimum():
        pytest.skip("no CMake >= the project's minimum here")
    return exe


def _configure(cmake, tmp_path, *defs):
    return subprocess.run([cmake, "-S", str(KERNELS), "-B", str(tmp_path / "build"),
                           f"-DPython3_EXECUTABLE={sys.executable}", *defs],
                          capture_output=True, text=True, timeout=300)


def test_cmake_refuses_an_unknown_soc(cmake, fake_cann, tmp_path):
    res = _configure(cmake, tmp_path, "-DSOC_VERSION=Ascend310P3", f"-DASCEND_CANN_PACKAGE_PATH={fake_cann}")
    assert res.returncode != 0
    err = " ".join(res.stderr.split())
    assert "SOC_VERSION='Ascend310P3' is not supported" in err and "Ascend910_9362" in err


def test_cmake_says_how_to_get_past_build_isolation(cmake, fake_cann, tmp_path):
    res = _configure(cmake, tmp_path, "-DSOC_VERSION=ascend910b3", f"-DASCEND_CANN_PACKAGE_PATH={fake_cann}",
                     "-DSGEMM_CUBE_TORCH_PATH=/x", "-DSGEMM_CUBE_PYBIND11_PATH=/y")  # torch_npu looked up: absent
    assert res.returncode != 0
    err = " ".join(res.stderr.split())
    assert "Python package 'torch_npu' is not installed" in err
    assert "`pip install --no-build-isolation -v .`" in err


def test_cmake_configures_the_extension_with_a_stub_cann(cmake, fake_cann, tmp_path):
    """The whole configure step (torch's and pybind11's CMake packages included) with the stub flow."""
    pytest.importorskip("torch")
    pytest.importorskip("pybind11")
    (tmp_path / "torch_npu").mkdir()
    res = _configure(cmake, tmp_path, "-DSOC_VERSION=Ascend910A", f"-DASCEND_CANN_PACKAGE_PATH={fake_cann}",
                     f"-DSGEMM_CUBE_TORCH_NPU_PATH={tmp_path / 'torch_npu'}")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "SOC_VERSION=Ascend910A -> SGEMM_CUBE_SOC_910A" in res.stdout


# ------------------------------------------------------ the bring-up script
def _check_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_on_npu", KERNELS / "tests" / "check_on_npu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("soc", ["910a", "910b"])
def test_check_on_npu_dry_run(soc):
    """The bring-up checks on the kernels' CPU model: every quick case within the bound, bit-exact
    with cpu_fallback where one K group and no FP32 lines, and the model restored afterwards."""
    pytest.importorskip("torch")
    from sgemm_cube.backends import npu

    check = _check_module()
    lines = []
    assert check.run_cases(soc, dry_run=True, quick=True, out=lines.append) == 0, "\n".join(lines)
    table = lines[0].splitlines()
    assert table[0].split()[:3] == ["case", "MxNxK", "groups"]
    width = table[0].index("MxNxK")  # the case column's width
    rows = {line[:width].strip(): line[width:].split() for line in table[2:]}
    assert set(rows) >= {"1x1x1", "tails", "K groups, tiling", "NaN/Inf", "near overflow", "near underflow"}
    assert rows["tails"][:6] == ["17x33x65", "1", "0", "0", "yes", "yes"]
    assert all(r[4] == "yes" for r in rows.values() if r[5] == "yes")  # what is expected exact is
    assert int(rows["K groups, tiling"][1]) > 1                 # several K groups: not cpu_fallback's sum
    assert rows["NaN/Inf"][2] != "0" and rows["NaN/Inf"][-1] == "ok"
    assert all(r[-1] == "ok" for r in rows.values())
    assert len(lines) == 1                                      # no failure notes
    assert "not built" in npu.unavailable_reason()              # the stand-in is gone


@pytest.mark.parametrize("soc", ["910a", "910b"])
def test_first_contact_checks_dry_run(soc):
    """The first-contact checks on the CPU model: the precision mode and routes read, no host read-back on
    each route, the guarantee on all adversarial generators with native measured beside; a planted host
    read-back and a planted wrong answer make it fail."""
    pytest.importorskip("torch")
    import torch

    from sgemm_cube.backends import npu

    check = _check_module()
    lines = []
    assert check.first_contact(soc, dry_run=True, out=lines.append) == 0, "\n".join(lines)
    text = "\n".join(lines)
    default = npu.DEFAULT_PRECISION_MODE[soc]
    assert f"precision mode  {default} (the chip's default)" in text
    assert ("NOT FP32" in text) == (soc == "910a")
    assert "backend='npu' 512x384x1024 (npu/fp16x3): no host read-back" in text
    small = "npu/fp32" if soc == "910a" else "native/native"
    assert f"backend='auto' 512x384x8 ({small}): no host read-back" in text
    table = text.split("-- the guarantee on the adversarial generators")[1].splitlines()[3:]
    assert len(table) == len(check._guarantee_module().GENERATORS)
    assert all(row.split()[2] == "ok" for row in table)

    run = npu.run

    def reads_back(plan, a, b, out, alpha=1.0):
        a.cpu()
        return run(plan, a, b, out, alpha)

    def wrong(plan, a, b, out, alpha=1.0):
        run(plan, a, b, out, alpha)
        out.mul_(1 + 2.0 ** -10)

    for planted, expect in ((reads_back, "FAIL: sgemm_cube called Tensor.cpu"), (wrong, "FAIL")):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(npu, "run", planted)
            lines = []
            assert check.first_contact(soc, dry_run=True, out=lines.append) == 1
            assert expect in "\n".join(lines)
    assert torch.Tensor.cpu is not None and "not built" in npu.unavailable_reason()  # everything restored


def test_multi_group_k_spans_several_groups():
    from sgemm_cube.backends import npu

    check = _check_module()
    for soc in ("910a", "910b"):
        k = check.multi_group_k(soc, 48, 40)
        assert k % 16 and check._groups(soc, 48, 40, k, npu.choose_tiling(soc, 48, 40, k)) >= 2


def test_bringup_dry_run(monkeypatch, capfd):
    pytest.importorskip("torch")
    from ascendc_kernels import bringup

    monkeypatch.setenv("SGEMM_CUBE_SOC_VERSION", "Ascend910B3")  # no npu-smi / torch_npu probe
    assert bringup.main(["--dry-run", "--quick"]) == 0
    out = capfd.readouterr().out
    assert "SoC         Ascend910B3 (SGEMM_CUBE_SOC_VERSION; kernels: 910b)" in out
    assert "dry run: would run `pip install --no-build-isolation -v .`" in out
    assert "dry run: the 910b kernels' CPU model in place of the NPU" in out
    assert re.search(r"^tails\s+17x33x65\s+1\s+0\s+0\s+yes\s+yes", out, re.M)
    assert "-- the guarantee on the adversarial generators" in out and "-- no host synchronisation" in out
    # step 3: the probe table against the stand-in, each alternative identified (tests/ascendc_kernels/test_probes.py)
    assert "== 3. probes" in out and "-- 910b stand-in, subnormals=flush: identified" in out and "WRONG" not in out
