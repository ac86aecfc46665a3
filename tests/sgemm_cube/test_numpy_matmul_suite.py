"""NumPy's own ``np.matmul`` tests, unmodified, run against :func:`sgemm_cube.matmul` for float32.

NumPy ships its test suite in the wheel: ``MatmulCommon`` and ``TestMatmul``
live in ``numpy/_core/tests/test_multiarray.py`` (``numpy/core/tests`` before
NumPy 2).  Their tests call ``self.matmul``; the subclasses below set it to a
dispatcher that sends every call whose operands are float32 arrays (and
``out=``, if given, a float32 array) to ``sgemm_cube.matmul`` and everything
else -- the other dtypes of ``MatmulCommon.types`` (bool, integers, float16,
float64, longdouble, complex, object), mixed dtypes, extra keywords -- to
``np.matmul``.  Each inherited test is collected under the subclasses only:
this module imports NumPy's test *module*, never its ``Test*`` classes, so
pytest does not collect ``TestMatmul`` a second time.

One subclass, ``TestNumpyMatmulSuiteEmulated``, with ``backend="cpu"``, so
the FP16 split and the three FP16 products run on every float32 call,
whatever K.  (With the default ``backend="auto"`` the suite would test
NumPy's own float32 matmul: its operands all have K < 16, where ``auto``
runs native FP32.  For the same reason the checks below run ``backend="cpu"``,
and ``auto`` only where K >= 16.)

NumPy's float32 checks are exact (``assert_equal``) on small integer-valued
data; sgemm_cube must match there (the split holds such values exactly).

The rest of the module adds float32 checks that NumPy's ``TestMatmul``
makes only on float64 or through ``np.matmul`` directly
(``test_dot_equivalent``, ``test_dot_equivalent_matrix_matrix_blastypes``,
``TestMethods.test_matmul_out``, ``TestMatmulInplace.test_shapes``,
``test_out_arg``, ``test_empty_out``, ``test_out_contiguous``), subclass
preservation (``np.matrix``) and exact integer-valued products with K >= 16.

If NumPy's test module cannot be imported (a NumPy build without its tests,
a missing test-only dependency), ``test_numpy_test_module_imports`` FAILS
with the import error: nothing is skipped.
"""
from __future__ import annotations

import collections
import importlib
import itertools
import traceback
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal, assert_equal

import sgemm_cube
from sgemm_cube.backends import get_backend

# --------------------------------------------------------------------------- NumPy's test module

_NP_TEST_MODULES = ("numpy._core.tests.test_multiarray", "numpy.core.tests.test_multiarray")
_np_tests = None
_import_errors: list[str] = []
for _name in _NP_TEST_MODULES:
    try:
        with warnings.catch_warnings():  # marks NumPy's own conftest registers (thread_unsafe, ...)
            warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
            _np_tests = importlib.import_module(_name)
        break
    except Exception:  # noqa: BLE001  (any failure is reported by test_numpy_test_module_imports)
        _import_errors.append(f"import {_name}:\n{traceback.format_exc()}")


def test_numpy_test_module_imports():
    """NumPy's matmul tests are importable here; if not, fail (never skip) with the reason."""
    if _np_tests is None:
        pytest.fail(f"NumPy {np.__version__}: cannot import NumPy's test module, so its TestMatmul "
                    f"suite did not run against sgemm_cube:\n" + "\n".join(_import_errors), pytrace=False)
    assert hasattr(_np_tests, "TestMatmul") and hasattr(_np_tests, "MatmulCommon")
    assert "f" in _np_tests.MatmulCommon.types  # float32 is among the dtypes NumPy's tests loop over


# --------------------------------------------------------------------------- the dispatcher

def _is_f32_array(x) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == np.float32


class MatmulDispatcher:
    """``np.matmul``'s signature; float32 array operands (and float32 ``out``) go to ``sgemm_cube.matmul``.

    ``calls`` counts where each call went (``"sgemm_cube"`` / ``"numpy"``).
    """

    def __init__(self, **options):
        self.options = options
        self.calls = collections.Counter()

    def routes(self, args, kwargs) -> bool:
        if len(args) not in (2, 3) or set(kwargs) - {"out"}:
            return False
        a, b = args[:2]
        out = args[2] if len(args) == 3 else kwargs.get("out")
        if isinstance(out, tuple) and len(out) == 1:  # ufunc spelling out=(arr,)
            out = out[0]
        return _is_f32_array(a) and _is_f32_array(b) and (out is None or _is_f32_array(out))

    def __call__(self, *args, **kwargs):
        if self.routes(args, kwargs):
            a, b = args[:2]
            out = args[2] if len(args) == 3 else kwargs.get("out")
            if isinstance(out, tuple):
                out = out[0]
            self.calls["sgemm_cube"] += 1
            return sgemm_cube.matmul(a, b, out=out, **self.options)
        self.calls["numpy"] += 1
        return np.matmul(*args, **kwargs)


