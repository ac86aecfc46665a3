"""A call travels one way: no module calls back up, no module gets the operands from two places.

The rules and how they are measured: ``tests/call_graph.py``.  Each path a
user's product can take on a CPU is traced (NumPy arrays, torch tensors, the
switch, autograd, the ``torch.ops.sgemm_cube.matmul`` operator and its
gradient, ``explain``), and the CUDA backend's under Triton's interpreter
when ``tests/sgemm_cube/backends/cuda/test_cuda_backend.py`` turned it on;
``tests/gpu/test_call_path_gpu.py`` traces the CUDA path on a GPU.
"""
import numpy as np
import pytest

import sgemm_cube
from tests.call_graph import (KNOWN_PACKAGE_LOOPS, runtime_imports_of_tuner, CallGraph, cycles, import_graph, modules, package_cycles,
                              package_of, second_entries)

torch = pytest.importorskip("torch")


def _operands(rng, m=24, k=40, n=20):
    return rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)


def _cases(a, b):
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    mixed = a.copy()
    mixed[0, 0], mixed[1, 1], mixed[2, 2] = 1e30, 1e-30, np.inf  # scaled, recomputed and non-finite lines

    def switch():
        with sgemm_cube.enabled(devices=("cpu",)):
            torch.nn.functional.linear(ta, tb.T)

    def grad():
        x = ta.clone().requires_grad_()
        sgemm_cube.matmul(x, tb).sum().backward()

    def operator_grad():
        import sgemm_cube.torch_ops  # noqa: F401 - registers the operator

        x = ta.clone().requires_grad_()
        torch.ops.sgemm_cube.matmul(x, tb).sum().backward()

    return {
        "numpy": lambda: sgemm_cube.matmul(a, b),
        "numpy, out=, every fix-up": lambda: sgemm_cube.matmul(mixed, b, out=np.empty((a.shape[0], b.shape[1]))),
        "batched torch": lambda: sgemm_cube.matmul(ta.expand(3, *ta.shape), tb),
        "explain": lambda: sgemm_cube.explain(a, b),
        "switch": switch,
        "autograd": grad,
        "operator with autograd": operator_grad,
    }


@pytest.mark.parametrize("case", list(_cases(*_operands(np.random.default_rng(0)))))
def test_a_call_travels_one_way(case, rng):
    fn = _cases(*_operands(rng))[case]
    fn()  # first call: imports and caches out of the way
    graph = CallGraph(fn)
    assert graph.data_edges, "the trace saw no call carrying the operands"
    assert not cycles(graph.edges), f"modules that call back up:\n{graph.describe()}"
    assert not second_entries(graph.data_edges), f"modules entered from two places:\n{graph.describe()}"


def test_the_cuda_path_travels_one_way_under_the_interpreter(rng):
    from sgemm_cube.backends.cuda import interpreter_active

    if not interpreter_active():
        pytest.skip("TRITON_INTERPRET=1 is set by test_cuda_backend.py when it is collected in the same run")
    a, b = _operands(rng, 20, 48, 18)
    a[0, 0] = 1e30
    call = lambda: sgemm_cube.matmul(a, b, backend="cuda")  # noqa: E731
    call()
    graph = CallGraph(call)
    assert any(callee.startswith("sgemm_cube.backends.cuda") for _, callee, _ in graph.data_edges)
    assert not cycles(graph.edges), graph.describe()
    assert not second_entries(graph.data_edges), graph.describe()


def test_the_path_of_a_numpy_product():
    """The documented path (README's layout table), as traced: api -> product -> the backend -> the model."""
    a, b = _operands(np.random.default_rng(1))
    graph = CallGraph(lambda: sgemm_cube.matmul(a, b))
    callers = {callee: caller for caller, callee, _ in graph.data_edges}
    chain, module = [], "sgemm_cube.cpu_fallback.split"
    while module in callers:
        chain.append(module)
        module = callers[module]
    chain.append(module)
    assert [m.replace("sgemm_cube.", "") for m in reversed(chain)] == [
        "api", "product", "backends.cpu", "cpu_fallback.gemm", "cpu_fallback.schemes", "cpu_fallback.split"]


def test_no_import_cycles():
    """No module imports, directly or through others, a module that imports it (lazy imports included)."""
    assert cycles(import_graph()) == []


def _packages(root=None, folders=None) -> set[str]:
    found = modules() if root is None else modules(root, folders)
    return {name for name, (_, is_package) in found.items() if is_package}


def test_no_import_cycles_between_packages():
    """No subpackage imports, through any of its modules, a package that imports it (but the known loop)."""
    assert package_cycles(import_graph(), _packages(), KNOWN_PACKAGE_LOOPS) == []


