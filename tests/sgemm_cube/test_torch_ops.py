"""The ``sgemm_cube::matmul`` custom operator: registration, fake tensors, compile, export, autograd.

What is claimed and checked here (CPU; ``tests/gpu/test_torch_compile_cuda.py``
repeats the compile claims on CUDA):

* ``torch.library.opcheck`` passes (schema, fake implementation, autograd
  registration, AOT dispatch with dynamic shapes) over a table of shapes;
* the fake implementation gives the real result's shape, dtype, device and
  strides, and refuses what the operator refuses;
* ``torch.compile`` traces functions using the operator, forward and
  backward, with zero graph breaks, static and dynamic shapes, bit for bit
  the eager result; ``torch.export`` keeps the operator as one node;
* the forward is :func:`sgemm_cube.matmul` with the same options (names,
  defaults, validation), bit for bit; on in-range data the two agree; data far
  outside the split's range keep FP32 accuracy either way (scaled lines, or
  lines computed in plain FP32), never an error;
* both gradients, against float64 autograd, are within twice native FP32's
  error (measured beside) plus 2**-21 (the split's 22-bit floor), for 1-D,
  batched and broadcast operands; second derivatives (four products chained
  through tanh) are FP32-level only: within 3x (native + 2**-21), measured.
"""
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import sgemm_cube  # noqa: E402
from sgemm_cube import torch_ops  # noqa: E402
from sgemm_cube.metrics import relative_error  # noqa: E402

from tests.conftest import DISTRIBUTIONS, draw  # noqa: E402
from tests.guarantee_data import fp32_autograd_matmul, fp32_matmul  # noqa: E402

#: (a shape, b shape): 1-D operands, plain, batched, broadcast batch, batch x 2-D, empty.
SHAPES = [((7,), (7,)), ((5, 7), (7,)), ((7,), (7, 3)), ((5, 7), (7, 3)), ((2, 5, 7), (7, 3)),
          ((5, 7), (2, 7, 3)), ((2, 1, 5, 7), (4, 7, 3)), ((0, 7), (7, 3)), ((5, 0), (0, 3))]
FLOOR = 2.0 ** -21  # the split keeps 22 significant bits: visible where FP32 itself is almost exact


def _t(x):
    return torch.from_numpy(x)


def _operands(rng, sa, sb, dist="normal"):
    return _t(draw(rng, dist, sa)), _t(draw(rng, dist, sb))


@pytest.mark.parametrize("sa,sb", SHAPES)
def test_opcheck(rng, sa, sb):
    a, b = _operands(rng, sa, sb)
    result = torch.library.opcheck(torch_ops.OP, (a, b), {"order": "elementwise"})
    assert all(v == "SUCCESS" for v in result.values()), result


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_fake_matches_real(rng, sa, sb, layout):
    from torch._subclasses.fake_tensor import FakeTensorMode

    a, b = _operands(rng, sa, sb)
    if layout == "transposed" and a.dim() >= 2:
        a = a.mT.contiguous().mT
    if layout == "sliced" and b.dim() >= 2:
        b = torch.cat([b, b], dim=-1)[..., ::2]
    real = torch_ops.matmul(a, b)
    with FakeTensorMode() as mode:
        fake = torch_ops.matmul(mode.from_tensor(a), mode.from_tensor(b))
    assert (fake.shape, fake.stride(), fake.dtype, fake.device) == (real.shape, real.stride(), real.dtype,
                                                                     real.device)
    assert real.shape == torch.matmul(a, b).shape


@pytest.mark.parametrize("a,b,error", [
    (torch.ones(3, 4), torch.ones(5, 2), "do not match"),
    (torch.ones(3, 4, dtype=torch.float64), torch.ones(4, 2), "float32"),
    (torch.ones(2, 3, 4), torch.ones(3, 4, 2), "broadcast"),
])
def test_fake_refuses_what_the_operator_refuses(a, b, error):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with pytest.raises((RuntimeError, ValueError, TypeError)):
        torch_ops.matmul(a, b)
    with FakeTensorMode() as mode, pytest.raises(RuntimeError, match=error):
        torch_ops.matmul(mode.from_tensor(a), mode.from_tensor(b))


