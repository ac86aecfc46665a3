"""sgemm_cube.product: the operands' checks and shapes, the backend by device, out= handling, compute's result.

The arithmetic of each backend has its own tests (``tests/sgemm_cube/backends/``); here the products
are small and checked against the CPU backend itself, so that what is tested is this module's routing.
"""
import warnings

import numpy as np
import pytest

from sgemm_cube import product
from sgemm_cube.plan import make_request

REQ = make_request(backend="cpu")


def _pair(rng, shape_a, shape_b):
    return (rng.standard_normal(shape_a).astype(np.float32), rng.standard_normal(shape_b).astype(np.float32))


@pytest.mark.parametrize("shape_a, shape_b, result, batch", [
    ((5, 7), (7, 3), (5, 3), ()),
    ((7,), (7, 3), (3,), ()),              # 1-D a: a row vector, its dimension dropped again
    ((5, 7), (7,), (5,), ()),              # 1-D b: a column vector
    ((7,), (7,), (), ()),                  # a dot product: a scalar
    ((2, 1, 5, 7), (4, 7, 3), (2, 4, 5, 3), (2, 4)),   # batch dimensions broadcast as np.matmul's
])
def test_operands_have_numpy_matmul_shapes(rng, shape_a, shape_b, result, batch):
    a, b = _pair(rng, shape_a, shape_b)
    ops = product.Operands(a, b)
    assert ops.result_shape == result == np.matmul(a, b).shape
    assert ops.batch == batch
    a3, b3 = ops.views()
    assert a3.shape == (ops.nb, ops.m, ops.k) and b3.shape == (ops.nb, ops.k, ops.n)


@pytest.mark.parametrize("a, b, exc, match", [
    (np.ones((2, 3), np.float32), np.ones((4, 2), np.float32), ValueError, "a has 3 columns, b has 4 rows"),
    (np.ones((2, 2, 3), np.float32), np.ones((3, 3, 2), np.float32), ValueError, "do not broadcast"),
    (np.ones((), np.float32), np.ones((2,), np.float32), ValueError, "at least one dimension"),
    (np.ones((2, 2), np.float64), np.ones((2, 2), np.float32), TypeError, "astype"),
])
def test_operand_errors_name_the_problem(a, b, exc, match):
    with pytest.raises(exc, match=match):
        product.Operands(a, b)


def test_the_backend_follows_the_device():
    torch = pytest.importorskip("torch")
    assert product.select_backend(np.ones((2, 2), np.float32)) == "cpu"
    assert product.select_backend(torch.ones(2, 2)) == "cpu"
    assert product.select_backend(torch.ones(2, 2), backend="native") == "native"
    assert product.select_backend(torch.ones(2, 2, device="meta")) == "native"  # no values to compute with


def test_compute_writes_out_in_place_and_casts_as_numpy(rng):
    a, b = _pair(rng, (6, 40), (40, 5))
    want = product.compute(REQ, a, b)
    out = np.full((6, 5), 7.0, np.float32)
    assert product.compute(REQ, a, b, out) is out
    np.testing.assert_array_equal(out, want)
    out64 = np.zeros((6, 5), np.float64)  # same_kind cast, as np.matmul(a, b, out=out64)
    product.compute(REQ, a, b, out64)
    np.testing.assert_array_equal(out64, want.astype(np.float64))
    with pytest.raises(ValueError, match=r"out has shape \(5, 6\)"):
        product.compute(REQ, a, b, np.zeros((5, 6), np.float32))
    with pytest.raises(TypeError, match="same_kind"):
        product.compute(REQ, a, b, np.zeros((6, 5), np.int32))


def test_out_overlapping_an_operand_gets_the_product_of_the_inputs(rng):
    """out= aliasing a reads the inputs before writing (a temporary), as np.matmul does."""
    a, b = _pair(rng, (8, 8), (8, 8))
    want = product.compute(REQ, a, b)
    product.compute(REQ, a, b, out=a)
    np.testing.assert_array_equal(a, want)


def test_alpha_scales_every_output_once(rng):
    a, b = _pair(rng, (4, 24), (24, 3))
    np.testing.assert_array_equal(product.compute(REQ, a, b, alpha=2.0), 2 * product.compute(REQ, a, b))


def test_empty_and_k0_products(rng):
    assert product.compute(REQ, np.ones((0, 3), np.float32), np.ones((3, 4), np.float32)).shape == (0, 4)
    zero_k = product.compute(REQ, np.ones((2, 0), np.float32), np.ones((0, 4), np.float32))
    assert zero_k.shape == (2, 4) and not zero_k.any()


def test_resize_output_warns_as_torch_does_for_nonempty_out():
    torch = pytest.importorskip("torch")
    out = torch.zeros(2, 2)
    with pytest.warns(UserWarning, match="was resized"):
        product.resize_output(out, (3, 1))
    assert tuple(out.shape) == (3, 1)
    empty = torch.zeros(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty out is resized silently, as torch does
        product.resize_output(empty, (2, 2))
    assert tuple(empty.shape) == (2, 2)
