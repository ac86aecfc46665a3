"""The accuracy guarantee of ``sgemm_cube.matmul``, attacked on the CPU (NumPy model and, under
TRITON_INTERPRET=1, the CUDA backend's Triton kernels).

The promise (default options; ``backend="cpu"``/``"cuda"`` with K >= 16, ``"auto"`` for any K;
every finite float32 input)::

    |C - C64| <= 3 * K * 2**-24 * (|A| @ |B|) + K * 2**-149          elementwise

with C64 the float64 product of the same float32 inputs.  NaN/Inf outputs are exactly native
FP32's; exact results beyond FP32's range are the infinity of their sign (K >= 16); where native
FP32 is finite so is C; K < 16 under ``backend="auto"`` is native FP32 itself (this host's
BLAS, compared with itself: the same call).  Forced emulation below K = 16 meets
``max(3K, K + 14) * 2**-24 * |A||B|`` instead.  ``fixup=False`` (the paper's split as is) gives the
accuracy up for rows that lose bits, but not the special values nor finiteness.

"Native FP32" in the checks is ``sequential_fp32`` (``tests/guarantee_data.py``): recursive
summation in NumPy's elementwise float32 arithmetic, the same bits on every host.  This host's
BLAS is measured beside it in the messages, never used as a limit: its rounding differs between
CPUs (AVX2 and AVX-512 OpenBLAS kernels differ by 2.5x on the same data).  The measured property
``||C - C64||_F / ||C64||_F <= 2 * max(fp32_err, 2**-24)`` (sequential FP32's error) is checked
beside the guarantee.

The data (``tests/guarantee_data.py``) attack the FP16 split: mixed magnitudes within rows and
columns, the issue's half-scaled 64x64 case, the edges of FP32's range, subnormals, NaN/Inf,
ill-conditioned products, the BF16x9 paper's condition-number generator.  Seeds are fixed per
test; ``SGEMM_CUBE_TEST_SEED=random`` draws fresh ones (each failure message says how to replay).

The checker itself is tested first: FP32 summation meets the bound with c_factor=1, and the
checker rejects results just outside it.
"""
import os
import re
import sys
from types import SimpleNamespace

import numpy as np
import pytest

try:
    import torch
except ImportError:  # the CPU model needs no torch
    torch = None

# The cuda backend runs here only on Triton's CPU interpreter.  conftest.py sets the flag when there
# is no GPU; it must be set before triton is first imported.
if torch is not None and "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available() \
        and "triton" not in sys.modules:
    os.environ["TRITON_INTERPRET"] = "1"

import sgemm_cube  # noqa: E402

from tests.guarantee_data import (FINITE, GENERATORS, OPTIONS, OVERFLOW, SPECIAL, U, check_guarantee,  # noqa: E402
                             frobenius_errors, ieee_special_values, issue_64x64, nextafter_2_64, sequential_fp32,
                             native_overflow_ok, normwise_claimed, option_id, overflow_case, padded_issue_case,
                             references, rng_for, same_bits_any_nan, special_case)


def _cuda_skip_reason():
    if torch is None:
        return "torch is not installed"
    if os.environ.get("TRITON_INTERPRET", "0") != "1":
        return "TRITON_INTERPRET is not 1 (a GPU is present: tests/gpu/test_guarantee_gpu.py covers cuda)"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "triton is not installed"
    return None


# NumPy, torch and the Triton interpreter warn on the overflow and NaN these data are made of.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

_CUDA_SKIP = _cuda_skip_reason()
_TORCH_SKIP = "torch is not installed" if torch is None else None


def _param(name, reason):
    return pytest.param(name, marks=pytest.mark.skipif(reason is not None, reason=reason or ""))


#: The backends, as _run passes them: operands' kind and the backend= argument.
CPU = _param("cpu", None)                   # NumPy arrays, the NumPy model
CUDA = _param("cuda", _CUDA_SKIP)           # torch CPU tensors, the Triton kernels (interpreter)
AUTO = _param("auto", None)                 # NumPy arrays, backend="auto"
AUTO_TORCH = _param("auto-torch", _TORCH_SKIP)  # torch CPU tensors, backend="auto"
EMULATING = [CPU, CUDA]
ALL = [CPU, CUDA, AUTO, AUTO_TORCH]

#: (m, k, n) per backend: the interpreter is slow, so its shapes stay <= 48.
SHAPE = {"cpu": (61, 96, 45), "auto": (61, 96, 45), "auto-torch": (61, 96, 45), "cuda": (33, 48, 29)}
ISSUE_SIZE = {"cpu": 64, "auto": 64, "auto-torch": 64, "cuda": 48}


