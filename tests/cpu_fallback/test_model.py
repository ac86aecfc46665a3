"""The arithmetic model (cpu_fallback): bit-exact against the scalar reference."""
import itertools
from fractions import Fraction

import numpy as np
import pytest

import sgemm_cube.cpu_fallback.accumulate as accumulate_mod
from sgemm_cube.cpu_fallback import accumulate_product, emulated_matmul, split
from sgemm_cube.cpu_fallback.exact import round_scaled_int
from sgemm_cube.cpu_fallback.reference import _round_to_f32, reference_matmul

from tests.conftest import draw

OPTIONS = list(itertools.product(["termwise", "elementwise"], ["cube16", "sequential"], [False, True]))


@pytest.mark.parametrize("order,accumulate,keep_lo_lo", OPTIONS)
@pytest.mark.parametrize("dist", ["normal", "uniform01", "wide_exponent"])
def test_model_is_bit_exact_with_scalar_reference(rng, order, accumulate, keep_lo_lo, dist):
    for _ in range(2):
        m, k, n = rng.integers(1, 6), rng.integers(1, 50), rng.integers(1, 6)
        a = draw(rng, dist, (m, k), scale_exp=int(rng.integers(-8, 6)))
        b = draw(rng, dist, (k, n), scale_exp=int(rng.integers(-8, 6)))
        sb = int(rng.choice([0, 6, 12]))
        fast = emulated_matmul(a, b, sb=sb, order=order, accumulate=accumulate, keep_lo_lo=keep_lo_lo)
        slow = reference_matmul(a, b, sb=sb, order=order, accumulate=accumulate, keep_lo_lo=keep_lo_lo)
        assert fast.dtype == np.float32
        assert np.array_equal(fast, slow), (m, k, n, sb)


def test_exact_fallback_is_exercised_and_exact(rng, monkeypatch):
    """Wide exponent spreads defeat float64; the integer path must take over, bit-exact."""
    calls = []
    original = accumulate_mod._exact_pair_sums
    monkeypatch.setattr(accumulate_mod, "_exact_pair_sums", lambda *a: calls.append(1) or original(*a))
    a = (rng.uniform(-1, 1, (4, 48)) * 2.0 ** rng.integers(-14, 15, (4, 48))).astype(np.float32)
    b = (rng.uniform(-1, 1, (48, 5)) * 2.0 ** rng.integers(-14, 15, (48, 5))).astype(np.float32)
    assert np.array_equal(emulated_matmul(a, b), reference_matmul(a, b))
    assert calls, "the exact integer fallback was never used"


@pytest.mark.parametrize("accumulate,block", [("cube16", 32), ("cube16", 48), ("sequential", 7)])
def test_accumulator_continues_across_k_blocks(rng, accumulate, block):
    a = draw(rng, "normal", (9, 150))
    b = draw(rng, "normal", (150, 11))
    x, y = split(a, 12)[0], split(b, 12)[0]
    whole = accumulate_product(x, y, accumulate=accumulate)
    acc = None
    for k0 in range(0, 150, block):
        acc = accumulate_product(x[:, k0:k0 + block], y[k0:k0 + block], accumulate=accumulate, acc=acc)
    assert np.array_equal(whole, acc)


def test_models_differ_and_chunking_matters(rng):
    """cube16 and sequential are different models: if they always agreed, the option would be a no-op."""
    x = draw(rng, "uniform01", (64, 256)).astype(np.float16)
    y = draw(rng, "uniform01", (256, 64)).astype(np.float16)
    assert not np.array_equal(accumulate_product(x, y, accumulate="cube16"),
                              accumulate_product(x, y, accumulate="sequential"))


def test_round_scaled_int_matches_exact_rounding(rng):
    for _ in range(3000):
        n = int(rng.integers(1, 2 ** 62)) * int(rng.choice([-1, 1])) >> int(rng.integers(0, 40))
        e = int(rng.integers(-200, 80))
        assert round_scaled_int(n, e) == _round_to_f32(Fraction(n) * Fraction(2) ** e)


def test_round_scaled_int_ties_to_even_and_limits():
    assert round_scaled_int((1 << 24) + 1, 0) == np.float32(2 ** 24)          # tie, even below
    assert round_scaled_int((1 << 24) + 3, 0) == np.float32(2 ** 24 + 4)      # tie, even above
    assert round_scaled_int(1, -150) == 0 and round_scaled_int(3, -150) == np.float32(2.0 ** -148)
    assert round_scaled_int(1, 128) == np.inf and round_scaled_int(-1, 128) == -np.inf


