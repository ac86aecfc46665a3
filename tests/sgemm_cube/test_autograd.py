"""sgemm_cube._autograd: gradients of a product computed by the product itself.

Checked against torch's own autograd of ``torch.matmul`` in float64 (the formulas), and through
:func:`differentiable` with the CPU backend (the recording and its errors).
"""
import pytest

torch = pytest.importorskip("torch")

from sgemm_cube._autograd import differentiable, gradient_operands, gradients  # noqa: E402
from sgemm_cube.plan import make_request  # noqa: E402

SHAPES = [((5, 7), (7, 3)), ((7,), (7, 3)), ((5, 7), (7,)), ((7,), (7,)),
          ((4, 5, 7), (7, 3)),       # 2-D b against a batch: dB from one folded product
          ((5, 7), (2, 4, 7, 3)),    # 2-D a against a batch
          ((2, 1, 5, 7), (4, 7, 3))]  # broadcast batch dimensions, summed back


@pytest.mark.parametrize("shape_a, shape_b", SHAPES)
def test_gradients_are_torch_matmuls(shape_a, shape_b):
    gen = torch.Generator().manual_seed(7)
    a = torch.randn(shape_a, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(shape_b, generator=gen, dtype=torch.float64, requires_grad=True)
    c = torch.matmul(a, b)
    grad = torch.randn(c.shape, generator=gen, dtype=torch.float64)
    want_a, want_b = torch.autograd.grad(c, (a, b), grad)
    pair_a, pair_b = gradient_operands(a.detach(), b.detach(), grad)
    got_a, got_b = gradients(a.detach(), b.detach(), torch.matmul(*pair_a), torch.matmul(*pair_b))
    assert got_a.shape == a.shape and got_b.shape == b.shape
    torch.testing.assert_close(got_a, want_a, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_b, want_b, rtol=1e-12, atol=1e-12)


def test_only_the_needed_gradients_are_computed():
    a, b, grad = torch.ones(3, 4), torch.ones(4, 2), torch.ones(3, 2)
    pair_a, pair_b = gradient_operands(a, b, grad, need_a=False)
    assert pair_a is None and pair_b is not None
    grad_a, grad_b = gradients(a, b, None, torch.matmul(*pair_b))
    assert grad_a is None and grad_b.shape == b.shape


def test_differentiable_records_with_the_emulated_product():
    req = make_request(backend="cpu")
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(6, 40, generator=gen, requires_grad=True)
    b = torch.randn(40, 5, generator=gen)
    c = differentiable(req, a, b)
    assert c.requires_grad
    c.backward(torch.ones_like(c))
    # dA = 1 @ b^T, within FP32 accuracy of the float64 product.
    want = torch.ones(6, 5, dtype=torch.float64) @ b.double().T
    assert (a.grad.double() - want).abs().max().item() <= 1e-5 * want.abs().max().item()
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        differentiable(req, a, b, out=torch.empty(6, 5))
    with torch.no_grad():  # grad mode off: a plain product, nothing recorded
        assert not differentiable(req, a, b).requires_grad