@pytest.fixture
def data(request):
    """A fixed-seed generator for this test (``SGEMM_CUBE_TEST_SEED=random``: fresh) and its replay line."""
    rng, seed = rng_for(request.node.nodeid)
    return SimpleNamespace(rng=rng, seed=seed)


def _run(backend, a, b, **kw):
    """``sgemm_cube.matmul`` on the backend's kind of operands; the result as a NumPy array.

    Also checks that the operands come back unchanged and the result is of their kind."""
    a0, b0 = a.copy(), b.copy()
    if backend in ("cuda", "auto-torch"):
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        c = sgemm_cube.matmul(ta, tb, backend="cuda" if backend == "cuda" else "auto", **kw)
        assert isinstance(c, torch.Tensor) and c.device.type == "cpu" and c.dtype == torch.float32
        c = c.numpy()
    else:
        c = sgemm_cube.matmul(a, b, backend=backend, **kw)
        assert isinstance(c, np.ndarray)
    assert np.array_equal(a.view(np.uint32), a0.view(np.uint32)), "matmul modified a"
    assert np.array_equal(b.view(np.uint32), b0.view(np.uint32)), "matmul modified b"
    return c


def _native(backend, a, b):
    """Native FP32 as backend="auto" computes it for K < 16: np.matmul, or torch.matmul on tensors
    (they differ in the last bit: torch's CPU BLAS rounds differently from NumPy's)."""
    if backend in ("cuda", "auto-torch"):
        return torch.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    with np.errstate(all="ignore"):
        return np.matmul(a, b)


def _assert_guarantee(c, a, b, seed, what="", **kw):
    msg = check_guarantee(c, a, b, **kw)
    assert not msg, f"{what}\n{msg}\n{seed}"


# ================================================================ the checker and the data


@pytest.mark.parametrize("gen", list(GENERATORS))
def test_native_fp32_meets_the_bound_with_c_1(data, gen):
    """The bound is right: FP32 summation satisfies it with c_factor=1 (Jeannerod-Rump:
    |fl(x.y) - x.y| <= K u |x|.|y| in any summation order, plus K * 2**-150 for underflow).  Checked on
    the checker's own reference (sequential sums, the same on every host) for every generator, and on
    this host's BLAS where no sum overflows (its overflow pattern depends on its summation order)."""
    for shape in [(61, 96, 45), (33, 48, 29), (17, 16, 9), (5, 3, 7), (1, 1, 1)]:
        a, b = GENERATORS[gen](data.rng, *shape)
        # native_overflow_ok: native FP32's running sum may reach the infinity of the wrong sign where
        # the exact result overflows (the guarantee promises C64's sign: stricter than native)
        _assert_guarantee(sequential_fp32(a, b), a, b, data.seed, f"{gen} {shape}", c_factor=1,
                          native_overflow_ok=True)
        if gen in FINITE:
            _assert_guarantee(_native("cpu", a, b), a, b, data.seed, f"host BLAS, {gen} {shape}", c_factor=1,
                              frobenius=False)


@pytest.mark.parametrize("gen", SPECIAL)
def test_native_special_values_are_ieee(data, gen):
    """The special values the checker demands (sequential FP32's) are IEEE arithmetic's, term by term."""
    for shape in [(33, 48, 29), (4, 16, 3), (3, 2, 5), (1, 1, 1)]:
        a, b = GENERATORS[gen](data.rng, *shape)
        native, ieee = sequential_fp32(a, b), ieee_special_values(a, b)
        for test in (np.isnan, np.isposinf, np.isneginf):
            assert np.array_equal(test(native), test(ieee)), (gen, shape, test.__name__, data.seed)


def test_sequential_fp32_is_recursive_summation():
    """The reference adds the rounded products in order of k, rounding each sum: 1 + 2**-24 + 2**-24 is 1
    that way (each addition rounds back to 1), and 1 + 2**-23 in the other order."""
    a = np.array([[1.0, 2.0 ** -24, 2.0 ** -24]], np.float32)
    assert sequential_fp32(a, np.ones((3, 1), np.float32))[0, 0] == 1.0
    assert sequential_fp32(a[:, ::-1].copy(), np.ones((3, 1), np.float32))[0, 0] == np.float32(1 + 2.0 ** -23)
    x = np.float32(1 + 2.0 ** -12)  # x * x = 1 + 2**-11 + 2**-24: the product is rounded before the sum
    assert sequential_fp32(np.array([[x, 1.0]], np.float32), np.array([[x], [-1.0]], np.float32))[0, 0] == 2.0 ** -11


