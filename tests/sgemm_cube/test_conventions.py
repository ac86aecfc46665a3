"""NumPy's and PyTorch's conventions in :func:`sgemm_cube.matmul` (issue 12, defects 1, 4, 5 and 7).

* 1: tensors that require grad give a result with a ``grad_fn``; both
  gradients are sgemm_cube products with the call's options (double
  backward too), summed over broadcast batch dimensions as torch does;
* 4: 1-D @ 1-D gives a NumPy scalar; ndarray subclasses come back as such;
* 5: errors of the type (and, for ``out``, the rules) NumPy or torch applies;
* 7: no internal warning reaches the user, and out-of-range data never turn
  into NaN, with or without ``fixup`` / the deprecated ``check_range``.
(Defect 6, bounded memory: ``tests/sgemm_cube/test_cpu_bounded_memory.py``; 2 and 3,
the switch: ``tests/sgemm_cube/test_torch_switch.py``.)
"""
import warnings

import numpy as np
import pytest

import sgemm_cube

X24 = 1.0 + 2.0 ** -11 + 2.0 ** -23  # 24 significant bits: the split keeps 22


def _selection(k, n, rng):
    p = np.zeros((k, n), np.float32)
    p[rng.integers(0, k, n), np.arange(n)] = 1.0
    return p


# ---- 1: autograd -------------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb_", [((6, 24), (24, 5)), ((2, 6, 24), (24, 5)), ((24,), (24, 5)), ((6, 24), (24,)),
                                    ((3, 1, 6, 24), (2, 24, 5)), ((24,), (24,))])
def test_gradients_flow_through_sgemm_cube_matmul(rng, sa, sb_):
    torch = pytest.importorskip("torch")
    a = torch.from_numpy(rng.standard_normal(sa).astype(np.float32)).requires_grad_()
    b = torch.from_numpy(rng.standard_normal(sb_).astype(np.float32)).requires_grad_()
    w = torch.from_numpy(rng.standard_normal(sb_).astype(np.float32)).requires_grad_()
    c = sgemm_cube.matmul(a, b)
    assert c.requires_grad and c.grad_fn is not None
    g = torch.from_numpy(rng.standard_normal(tuple(c.shape)).astype(np.float32))
    loss = (c * g).sum() + (b ** 2).sum() + (w * 0).sum()
    loss.backward()
    a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    ((a64 @ b64) * g.double()).sum().backward()
    assert a.grad.shape == a.shape and b.grad.shape == b.shape
    assert torch.allclose(a.grad.double(), a64.grad, rtol=1e-5, atol=1e-5)
    assert torch.allclose(b.grad.double(), b64.grad + 2 * b.detach().double(), rtol=1e-5, atol=1e-5)


def test_gradients_are_sgemm_cube_products_with_the_calls_options(rng):
    torch = pytest.importorskip("torch")
    # d(P^T W)/dW = P G: rows of the 24-bit upstream gradient G, as the split holds them.
    p = torch.from_numpy(_selection(24, 6, rng))
    g = torch.from_numpy((X24 * rng.choice([-1.0, 1.0], (6, 5))).astype(np.float32))
    w = torch.ones(24, 5, requires_grad=True)
    sgemm_cube.matmul(p.T.contiguous(), w, backend="cpu").backward(g)
    hi, lo = sgemm_cube.split(g.numpy())
    g22 = torch.from_numpy((hi.astype(np.float64) + lo.astype(np.float64) * 2.0 ** -12).astype(np.float32))
    assert torch.equal(w.grad, p @ g22) and not torch.equal(w.grad, p @ g)


