"""The quick run, ``pytest -m "not slow"`` (``tests/conftest.py``): its lists name tests that exist, and it
keeps a test of every area, the executed-kernel and interpreter smokes included."""
import ast
import pathlib
import subprocess
import sys

import pytest

from tests import conftest

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: area -> test modules of which the quick run must keep at least one test
AREAS = {
    "API": ["tests/sgemm_cube/test_api.py", "tests/sgemm_cube/test_numpy_matmul_suite.py"],
    "CPU model": ["tests/cpu_fallback/test_model.py", "tests/cpu_fallback/test_split.py"],
    "guarantee": ["tests/sgemm_cube/test_guarantee.py"],
    "switch": ["tests/sgemm_cube/test_torch_switch.py"],
    "CLI": ["tests/sgemm_cube/cli/test_cli.py", "tests/sgemm_cube/cli/test_cli_inputs.py"],
    "tuner": ["tests/tuning/test_tuning_cli.py", "tests/tuning/test_pipeline_model.py"],
    "executed AscendC kernels": ["tests/ascendc_kernels/test_executed_kernels.py",
                                 "tests/sgemm_cube/backends/test_npu_backend.py"],
    "Triton interpreter": ["tests/sgemm_cube/backends/cuda/test_cuda_backend.py"],
}


def _test_names(path: pathlib.Path) -> set:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


@pytest.mark.parametrize("entry", conftest.SLOW_MODULES + conftest.SLOW_TESTS + conftest.QUICK_TESTS)
def test_every_entry_names_a_test_module_and_function(entry):
    path, _, rest = entry.partition("::")
    assert (ROOT / path).is_file(), f"{entry}: no such file"
    name = rest.split("[")[0]
    if name and "*" not in name:
        assert name in _test_names(ROOT / path), f"{entry}: no test {name} in {path}"


def test_entries_cover_what_they_say():
    covers = conftest._covers
    assert covers("t.py::test_a", "t.py::test_a") and covers("t.py::test_a", "t.py::test_a[1-x]")
    assert not covers("t.py::test_a", "t.py::test_ab") and not covers("t.py::test_a", "t.py::test_ab[1]")
    assert covers("t.py::test_a[cuda-", "t.py::test_a[cuda-x]")
    assert not covers("t.py::test_a[cuda-", "t.py::test_a[cpu]")
    assert covers("t.py::*[cuda*", "t.py::test_b[cuda]") and covers("t.py::*[cuda*", "t.py::test_c[cuda-x-1]")
    assert not covers("t.py::*[cuda*", "t.py::test_b[cpu]") and not covers("t.py::*[cuda*", "u.py::test_b[cuda]")
    assert not conftest.is_slow(conftest.QUICK_TESTS[0] + "910A]")
    assert conftest.is_slow(conftest.SLOW_MODULES[0] + "::x")


def test_the_quick_run_keeps_every_area_and_every_quick_test():
    """Collected with ``-m "not slow"``: each area keeps a test, each QUICK_TESTS entry selects one."""
    files = sorted({p for paths in AREAS.values() for p in paths} | {q.split("::")[0] for q in conftest.QUICK_TESTS})
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", "not slow",
                           "-p", "no:cacheprovider", *files], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    for area, paths in AREAS.items():
        assert any(i.split("::")[0] in paths for i in ids), f"the quick run has no test of the {area}"
    for q in conftest.QUICK_TESTS:
        assert any(conftest._covers(q, i) for i in ids), f"QUICK_TESTS entry {q!r} selects no test"