def test_same_bits_any_nan_ignores_only_a_nans_sign_and_payload():
    pos, neg, payload = (np.array([v], np.uint32).view(np.float32) for v in (0x7FC00000, 0xFFC00000, 0x7FC00123))
    plus_zero, minus_zero = np.float32([1.0, 0.0]), np.float32([1.0, -0.0])
    assert same_bits_any_nan(pos, neg) and same_bits_any_nan(pos, payload)
    assert not same_bits_any_nan(pos, np.float32([np.inf])) and not same_bits_any_nan(plus_zero, minus_zero)
    assert not same_bits_any_nan(plus_zero, np.nextafter(plus_zero, np.float32(2)))  # one ulp
    assert not same_bits_any_nan(plus_zero, plus_zero[:1])  # shapes


def test_checker_rejects_results_outside_the_guarantee(data):
    a, b = GENERATORS["normal"](data.rng, 20, 32, 12)
    r = references(a, b)
    bound = 3 * 32 * U * r.absab + 32 * 2.0 ** -149
    assert check_guarantee(r.fp32, a, b, refs=r) == ""
    # within the bound elementwise (and Frobenius: 2**-24 relative is below the floor)
    assert check_guarantee((r.c64 * (1 + 2.0 ** -24)).astype(np.float32), a, b, refs=r) == ""
    c = r.fp32.copy()
    c[3, 4] = np.float32(r.c64[3, 4] + 1.5 * bound[3, 4])
    msg = check_guarantee(c, a, b, refs=r, frobenius=False)
    assert "1 of 240 outputs" in msg and "(3, 4)" in msg, msg
    assert abs(float(re.search(r"ratio=([0-9.e+-]+)", msg).group(1)) - 1.5) < 0.01, msg
    c = r.fp32.copy()
    c[7, 1] = np.nan
    assert "(7, 1)" in check_guarantee(c, a, b, refs=r)
    # Frobenius: three times native's error, elementwise still far inside the bound
    assert frobenius_errors(r.fp32, a, b, refs=r)[1] > 2.0 ** -24
    c = (r.c64 + 3 * (r.fp32.astype(np.float64) - r.c64)).astype(np.float32)
    assert np.all(np.abs(c - r.c64) <= bound)
    assert "Frobenius" in check_guarantee(c, a, b, refs=r)
    assert check_guarantee(c, a, b, refs=r, frobenius=False) == ""
    assert "dtype" in check_guarantee(r.fp32.astype(np.float64), a, b, refs=r)
    assert "shape" in check_guarantee(r.fp32[:, :5], a, b, refs=r)
    # special values: every output of a NaN row must be NaN, an infinity must keep its sign
    a2, b2 = a.copy(), b.copy()
    a2[2, 5], b2[6, 3] = np.nan, np.inf
    r2 = references(a2, b2)
    assert check_guarantee(r2.fp32, a2, b2, refs=r2) == ""
    c = r2.fp32.copy()
    c[2, 0] = 0.0
    assert "native FP32's special value" in check_guarantee(c, a2, b2, refs=r2)
    c = r2.fp32.copy()
    j = next(i for i in range(20) if i != 2 and np.isinf(c[i, 3]))
    c[j, 3] = -c[j, 3]
    assert f"({j}, 3)" in check_guarantee(c, a2, b2, refs=r2)
    # overflow: exact results beyond FP32 must be the infinity of their sign
    a3, b3 = GENERATORS["near_overflow"](data.rng, 20, 32, 12)
    r3 = references(a3, b3)
    assert check_guarantee(r3.fp32, a3, b3, refs=r3, native_overflow_ok=True) == ""
    over = np.abs(r3.c64) >= OVERFLOW
    assert over.sum() > 5
    c = np.where(over, np.copysign(np.inf, r3.c64), r3.fp32).astype(np.float32)
    assert check_guarantee(c, a3, b3, refs=r3) == ""
    c[over] = -c[over]
    assert "infinity of C64's sign" in check_guarantee(c, a3, b3, refs=r3)
    c[over] = np.nan
    assert "infinity of C64's sign" in check_guarantee(c, a3, b3, refs=r3)


def _row_span(x, axis):
    """Binades between the largest and smallest nonzero magnitude of each row (axis=-1) / column."""
    mag = np.abs(x.astype(np.float64))
    big = mag.max(axis=axis)
    small = np.where(mag > 0, mag, np.inf).min(axis=axis)
    return np.log2(big / small)


