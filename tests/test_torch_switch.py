"""The drop-in switch (:mod:`sgemm_cube.switch`).

What is claimed and checked here:

* while on, every listed entry point sends float32 CPU tensors to the
  ``sgemm_cube::matmul`` operator (seen by a dispatch-mode spy), with the
  operator's result bit for bit, gradients included;
* other dtypes, mixed dtypes, ``out=``, shapes torch rejects, tensor
  subclasses and ``vmap`` go to the original functions (same results, same
  error messages);
* turning it off restores the very same function objects; enable/disable
  nest and count, also from many threads at once; :func:`bypass` is per
  thread;
* ``torch.compile`` of code using each entry point has zero graph breaks and
  the operator in its AOT graph while on, the original ops once off;
* ``SGEMM_CUBE_ENABLE`` is read at import; importing sgemm_cube does not
  import torch.
"""
import os
import subprocess
import sys
import threading

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from sgemm_cube import switch, torch_ops  # noqa: E402
from sgemm_cube.metrics import relative_error  # noqa: E402

from .conftest import draw  # noqa: E402

OP = torch.ops.sgemm_cube.matmul.default
TARGETS = [(torch, "matmul"), (torch, "mm"), (torch, "bmm"), (F, "linear"), (torch.Tensor, "matmul"),
           (torch.Tensor, "mm"), (torch.Tensor, "bmm"), (torch.Tensor, "__matmul__"), (torch.Tensor, "__rmatmul__")]
ORIGINALS = {(owner, name): getattr(owner, name) for owner, name in TARGETS}
OWN = {(owner, name): name in vars(owner) for owner, name in TARGETS}


@pytest.fixture(autouse=True)
def _switch_off_after_each_test():
    assert not switch.is_enabled()
    yield
    leaked = switch.is_enabled()
    while switch.is_enabled():
        switch.disable()
    assert not leaked, "a test left the switch on"


