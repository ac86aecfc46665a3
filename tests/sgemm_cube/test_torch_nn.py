"""Explicit modules: :class:`sgemm_cube.nn.Linear` and :func:`sgemm_cube.nn.convert`.

Claims: ``Linear`` is a drop-in ``torch.nn.Linear`` (isinstance, state_dict,
parameters) whose float32 forward and gradients are sgemm_cube's and within
twice native FP32's error against float64 (plus 2**-21); other dtypes run
torch's own linear; ``convert`` swaps every plain ``torch.nn.Linear`` in a
model in place, sharing the parameters, and leaves everything else alone.
"""
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import sgemm_cube.nn  # noqa: E402
from sgemm_cube import torch_ops  # noqa: E402
from sgemm_cube.metrics import relative_error  # noqa: E402
from tests.guarantee_data import fp32_autograd_matmul  # noqa: E402

from tests.conftest import draw  # noqa: E402

FLOOR = 2.0 ** -21


def _t(rng, shape, dist="normal"):
    return torch.from_numpy(draw(rng, dist, shape))


def test_linear_is_a_torch_linear():
    layer = sgemm_cube.nn.Linear(6, 3, sb=10, order="elementwise")
    assert isinstance(layer, torch.nn.Linear)
    assert list(layer.state_dict()) == list(torch.nn.Linear(6, 3).state_dict())
    assert "sb=10" in repr(layer) and "elementwise" in repr(layer)
    assert sgemm_cube.nn.Linear(6, 3, bias=False).bias is None
    with pytest.raises(ValueError, match="order"):
        sgemm_cube.nn.Linear(6, 3, order="rowwise")


@pytest.mark.parametrize("dist", ["normal", "uniform01", "lognormal"])
@pytest.mark.parametrize("shape", [(40,), (33, 40), (3, 17, 40)])
def test_linear_forward_and_gradients_against_float64(rng, dist, shape):
    layer = sgemm_cube.nn.Linear(40, 24)
    with torch.no_grad():
        layer.weight.copy_(_t(rng, (24, 40), dist))
        layer.bias.copy_(_t(rng, (24,), dist))
    x = _t(rng, shape, dist)
    g = _t(rng, shape[:-1] + (24,))

    def run(fn, dtype):
        leaves = [t.detach().to(dtype).requires_grad_() for t in (x, layer.weight, layer.bias)]
        out = fn(*leaves)
        out.backward(g.to(dtype))
        return [out.detach()] + [t.grad for t in leaves]

    want = run(F.linear, torch.float64)
    native = run(lambda x, w, b: fp32_autograd_matmul(x, w.T) + b, torch.float32)  # the same on every host
    x_ = x.clone().requires_grad_()
    out = layer(x_)
    out.backward(g)
    got = [out.detach(), x_.grad, layer.weight.grad, layer.bias.grad]
    for gi, ni, wi in zip(got, native, want):
        assert gi.dtype == torch.float32 and gi.shape == wi.shape
        assert relative_error(gi, wi) <= 2 * relative_error(ni, wi) + FLOOR
    assert torch.equal(got[0], torch_ops.linear(x, layer.weight, layer.bias))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_other_dtypes_run_torch_linear(rng, dtype):
    layer = sgemm_cube.nn.Linear(8, 4).to(dtype)
    x = _t(rng, (5, 8)).to(dtype)
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))


def test_convert_swaps_plain_linears_in_place(rng):
    class Custom(torch.nn.Linear):
        pass

    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(),
        torch.nn.ModuleDict({"inner": torch.nn.Linear(16, 16), "keep": Custom(16, 16)}),
        torch.nn.Linear(16, 2, bias=False))
    model.eval()
    params = {name: p for name, p in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = _t(rng, (4, 8))
    before = model[3](model[2]["inner"](model[0](x).relu()))

    assert sgemm_cube.nn.convert(model, sb=11) is model
    assert type(model[0]) is sgemm_cube.nn.Linear and type(model[2]["inner"]) is sgemm_cube.nn.Linear
    assert type(model[3]) is sgemm_cube.nn.Linear and model[3].bias is None
    assert type(model[2]["keep"]) is Custom
    assert model[0].sb == 11 and not model[0].training
    assert all(p is params[name] for name, p in model.named_parameters())  # shared, not copied
    after = model[3](model[2]["inner"](model[0](x).relu()))
    assert relative_error(after.detach(), before.detach().double()) < 1e-5

    after.square().sum().backward()
    w0 = model[0].weight.detach().clone()
    optimizer.step()  # the optimizer made before convert still updates the model's weights
    assert not torch.equal(model[0].weight, w0)


def test_convert_a_single_linear(rng):
    layer = torch.nn.Linear(5, 3)
    new = sgemm_cube.nn.convert(layer)
    assert type(new) is sgemm_cube.nn.Linear and new.weight is layer.weight and new.bias is layer.bias
    x = _t(rng, (2, 5))
    assert torch.equal(new(x), torch_ops.linear(x, layer.weight, layer.bias))