def test_generators_make_what_they_claim(data):
    rng = data.rng
    m, k, n = 61, 96, 45
    g = {name: gen(rng, m, k, n) for name, gen in GENERATORS.items()}
    for name, (a, b) in g.items():
        assert a.dtype == b.dtype == np.float32 and a.shape == (m, k) and b.shape == (k, n), name
        assert a.flags.c_contiguous and b.flags.c_contiguous, name
        assert (np.isfinite(a).all() and np.isfinite(b).all()) == (name not in SPECIAL), name
    refs = {name: references(a, b) for name, (a, b) in g.items()}
    for name in FINITE:  # finite data, finite exact and native results
        assert np.isfinite(refs[name].fp32).all() and (np.abs(refs[name].c64) < OVERFLOW).all(), name
    # mixed magnitudes within rows of A and columns of B (the FP16 split holds 29 binades)
    assert _row_span(g["row_span_120"][0], -1).min() > 100 and _row_span(g["row_span_120"][1], 0).min() > 100
    for name in ("alt_cols_1e-10", "half_scaled_1e-6", "half_scaled_1e-10"):
        assert _row_span(g[name][0], -1).min() > 18 and _row_span(g[name][1], 0).min() > 18, name
    assert _row_span(g["alt_cols_1e-10"][0], -1).min() > 30
    assert _row_span(g["half_scaled_1e-10"][0], -1).min() > 30
    for name in ("one_tiny_per_row", "one_huge_per_row"):
        a, b = g[name]
        assert _row_span(a, -1).min() > 55 and np.nanmax(_row_span(b, 0)) > 55, name
    assert np.median(_row_span(g["cond_phi5"][0], -1)) > 29 > 20 > np.median(_row_span(g["cond_phi0.5"][0], -1))
    # the small entries matter: dropping them changes C by far more than FP32's rounding
    for name in ("alt_cols_1e-10", "one_tiny_per_row", "one_huge_per_row", "half_scaled_1e-10"):
        a, b = g[name]
        mag = np.abs(a)
        big = np.where(mag >= mag.max(axis=1, keepdims=True) * 2.0 ** -29, a, 0).astype(np.float64)
        c64 = refs[name].c64
        assert np.linalg.norm(big @ b - c64) > 1e-2 * np.linalg.norm(c64), name
    # edges of the range
    assert (np.abs(refs["underflow"].c64) < 2.0 ** -126).mean() > 0.9  # subnormal results
    a, b = g["subnormal_rows"]
    assert (np.abs(a) < 2.0 ** -126).all() and (np.abs(refs["subnormal_rows"].c64) > 2.0 ** -60).all()
    sub = [(np.abs(x) > 0) & (np.abs(x) < 2.0 ** -126) for x in g["subnormal_mixed"]]
    assert all(0.1 < s.mean() < 0.3 for s in sub)
    r = refs["near_overflow"]
    over = np.abs(r.c64) >= OVERFLOW
    assert 0.1 < over.mean() < 0.9 and (np.abs(r.c64[~over]) > 2.0 ** 120).mean() > 0.5
    assert (np.abs(g["near_overflow"][0]) > 1e18).mean() > 0.5
    r = refs["overflow_edge"]
    assert np.abs(r.c64).max() > 0.9 * 2.0 ** 128 and (np.abs(r.c64) > 2.0 ** 127).mean() > 0.5
    for name, scale in (("scale_1e6", 1e6), ("scale_1e-8", 1e-8), ("scale_1e30", 1e30), ("scale_1e-30", 1e-30)):
        assert 0.1 < np.median(np.abs(g[name][0])) / scale < 10, name
    # ill-conditioned products: C64 tiny next to |A| @ |B|
    for name, ratio in (("ill_conditioned", 1e-4), ("orthogonal", 1e-6)):
        assert np.median(np.abs(refs[name].c64) / refs[name].absab) < ratio, name
    # special values: every pattern present
    nat = {name: refs[name].fp32 for name in SPECIAL}
    for name in SPECIAL:
        assert np.isnan(nat[name]).any() and np.isinf(nat[name]).any(), name
    assert np.isposinf(nat["inf_zero"]).any() and np.isneginf(nat["inf_zero"]).any()
    a, b = g["inf_zero"]
    zero_meets_inf = (np.isinf(a).astype(float) @ (b == 0)) + ((a == 0).astype(float) @ np.isinf(b))
    assert (zero_meets_inf > 0).sum() >= 2
    a, b = g["inf_opposite"]
    row = np.isposinf(a).any(axis=1) & np.isneginf(a).any(axis=1)
    assert row.sum() == 1 and np.isnan(nat["inf_opposite"][row]).all()
    assert np.isposinf(nat["inf_opposite"]).any() and np.isneginf(nat["inf_opposite"]).any()


def test_the_issue_case_is_what_the_issue_measured(data):
    """64x64, half of A's columns and half of B's rows times 1e-10: native FP32 ~1e-7."""
    a, b = issue_64x64(data.rng)
    ours, native = frobenius_errors(_native("cpu", a, b), a, b)
    assert native < 5e-7