def _function(x, w1, w2):
    """A small network: every product is the operator, with pointwise work between."""
    h = torch.tanh(torch_ops.matmul(x, w1)) * 0.5 + 1.0
    return torch_ops.matmul(h, w2).relu().sum(dim=-1)


@pytest.mark.parametrize("dynamic", [False, True])
def test_compile_without_graph_breaks(rng, dynamic):
    x, w1 = _operands(rng, (6, 16), (16, 24))
    w2 = _t(draw(rng, "normal", (24, 8)))
    explanation = torch._dynamo.explain(_function)(x, w1, w2)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    ops = [n.target for g in explanation.graphs for n in g.graph.nodes if n.op == "call_function"]
    assert ops.count(torch.ops.sgemm_cube.matmul.default) == 2

    torch._dynamo.reset()
    compiled = torch.compile(_function, backend="aot_eager", fullgraph=True, dynamic=dynamic)
    for rows in (6, 11):  # a second shape: recompiles (static) or reuses the symbolic graph (dynamic)
        xi = _t(draw(rng, "normal", (rows, 16)))
        leaves = [t.clone().requires_grad_() for t in (xi, w1, w2)]
        eager_leaves = [t.clone().requires_grad_() for t in (xi, w1, w2)]
        out, eager = compiled(*leaves), _function(*eager_leaves)
        assert torch.equal(out, eager)
        out.sum().backward()
        eager.sum().backward()
        for got, want in zip(leaves, eager_leaves):
            assert torch.equal(got.grad, want.grad)


def test_export_keeps_one_node(rng):
    class Net(torch.nn.Module):
        def forward(self, a, b):
            return torch_ops.matmul(a, b, order="elementwise") + 1

    a, b = _operands(rng, (2, 5, 7), (7, 3))
    exported = torch.export.export(Net(), (a, b))
    nodes = [n for n in exported.graph.nodes if n.op == "call_function"]
    assert [n.target for n in nodes].count(torch.ops.sgemm_cube.matmul.default) == 1
    assert torch.equal(exported.module()(a, b), Net()(a, b))


