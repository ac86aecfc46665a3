"""Every backend follows the one protocol of sgemm_cube.backends.base.Backend."""
import importlib
import inspect
import re

import pytest

from sgemm_cube.backends import BACKENDS
from sgemm_cube.backends.base import Backend
from sgemm_cube.cpu_fallback import ORDERS, SCHEMES


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_backend_module_follows_the_protocol(name):
    try:
        mod = importlib.import_module(BACKENDS[name])
    except ImportError as exc:  # an optional library is missing here: the registry reports it as unavailable
        pytest.skip(f"{name}: {exc}")
    assert isinstance(mod, Backend)
    assert set(mod.SCHEMES) <= set(SCHEMES) | {"native"} and mod.SCHEMES
    assert set(mod.ORDERS) <= set(ORDERS) and mod.ORDERS
    assert list(inspect.signature(mod.plan).parameters) == ["req", "batch", "m", "n", "k", "like"]
    # one entry point, reading the plan only: the request stays above the backends
    assert list(inspect.signature(mod.run).parameters) == ["plan", "a", "b", "out", "alpha"]
    assert not re.search(r"\breq\b", inspect.getsource(mod.run))
    assert inspect.signature(mod.run).parameters["alpha"].default == 1.0
    assert isinstance(mod.is_available(), bool) and isinstance(mod.unavailable_reason(), str)
    assert mod.is_available() == (mod.unavailable_reason() == "")


def test_explain_is_the_backends_plan_with_matmuls_defaults():
    import numpy as np

    import sgemm_cube
    from sgemm_cube.api import explain, matmul

    for fn in (explain, matmul):
        params = inspect.signature(fn).parameters
        assert params["sb"].default == 12 and params["scheme"].default == "auto"
    shared = set(inspect.signature(explain).parameters) - {"a", "b"}
    m = inspect.signature(matmul).parameters
    for p in shared:
        assert inspect.signature(explain).parameters[p].default == m[p].default, p
    a = np.ones((4, 32), np.float32)
    plan = sgemm_cube.explain(a, a.T, backend="cpu")
    assert plan == sgemm_cube.backends.get_backend("cpu").plan(sgemm_cube.plan.make_request(backend="cpu"), 1, 4, 4,
                                                               32, a)


@pytest.mark.parametrize("options, decisions", [
    (dict(), dict(scheme="fp16x3", order="termwise", fixup=True, accumulate="cube16", config=None)),
    (dict(order="elementwise", fixup=False, accumulate="truncate", scheme="bf16x6", sb=6, scale="rows"),
     dict(scheme="bf16x6", sb=6, scale="rows", order="elementwise", fixup=False, accumulate="truncate")),
    (dict(backend="native"), dict(scheme="native", backend="native", scale=None, order=None, fixup=False,
                                  accumulate=None)),
])
def test_explain_shows_every_decision_run_reads(options, decisions):
    """The plan carries order, fixup and accumulate (the CPU model's default resolved): what cpu.run reads."""
    import numpy as np

    import sgemm_cube

    a = np.ones((4, 32), np.float32)
    plan = sgemm_cube.explain(a, a.T, **options)
    assert {key: getattr(plan, key) for key in decisions} == decisions


def test_cpu_run_reads_the_plan_not_the_options():
    """A plan changed after planning runs as changed (the request is not consulted): order and accumulate."""
    import numpy as np

    from sgemm_cube import cpu_fallback
    from sgemm_cube.backends import cpu
    from sgemm_cube.plan import make_request

    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 8, 40)).astype(np.float32)
    b = rng.standard_normal((1, 40, 6)).astype(np.float32)
    plan = cpu.plan(make_request(backend="cpu"), 1, 8, 6, 40)._replace(order="elementwise", accumulate="sequential")
    out = np.empty((1, 8, 6), np.float32)
    cpu.run(plan, a, b, out)
    want = cpu_fallback.emulated_matmul(a[0], b[0], order="elementwise", accumulate="sequential")
    assert np.array_equal(out[0], want)


def test_the_wheel_installs_only_sgemm_cube():
    """setup.py's packages are sgemm_cube and its subpackages: no top-level cpu_fallback or tuning."""
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[3]
    code = ("import setuptools, sys; setuptools.setup = lambda **kw: print(sorted(kw['packages'])); "
            "sys.argv = ['setup.py']; __file__ = 'setup.py'; exec(open('setup.py').read())")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root)
    assert res.returncode == 0, res.stderr[-2000:]
    packages = eval(res.stdout.strip().splitlines()[-1])
    assert packages and all(p == "sgemm_cube" or p.startswith("sgemm_cube.") for p in packages), packages
    assert {"sgemm_cube.cpu_fallback", "sgemm_cube.tuning", "sgemm_cube.cli"} <= set(packages)


def test_python_dash_m_runs_the_cli():
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "sgemm_cube", "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "demo" in res.stdout and "tune" in res.stdout


def test_true_fp32_turns_tf32_off_and_restores_the_setting():
    """backends.native.true_fp32, the one TF32-off context manager (native backend, switch, benchmarks)."""
    torch = pytest.importorskip("torch")
    from sgemm_cube.backends.native import true_fp32

    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for before in (True, False):
            torch.backends.cuda.matmul.allow_tf32 = before
            with true_fp32():
                assert torch.backends.cuda.matmul.allow_tf32 is False
            assert torch.backends.cuda.matmul.allow_tf32 is before
        torch.backends.cuda.matmul.allow_tf32 = True
        with true_fp32(torch.device("cpu")):  # another device: left alone
            assert torch.backends.cuda.matmul.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