# ================================================================ the guarantee, default options


@pytest.mark.parametrize("gen", list(GENERATORS))
@pytest.mark.parametrize("backend", ALL)
def test_default_options_meet_the_guarantee(data, backend, gen):
    a, b = GENERATORS[gen](data.rng, *SHAPE[backend])
    c = _run(backend, a, b)
    _assert_guarantee(c, a, b, data.seed, f"{backend} {gen}")


@pytest.mark.parametrize("s", [1e-6, 1e-10])
@pytest.mark.parametrize("backend", ALL)
def test_issue_half_scaled_64x64(data, backend, s):
    """The issue: native 1.3e-7, the old default 5.7e-2 (s=1e-10): now within the guarantee."""
    size = ISSUE_SIZE[backend]
    a, b = issue_64x64(data.rng, s, size)
    c = _run(backend, a, b)
    _assert_guarantee(c, a, b, data.seed, f"{backend} s={s} errors (ours, native)={frobenius_errors(c, a, b)}")


@pytest.mark.parametrize("backend", [AUTO, AUTO_TORCH])
def test_issue_small_case_is_native_under_auto(data, backend):
    """The issue's a=[[1, 1e-6]], b=[[1e-6], [1]] (K=2): native FP32, which is exact here."""
    a = np.array([[1.0, 1e-6]], np.float32)
    b = np.array([[1e-6], [1.0]], np.float32)
    c = _run(backend, a, b)
    assert np.array_equal(c, _native(backend, a, b))
    _assert_guarantee(c, a, b, data.seed)


@pytest.mark.parametrize("backend", EMULATING + [AUTO])
def test_issue_small_case_padded_to_k16(data, backend):
    """The issue's small case with zeros up to K=16 (the emulating backends' range): within the bound
    and, native being exact, within 2**-23 of the exact result."""
    a, b = padded_issue_case(16)
    c = _run(backend, a, b)
    _assert_guarantee(c, a, b, data.seed)
    exact = float(a[0, 0]) * float(b[0, 0]) + float(a[0, 1]) * float(b[1, 0])
    assert abs(float(c[0, 0]) - exact) <= 2.0 ** -23 * abs(exact), (float(c[0, 0]), exact)


def _low_bits_set(rng, shape):
    """Values in [1, 2) whose last two significand bits are set: the split's residual rounding loses
    the most there (the FP16 lo part keeps bits 12-22 of the 23)."""
    m = (rng.integers(0, 2 ** 23, shape) | 0x3).astype(np.float64)
    return (rng.choice([-1.0, 1.0], shape) * (1 + m * 2.0 ** -23)).astype(np.float32)


@pytest.mark.parametrize("backend", EMULATING)
def test_forced_emulation_with_small_k_meets_its_own_bound(data, backend):
    """backend="cpu"/"cuda" with K < 16 emulate (``"auto"`` runs native FP32 there).  Each operand's split
    keeps 22 bits (error <= 2**-22 |x|) and lo*lo is dropped (<= 2**-22 |a||b|): 12 units of 2**-24 per
    term on top of FP32 accumulation (K units) and the termwise combination (1), so the emulation meets
    ``max(3K, K + 14) * 2**-24 * |A||B|``: SGEMM's 3K bound from K = 7, not below.  The README's K = 1
    example 1.0053295 * 1.0132469 is off by 7.4 units, 2.5x the 3K bound."""
    a, b = np.array([[1.0053295]], np.float32), np.array([[1.0132469]], np.float32)
    c = _run(backend, a, b)
    err = abs(float(c[0, 0]) - float(a[0, 0]) * float(b[0, 0])) / (float(a[0, 0]) * float(b[0, 0]) * U)
    assert 3 < err <= 15, err
    for k in range(1, 16):
        a, b = _low_bits_set(data.rng, (16, k)), _low_bits_set(data.rng, (k, 12))
        a[::2] = data.rng.standard_normal((8, k)).astype(np.float32)  # and ordinary rows
        _assert_guarantee(_run(backend, a, b), a, b, data.seed, f"{backend} K={k}",
                          c_factor=max(3 * k, k + 14) / k, frobenius=False)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 15])
@pytest.mark.parametrize("backend", [AUTO, AUTO_TORCH])
def test_small_k_under_auto_is_native_fp32(data, backend, k):
    """K < 16 under backend="auto" runs native FP32: the same bits, NaN/Inf and overflow included."""
    bad = []
    for gen in GENERATORS:
        for m, n in [(7, 5), (1, 1)]:
            a, b = GENERATORS[gen](data.rng, m, k, n)
            c = _run(backend, a, b)
            if not np.array_equal(c, _native(backend, a, b), equal_nan=True):
                bad.append(f"{gen} {(m, k, n)}")
    assert not bad, f"differs from native FP32: {bad}\n{data.seed}"


