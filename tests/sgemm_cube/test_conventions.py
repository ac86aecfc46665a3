"""NumPy's and PyTorch's conventions in :func:`sgemm_cube.matmul`.

* 1: tensors that require grad give a result with a ``grad_fn``; both
  gradients are sgemm_cube products with the call's options (double
  backward too), summed over broadcast batch dimensions as torch does;
* 4: 1-D @ 1-D gives a NumPy scalar; ndarray subclasses come back as such;
* 5: errors of the type (and, for ``out``, the rules) NumPy or torch applies;
* 7: no internal warning reaches the user, and out-of-range data never turn
  into NaN, with or without ``fixup``; NaN
  and infinities raise no warning either;
* option types are checked whatever ran before (a cached, validated option
  must not let ``1`` stand for ``True`` nor ``12.0`` for ``12``);
* NumPy's ``out`` may add loop dimensions; nested tensors are a TypeError;
  meta tensors give a meta result, as torch does; K = 0 has gradients.
(Defect 6, bounded memory: ``tests/sgemm_cube/test_cpu_bounded_memory.py``; 2 and 3,
the switch: ``tests/sgemm_cube/test_torch_switch.py``.)
"""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import sgemm_cube
from tests.guarantee_data import ieee_special_values

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


@pytest.mark.parametrize("sa,sb_", [((0,), (2, 0, 3)), ((4, 0), (0, 3)), ((2, 4, 0), (0, 3)), ((4, 0), (2, 0, 3)),
                                    ((0,), (0,)), ((2, 4, 0), (0,))])
@pytest.mark.parametrize("path", ["sgemm_cube.matmul", "operator"])
def test_k_zero_has_gradients_as_torch(sa, sb_, path):
    """K = 0: the product is zeros and so are both gradients (reshapes spelled without -1)."""
    torch = pytest.importorskip("torch")
    import sgemm_cube.torch_ops  # noqa: F401  (registers torch.ops.sgemm_cube)

    f = sgemm_cube.matmul if path == "sgemm_cube.matmul" else torch.ops.sgemm_cube.matmul
    grads = []
    for fn in (f, torch.matmul):
        a, b = torch.zeros(sa, requires_grad=True), torch.zeros(sb_, requires_grad=True)
        out = fn(a, b)
        out.sum().backward()
        grads.append((out.shape, a.grad, b.grad))
    (shape, ga, gb), (shape_t, ga_t, gb_t) = grads
    assert shape == shape_t and torch.equal(ga, ga_t) and torch.equal(gb, gb_t)


def test_k_zero_linear_layer_backward():
    torch = pytest.importorskip("torch")
    import sgemm_cube.nn

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Initializing zero-element tensors is a no-op"
        layer = sgemm_cube.nn.Linear(0, 4)
    x = torch.zeros(2, 3, 0, requires_grad=True)
    layer(x).sum().backward()
    assert layer.weight.grad.shape == (4, 0) and x.grad.shape == (2, 3, 0)
    assert torch.equal(layer.bias.grad, torch.full((4,), 6.0))


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


