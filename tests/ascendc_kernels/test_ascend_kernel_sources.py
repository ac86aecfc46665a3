"""What can be checked of the AscendC device and host sources without CANN.

* The device sources (kernel/*.cpp, and each header of
  include/sgemm_cube/{tile,block,kernel}/ on its own) are compiled with
  ``g++ -fsyntax-only`` against ``tests/mock_ascendc/``, a declarations-only
  stand-in for the AscendC basic API, once per chip: ``__NPU_ARCH__`` as
  bisheng defines it (1001 = 910A / dav-c100, 2201 = 910B / dav-c220) plus
  the SoC macro CMake derives from SOC_VERSION.  The stand-in declares every
  API only for the chips whose real headers declare it, so a chip's build
  that reaches another chip's API fails here.  It is not a bisheng compile
  (none is possible here).
* Planted misuses (``tests/misuse/``) prove that: each compiles cleanly
  without ``SGEMM_CUBE_PLANT_MISUSE`` and fails, with it, exactly on the chips
  whose real headers lack the API.
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

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "ascendc_kernels"
ENTRY = KERNELS / "kernel" / "sgemm_cube_kernels.cpp"
MOCK = KERNELS / "tests" / "mock_ascendc"
MISUSE = KERNELS / "tests" / "misuse"

# chip -> (__NPU_ARCH__ as bisheng defines it for the chip's --npu-arch, the SoC macro CMake
# derives from SOC_VERSION).  One table, so the two can never disagree in CI.
CHIPS = {
    "910A": (1001, "SGEMM_CUBE_SOC_910A"),  # Ascend910A..., dav-c100
    "910B": (2201, "SGEMM_CUBE_SOC_910B"),  # Ascend910B1..B4, dav-c220
}
DEVICE_UNITS = sorted((KERNELS / "kernel").glob("*.cpp"))
DEVICE_HEADERS = sorted(p for layer in ("tile", "block", "kernel")
                        for p in (KERNELS / "include" / "sgemm_cube" / layer).glob("*.hpp"))

# Planted misuse -> chips whose build must fail, and a fragment of g++'s error there.
MISUSES = {
    "fixpipe_v220_on_910a.cpp": ({"910A"}, "is not available on __NPU_ARCH__ 1001"),
    "global_tensor_reinterpret_cast.cpp": ({"910A", "910B"}, "has no member named 'ReinterpretCast'"),
    "mmad_params_foreign_field.cpp": ({"910A", "910B"}, "has no member named 'disableGemv'"),
}


def _gxx() -> str:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found")
    return gxx


def _compile(source, *defines: str, soc: str | None = None, werror: bool = True, header: bool = False):
    """g++ -fsyntax-only of `source` against the stand-in, for chip `soc` (None: no chip macros)."""
    cmd = [_gxx(), "-std=c++17", "-fsyntax-only"]
    if werror:
        cmd += ["-Wall", "-Wextra", "-Werror"]
    if soc is not None:
        arch, macro = CHIPS[soc]
        cmd += [f"-D__NPU_ARCH__={arch}", f"-D{macro}"]
    cmd += [f"-D{d}" for d in defines]
    cmd += ["-I", str(MOCK), "-I", str(KERNELS / "include")]
    cmd += ["-x", "c++", "-include", str(source), "/dev/null"] if header else [str(source)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    return res.returncode, res.stderr


def _first_errors(stderr: str, n: int = 3) -> str:
    return "\n".join([line for line in stderr.splitlines() if "error" in line][:n]) or stderr[-2000:]


def test_there_are_device_sources():
    assert ENTRY in DEVICE_UNITS and DEVICE_HEADERS


@pytest.mark.parametrize("soc", sorted(CHIPS))
@pytest.mark.parametrize("unit", DEVICE_UNITS, ids=lambda p: p.name)
def test_device_sources_compile_against_the_chips_api(unit, soc):
    rc, err = _compile(unit, soc=soc)
    assert rc == 0, f"{unit.name} for {soc} (__NPU_ARCH__={CHIPS[soc][0]}):\n{_first_errors(err, 10)}"


@pytest.mark.parametrize("soc", sorted(CHIPS))
@pytest.mark.parametrize("header", DEVICE_HEADERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_device_header_compiles_on_its_own(header, soc):
    rc, err = _compile(header, soc=soc, header=True)
    assert rc == 0, f"{header.name} for {soc}:\n{_first_errors(err, 10)}"


def test_device_sources_refuse_a_build_without_a_soc():
    rc, err = _compile(ENTRY, "__NPU_ARCH__=2201", werror=False)
    assert rc != 0 and "SGEMM_CUBE_SOC_910A" in err


@pytest.mark.parametrize("arch,soc", [(1001, "910B"), (2201, "910A")])
def test_device_sources_refuse_a_soc_of_another_chip(arch, soc):
    rc, err = _compile(ENTRY, f"__NPU_ARCH__={arch}", CHIPS[soc][1], werror=False)
    assert rc != 0 and f"{CHIPS[soc][1]} needs __NPU_ARCH__ {CHIPS[soc][0]}" in err, _first_errors(err)


@pytest.mark.parametrize("arch", [None, 3510])
def test_stand_in_needs_a_modelled_chip(arch):
    defines = ["SGEMM_CUBE_SOC_910B"] + ([f"__NPU_ARCH__={arch}"] if arch else [])
    rc, err = _compile(ENTRY, *defines, werror=False)
    assert rc != 0 and "mock AscendC" in err and "__NPU_ARCH__" in err


@pytest.mark.parametrize("soc", sorted(CHIPS))
@pytest.mark.parametrize("name", sorted(MISUSES))
def test_planted_misuse_fails_exactly_on_the_chips_that_lack_the_api(name, soc):
    fails_on, message = MISUSES[name]
    source = MISUSE / name
    rc, err = _compile(source, soc=soc)
    assert rc == 0, f"clean control {name} for {soc}:\n{_first_errors(err)}"
    rc, err = _compile(source, "SGEMM_CUBE_PLANT_MISUSE", soc=soc)
    if soc in fails_on:
        assert rc != 0, f"{name}: the {soc} build accepted an API its real headers do not declare"
        assert message in err.replace("\u2018", "'").replace("\u2019", "'"), _first_errors(err)
    else:
        assert rc == 0, f"{name} for {soc}:\n{_first_errors(err)}"


def test_every_stand_in_declaration_names_its_real_header():
    """Every top-level declaration of the stand-in has, in the nearest comment above it (before
    a blank line) or on its own line, the asc-devkit header it was read from (or "compiler
    built-in").  Whether the cited header is the right one is for review, not for this test.  The
    types shared with the executable stand-in (``tests/ascendc_types.h``) are checked the same way."""
    decl = re.compile(r"^(struct|class|enum|using|constexpr|#define|[A-Za-z_][\w:<>]*\s+[\w:]+\s*\()")
    cite = re.compile(r"(from: (include|impl)/[\w/|]+\.h|compiler built-in)")
    missing = []
    text = ""
    lines = []
    for path, start in ((KERNELS / "tests" / "ascendc_types.h", "// -------------------------------------------------"
                         "----------- qualifiers"), (MOCK / "kernel_operator.h", '#include "../ascendc_types.h"')):
        part = path.read_text()
        text += part
        lines += [""] + part[part.index(start):].splitlines()  # a blank line: no comment block spans files
    for i, line in enumerate(lines):
        if not decl.match(line) or cite.search(line):
            continue
        j = i - 1
        while j >= 0 and lines[j].strip() and not lines[j].lstrip().startswith("//"):
            j -= 1
        block = []
        while j >= 0 and lines[j].lstrip().startswith("//"):
            block.append(lines[j])
            j -= 1
        if not any(cite.search(c) for c in block):
            missing.append(line.strip())
    assert not missing, "declarations without a '// from: <asc-devkit header>' comment:\n" + "\n".join(missing)
    for path in re.findall(r"from: ((?:include|impl)/[\w/|]+\.h)", text):
        assert path.startswith(("include/basic_api/", "impl/basic_api/", "impl/utils/")), path


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
    assert set(kernels) == {"sgemm_cube_split", "sgemm_cube_gemm", "sgemm_cube_combine", "sgemm_cube_line_stats",
                            "sgemm_cube_line_meta", "sgemm_cube_unscale", "sgemm_cube_fixup_rows",
                            "sgemm_cube_fixup_cols"}
    for name, params in kernels.items():
        stub = (KERNELS / "ci" / "stubs" / f"aclrtlaunch_{name}.h").read_text()
        decl = re.search(rf"uint32_t aclrtlaunch_{name}\((.*?)\);", stub, re.S).group(1)
        stub_params = _params(decl)
        assert stub_params[:2] == [("uint32_t", "blockDim"), ("aclrtStream", "stream")]
        assert stub_params[2:] == _params(params), name


def test_the_python_matmul_options_mirror_the_binding():
    """``npu.MatmulOptions`` (what the stand-in extensions take) has binding.cpp's ``MatmulOptions`` fields, in
    order, with its defaults, and every field is bound as an attribute."""
    from sgemm_cube.backends.npu import MatmulOptions

    src = (KERNELS / "host" / "binding.cpp").read_text()
    bound = src[src.index('py::class_<MatmulOptions>'):src.index('m.def("matmul"')]
    args = re.findall(r'py::arg\("(\w+)"\)(?:\s*=\s*([\w.]+))?', bound)
    def value(literal):  # a C++ default: false, true, an integer or a double
        return {"false": False, "true": True}[literal] if literal in ("false", "true") else (
            float(literal) if "." in literal else int(literal))

    cpp = {name: value(d) if d else None for name, d in args}
    assert tuple(cpp) == MatmulOptions._fields
    assert {k: v for k, v in cpp.items() if v is not None} == MatmulOptions._field_defaults
    assert re.findall(r'def_readwrite\("(\w+)"', bound) == list(MatmulOptions._fields)


def test_host_glue_compiles_against_torch_npu_headers():
    wheel = os.environ.get("SGEMM_CUBE_TORCH_NPU_DIR")
    if not wheel or not (Path(wheel) / "torch_npu" / "include").is_dir():
        pytest.skip("set SGEMM_CUBE_TORCH_NPU_DIR to an unpacked torch-npu wheel (or run "
                    "ascendc_kernels/ci/compile_host_glue.sh, which CI does)")
    res = subprocess.run(["bash", str(KERNELS / "ci" / "compile_host_glue.sh")], capture_output=True, text=True,
                         env={**os.environ, "PYTHON": os.environ.get("PYTHON", "python3")}, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
