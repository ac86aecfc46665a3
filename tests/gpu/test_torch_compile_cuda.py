"""``sgemm_cube::matmul`` under ``torch.compile`` on CUDA: run ``pytest tests/gpu -m gpu`` on a GPU.

Not part of CI (no GPU there); ``tests/sgemm_cube/test_torch_*.py`` make the same
claims on the CPU.  Checked here, with Inductor (the default backend):

* functions using the operator compile with zero graph breaks (counted by
  ``torch._dynamo.explain``) and ``fullgraph=True``, static and dynamic
  shapes; the compiled operator gives the eager operator's bits;
* results and both gradients, against float64, within twice cuBLAS SGEMM's
  error (TF32 off) on the same data plus 2**-21, for the Triton backend
  and for ``backend="auto"``;
* ``mode="reduce-overhead"`` (CUDA graphs) runs: the operator is tagged
  ``cudagraph_unsafe`` and left out of the graphs;
* the drop-in switch reaches a compiled model's products when it runs
  (zero graph breaks); ``sgemm_cube.nn.convert`` puts the operator into a
  compiled model's graph; the example's short run agrees with native FP32.
"""
import copy
import importlib.util
import pathlib

import pytest

from tests.gpu import require_gpu

torch = require_gpu()
pytestmark = pytest.mark.gpu

import sgemm_cube.nn  # noqa: E402
from sgemm_cube import switch, torch_ops  # noqa: E402
from sgemm_cube.metrics import relative_error  # noqa: E402

from tests.conftest import draw  # noqa: E402

OP = torch.ops.sgemm_cube.matmul.default
FLOOR = 2.0 ** -21


@pytest.fixture(autouse=True)
def _fresh_compile_state():
    torch.compiler.reset()
    yield
    torch.compiler.reset()
    while switch.is_enabled():
        switch.disable()


def _cuda(rng, shape, dist="normal"):
    return torch.from_numpy(draw(rng, dist, shape)).cuda()


def _net(backend):
    def net(x, w1, w2):
        h = torch.tanh(torch_ops.matmul(x, w1, backend=backend))
        return torch_ops.matmul(h, w2, backend=backend) * 0.5 + 1.0
    return net


def _reference_net(x, w1, w2):
    return torch.tanh(x @ w1) @ w2 * 0.5 + 1.0


def _grads(fn, leaves, g):
    leaves = [t.detach().clone().requires_grad_() for t in leaves]
    out = fn(*leaves)
    out.backward(g.to(out.dtype))
    return [out.detach()] + [t.grad for t in leaves]


@pytest.mark.parametrize("backend", ["cuda", "auto"])
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("dist", ["normal", "uniform01"])
def test_compiled_network_against_float64(rng, backend, dynamic, dist):
    # w1 / 64 keeps x @ w1 of order 1: a saturated tanh would make the gradients exactly 0.
    w1, w2 = _cuda(rng, (512, 768), dist) / 64, _cuda(rng, (768, 256), dist) / 16
    net = _net(backend)
    explanation = torch._dynamo.explain(net)(_cuda(rng, (384, 512), dist), w1, w2)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    torch.compiler.reset()
    compiled = torch.compile(net, fullgraph=True, dynamic=dynamic)
    for rows in (384, 1000):
        x = _cuda(rng, (rows, 512), dist)
        g = _cuda(rng, (rows, 256))
        want = _grads(_reference_net, [x.double(), w1.double(), w2.double()], g.double())
        native = _grads(_reference_net, [x, w1, w2], g)
        got = _grads(compiled, [x, w1, w2], g)
        for gi, ni, wi in zip(got, native, want):
            assert gi.dtype == torch.float32 and gi.shape == wi.shape
            assert relative_error(gi, wi) <= 2 * relative_error(ni, wi) + FLOOR


def test_compiled_operator_gives_eager_bits(rng):
    a, b = _cuda(rng, (2, 300, 500)), _cuda(rng, (500, 200))
    compiled = torch.compile(lambda a, b: torch_ops.matmul(a, b, backend="cuda"), fullgraph=True)
    assert torch.equal(compiled(a, b), torch_ops.matmul(a, b, backend="cuda"))


def test_reduce_overhead_mode_runs(rng):
    assert torch.Tag.cudagraph_unsafe in OP.tags
    w1, w2 = _cuda(rng, (256, 512)), _cuda(rng, (512, 128)) / 16
    compiled = torch.compile(_net("cuda"), mode="reduce-overhead", fullgraph=True)
    x = _cuda(rng, (128, 256))
    want = _reference_net(x.double(), w1.double(), w2.double())
    for _ in range(3):  # warm-up, record, replay
        out = compiled(x, w1, w2)
    torch.cuda.synchronize()
    assert relative_error(out, want) <= 2 * relative_error(_reference_net(x, w1, w2), want) + FLOOR


def _forward_graph_ops(model, x):
    """Ops in the AOT forward graph of the compiled model (the Inductor input)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    ops = []

    def forward_compiler(gm, example_inputs):
        ops.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
        return make_boxed_func(gm.forward)

    torch.compiler.reset()
    torch.compile(model, backend=aot_autograd(fw_compiler=forward_compiler), fullgraph=True)(x)
    torch.compiler.reset()
    return ops


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 64)).cuda()


def test_switch_routes_a_compiled_model(rng):
    # large enough for the hybrid rule to choose the emulation (34 GFLOP per layer)
    model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 2048)).cuda()
    x = _cuda(rng, (4096, 2048))
    assert torch._dynamo.explain(model)(x).graph_break_count == 0
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        native = compiled(x)
        with switch.enabled():
            out = compiled(x)  # compiled without the switch: ATen's kernels are looked up when they run
            calls = switch.routed_calls()
        want = copy.deepcopy(model).double()(x.double())
    assert sum(calls.values()) >= 2 and not torch.equal(out, native)
    assert relative_error(out, want) <= 2 * relative_error(native, want) + FLOOR


def test_converted_model_compiles(rng):
    model = sgemm_cube.nn.convert(_mlp())
    x = _cuda(rng, (1024, 256))
    assert OP in _forward_graph_ops(model, x)
    out = torch.compile(model, fullgraph=True)(x)
    out.square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_example_on_cuda(rng):
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_mlp.py"
    spec = importlib.util.spec_from_file_location("train_mlp", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    curves = example.run(steps=60, devices=("cuda",), seed=int(rng.integers(2 ** 31)), log=lambda *_: None)
    dev = {label.split()[0]: d.max() for label, d in example.deviation(curves).items()}
    assert dev["sgemm_cube"] <= max(3 * dev["native"], 1e-6), dev
