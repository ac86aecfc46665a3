"""The switch's C++ kernels (sgemm_cube/csrc/switch_kernels.cpp): built here, and the same answers as the
Python kernels, without entering Python where the plan runs PyTorch's kernel.

tests/sgemm_cube/test_torch_switch.py runs its whole suite under both kinds of kernels; this file checks
what only the C++ kernels do: which calls they keep out of Python, and the fallback where they cannot
be built."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import sgemm_cube  # noqa: E402
from sgemm_cube import switch, switch_kernels  # noqa: E402


@pytest.fixture
def kernels(request, monkeypatch):
    """The switch's kernels registered afresh as ``request.param`` asks ("c++" or "python"), on the CPU."""
    if request.param == "python":
        monkeypatch.setenv(switch_kernels.ENV_VAR, "python")
    else:
        monkeypatch.delenv(switch_kernels.ENV_VAR, raising=False)
    switch.restore()
    yield request.param
    sgemm_cube.disable()
    switch.restore()


def test_the_cpp_kernels_build_where_a_compiler_is():
    """Where a C++ compiler is on the PATH (CI's machine has one) the C++ kernels build and load; where
    none is, the status names the missing compiler."""
    status = switch.kernels()
    if switch_kernels.find_compiler() and sys.platform in ("linux", "darwin"):
        assert status.language == "c++", status.detail
        assert os.path.exists(status.detail)
    else:
        assert status.language == "python" and "compiler" in status.detail


def _planning_counter(monkeypatch):
    """Count the Python kernels' plan lookups (switch._native): one per call that reaches Python."""
    calls = []
    plan = switch._native

    def counted(*args):
        calls.append(args)
        return plan(*args)
    monkeypatch.setattr(switch, "_native", counted)
    return calls


@pytest.mark.parametrize("kernels", ["c++", "python"], indirect=True)
def test_calls_planned_native_stay_out_of_python(kernels, monkeypatch):
    """K = 8 < 16: the plan runs PyTorch's kernel.  The first call of a shape reaches the Python kernel,
    which plans it; with the C++ kernels the next calls of that shape do not reach Python at all, and
    every operator's answer is PyTorch's own, bit for bit, under both kernels."""
    if kernels == "c++" and not switch_kernels.find_compiler():
        pytest.fail("no C++ compiler here: test_the_cpp_kernels_build_where_a_compiler_is says so")
    g = torch.Generator().manual_seed(7)
    a, b, c = torch.randn(6, 8, generator=g), torch.randn(8, 5, generator=g), torch.randn(6, 5, generator=g)
    b1, b2 = torch.randn(3, 6, 4, generator=g), torch.randn(3, 4, 5, generator=g)
    v, w = torch.randn(8, generator=g), torch.randn(8, generator=g)
    calls = {
        "mm": lambda: torch.mm(a, b), "addmm": lambda: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
        "addmm.out": lambda: torch.addmm(c, a, b, out=torch.empty(6, 5)),
        "bmm": lambda: torch.bmm(b1, b2), "baddbmm": lambda: torch.baddbmm(c, b1, b2),
        "addbmm": lambda: torch.addbmm(c, b1, b2), "addmv": lambda: torch.addmv(c[:, 0], a, v),
        "dot": lambda: torch.dot(v, w), "linear": lambda: torch.nn.functional.linear(a, b.T, c[0]),
    }
    expected = {name: call() for name, call in calls.items()}  # the switch off: PyTorch's kernels
    planned = _planning_counter(monkeypatch)
    with sgemm_cube.enabled(devices=("cpu",)):
        assert switch.kernels().language == kernels
        first = {name: call() for name, call in calls.items()}
        after_first = len(planned)
        again = {name: call() for name, call in calls.items() for _ in range(3)}
        assert switch.routed_calls() == {}  # all native: none computed by sgemm_cube
    assert after_first >= 1  # operators of one shape share a plan; some CPU kernels call others (baddbmm: bmm)
    assert len(planned) == (after_first if kernels == "c++" else 4 * after_first)
    for name in calls:
        assert torch.equal(first[name], expected[name]) and torch.equal(again[name], expected[name]), name