class Spy(TorchDispatchMode):
    """Records the ops that reach the dispatcher (the operator's internals stay hidden)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def _products(ops):
    """The matrix products among dispatched ops (sgemm_cube's or aten's)."""
    names = {"mm", "bmm", "addmm", "baddbmm", "matmul", "dot", "mv", "addmv", "linear", "vdot"}
    return [op for op in ops if op is OP or op.overloadpacket.__name__ in names]


def _t(rng, shape, dist="normal"):
    return torch.from_numpy(draw(rng, dist, shape))


#: name -> (call, a shape, b shape, reference with the operator).
ENTRY_POINTS = {
    "torch.matmul": (lambda a, b: torch.matmul(a, b), (2, 5, 7), (7, 3), torch_ops.matmul),
    "@": (lambda a, b: a @ b, (5, 7), (2, 7, 3), torch_ops.matmul),
    "@ 1-D": (lambda a, b: a @ b, (7,), (7,), torch_ops.matmul),
    "Tensor.matmul": (lambda a, b: a.matmul(b), (7,), (7, 3), torch_ops.matmul),
    "Tensor.__rmatmul__": (lambda a, b: b.__rmatmul__(a), (5, 7), (7, 3), torch_ops.matmul),
    "torch.mm": (lambda a, b: torch.mm(a, b), (5, 7), (7, 3), torch_ops.matmul),
    "Tensor.mm": (lambda a, b: a.mm(b), (5, 7), (7, 3), torch_ops.matmul),
    "torch.bmm": (lambda a, b: torch.bmm(a, b), (2, 5, 7), (2, 7, 3), torch_ops.matmul),
    "Tensor.bmm": (lambda a, b: a.bmm(b), (2, 5, 7), (2, 7, 3), torch_ops.matmul),
    "F.linear": (lambda a, b: F.linear(a, b.mT), (2, 5, 7), (7, 3), lambda a, b: torch_ops.linear(a, b.mT)),
}


def _assert_restored():
    for (owner, name), original in ORIGINALS.items():
        assert getattr(owner, name) is original, f"{owner.__name__}.{name} not restored"
        assert (name in vars(owner)) == OWN[(owner, name)]


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_entry_points_are_routed(rng, name):
    call, sa, sb, reference = ENTRY_POINTS[name]
    a, b = _t(rng, sa), _t(rng, sb)
    with switch.enabled():
        with Spy() as spy:
            got = call(a, b)
    assert _products(spy.ops) == [OP]
    assert torch.equal(got, reference(a, b))
    with Spy() as spy:
        native = call(a, b)
    assert _products(spy.ops) and OP not in spy.ops and native.shape == got.shape
    _assert_restored()


def test_linear_module_with_bias_and_gradients(rng):
    layer = torch.nn.Linear(12, 5)
    x = _t(rng, (3, 4, 12)).requires_grad_()
    with switch.enabled():
        with Spy() as spy:
            y = layer(x)
        y.square().sum().backward()
    assert OP in spy.ops
    with torch.no_grad():
        ref64 = F.linear(x.double(), layer.weight.double(), layer.bias.double())
        native = F.linear(x, layer.weight, layer.bias)
    assert relative_error(y.detach(), ref64) <= 2 * relative_error(native, ref64) + 2.0 ** -21
    grads = [x.grad, layer.weight.grad, layer.bias.grad]
    x2 = x.detach().clone().requires_grad_()
    layer.zero_grad()
    torch_ops.linear(x2, layer.weight, layer.bias).square().sum().backward()
    for got, want in zip(grads, [x2.grad, layer.weight.grad, layer.bias.grad]):
        assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.int64])
def test_other_dtypes_untouched(rng, dtype):
    a = _t(rng, (6, 8)).to(dtype) if dtype != torch.int64 else torch.randint(-9, 9, (6, 8))
    b = _t(rng, (8, 4)).to(dtype) if dtype != torch.int64 else torch.randint(-9, 9, (8, 4))
    native = [a @ b, torch.matmul(a, b), torch.mm(a, b), F.linear(a, b.mT)]
    with switch.enabled(), Spy() as spy:
        got = [a @ b, torch.matmul(a, b), torch.mm(a, b), F.linear(a, b.mT)]
    assert OP not in spy.ops
    for g, n in zip(got, native):
        assert g.dtype == n.dtype and torch.equal(g, n)


def _error(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 -- comparing whatever torch raises
        return type(exc), str(exc)
    return None


@pytest.mark.parametrize("call", [
    lambda a, b: torch.mm(a, b.mT),                        # shapes torch rejects
    lambda a, b: torch.bmm(a, b),                          # 2-D operands to bmm
    lambda a, b: torch.matmul(a, b.double()),              # mixed dtypes
    lambda a, b: torch.mm(a[None], b),                     # 3-D operand to mm
    lambda a, b: F.linear(a, b),                           # weight of the wrong shape
])
def test_refused_calls_fail_as_in_torch(rng, call):
    a, b = _t(rng, (5, 7)), _t(rng, (7, 3))
    want = _error(lambda: call(a, b))
    assert want is not None
    with switch.enabled():
        assert _error(lambda: call(a, b)) == want


def test_out_subclasses_and_vmap_use_the_originals(rng):
    a, b = _t(rng, (4, 5)), _t(rng, (5, 3))

    class Logged(torch.Tensor):
        seen = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.seen.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    with switch.enabled(), Spy() as spy:
        out = torch.empty(4, 3)
        torch.matmul(a, b, out=out)
        torch.mm(a, b, out=out)
        sub = a.as_subclass(Logged) @ b
        batched = torch.vmap(torch.matmul)(a[None].expand(2, 4, 5), b[None].expand(2, 5, 3))
    assert OP not in spy.ops
    assert torch.equal(out, a @ b) and isinstance(sub, Logged) and Logged.seen
    assert torch.equal(batched[0], a @ b)


def test_nesting_counts_and_options_must_agree():
    assert not switch.is_enabled()
    with switch.enabled():
        with switch.enabled():
            assert switch.is_enabled()
        assert switch.is_enabled() and torch.matmul is not ORIGINALS[(torch, "matmul")]
        with pytest.raises(ValueError, match="already on"):
            switch.enable(order="elementwise")
        assert switch.is_enabled()
    assert not switch.is_enabled()
    _assert_restored()
    with pytest.raises(RuntimeError, match="switch is off"):
        switch.disable()
    with pytest.raises(ValueError, match="order"):
        switch.enable(order="columnwise")
    assert not switch.is_enabled()


def test_options_are_used(rng):
    a, b = _t(rng, (8, 40)), _t(rng, (40, 6))
    with switch.enabled(sb=10, order="elementwise", keep_lo_lo=True):
        got = a @ b
    assert torch.equal(got, torch_ops.matmul(a, b, sb=10, order="elementwise", keep_lo_lo=True))


def test_out_of_range_data_keep_fp32_accuracy(rng):
    a = _t(rng, (16, 64), "lognormal") * 2.0 ** 30
    b = _t(rng, (64, 8)) * 2.0 ** -40
    ref = a.double() @ b.double()
    with switch.enabled():
        got = a @ b
    assert relative_error(got, ref) <= 2 * relative_error(a @ b, ref) + 2.0 ** -21


def test_threads_nest_and_restore(rng):
    a, b = _t(rng, (6, 9)), _t(rng, (9, 4))
    want = torch_ops.matmul(a, b)
    errors, barrier = [], threading.Barrier(8)

    def worker():
        try:
            barrier.wait()
            for _ in range(15):
                with switch.enabled():
                    if not torch.equal(a @ b, want):
                        errors.append("a routed product differs")
        except Exception as exc:  # noqa: BLE001 -- reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert not switch.is_enabled()
    _assert_restored()


def test_bypass_is_per_thread(rng):
    a, b = _t(rng, (6, 9)), _t(rng, (9, 4))
    seen = {}

    def other():
        with Spy() as spy:
            a @ b
        seen["other"] = OP in spy.ops

    with switch.enabled():
        with switch.bypass():
            with Spy() as spy:
                a @ b
            seen["here"] = OP in spy.ops
            t = threading.Thread(target=other)
            t.start()
            t.join()
    assert seen == {"here": False, "other": True}


def _aot_graph_ops(fn, *args):
    """Ops of the forward graph that torch.compile (AOTAutograd) builds for fn, and its graph breaks."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    ops = []

    def forward_compiler(gm, example_inputs):
        ops.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    breaks = torch._dynamo.explain(fn)(*args).graph_break_count
    torch._dynamo.reset()
    out = torch.compile(fn, backend=aot_autograd(fw_compiler=forward_compiler), fullgraph=True)(*args)
    return ops, breaks, out