def test_double_backward_and_no_grad(rng):
    torch = pytest.importorskip("torch")
    a = torch.from_numpy(rng.standard_normal((5, 20)).astype(np.float32)).requires_grad_()
    b = torch.from_numpy(rng.standard_normal((20, 4)).astype(np.float32)).requires_grad_()
    (ga,) = torch.autograd.grad(sgemm_cube.matmul(a, b).square().sum(), a, create_graph=True)
    (gb,) = torch.autograd.grad(ga.sum(), b)
    a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    (ga64,) = torch.autograd.grad((a64 @ b64).square().sum(), a64, create_graph=True)
    (gb64,) = torch.autograd.grad(ga64.sum(), b64)
    assert torch.allclose(gb.double(), gb64, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        assert not sgemm_cube.matmul(a, b).requires_grad
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        sgemm_cube.matmul(a, b, out=torch.empty(5, 4))


# ---- 4: NumPy's result types -------------------------------------------------------------------

def test_vector_dot_vector_is_a_numpy_scalar(rng):
    a = rng.standard_normal(24).astype(np.float32)
    for backend in ("auto", "cpu"):
        c = sgemm_cube.matmul(a, a, backend=backend)
        assert type(c) is np.float32 and type(np.matmul(a, a)) is np.float32


def test_subclasses_come_back_as_numpy_returns_them(rng):
    a = np.asmatrix(rng.standard_normal((6, 24)).astype(np.float32))
    b = rng.standard_normal((24, 5)).astype(np.float32)
    for x, y in [(a, b), (b.T.copy(), a.T)]:
        c = sgemm_cube.matmul(x, y)
        assert type(c) is type(np.matmul(x, y)) is np.matrix and c.shape == np.matmul(x, y).shape


# ---- 5: errors -----------------------------------------------------------------------------------

def test_third_positional_argument_is_sb():
    a = np.ones((3, 20), np.float32)
    with pytest.raises(TypeError, match="third positional argument is sb.*out="):
        sgemm_cube.matmul(a, a.T, np.empty((3, 3), np.float32))


@pytest.mark.parametrize("out,exc,match", [
    ([[0.0] * 3] * 3, TypeError, "must be a NumPy array"),
    (np.empty((3, 3), np.int32), TypeError, "same_kind"),
    (np.empty((3, 4), np.float32), ValueError, "shape"),
])
def test_out_errors_are_numpys(out, exc, match):
    a = np.ones((3, 20), np.float32)
    with pytest.raises(exc, match=match):
        sgemm_cube.matmul(a, a.T, out=out)
    with pytest.raises(exc):
        np.matmul(a, a.T, out=out)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_out_of_another_float_dtype_is_cast_into_as_numpy_does(rng, dtype):
    a = rng.standard_normal((3, 20)).astype(np.float32)
    out = np.zeros((3, 3), dtype)
    assert sgemm_cube.matmul(a, a.T, out=out) is out
    assert np.array_equal(out, sgemm_cube.matmul(a, a.T).astype(dtype))


@pytest.mark.parametrize("kwargs,exc", [
    (dict(scheme="fp17"), ValueError), (dict(scale="columns"), ValueError), (dict(accumulate="fma"), ValueError),
    (dict(order="random"), ValueError), (dict(check_range="no"), TypeError), (dict(fixup="yes"), TypeError),
    (dict(sb=30), ValueError),
])
@pytest.mark.parametrize("shapes", [((3, 0), (0, 4)), ((0, 5), (5, 4)), ((3, 20), (20, 4))], ids=["K=0", "M=0", "3x20x4"])
def test_unknown_options_fail_on_every_shape(kwargs, exc, shapes):
    a, b = (np.ones(s, np.float32) for s in shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(exc):
            sgemm_cube.matmul(a, b, **kwargs)


def test_torch_errors_are_torchs():
    torch = pytest.importorskip("torch")
    a = torch.ones(3, 20)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        sgemm_cube.matmul(a, torch.ones(19, 2))
    with pytest.raises(RuntimeError, match="dtype float"):
        sgemm_cube.matmul(a, a.T, out=torch.empty(3, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="to_dense"):
        sgemm_cube.matmul(a.to_sparse(), a.T)
    with pytest.warns(UserWarning, match="resized"):
        out = torch.empty(2, 2)
        assert sgemm_cube.matmul(a, a.T, out=out) is out and out.shape == (3, 3)


# ---- 7: no internal warnings, no silent NaN ------------------------------------------------------

@pytest.mark.parametrize("scale", [2.0 ** 100, 2.0 ** -100, 7e4, 1e-40])
@pytest.mark.parametrize("kwargs", [dict(), dict(fixup=False), dict(scale=None), dict(check_range=False)])
def test_no_internal_warnings_and_no_silent_nan(rng, scale, kwargs):
    a = (rng.standard_normal((8, 32)) * scale).astype(np.float32)
    b = rng.standard_normal((32, 6)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if "check_range" in kwargs:
            warnings.filterwarnings("ignore", category=DeprecationWarning)
        c = sgemm_cube.matmul(a, b, backend="cpu", **kwargs)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.isfinite(c).all() == np.isfinite(ref.astype(np.float32)).all()
    assert np.isfinite(c).all()