def _no_subnormal_data(rng, shape):
    """Values sign * [1, 2) * 2**e, e in [-6, 6]: no FP16 subnormal in either part of the split."""
    mant = rng.uniform(1.0, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return _t((mant * 2.0 ** rng.integers(-6, 7, shape)).astype(np.float32))


@pytest.mark.parametrize("order", ["termwise", "elementwise"])
@pytest.mark.parametrize("scheme", ["fp16x3", "fp16x4"])
@pytest.mark.parametrize("sa,sb", [((33, 40), (40, 17)), ((3, 9, 40), (40, 5)), ((40,), (2, 40, 6))])
def test_scaling_is_exact_in_range(rng, sa, sb, order, scheme):
    """In-range data: scale="auto" scales no line, so it gives scale=None's bits."""
    a, b = _no_subnormal_data(rng, sa), _no_subnormal_data(rng, sb)
    got = torch_ops.matmul(a, b, order=order, scheme=scheme)
    assert torch.equal(got, sgemm_cube.matmul(a, b, order=order, scheme=scheme))
    assert torch.equal(got, torch_ops.matmul(a, b, order=order, scheme=scheme, scale=None))


@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("scale_a,scale_b", [(0, 0), (24, 0), (-40, 0), (30, -60), (-20, -20)])
def test_accuracy_any_range(rng, dist, scale_a, scale_b):
    a = draw(rng, dist, (40, 200), scale_a)
    b = draw(rng, dist, (200, 30), scale_b)
    b[:, 0] *= np.float32(2.0 ** -50)  # one column far below the rest
    ref = a.astype(np.float64) @ b.astype(np.float64)
    fp32 = fp32_matmul(a, b)  # native FP32, the same on every host
    native = relative_error(fp32, ref)
    got = relative_error(torch_ops.matmul(_t(a), _t(b)), ref)
    assert got <= 2 * native + FLOOR, (got, native)
    ref0 = ref[:, 0]  # the tiny column keeps its own accuracy (row/column scaling, not one global scale)
    assert relative_error(torch_ops.matmul(_t(a), _t(b))[:, 0], ref0) <= 2 * relative_error(fp32[:, 0], ref0) + FLOOR
    # Without scaling no error either: the lines the split cannot hold are computed in plain FP32.
    plain = torch_ops.matmul(_t(a), _t(b), scale=None)
    assert relative_error(plain, ref) <= 2 * native + FLOOR, (relative_error(plain, ref), native)
    assert relative_error(plain[:, 0], ref0) <= 2 * relative_error(fp32[:, 0], ref0) + FLOOR


def test_special_values_propagate():
    a = torch.tensor([[float("inf"), 1.0], [2.0, 3.0], [float("nan"), 0.0]]) * 2.0 ** 40
    b = torch.tensor([[1.0, 0.0], [-1.0, 1.0]])
    got, want = torch_ops.matmul(a, b), a @ b
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    assert torch.equal(got[~torch.isnan(got)], want[~torch.isnan(want)])


def _grads(fn, leaves, grad_out):
    leaves = [t.detach().clone().requires_grad_() for t in leaves]
    out = fn(*leaves)
    out.backward(grad_out.to(out.dtype))
    return out.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("dist", ["normal", "uniform01", "lognormal", "wide_exponent"])
@pytest.mark.parametrize("sa,sb", [((48, 96), (96, 40)), ((64,), (64, 20)), ((30, 50), (50,)),
                                   ((3, 24, 64), (64, 32)), ((24, 64), (3, 64, 32)), ((2, 1, 16, 40), (3, 40, 24))])
def test_gradients_against_float64(rng, dist, sa, sb):
    a, b = _operands(rng, sa, sb, dist)
    g = _t(draw(rng, "normal", tuple(torch.matmul(a, b).shape)))
    ref, ref_grads = _grads(torch.matmul, [a.double(), b.double()], g.double())
    _, native_grads = _grads(fp32_autograd_matmul, [a, b], g)
    out, grads = _grads(torch_ops.matmul, [a, b], g)
    assert relative_error(out, ref) <= 2 * relative_error(fp32_matmul(a, b), ref) + FLOOR
    for got, native, want in zip(grads, native_grads, ref_grads):
        assert got.shape == want.shape and got.dtype == torch.float32
        err, native_err = relative_error(got, want), relative_error(native, want)
        assert err <= 2 * native_err + FLOOR, (err, native_err)


def test_gradient_of_a_network_against_float64(rng):
    """gradcheck in float64-reference form: a two-layer function, gradients for every input."""
    x, w1 = _operands(rng, (32, 48), (48, 64))
    w2 = _t(draw(rng, "normal", (64, 16)) / 8)

    def net(matmul):
        return lambda x, w1, w2: torch.tanh(matmul(torch.tanh(matmul(x, w1)), w2))

    g = _t(draw(rng, "normal", (32, 16)))
    _, want = _grads(net(torch.matmul), [x.double(), w1.double(), w2.double()], g.double())
    _, native = _grads(net(fp32_autograd_matmul), [x, w1, w2], g)
    _, got = _grads(net(torch_ops.matmul), [x, w1, w2], g)
    for gi, ni, wi in zip(got, native, want):
        assert relative_error(gi, wi) <= 2 * relative_error(ni, wi) + FLOOR


def test_second_derivatives_against_float64(rng):
    """Second derivatives (four products chained through tanh, K = 20) are FP32-level, not within twice
    native FP32's error: the guarantee is per product, and the split's 22 bits show at K = 20.

    Measured over 301 seeds: err / max(native, 2**-24) median 1.36, 90th percentile 2.19,
    maximum 4.46 (above 2 on 15% of seeds); err / (native + 2**-21) at most 2.54.  The previous bound,
    ``3 * native + 2**-21``, failed on 4 of those seeds (1.3%); the fixed data give err 7.5e-7, native 5.8e-7.
    """
    a, b = _operands(rng, (12, 20), (20, 9))

    def hvp(matmul, a, b):
        a = a.clone().requires_grad_()
        (ga,) = torch.autograd.grad((torch.tanh(matmul(a, b)) ** 2).sum(), a, create_graph=True)
        (gga,) = torch.autograd.grad((ga * ga).sum(), a)
        return gga

    want = hvp(torch.matmul, a.double(), b.double())
    err = relative_error(hvp(torch_ops.matmul, a, b), want)
    native = relative_error(hvp(fp32_autograd_matmul, a, b), want)
    assert err <= 3 * (native + FLOOR), (err, native)


def test_only_needed_gradients_are_computed(rng):
    a, b = _operands(rng, (8, 6), (6, 4))
    a.requires_grad_()
    torch_ops.matmul(a, b).sum().backward()
    assert a.grad is not None and b.grad is None


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(10,), (6, 10), (2, 3, 10)])
def test_linear_matches_functional_linear(rng, shape, bias):
    x = _t(draw(rng, "normal", shape))
    w = _t(draw(rng, "normal", (4, 10)))
    bvec = _t(draw(rng, "normal", (4,))) if bias else None
    ref = torch.nn.functional.linear(x.double(), w.double(), None if bvec is None else bvec.double())
    got = torch_ops.linear(x, w, bvec)
    native = fp32_matmul(x, w.T) + (0 if bvec is None else bvec)
    assert got.shape == ref.shape
    assert relative_error(got, ref) <= 2 * relative_error(native, ref) + FLOOR