_emulated = MatmulDispatcher(backend="cpu")

if _np_tests is not None:
    class TestNumpyMatmulSuiteEmulated(_np_tests.TestMatmul):
        """NumPy's ``TestMatmul`` (and ``MatmulCommon``), float32 through ``sgemm_cube.matmul(backend="cpu")``:
        the FP16 split emulation runs on every float32 call."""

        matmul = staticmethod(_emulated)

    _SUITE_CLASSES = {"cpu": TestNumpyMatmulSuiteEmulated}
else:
    _SUITE_CLASSES = {}


# --------------------------------------------------------------------------- the dispatcher really routes

#: MatmulCommon tests whose loops over ``types`` include float32 ("f").
_FLOAT32_TESTS = ("test_exceptions", "test_shapes", "test_result_types", "test_scalar_output",
                  "test_vector_vector_values", "test_vector_matrix_values", "test_matrix_vector_values",
                  "test_matrix_matrix_values")


class _CountingRun:
    def __init__(self, run):
        self.run, self.n = run, 0

    def __call__(self, *args, **kwargs):
        self.n += 1
        return self.run(*args, **kwargs)


def test_dispatcher_sends_float32_to_sgemm_cube(monkeypatch):
    """Rerun NumPy's float32-bearing tests with fresh counters: float32 calls reach sgemm_cube, the rest NumPy.

    (Independent of test order: the tests are run here, on a fresh dispatcher.)
    The CPU backend's emulation (``backends.cpu.run``) must run for each of them.
    """
    if _np_tests is None:
        pytest.fail("NumPy's test module did not import (see test_numpy_test_module_imports)")
    dispatcher = MatmulDispatcher(backend="cpu")
    cpu = get_backend("cpu")
    counting = _CountingRun(cpu.run)
    monkeypatch.setattr(cpu, "run", counting)
    seen = collections.Counter()
    real = sgemm_cube.matmul

    def spy(a, b, **kw):
        seen[(a.dtype.str, b.dtype.str)] += 1
        return real(a, b, **kw)

    monkeypatch.setattr(sgemm_cube, "matmul", spy)

    suite = type("Suite", (_np_tests.TestMatmul,), {"matmul": staticmethod(dispatcher)})()
    for name in _FLOAT32_TESTS:
        getattr(suite, name)()
    n = dispatcher.calls["sgemm_cube"]
    # float32 (NumPy 2.4): 9 shape errors + 4 shapes + 4 result types + 2 scalar outputs + 2 vector-vector
    # + 2 vector-matrix + 2 matrix-vector + 5 matrix-matrix = 30 calls; the 18 other dtypes go to NumPy.
    assert n >= 25, dispatcher.calls
    assert dispatcher.calls["numpy"] > 10 * n, dispatcher.calls
    assert set(seen) == {("<f4", "<f4")}, seen          # nothing but float32 reached sgemm_cube
    assert sum(seen.values()) == n
    # every successful float32 call ran the emulation (the 9 shape errors are refused before)
    assert counting.n >= n - 9, (counting.n, n)


def test_suite_classes_collected_once():
    """pytest collects the inherited tests under the subclasses only, not NumPy's TestMatmul again."""
    if _np_tests is None:
        pytest.fail("NumPy's test module did not import (see test_numpy_test_module_imports)")
    names = [k for k, v in globals().items() if isinstance(v, type) and k.startswith("Test")]
    assert sorted(names) == ["TestNumpyMatmulSuiteEmulated"]
    for cls in _SUITE_CLASSES.values():
        assert cls.__mro__[1] is _np_tests.TestMatmul
        assert {"test_out_arg", "test_matrix_matrix_values", "test_dot_equivalent"} <= set(dir(cls))


# --------------------------------------------------------------------------- float32 versions of NumPy's checks

