"""The public API: NumPy/torch conventions, dispatch, errors, special values."""
import numpy as np
import pytest

import sgemm_cube
from cpu_fallback import emulated_matmul
from sgemm_cube.backends import BackendUnavailableError

from .conftest import draw

def _expected(a, b, **kw):
    """Batch-by-batch model result with NumPy broadcasting, for comparison."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    a3 = np.broadcast_to(a2, batch + a2.shape[-2:]).reshape(-1, *a2.shape[-2:])
    b3 = np.broadcast_to(b2, batch + b2.shape[-2:]).reshape(-1, *b2.shape[-2:])
    out = np.stack([emulated_matmul(x, y, **kw) for x, y in zip(a3, b3)]) if a3.shape[0] else \
        np.empty((0, a2.shape[-2], b2.shape[-1]), np.float32)
    out = out.reshape(batch + (a2.shape[-2], b2.shape[-1]))
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


SHAPES = [
    ((1, 2), (2, 3)), ((7, 1), (1, 5)), ((33, 47), (47, 65)), ((5,), (5, 4)), ((4, 5), (5,)), ((6,), (6,)),
    ((3, 8, 9), (9, 4)), ((2, 1, 8, 9), (3, 9, 5)), ((4, 6), (2, 6, 3)), ((2, 3, 4, 5), (5, 2)),
]


@pytest.mark.parametrize("sa,sb_", SHAPES)
def test_shapes_and_broadcasting_match_numpy(rng, sa, sb_):
    a, b = draw(rng, "normal", sa), draw(rng, "normal", sb_)
    c = sgemm_cube.matmul(a, b)
    assert c.shape == np.matmul(a, b).shape and c.dtype == np.float32
    assert np.array_equal(c, _expected(a, b, sb=12))


def test_options_are_forwarded_exactly(rng):
    a, b = draw(rng, "uniform01", (9, 40)), draw(rng, "uniform01", (40, 7))
    for sb in (0, 6, 12):
        for order in ("termwise", "elementwise"):
            for accumulate in ("cube16", "sequential"):
                for keep in (False, True):
                    got = sgemm_cube.matmul(a, b, sb, order=order, accumulate=accumulate, keep_lo_lo=keep)
                    want = emulated_matmul(a, b, sb=sb, order=order, accumulate=accumulate, keep_lo_lo=keep)
                    assert np.array_equal(got, want)


def test_transposed_and_strided_views(rng):
    base_a = draw(rng, "normal", (40, 60))
    base_b = draw(rng, "normal", (50, 70))
    a = base_a[::2, 1:51].T          # (50, 20), non-contiguous, transposed
    b = base_b[:, ::3]               # (50, 24), strided
    a_t = a.T.copy()                 # to get the same values in (20, 50)
    c = sgemm_cube.matmul(a.T, b)
    assert np.array_equal(c, emulated_matmul(np.ascontiguousarray(a_t), np.ascontiguousarray(b)))


def test_empty_dimensions():
    z = sgemm_cube.matmul(np.ones((0, 3), np.float32), np.ones((3, 4), np.float32))
    assert z.shape == (0, 4)
    k0 = sgemm_cube.matmul(np.ones((2, 0), np.float32), np.ones((0, 3), np.float32))
    assert k0.shape == (2, 3) and np.all(k0 == 0)
    assert sgemm_cube.matmul(np.ones((0, 2, 3), np.float32), np.ones((3, 1), np.float32)).shape == (0, 2, 1)


def test_out_argument(rng):
    a, b = draw(rng, "normal", (2, 5, 6)), draw(rng, "normal", (6, 3))
    out = np.full((2, 5, 3), np.nan, np.float32)
    res = sgemm_cube.matmul(a, b, out=out)
    assert res is out and np.array_equal(out, _expected(a, b, sb=12))
    with pytest.raises(ValueError, match="shape"):
        sgemm_cube.matmul(a, b, out=np.empty((5, 3), np.float32))
    with pytest.raises(ValueError, match="float32"):
        sgemm_cube.matmul(a, b, out=np.empty((2, 5, 3), np.float64))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int64, np.complex64])
def test_wrong_dtype_is_a_type_error_that_says_what_to_do(dtype):
    a = np.ones((3, 3), dtype)
    with pytest.raises(TypeError, match="float32"):
        sgemm_cube.matmul(a, np.ones((3, 3), np.float32))
    with pytest.raises(TypeError, match="astype"):
        sgemm_cube.matmul(np.ones((3, 3), np.float32), a)


def test_python_lists_are_refused_with_advice():
    with pytest.raises(TypeError, match="float32"):
        sgemm_cube.matmul([[1.0, 2.0]], np.ones((2, 1), np.float32))


@pytest.mark.parametrize("sa,sb_", [((3, 4), (5, 2)), ((2, 3, 4), (3, 4, 2)), ((4,), (3,))])
def test_shape_mismatch(sa, sb_):
    with pytest.raises(ValueError, match="match|broadcast"):
        sgemm_cube.matmul(np.ones(sa, np.float32), np.ones(sb_, np.float32))


def test_bad_options():
    a = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="order"):
        sgemm_cube.matmul(a, a, order="diagonal")
    with pytest.raises(ValueError, match="backend"):
        sgemm_cube.matmul(a, a, backend="tpu")
    with pytest.raises(ValueError, match="accumulation model"):
        sgemm_cube.matmul(a, a, accumulate="fma")
    with pytest.raises(ValueError):
        sgemm_cube.matmul(a, a, 30)
    with pytest.raises(ValueError, match="at least one dimension"):
        sgemm_cube.matmul(np.float32(1.0) * np.ones((), np.float32), a)


def test_accumulate_is_refused_for_hardware_backends():
    a = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="CPU backend"):
        sgemm_cube.matmul(a, a, accumulate="cube16", backend="native")


def test_missing_backends_say_what_is_missing():
    status = sgemm_cube.available_backends()
    assert status["cpu"] == "available" and status["native"] == "available"
    a = np.ones((2, 2), np.float32)
    for name in ("cuda", "npu"):
        if status[name] != "available":
            with pytest.raises(BackendUnavailableError, match=name):
                sgemm_cube.matmul(a, a, backend=name)
            assert len(status[name]) > 10  # a reason, not a bare "no"


def test_range_errors(rng):
    a, b = draw(rng, "normal", (8, 16)), draw(rng, "normal", (16, 4))
    with pytest.raises(ValueError, match="32768"):
        sgemm_cube.matmul(a * np.float32(1e5), b)
    with pytest.raises(ValueError, match="row"):
        sgemm_cube.matmul(a * np.float32(1e-8), b)
    with pytest.raises(ValueError, match="column"):
        sgemm_cube.matmul(a, b * np.float32(1e-8))
    # sb=0 allows up to 65504 but not tiny rows; check_range=False opts out knowingly
    assert np.isfinite(sgemm_cube.matmul(a * np.float32(4000), b, 0)).all()
    with pytest.raises(ValueError, match="sb=0"):
        sgemm_cube.matmul(a * np.float32(2.0 ** -6), b, 0)
    assert np.isfinite(sgemm_cube.matmul(a * np.float32(2.0 ** -6), b, 0, check_range=False)).all()


def test_zero_rows_are_fine(rng):
    a = draw(rng, "normal", (5, 16))
    a[2] = 0
    c = sgemm_cube.matmul(a, draw(rng, "normal", (16, 3)))
    assert np.all(c[2] == 0)


def _special_pattern(c):
    return np.stack([np.isnan(c), c == np.inf, c == -np.inf])


@pytest.mark.parametrize("trial", range(6))
def test_nan_and_inf_propagate_as_native_sgemm(rng, trial):
    m, k, n = 9, 20, 11
    a, b = draw(rng, "normal", (m, k)), draw(rng, "normal", (k, n))
    for x in (a, b):
        idx = rng.choice(x.size, size=3, replace=False)
        x.flat[idx] = rng.choice([np.nan, np.inf, -np.inf, 0.0, 1.0], size=3)
    b[rng.integers(k), rng.integers(n)] = 1.0  # exact in FP16: lo = 0, the spurious-NaN trap
    with np.errstate(invalid="ignore"):
        native = a.astype(np.float64) @ b.astype(np.float64)
    c = sgemm_cube.matmul(a, b)
    assert np.array_equal(_special_pattern(c), _special_pattern(native))
    finite = np.isfinite(native)
    clean_a = np.where(np.isfinite(a), a, 0)
    clean_b = np.where(np.isfinite(b), b, 0)
    assert np.array_equal(c[finite], emulated_matmul(clean_a, clean_b)[finite])  # neighbours unpoisoned


def test_inf_times_exact_value_is_inf_not_nan():
    a = np.array([[np.inf, 1.0]], np.float32)
    b = np.array([[1.0], [2.0]], np.float32)   # 1.0 splits to (1, 0): inf * 0 would be NaN
    assert sgemm_cube.matmul(a, b)[0, 0] == np.inf
    a[0, 1] = -np.inf
    assert np.isnan(sgemm_cube.matmul(a, b)[0, 0])  # inf - inf, as native


def test_subnormal_inputs_do_not_crash_or_poison(rng):
    a, b = draw(rng, "normal", (6, 32)), draw(rng, "normal", (32, 5))
    a[:, 3] = np.float32(1e-40)
    b[7, :] = np.float32(-3e-42)
    c = sgemm_cube.matmul(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.isfinite(c))
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6


# ---- torch CPU tensors -------------------------------------------------------------------

def test_torch_cpu_tensors_round_trip(rng):
    torch = pytest.importorskip("torch")
    a, b = draw(rng, "normal", (2, 7, 9)), draw(rng, "normal", (9, 5))
    ta = torch.from_numpy(a)
    tb = torch.from_numpy(b.T.copy()).T  # transposed view
    c = sgemm_cube.matmul(ta, tb)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.float32 and tuple(c.shape) == (2, 7, 5)
    assert np.array_equal(c.numpy(), _expected(a, b, sb=12))
    out = torch.empty(2, 7, 5)
    assert sgemm_cube.matmul(ta, tb, out=out) is out and torch.equal(out, c)
    x = ta.requires_grad_(True)
    assert tuple(sgemm_cube.matmul(x, tb).shape) == (2, 7, 5)


def test_torch_errors():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"\.float\(\)"):
        sgemm_cube.matmul(torch.ones(2, 2, dtype=torch.float64), torch.ones(2, 2))
    with pytest.raises(TypeError, match="both"):
        sgemm_cube.matmul(torch.ones(2, 2), np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="same kind"):
        sgemm_cube.matmul(torch.ones(2, 2), torch.ones(2, 2), out=np.empty((2, 2), np.float32))


def test_torch_special_values():
    torch = pytest.importorskip("torch")
    a = torch.tensor([[np.inf, 1.0], [2.0, 3.0]])
    b = torch.tensor([[1.0, 0.0], [np.nan, 1.0]])
    c = sgemm_cube.matmul(a, b)
    assert torch.isnan(c[0, 0]) and torch.isnan(c[1, 0]) and torch.isnan(c[0, 1]) and c[1, 1] == 3.0