@pytest.mark.parametrize("kernels", ["c++"], indirect=True)
def test_what_the_cpp_kernels_pass_to_python(kernels, monkeypatch):
    """The C++ kernels send to PyTorch's kernel only calls whose shapes were planned native, with the
    options in force: a new shape, an emulated product, float64 operands, other options (enable() with
    new options forgets the plans) and sgemm_cube's own calls each take their usual path."""
    if not switch_kernels.find_compiler():
        pytest.fail("no C++ compiler here: test_the_cpp_kernels_build_where_a_compiler_is says so")
    library = switch_kernels.load()
    native = library.sgemm_cube_switch_native_calls
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(4, 8, generator=g), torch.randn(8, 4, generator=g)
    planned = _planning_counter(monkeypatch)
    sgemm_cube.enable(devices=("cpu",))
    torch.mm(a, b)
    start = native()
    torch.mm(a, b)
    assert native() == start + 1 and len(planned) == 1             # planned native before: C++ alone
    torch.mm(a[:3], b)                                            # a new shape: planned in Python
    assert len(planned) == 2
    wide, tall = torch.randn(4, 64, generator=g), torch.randn(64, 4, generator=g)
    torch.mm(wide, tall)
    torch.mm(wide, tall)                                          # K = 64: emulated, Python both times
    assert switch.routed_calls() == {"mm": 2} and native() == start + 1
    torch.mm(a.double(), b.double())                              # not float32: PyTorch's kernel
    assert native() == start + 1
    with switch.bypass():
        torch.mm(a, b)                                            # bypass: PyTorch's kernel, not counted
    assert native() == start + 1
    sgemm_cube.enable(devices=("cpu",), sb=10)                    # new options: plans forgotten
    before = len(planned)
    torch.mm(a, b)
    assert len(planned) == before + 1 and native() == start + 1
    torch.mm(a, b)
    assert native() == start + 2
    sgemm_cube.disable()
    torch.mm(a, b)                                                # off: PyTorch's kernel
    assert native() == start + 2 and len(planned) == before + 1


def test_without_a_compiler_the_python_kernels_run(tmp_path):
    """No C++ compiler ($CXX names none, an empty cache): the status says why, and the switch runs its
    Python kernels with the same answers (a fresh process: the library loads once per process)."""
    script = (
        "import torch, sgemm_cube\n"
        "from sgemm_cube import switch\n"
        "a, b = torch.randn(5, 8), torch.randn(8, 3)\n"
        "want = torch.mm(a, b)\n"
        "status = switch.kernels()\n"
        "with sgemm_cube.enabled(devices=('cpu',)):\n"
        "    got = [torch.mm(a, b) for _ in range(3)]\n"
        "    assert switch.kernels() == status, switch.kernels()\n"
        "assert all(torch.equal(g, want) for g in got)\n"
        "print(status.language, '|', status.detail)\n"
    )
    env = dict(os.environ, CXX=str(tmp_path / "no-such-compiler"), SGEMM_CUBE_CACHE=str(tmp_path / "cache"))
    env.pop(switch_kernels.ENV_VAR, None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    language, detail = done.stdout.strip().split(" | ", 1)
    assert language == "python" and "no-such-compiler" in detail


@pytest.mark.parametrize("kernels", ["c++"], indirect=True)
def test_a_failed_registration_leaves_the_python_kernels(kernels, monkeypatch):
    """If registering a C++ kernel fails, every C++ kernel is removed with a RuntimeWarning that says
    why, the Python kernels carry on with the same answers, and kernels() reports it."""
    if not switch_kernels.find_compiler():
        pytest.fail("no C++ compiler here: test_the_cpp_kernels_build_where_a_compiler_is says so")
    library = switch_kernels.load()
    real = library.sgemm_cube_switch_register
    calls = []

    def failing(name, device_type):
        calls.append(name)
        return real(name, device_type) if len(calls) < 3 else 1  # the third operator fails
    monkeypatch.setattr(library, "sgemm_cube_switch_register", failing)
    monkeypatch.setattr(switch, "_cpp_reason", "")  # restored after the test: later tests build afresh
    a, b = torch.randn(5, 8), torch.randn(8, 3)
    want = torch.mm(a, b)
    with pytest.warns(RuntimeWarning, match="runs its Python kernels: registering the C.. kernels failed"):
        sgemm_cube.enable(devices=("cpu",))
    status = switch.kernels()
    assert status.language == "python" and "registering the C++ kernels failed" in status.detail
    assert len(calls) == 3 and switch._cpp_devices == {}
    start = library.sgemm_cube_switch_native_calls()
    got = [torch.mm(a, b) for _ in range(3)]
    assert all(torch.equal(g, want) for g in got)
    assert library.sgemm_cube_switch_native_calls() == start  # no C++ kernel took them