def test_an_out_that_requires_grad_raises_as_in_torch(rng):
    """``out=`` a tensor that requires grad, the operands not, in grad mode: torch.matmul's RuntimeError, ``out``
    left as it was (the emulation and native FP32 alike); with grad mode off it is written."""
    torch = pytest.importorskip("torch")
    a = torch.from_numpy(rng.standard_normal((5, 20)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((20, 4)).astype(np.float32))
    for backend in ("cpu", "native"):
        out = torch.zeros(5, 4, requires_grad=True)
        with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
            sgemm_cube.matmul(a, b, out=out, backend=backend)
        assert bool((out == 0).all()) and out.grad_fn is None  # left as it was
        with torch.no_grad():  # grad mode off: written, as torch.matmul writes it
            assert sgemm_cube.matmul(a, b, out=out, backend=backend) is out
        assert torch.allclose(out.detach().double(), a.double() @ b.double(), rtol=1e-5, atol=1e-6)


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
    (dict(order="random"), ValueError), (dict(fixup="yes"), TypeError),
    (dict(sb=30), ValueError),
])
@pytest.mark.parametrize("shapes", [((3, 0), (0, 4)), ((0, 5), (5, 4)), ((3, 20), (20, 4))], ids=["K=0", "M=0", "3x20x4"])
def test_unknown_options_fail_on_every_shape(kwargs, exc, shapes):
    a, b = (np.ones(s, np.float32) for s in shapes)
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
@pytest.mark.parametrize("kwargs", [dict(), dict(fixup=False), dict(scale=None)])
def test_no_internal_warnings_and_no_silent_nan(rng, scale, kwargs):
    a = (rng.standard_normal((8, 32)) * scale).astype(np.float32)
    b = rng.standard_normal((32, 6)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = sgemm_cube.matmul(a, b, backend="cpu", **kwargs)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.isfinite(c).all() == np.isfinite(ref.astype(np.float32)).all()
    assert np.isfinite(c).all()


@pytest.mark.parametrize("nan_or_inf", ["nan", "inf", "-inf", "inf*0"])
@pytest.mark.parametrize("backend", ["auto", "cpu"])
def test_special_values_raise_no_warning(rng, nan_or_inf, backend):
    """NaN and infinities are data: their outputs are native FP32's, and nothing warns (NumPy's FP32
    fix-up of their lines would say "invalid value encountered in matmul")."""
    a = rng.standard_normal((6, 32)).astype(np.float32)
    b = rng.standard_normal((32, 5)).astype(np.float32)
    if nan_or_inf == "inf*0":
        a[1, 3], b[3, :] = np.inf, 0.0
    else:
        a[1, 3] = float(nan_or_inf)
        b[7, 2] = -float(nan_or_inf) if nan_or_inf != "nan" else np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = sgemm_cube.matmul(a, b, backend=backend)
    ieee = ieee_special_values(a, b)
    assert np.array_equal(np.isnan(c), np.isnan(ieee)) and np.array_equal(np.isinf(c), np.isinf(ieee))
    assert not np.isfinite(c[1]).any()  # the special value's row: NaN or infinite everywhere


# ---- option checks do not depend on what ran before ----------------------------------------------

OPTION_TYPE_ERRORS = [dict(fixup=1), dict(fixup=0), dict(sb=12.0), dict(sb=True)]


@pytest.mark.parametrize("kwargs", OPTION_TYPE_ERRORS, ids=str)
def test_option_types_are_checked_whatever_ran_before(kwargs):
    """1 == True and 12.0 == 12 hash alike: a cache of validated options must not let the second in
    after the first ran (the cache is typed)."""
    a = np.ones((3, 20), np.float32)
    with pytest.raises(TypeError):
        sgemm_cube.matmul(a, a.T, **kwargs)
    sgemm_cube.matmul(a, a.T)
    sgemm_cube.matmul(a, a.T, sb=1, fixup=True)
    with pytest.raises(TypeError):
        sgemm_cube.matmul(a, a.T, **kwargs)


def test_option_types_in_a_fresh_process():
    """The same, in a process where no call ran first (the order the cache could hide)."""
    code = ("import numpy as np, sgemm_cube\n"
            "a = np.ones((3, 20), np.float32)\n"
            f"for kw in {OPTION_TYPE_ERRORS!r}:\n"
            "    for first in (False, True):\n"
            "        if first:\n"
            "            sgemm_cube.matmul(a, a.T, sb=1)\n"
            "        try:\n"
            "            sgemm_cube.matmul(a, a.T, **kw)\n"
            "        except TypeError:\n"
            "            continue\n"
            "        raise SystemExit(f'accepted {kw} (after a call: {first})')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- NumPy's out= with loop dimensions; torch's nested and meta tensors --------------------------

@pytest.mark.parametrize("out_shape", [(1, 3, 2), (5, 3, 2), (2, 1, 3, 2)])
def test_out_with_more_loop_dimensions_is_filled_as_numpy_does(rng, out_shape):
    a = rng.standard_normal((3, 20)).astype(np.float32)
    b = rng.standard_normal((20, 2)).astype(np.float32)
    expected = np.zeros(out_shape, np.float32)
    np.matmul(a, b, out=expected)  # accepted by NumPy: every loop index gets the product
    out = np.full(out_shape, np.nan, np.float32)
    assert sgemm_cube.matmul(a, b, out=out) is out
    assert np.array_equal(out, np.broadcast_to(sgemm_cube.matmul(a, b), out_shape))


@pytest.mark.parametrize("a_shape,out_shape", [((3, 20), (3, 1, 2)), ((3, 20), (1, 2)), ((3, 20), (2, 3, 3)),
                                               ((2, 3, 20), (3, 3, 2))])
def test_out_numpy_refuses_is_refused(a_shape, out_shape):
    a, b = np.ones(a_shape, np.float32), np.ones((20, 2), np.float32)
    with pytest.raises(ValueError):
        np.matmul(a, b, out=np.zeros(out_shape, np.float32))
    with pytest.raises(ValueError, match="shape"):
        sgemm_cube.matmul(a, b, out=np.zeros(out_shape, np.float32))


def test_nested_tensors_are_a_type_error():
    torch = pytest.importorskip("torch")
    for layout in (torch.strided, torch.jagged):
        nested = torch.nested.nested_tensor([torch.ones(2, 20), torch.ones(3, 20)], layout=layout)
        with pytest.raises(TypeError, match="nested"):
            sgemm_cube.matmul(nested, torch.ones(20, 4))
        with pytest.raises(TypeError, match="nested"):
            sgemm_cube.matmul(torch.ones(4, 20), nested.transpose(-1, -2) if layout is torch.strided else nested)


@pytest.mark.parametrize("sa,sb_", [((3, 20), (20, 2)), ((4, 3, 20), (20, 2)), ((20,), (20,)), ((3, 8), (8, 2))])
def test_meta_tensors_give_a_meta_result_as_torch(sa, sb_):
    torch = pytest.importorskip("torch")
    a, b = torch.empty(sa, device="meta"), torch.empty(sb_, device="meta")
    got, expected = sgemm_cube.matmul(a, b), torch.matmul(a, b)
    assert got.device.type == "meta" and got.shape == expected.shape and got.dtype == expected.dtype
    assert "meta" in sgemm_cube.explain(a, b).reason