#: The checks with K < 16 run the emulation only: there ``auto`` would run native FP32, NumPy's own matmul.
BACKENDS = ["cpu"]
#: Where K >= 16, ``auto`` runs the emulation too, through the planner's choice.
BACKENDS_LARGE_K = ["auto", "cpu"]


def _mm(backend):
    return (lambda a, b, **kw: sgemm_cube.matmul(a, b, **kw)) if backend == "auto" else \
        (lambda a, b, **kw: sgemm_cube.matmul(a, b, backend=backend, **kw))


_m1 = np.arange(15.).reshape(5, 3)
_m2 = np.arange(21.).reshape(3, 7)
_m3 = np.arange(30.).reshape(5, 6)[:, ::2]  # non-contiguous
_vc = np.arange(10.)
_vr = np.arange(6.)
_m0 = np.zeros((3, 0))
# TestMatmul.test_dot_equivalent's argument list (NumPy runs it with float64 only).
_DOT_EQUIVALENT = [
    (_m1, _m2), (_m2.T, _m1.T), (_m2.T.copy(), _m1.T), (_m2.T, _m1.T.copy()),
    (_m1, _m1.T), (_m1.T, _m1), (_m1, _m3.T), (_m3, _m1.T), (_m3, _m3.T), (_m3.T, _m3),
    (_m3, _m2), (_m2.T, _m3.T), (_m2.T.copy(), _m3.T),
    (_m1, _vr[:3]), (_vc[:5], _m1), (_m1.T, _vc[:5]), (_vr[:3], _m1.T),
    (_m1, _vr[::2]), (_vc[::2], _m1), (_m1.T, _vc[::2]), (_vr[::2], _m1.T),
    (_m3, _vr[:3]), (_vc[:5], _m3), (_m3.T, _vc[:5]), (_vr[:3], _m3.T),
    (_m3, _vr[::2]), (_vc[::2], _m3), (_m3.T, _vc[::2]), (_vr[::2], _m3.T),
    (_m0, _m0.T), (_m0.T, _m0), (_m1, _m0), (_m0.T, _m1.T),
]