@pytest.mark.parametrize("name", ["torch.matmul", "@", "Tensor.mm", "torch.bmm", "F.linear"])
def test_compile_follows_the_switch(rng, name):
    call, sa, sb, reference = ENTRY_POINTS[name]
    a, b = _t(rng, sa), _t(rng, sb)

    def fn(a, b):
        return torch.relu(call(a, b)) * 2

    with switch.enabled():
        ops, breaks, out = _aot_graph_ops(fn, a, b)
    assert breaks == 0 and OP in ops
    assert torch.equal(out, torch.relu(reference(a, b)) * 2)
    ops, breaks, out = _aot_graph_ops(fn, a, b)  # off again: the original ops
    assert breaks == 0 and OP not in ops
    assert torch.equal(out, fn(a, b))
    torch._dynamo.reset()


def test_compiled_module_trains_through_the_switch(rng):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    x = _t(rng, (32, 8))
    with switch.enabled():
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
        compiled(x).square().mean().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model(x).square().mean().backward()
    for got, p in zip(grads, model.parameters()):
        assert torch.equal(got, p.grad)
    torch._dynamo.reset()


def _python(code, **env):
    environ = {k: v for k, v in os.environ.items() if k != switch.ENV_VAR} | env
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environ["PYTHONPATH"] = root + os.pathsep + environ.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=300)


def test_environment_variable_turns_the_switch_on_at_import():
    code = ("import torch; original = torch.matmul\n"
            "import sgemm_cube.switch as s\n"
            "assert s.is_enabled() and torch.matmul is not original\n"
            "from sgemm_cube import torch_ops; a, b = torch.randn(3, 40), torch.randn(40, 2)\n"
            "assert torch.equal(a @ b, torch_ops.matmul(a, b))\n"
            # Dynamo is first loaded while the switch is on: compile before and after turning it off.
            "f = lambda a, b: torch.matmul(a, b) + a @ b\n"
            "check = lambda: torch.equal(torch.compile(f, backend='aot_eager', fullgraph=True)(a, b), f(a, b))\n"
            "assert check()\n"
            "s.disable(); assert torch.matmul is original\n"
            "torch.compiler.reset(); assert check()\n"
            "print('ok')")
    result = _python(code, SGEMM_CUBE_ENABLE="1")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
    result = _python("import warnings; warnings.simplefilter('error')\nimport sgemm_cube.switch",
                     SGEMM_CUBE_ENABLE="maybe")
    assert result.returncode != 0 and "not understood" in result.stderr


def test_import_does_not_import_torch():
    result = _python("import sys, sgemm_cube, sgemm_cube.switch\n"
                     "assert 'torch' not in sys.modules, 'torch imported'\n"
                     "assert not sgemm_cube.switch.is_enabled(); print('ok')", SGEMM_CUBE_ENABLE="0")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