@pytest.mark.parametrize("backend", [AUTO, AUTO_TORCH] + EMULATING)
def test_nextafter_2_64_squared_is_finite(data, backend):
    """a = b = nextafter(2**64, 0): the product 2**128 (1 - 2**-23 + 2**-48) is an FP32 number.
    K=1 under auto (native), K=16 (zero-padded) on the emulating backends."""
    k = 1 if backend.startswith("auto") else 16
    a, b = nextafter_2_64(k)
    c = _run(backend, a, b)
    assert np.isfinite(c).all(), c
    if k == 1:
        assert np.array_equal(c, _native(backend, a, b))
    _assert_guarantee(c, a, b, data.seed)


@pytest.mark.parametrize("backend", ALL)
def test_special_values_are_native_fp32s(data, backend):
    a, b, expected = special_case()
    ieee = ieee_special_values(a, b)  # the listing in special_case() agrees with IEEE arithmetic
    for test in (np.isnan, np.isposinf, np.isneginf):
        assert np.array_equal(test(ieee), expected[test.__name__]), test.__name__
    c = _run(backend, a, b)
    for test in (np.isnan, np.isposinf, np.isneginf):
        assert np.array_equal(test(c), expected[test.__name__]), (test.__name__, c)
    _assert_guarantee(c, a, b, data.seed)


@pytest.mark.parametrize("backend", ALL)
def test_overflow_gives_infinity_of_the_exact_sign(data, backend):
    """Exact results beyond FP32 -> +-inf; an exact 0 of two huge terms and a result just under
    FP32's largest value stay finite, as native FP32's do."""
    a, b = overflow_case()
    c = _run(backend, a, b)
    assert c[0, 0] == np.inf and c[0, 2] == np.inf and c[0, 1] == -np.inf, c
    assert np.isfinite(c[1:]).all(), c  # x*x - x*x = 0 exactly; x*x (1 + 2**-40) < 2**128
    _assert_guarantee(c, a, b, data.seed)


# ================================================================ options that keep the guarantee

ATTACKS_CPU = ("half_scaled_1e-10", "row_span_120", "one_tiny_per_row", "cond_phi5", "scale_1e30", "underflow",
               "near_overflow", "specials_half_scaled", "wide_cancel")
ATTACKS_CUDA = ("half_scaled_1e-10", "row_span_120", "specials_half_scaled", "wide_cancel")
#: Options the (slow) interpreter skips: the default (scale="auto"), sb=6.
CUDA_REDUNDANT = (dict(scale="auto"), dict(sb=6))
#: (m, k, n) of the options test: the NumPy model's BF16 schemes are slow on wide-range rows.
OPTIONS_SHAPE = (33, 48, 29)


@pytest.mark.parametrize("opts", OPTIONS, ids=option_id)
@pytest.mark.parametrize("backend", EMULATING)
def test_options_keep_the_guarantee(data, backend, opts):
    if backend == "cuda" and opts in CUDA_REDUNDANT:
        pytest.skip("interpreter time: the default (run by every other test), or covered by sb=0 and sb=11")
    bad = []
    for gen in ATTACKS_CPU if backend == "cpu" else ATTACKS_CUDA:
        a, b = GENERATORS[gen](data.rng, *OPTIONS_SHAPE)
        c = _run(backend, a, b, **opts)
        # scale=None: rows beyond the split's range run in native FP32, whose running sums can reach
        # the infinity of the wrong sign where the exact result overflows: accept native's value there
        msg = check_guarantee(c, a, b, native_overflow_ok=native_overflow_ok(opts),
                              frobenius=normwise_claimed(opts, gen))
        if msg:
            bad.append(f"[{gen}] {msg}")
    assert not bad, "\n".join(bad) + f"\n{data.seed}"


@pytest.mark.parametrize("backend", EMULATING)
def test_out_argument_keeps_the_guarantee(data, backend):
    for gen in ("half_scaled_1e-10", "specials_half_scaled"):
        a, b = GENERATORS[gen](data.rng, *SHAPE[backend])
        m, n = a.shape[0], b.shape[1]
        if backend == "cuda":
            out = torch.full((m, n), float("nan"))
            ret = sgemm_cube.matmul(torch.from_numpy(a), torch.from_numpy(b), backend="cuda", out=out)
            assert ret is out
            c = out.numpy()
        else:
            out = np.full((m, n), np.nan, np.float32)
            ret = sgemm_cube.matmul(a, b, backend="cpu", out=out)
            assert ret is out
            c = out
        _assert_guarantee(c, a, b, data.seed, gen)