def _f32_view(x):
    """``x`` in float32 with the same layout: a view of a float32 copy of its base, same strides in elements."""
    base = x
    while isinstance(base.base, np.ndarray):
        base = base.base
    flat = np.ascontiguousarray(base).astype(np.float32).reshape(-1)
    offset = (x.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // x.itemsize
    return np.lib.stride_tricks.as_strided(flat[offset:], shape=x.shape,
                                           strides=tuple(s // x.itemsize * 4 for s in x.strides))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("i", range(len(_DOT_EQUIVALENT)))
def test_dot_equivalent_float32(i, backend):
    """TestMatmul.test_dot_equivalent in float32, with the same (non-)contiguity: equal to np.dot, exactly."""
    a64, b64 = _DOT_EQUIVALENT[i]
    a, b = _f32_view(a64), _f32_view(b64)
    assert a.strides == tuple(s // 2 for s in a64.strides) and b.strides == tuple(s // 2 for s in b64.strides)
    mm = _mm(backend)
    r1 = mm(a, b)
    r2 = np.dot(a, b)
    assert_equal(r1, r2)
    assert_equal(r1, np.dot(a64, b64).astype(np.float32))
    assert np.asarray(r1).dtype == np.float32 and np.shape(r1) == np.shape(r2)
    assert_equal(r1, mm(a.copy(), b.copy()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dot_equivalent_matrix_matrix_blastypes_float32(backend):
    """TestMatmul.test_dot_equivalent_matrix_matrix_blastypes (NumPy gh-29164) for float32: every C/F,
    contiguous/strided combination of a, b and out; the result is written into out and returned."""
    modes = list(itertools.product(["C", "F"], [True, False]))

    def apply_mode(m, mode):
        order, is_contiguous = mode
        if is_contiguous:
            return m.copy() if order == "C" else m.T.copy().T
        retval = np.zeros((m.shape[0] * 2, m.shape[1] * 2), dtype=m.dtype, order=order)[::2, ::2]
        retval[...] = m
        return retval

    m1 = _m1.astype(np.float32)
    m2 = _m2.astype(np.float32)
    dot_res = np.dot(m1, m2)
    mo = np.zeros_like(dot_res)
    mm = _mm(backend)
    for mode in itertools.product(*[modes] * 3):
        m1_, m2_, mo_ = [apply_mode(*x) for x in zip([m1, m2, mo], mode)]
        res = mm(m1_, m2_, out=mo_)
        assert res is mo_, mode
        assert_equal(mo_, dot_res, err_msg=str(mode))


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_out_overlapping_float32(backend):
    """TestMethods.test_matmul_out in float32: out is an operand, or a reversed view of one."""
    mm = _mm(backend)
    a = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    b = np.matmul(a, a)
    c = mm(a, a, out=a)
    assert c is a
    assert_equal(c, b)
    a = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    c = mm(a, a, out=a[::-1, ...])
    assert c.base is a.base
    assert_equal(c, b)


_INPLACE_SHAPES = {  # TestMatmulInplace.SHAPES, sizes cut down (the 10**5 / 10**4 rows to 10**3 / 10**2)
    "2d_large": ((10**3, 10), (10, 10)),
    "3d_large": ((10**2, 10, 10), (1, 10, 10)),
    "1d": ((3,), (3,)),
    "2d_1d": ((3, 3), (3,)),
    "1d_2d": ((3,), (3, 3)),
    "2d_broadcast": ((3, 3), (3, 1)),
    "2d_broadcast_reverse": ((1, 3), (3, 3)),
    "3d_broadcast1": ((3, 3, 3), (1, 3, 1)),
    "3d_broadcast2": ((3, 3, 3), (1, 3, 3)),
    "3d_broadcast3": ((3, 3, 3), (3, 3, 1)),
    "3d_broadcast_reverse1": ((1, 3, 3), (3, 3, 3)),
    "3d_broadcast_reverse2": ((3, 1, 3), (3, 3, 3)),
    "3d_broadcast_reverse3": ((1, 1, 3), (3, 3, 3)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("a_shape,b_shape", _INPLACE_SHAPES.values(), ids=_INPLACE_SHAPES)
def test_inplace_shapes_float32(a_shape, b_shape, backend):
    """TestMatmulInplace.test_shapes as ``matmul(a, b, out=a)`` in float32: same object, NumPy's values,
    and a ValueError where ``numpy.matmul`` raises one.  (NumPy's ``a @= b`` refuses more shapes than
    ``matmul(a, b, out=a)``: out may add loop dimensions, so a (3,) ``a`` holds a 1-D @ 1-D scalar
    three times, and a (3, 3) one a (3, 3) @ (3,) product in each row.)"""
    a = np.arange(np.prod(a_shape), dtype=np.float32).reshape(a_shape) / 64
    b = np.arange(np.prod(b_shape), dtype=np.float32).reshape(b_shape) / 64
    mm = _mm(backend)
    try:
        ref = np.matmul(a.copy(), b, out=a.copy())
    except ValueError:
        with pytest.raises(ValueError):
            mm(a, b, out=a)
        return
    a_id = id(a)
    res = mm(a, b, out=a)
    assert res is a and id(a) == a_id
    assert a.dtype == np.float32 and a.shape == a_shape
    assert_array_equal(a, ref)  # multiples of 1/64 below 2**11 * K: exact in both


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_arg_float32(backend):
    """TestMatmul.test_out_arg in float32 through the dispatcher: out positional and keyword, returned as is."""
    dispatcher = MatmulDispatcher(backend=backend)
    a = np.ones((5, 2), dtype=np.float32)
    b = np.array([[1, 3], [5, 7]], dtype=np.float32)
    tgt = np.dot(a, b)
    out = np.zeros((5, 2), dtype=np.float32)
    assert dispatcher(a, b, out) is out
    assert_array_equal(out, tgt, err_msg="out positional argument")
    out = np.zeros((5, 2), dtype=np.float32)
    assert dispatcher(a, b, out=out) is out
    assert_array_equal(out, tgt, err_msg="out keyword argument")
    assert dispatcher.calls == {"sgemm_cube": 2}
    # A float32 product into an int32 out: NumPy refuses (TypeError, same_kind casting); so must sgemm_cube.
    with pytest.raises((TypeError, ValueError)):
        sgemm_cube.matmul(a, b, out=np.zeros((5, 2), dtype=np.int32), **dispatcher.options)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_out_float32(backend):
    """TestMatmul.test_empty_out in float32: an out of another shape is refused even when the batch is empty."""
    mm = _mm(backend)
    arr = np.ones((0, 1, 1), dtype=np.float32)
    res = mm(arr, arr)
    assert res.shape == (0, 1, 1) and res.dtype == np.float32
    with pytest.raises(ValueError):
        mm(arr, arr, out=np.ones((1, 1, 1), dtype=np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_contiguous_float32(backend):
    """TestMatmul.test_out_contiguous in float32: non-contiguous and transposed out, matrix and vector."""
    mm = _mm(backend)
    a = np.ones((5, 2), dtype=np.float32)
    b = np.array([[1, 3], [5, 7]], dtype=np.float32)
    v = np.array([1, 3], dtype=np.float32)
    tgt = np.dot(a, b)
    tgt_mv = np.dot(a, v)
    out = np.ones((5, 2, 2), dtype=np.float32)
    c = mm(a, b, out=out[..., 0])
    assert c.base is out
    assert_array_equal(c, tgt)
    c = mm(a, v, out=out[:, 0, 0])
    assert_array_equal(c, tgt_mv)
    c = mm(v, a.T, out=out[:, 0, 0])
    assert_array_equal(c, tgt_mv)
    out = np.ones((10, 2), dtype=np.float32)
    c = mm(a, b, out=out[::2, :])
    assert_array_equal(c, tgt)
    assert_array_equal(out[1::2], 1)  # the rows between untouched
    out = np.ones((5, 2), dtype=np.float32)
    mm(b.T, a.T, out=out.T)
    assert_array_equal(out, tgt)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vector_vector_out_0d_float32(backend):
    """1-D @ 1-D with a 0-d out: NumPy writes into it and returns it (not a scalar)."""
    v = np.arange(1, 21, dtype=np.float32)
    out = np.zeros((), dtype=np.float32)
    ref = np.matmul(v, v, out=np.zeros((), dtype=np.float32))
    res = _mm(backend)(v, v, out=out)
    assert res is out
    assert_equal(out, ref)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [2, 16, 20])
def test_vector_vector_returns_numpy_scalar(k, backend):
    """MatmulCommon.test_result_types' rule for every K (NumPy's own uses K = 1, where auto runs native):
    1-D @ 1-D is a NumPy float32 scalar, as np.matmul gives."""
    v = np.arange(1, k + 1, dtype=np.float32)
    ref = np.matmul(v, v)
    res = _mm(backend)(v, v)
    assert type(res) is type(ref) is np.float32
    assert res == ref


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [2, 16, 24])
def test_matrix_subclass_preserved(rng, k, backend):
    """np.matmul on np.matrix operands gives np.matrix (ufunc __array_wrap__); sgemm_cube must too."""
    a = np.matrix(rng.integers(-8, 9, (3, k)).astype(np.float32))
    b = np.matrix(rng.integers(-8, 9, (k, 4)).astype(np.float32))
    ref = np.matmul(a, b)
    assert type(ref) is np.matrix
    res = _mm(backend)(a, b)
    assert type(res) is np.matrix, type(res)
    assert res.dtype == np.float32
    assert_array_equal(np.asarray(res), np.asarray(ref))


@pytest.mark.parametrize("backend", BACKENDS_LARGE_K)
@pytest.mark.parametrize("shape", [((16, 16), (16, 16)), ((5, 17), (17, 3)), ((2, 7, 64), (64, 9)),
                                   ((3, 1, 4, 100), (2, 100, 5)), ((64,), (64, 8)), ((8, 33), (33,))])
def test_integer_valued_exact_large_k(rng, shape, backend):
    """NumPy's exact float32 comparisons on integer-valued data, with K >= 16 so that the default path
    runs the emulation too: small integers split exactly, their sums stay below 2**24."""
    a = rng.integers(-16, 17, shape[0]).astype(np.float32)
    b = rng.integers(-16, 17, shape[1]).astype(np.float32)
    if backend == "auto":  # else this case would test NumPy's own float32 matmul again
        assert sgemm_cube.explain(a, b).scheme != "native", sgemm_cube.explain(a, b)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    res = _mm(backend)(a, b)
    assert res.shape == ref.shape and res.dtype == np.float32
    assert_equal(res, ref)
    # and on transposed (Fortran-ordered) copies of the operands
    at = np.asfortranarray(a)
    bt = np.asfortranarray(b)
    assert_equal(_mm(backend)(at, bt), ref)