def test_known_package_loops_are_still_there():
    """Each exempted import still exists: once issue 32 removes one, its entry must go too."""
    edges = import_graph()
    packages = _packages()
    for importer, package in KNOWN_PACKAGE_LOOPS:
        assert any(a == importer and package_of(b, packages) == package for a, b in edges), (
            f"{importer} no longer imports {package}: delete the pair from tests/call_graph.py's KNOWN_PACKAGE_LOOPS")


def test_the_runtime_never_imports_the_tuner():
    """Nothing under ``sgemm_cube/`` but the command line (and the tuner itself) imports ``sgemm_cube.tuning``:
    the npu backend reads the tiling tables the tuner wrote (issue 32, "tilings as data")."""
    assert runtime_imports_of_tuner(import_graph()) == []


def _write_tree(root, files: dict) -> None:
    """A source tree under ``root``: path -> text."""
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_a_runtime_import_of_the_tuner_planted_in_a_copy_is_found(tmp_path):
    """The rule above sees a lazy import planted in a runtime module, and lets the command line import it."""
    files = {
        "sgemm_cube/__init__.py": "",
        "sgemm_cube/backends/__init__.py": "",
        "sgemm_cube/backends/npu.py": "def choose():\n    from sgemm_cube.tuning.pipeline import best_kernel\n",
        "sgemm_cube/cli/__init__.py": "from sgemm_cube.tuning import cli\n",
        "tuning/__init__.py": "",
        "tuning/cli.py": "",
        "tuning/pipeline.py": "from sgemm_cube.backends import npu\n",
    }
    _write_tree(tmp_path, files)
    edges = import_graph(tmp_path, {"sgemm_cube": "sgemm_cube", "tuning": "sgemm_cube.tuning"})
    assert runtime_imports_of_tuner(edges) == [("sgemm_cube.backends.npu", "sgemm_cube.tuning.pipeline")]


def test_package_loop_planted_in_a_copy_is_found(tmp_path):
    """The shape the package check exists for: ``cli/__init__ -> tuning.cli -> cli.arguments`` has no circle
    between files (so the file check passes), but one between the packages, found in a tree laid out as ours
    (``tuning/`` installed as ``sgemm_cube.tuning``)."""
    files = {
        "sgemm_cube/__init__.py": "",
        "sgemm_cube/cli/__init__.py": "from sgemm_cube.tuning.cli import add_parser\n",
        "sgemm_cube/cli/arguments.py": "import argparse\n",
        "tuning/__init__.py": "",
        "tuning/cli.py": "def add_parser():\n    from sgemm_cube.cli.arguments import argparse\n",
    }
    _write_tree(tmp_path, files)
    folders = {"sgemm_cube": "sgemm_cube", "tuning": "sgemm_cube.tuning"}
    edges = import_graph(tmp_path, folders)
    assert edges == {("sgemm_cube.cli", "sgemm_cube.tuning.cli"), ("sgemm_cube.tuning.cli", "sgemm_cube.cli.arguments")}
    assert cycles(edges) == []
    packages = _packages(tmp_path, folders)
    assert package_cycles(edges, packages) == [["sgemm_cube.cli", "sgemm_cube.tuning"]]
    # An exemption names the importing module and the package: it lifts that import only.
    assert package_cycles(edges, packages, {("sgemm_cube.tuning.cli", "sgemm_cube.cli")}) == []
    assert package_cycles(edges, packages, {("sgemm_cube.tuning.cli", "sgemm_cube.backends")}) != []
    # A module counts for the first-level subpackage holding it; the root package's own modules for none
    # (they are checked as files).
    ours = _packages()
    assert package_of("sgemm_cube.backends.cuda.launch", ours) == "sgemm_cube.backends"
    assert package_of("sgemm_cube.plan", ours) is None


def test_the_checker_finds_what_it_looks_for():
    """The rules fail on the shapes they exist to catch (so a pass means something)."""
    assert cycles([("api", "plan"), ("plan", "api")]) == [["api", "plan"]]
    assert cycles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == [["a", "b", "c"]]
    assert cycles([("a", "b"), ("a", "c"), ("b", "c")]) == []
    assert second_entries([("a", "c", "f"), ("b", "c", "g"), ("a", "b", "h")]) == {"c": {"a", "b"}}
    assert second_entries([("a", "c", "f"), ("a", "c", "g")]) == {}
    edges = import_graph()
    assert ("sgemm_cube.api", "sgemm_cube.product") in edges
    assert ("sgemm_cube.backends.cpu", "sgemm_cube.cpu_fallback.guard") in edges