@pytest.mark.parametrize("backend", EMULATING)
def test_batched_operands_of_different_kinds(data, backend):
    """A batch whose matrices need different treatment (plain, fixed-up, special values, out of range),
    and the same with B broadcast."""
    m, k, n = SHAPE[backend]
    gens = ("normal", "half_scaled_1e-10", "nan_inf", "scale_1e30")
    pairs = [GENERATORS[g](data.rng, m, k, n) for g in gens]
    a, b = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
    c = _run(backend, a, b)
    _assert_guarantee(c, a, b, data.seed, "batched")
    b1 = GENERATORS["half_scaled_1e-10"](data.rng, m, k, n)[1]
    c = _run(backend, a, b1)
    _assert_guarantee(c, a, np.broadcast_to(b1, b.shape), data.seed, "broadcast b")


# ================================================================ fixup=False: the paper's split as is


@pytest.mark.parametrize("backend", EMULATING)
def test_fixup_false_gives_up_accuracy_on_the_issue_case(data, backend):
    """Documents the trade: without the fix-up the issue's case is far worse than native FP32."""
    size = ISSUE_SIZE[backend]
    a, b = issue_64x64(data.rng, 1e-10, size)
    fixed = _run(backend, a, b, fixup=True)
    _assert_guarantee(fixed, a, b, data.seed, "fixup=True")
    raw = _run(backend, a, b, fixup=False)
    ours, native = frobenius_errors(raw, a, b)
    assert np.isfinite(raw).all()
    # at least 10x beyond the guarantee's Frobenius limit (the paper's split keeps none of the 1e-10
    # entries' low bits: ~5e-2 without scaling, ~6e-6 with the largest entry of each row scaled to 2**14)
    assert ours > 10 * 2 * max(native, U), (ours, native, data.seed)
    assert check_guarantee(raw, a, b), "fixup=False met the guarantee here: the test no longer documents the trade"


@pytest.mark.parametrize("gen", SPECIAL)
@pytest.mark.parametrize("backend", EMULATING)
def test_fixup_false_keeps_special_values(data, backend, gen):
    a, b = GENERATORS[gen](data.rng, *SHAPE[backend])
    c = _run(backend, a, b, fixup=False)
    r = references(a, b)
    special = ~r.finite_in
    assert np.array_equal(c[special], r.fp32[special], equal_nan=True), data.seed
    assert np.isfinite(c[r.finite_in]).all(), data.seed


FIXUP_FALSE_CUDA = ("row_span_120", "scale_1e30", "overflow_edge", "one_huge_per_row")


@pytest.mark.parametrize("backend", EMULATING)
def test_fixup_false_makes_no_infinity_from_finite_data(data, backend):
    """Finite inputs whose native FP32 product is finite give finite outputs even without the fix-up."""
    bad = []
    for gen in FINITE if backend == "cpu" else FIXUP_FALSE_CUDA:
        a, b = GENERATORS[gen](data.rng, *SHAPE[backend])
        c = _run(backend, a, b, fixup=False)
        if not np.isfinite(c).all():
            bad.append(f"{gen}: {int((~np.isfinite(c)).sum())} non-finite outputs")
    a, b = nextafter_2_64(16)
    c = _run(backend, a, b, fixup=False)
    if not np.isfinite(c).all():
        bad.append(f"nextafter(2**64, 0) squared: {c}")
    assert not bad, f"{bad}\n{data.seed}"


@pytest.mark.parametrize("backend", [CPU, AUTO, AUTO_TORCH])
def test_overflow_keeps_its_sign_from_k_16_and_is_native_below(backend):
    """The README's example: [1e30, 1e30] @ [2e30, -1e30] is 1e60 exactly, +inf in FP32.  Padded with zeros
    to K = 16 the emulation (scaled lines, one rounding) gives +inf.  Under "auto" with K = 2 native FP32
    runs, and what it gives depends on the host's kernel: a sum of rounded products overflows part-way
    (inf - inf = NaN: OpenBLAS and torch here), a chain of FMAs gives inf."""
    a = np.zeros((1, 16), np.float32)
    b = np.zeros((16, 1), np.float32)
    a[0, :2], b[:2, 0] = [1e30, 1e30], [2e30, -1e30]
    emulated = _run(backend, a, b)
    assert emulated[0, 0] == np.inf
    if backend != "cpu":
        a2, b2 = a[:, :2].copy(), b[:2].copy()
        assert np.array_equal(_run(backend, a2, b2), _native(backend, a2, b2), equal_nan=True)  # native, K = 2
        assert not np.isfinite(_native(backend, a2, b2)).any()


# ================================================================ certified outputs (scale="rows")