def test_accumulate_product_rejects_bad_input():
    with pytest.raises(TypeError):
        accumulate_product(np.ones((2, 3), np.float64), np.ones((3, 2), np.float16))
    with pytest.raises(ValueError):
        accumulate_product(np.ones((2, 3), np.float16), np.ones((4, 2), np.float16))
    with pytest.raises(ValueError, match="cube16"):
        accumulate_product(np.ones((2, 3), np.float16), np.ones((3, 2), np.float16), accumulate="fma")


@pytest.mark.parametrize("scheme", ["bf16x9", "bf16x6", "fp16x4"])
@pytest.mark.parametrize("order,accumulate", [("termwise", "cube16"), ("elementwise", "cube16"),
                                              ("termwise", "sequential"), ("elementwise", "sequential")])
def test_other_schemes_bit_exact_with_reference(rng, scheme, order, accumulate):
    m, k, n = 3, int(rng.integers(1, 40)), 4
    if scheme.startswith("bf16"):  # BF16 slices span FP32's whole exponent range
        a = (rng.uniform(-1, 1, (m, k)) * 2.0 ** rng.integers(-100, 100, (m, k))).astype(np.float32)
        b = (rng.uniform(-1, 1, (k, n)) * 2.0 ** rng.integers(-20, 20, (k, n))).astype(np.float32)
    else:
        a, b = draw(rng, "normal", (m, k)), draw(rng, "normal", (k, n))
    fast = emulated_matmul(a, b, scheme=scheme, order=order, accumulate=accumulate)
    slow = reference_matmul(a, b, scheme=scheme, order=order, accumulate=accumulate)
    assert np.array_equal(fast, slow)


def test_keep_lo_lo_is_fp16x4(rng):
    a, b = draw(rng, "normal", (7, 33)), draw(rng, "normal", (33, 5))
    assert np.array_equal(emulated_matmul(a, b, keep_lo_lo=True), emulated_matmul(a, b, scheme="fp16x4"))
    with pytest.raises(ValueError, match="keep_lo_lo"):
        emulated_matmul(a, b, keep_lo_lo=True, scheme="bf16x9")
    with pytest.raises(ValueError, match="bf16x9"):
        emulated_matmul(a, b, scheme="int8x7")


def test_bf16_three_slices_are_exact_above_2_pow_minus_110(rng):
    from sgemm_cube.cpu_fallback import get_scheme, split_slices

    x = (rng.uniform(-1, 1, 20000) * 2.0 ** rng.integers(-149, 128, 20000)).astype(np.float32)
    x = x[np.isfinite(x)]
    s = split_slices(x, get_scheme("bf16x9"), 12)
    rec = s[0].astype(np.float64) + s[1] + s[2]
    assert all(np.array_equal(v.view(np.uint32) & 0xFFFF, np.zeros(v.shape, np.uint32)) for v in s)  # BF16 values
    big = np.abs(x) >= 2.0 ** -110
    assert np.array_equal(rec[big], x[big].astype(np.float64))
    assert np.all(np.abs(rec - x) <= 2.0 ** -134)
    assert np.all(np.isfinite(np.concatenate(s)))
    top = split_slices(np.array([3.4028235e38, -3.4e38], np.float32), get_scheme("bf16x9"), 12)
    assert np.all(np.isfinite(np.concatenate(top)))  # no overflow near FLT_MAX


def test_unscale_times_alpha_rounds_once(rng):
    """``unscale(c, ta, tb, alpha)``: alpha (taken as float32) times c times 2**-(ta + tb), one rounding to
    FP32 -- the correctly rounded value of the exact product, overflowing only where it exceeds FP32's range;
    0 * NaN and 0 * inf are NaN."""
    from fractions import Fraction

    from sgemm_cube.cpu_fallback.guard import unscale

    c = (rng.standard_normal((6, 5)) * 2.0 ** rng.integers(-20, 20, (6, 5))).astype(np.float32)
    c[0, 0] = np.float32(3.0e38)
    ta, tb = rng.integers(-40, 40, 6).astype(np.int32), rng.integers(-40, 40, 5).astype(np.int32)
    ta[0], tb[0] = 0, 0
    for alpha in (0.05, 1.0 / 3.0, 7.0, -1e-3):
        a32 = Fraction(float(np.float32(alpha)))
        got = unscale(c, ta, tb, alpha)
        for i in range(6):
            for j in range(5):
                exact = Fraction(float(c[i, j])) * a32 * Fraction(2) ** int(-(ta[i] + tb[j]))
                with np.errstate(over="ignore"):
                    want = np.float32(float(exact)) if abs(exact) < 2 ** 1000 else np.float32(np.inf * np.sign(exact))
                assert got[i, j] == want, (alpha, i, j, got[i, j], want)
    special = np.array([[np.nan, np.inf, 2.0]], np.float32)
    zero = unscale(special, np.zeros(1, np.int32), np.zeros(3, np.int32), 0.0)
    assert np.isnan(zero[0, :2]).all() and zero[0, 2] == 0