def test_options_reach_the_backend(rng):
    a, b = _operands(rng, (16, 64), (64, 8))
    for kwargs in [dict(sb=8), dict(order="elementwise"), dict(scheme="fp16x4"), dict(scheme="bf16x9"),
                   dict(accumulate="sequential"), dict(fixup=False)]:
        assert torch.equal(torch_ops.matmul(a, b, **kwargs), sgemm_cube.matmul(a, b, **kwargs))
        assert torch.equal(torch_ops.matmul(a, b, scale=None, **kwargs), sgemm_cube.matmul(a, b, scale=None, **kwargs))
    assert torch.equal(torch_ops.matmul(a, b, scale="rows"), sgemm_cube.matmul(a, b, scale="rows"))
    with pytest.raises(ValueError, match="order"):
        torch_ops.matmul(a, b, order="columnwise")


@pytest.mark.parametrize("imports", ["import torch, sgemm_cube", "import sgemm_cube, torch",
                                     "import sgemm_cube; import torch.nn"])
def test_documented_names_work_after_import_sgemm_cube(imports):
    """README's PyTorch block: sgemm_cube.nn, sgemm_cube.torch_ops and torch.ops.sgemm_cube.matmul work after
    ``import sgemm_cube``, whichever of torch and sgemm_cube is imported first (a fresh process each)."""
    code = (f"{imports}\n"
            "a, b = torch.randn(4, 20), torch.randn(20, 3)\n"
            "c = torch.ops.sgemm_cube.matmul(a, b)\n"
            "model = sgemm_cube.nn.convert(torch.nn.Linear(20, 3))\n"
            "assert isinstance(model, sgemm_cube.nn.Linear) and sgemm_cube.torch_ops.OP is not None\n"
            "print(tuple(c.shape))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "(4, 3)", out.stderr
    assert out.stderr == ""


def test_numpy_users_do_not_import_torch():
    code = ("import sys, numpy as np, sgemm_cube\n"
            "sgemm_cube.matmul(np.ones((4, 20), np.float32), np.ones((20, 3), np.float32))\n"
            "try:\n    sgemm_cube.nope\nexcept AttributeError as exc:\n    print(exc)\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["module 'sgemm_cube' has no attribute 'nope'", "False"]