@pytest.mark.parametrize("backend", EMULATING)
def test_certified_outputs_are_recomputed_where_the_split_breaks_the_bound(data, backend):
    """``scale="rows"`` emulates the lines the split cannot hold and certifies their outputs
    (``guard.uncertified``): on ``wide_cancel`` the same product without the fix-up breaks the bound at
    output (8, 4); the certified one computes that output again and keeps the guarantee everywhere."""
    a, b = GENERATORS["wide_cancel"](data.rng, *OPTIONS_SHAPE)
    loose = _run(backend, a, b, scheme="fp16x3", scale="rows", fixup=False)
    assert check_guarantee(loose[8:9, 4:5], a[8:9], b[:, 4:5], frobenius=False), f"no plant to catch\n{data.seed}"
    c = _run(backend, a, b, scheme="fp16x3", scale="rows")
    _assert_guarantee(c, a, b, data.seed, "wide_cancel, scale='rows'",
                      frobenius=normwise_claimed(dict(scheme="fp16x3", scale="rows"), "wide_cancel"))
    assert c[8, 4] != loose[8, 4]


@pytest.mark.parametrize("backend", EMULATING)
def test_certified_positive_wide_lines_stay_on_the_split(data, backend):
    """Log-normal data (sigma 3) on both operands, each line given an entry 2**-40 of its largest: every line
    reaches below the split's range, and every output is a sum of positive terms far above the certificate's
    threshold, so ``scale="rows"`` recomputes none (the bits of the product without the fix-up) and keeps
    the guarantee; the auto scheme's rule, which lists those lines under ``scale="auto"`` and takes bf16x6
    there, keeps fp16x3."""
    m, k, n = OPTIONS_SHAPE
    a = np.exp(3 * data.rng.standard_normal((m, k)))
    b = np.exp(3 * data.rng.standard_normal((k, n)))
    a[:, 0] = 2.0 ** -40 * a.max(axis=1)
    b[0, :] = 2.0 ** -40 * b.max(axis=0)
    a, b = a.astype(np.float32), b.astype(np.float32)
    c = _run(backend, a, b, scheme="fp16x3", scale="rows")
    loose = _run(backend, a, b, scheme="fp16x3", scale="rows", fixup=False)
    assert np.array_equal(c.view(np.uint32), loose.view(np.uint32)), data.seed
    _assert_guarantee(c, a, b, data.seed, "positive wide lines, scale='rows'", frobenius=False)
    from sgemm_cube.cpu_fallback.guard import choose_scheme
    assert choose_scheme(a[None], b[None], margin=0.05, scale="auto") == "bf16x6"
    assert choose_scheme(a[None], b[None], margin=0.05, scale="rows") == "fp16x3"


@pytest.mark.parametrize("k", [16, 64, 512])
@pytest.mark.parametrize("backend", EMULATING)
def test_certified_outputs_just_above_the_threshold_keep_the_guarantee(data, backend, k):
    """The worst case the certificate's bound allows, built: one output just above the threshold (scaled), its
    row's other entries below the split's range with ``hi`` rounded off by nearly 2**-25 each, against column
    entries near 2**14 whose own ``hi`` is rounded off by nearly 2**3, all of one sign, so the errors the bound
    counts add up.  The output is certified (the bits of the product without recomputation) and within the
    guarantee (on the CPU model 0.02 of it at most over such draws)."""
    from sgemm_cube.cpu_fallback.guard import certificate_threshold
    rng = data.rng
    a, b = np.zeros((1, k + 1)), np.zeros((k + 1, 1))
    a[0, 1:k] = (rng.integers(1, 2 ** 9, k - 1) + 0.5 - 2.0 ** -12 * rng.random(k - 1)) * 2.0 ** -24
    b[1:k, 0] = 2.0 ** 14 * (1 + 2.0 ** -11 * (1 - 2.0 ** -12 * rng.random(k - 1)))
    b[0, 0] = 0.999 * 2.0 ** 15  # the column's largest, at the top
    a[0, k] = 2.0 ** 14           # the row's largest, at the top, against a zero
    a[0, 0] = max(0.0, 1.01 * certificate_threshold(k + 1) - a[0, 1:k] @ b[1:k, 0]) / b[0, 0]
    a, b = a.astype(np.float32), b.astype(np.float32)
    c = _run(backend, a, b, scheme="fp16x3", scale="rows")
    loose = _run(backend, a, b, scheme="fp16x3", scale="rows", fixup=False)
    assert c.view(np.uint32)[0, 0] == loose.view(np.uint32)[0, 0], f"not certified\n{data.seed}"
    _assert_guarantee(c, a, b, data.seed, "just above the threshold", frobenius=False)
