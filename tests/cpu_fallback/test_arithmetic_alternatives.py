"""The NumPy model under every arithmetic the AscendC docs leave open (cpu_fallback/arithmetic.py).

* the split's conversions (``cast``, ``overflow``, ``subnormals``) and the ``"truncate"`` accumulation
  are bit-exact with the scalar reference (``cpu_fallback/reference.py``, independent means), for
  both orders, several sb, and on data that reaches the integer fallback of the exact chunk sums;
* each alternative changes what the model computes (on data chosen so that it must): an option the
  model ignored would pass the bit-exact checks trivially;
* the split's documented error bounds under each alternative (split.py's docstring), the flush-safe
  range of ``split_limits`` / ``guard.line_range`` and the fact that it is needed (the default range's
  lowest binade loses bits when FP16 subnormals flush);
* the rounding helpers: ``round_scaled_int`` and ``add_toward_zero`` toward zero, against exact rationals.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import sgemm_cube.cpu_fallback.accumulate as accumulate_mod
from sgemm_cube.cpu_fallback import accumulate_product, emulated_matmul, split, split_limits
from sgemm_cube.cpu_fallback.accumulate import add_toward_zero, to_f32_toward_zero
from sgemm_cube.cpu_fallback.arithmetic import DEFAULT, WORST, Arithmetic, alternatives, as_arithmetic
from sgemm_cube.cpu_fallback.exact import round_scaled_int
from sgemm_cube.cpu_fallback.guard import line_meta, line_range
from sgemm_cube.cpu_fallback.reference import _round_to_f32, reference_matmul, reference_split

#: every arithmetic the model distinguishes (the L0C -> UB copy is the kernels' business, not the model's)
MODELLED = [DEFAULT] + [a for a in alternatives() if a.l0c_to_ub == "block"] + [WORST]
IDS = [str(a) for a in MODELLED]


def _binades(rng, lo, hi, per):
    x = np.concatenate([rng.uniform(1, 2, per) * 2.0 ** e for e in range(lo, hi)])
    return (x * rng.choice([-1, 1], x.size)).astype(np.float32)


def _reconstruct(hi, lo, sb):
    return hi.astype(np.float64) + lo.astype(np.float64) * 2.0 ** -sb


def test_as_arithmetic():
    assert as_arithmetic(None) is DEFAULT and as_arithmetic("cast=trunc") == Arithmetic(cast="trunc")
    assert as_arithmetic(WORST) == WORST
    with pytest.raises(ValueError, match="cast"):
        as_arithmetic(Arithmetic(cast="floor"))
    with pytest.raises(TypeError):
        as_arithmetic(3)


@pytest.mark.parametrize("ar", MODELLED, ids=IDS)
@pytest.mark.parametrize("sb", [0, 12, 16])
def test_split_bit_exact_with_reference(rng, ar, sb):
    """Every binade from FP32 subnormals to past FP16's range (overflowing values included: saturation
    and truncation are what they change), NaN and infinities."""
    x = np.concatenate([_binades(rng, -140, 20, 12), np.float32([np.nan, np.inf, -np.inf, 0, -0.0, 65504,
                                                                 65519.99, 65520, -65536, 1e30, 2.0 ** -24,
                                                                 2.0 ** -25, 2.0 ** -14, -2.0 ** -15])])
    hi, lo = split(x, sb, arithmetic=ar)
    want = np.array([reference_split(v, sb, ar) for v in x])
    assert np.array_equal(hi.astype(np.float64), want[:, 0], equal_nan=True)
    assert np.array_equal(lo.astype(np.float64), want[:, 1], equal_nan=True)


def test_each_conversion_alternative_changes_the_split(rng):
    x = _binades(rng, -30, 16, 50)
    base = split(x, 12)
    for spec, data in (("cast=trunc", x), ("overflow=saturate", np.float32([70000.0, -1e6])),
                       ("subnormals=flush", x)):
        got, ref = split(data, 12, arithmetic=spec), split(data, 12)
        assert not all(np.array_equal(g, r) for g, r in zip(got, ref)), field
    assert all(np.array_equal(g, r) for g, r in zip(split(x, 12, arithmetic="accumulate=truncate"), base))


@pytest.mark.parametrize("sb", [0, 6, 12, 16, 24])
def test_trunc_split_keeps_21_bits(rng, sb):
    """cast="trunc": |hi + lo 2**-sb - x| < max(2**-21 |x|, 2**(-24 - min(sb, 11))) below max_abs (attained
    within 1%), no overflow at the top (truncation stops at 65504), and more than rounding to
    nearest loses (one ulp of lo, not half)."""
    limits = split_limits(sb)
    x = _binades(rng, -149, 16, 300)
    x = np.concatenate([x, np.float32(limits.max_abs) - np.arange(1, 2000, dtype=np.float32)
                        * np.spacing(np.float32(limits.max_abs))])
    x = x[(np.abs(x) < limits.max_abs) & (x != 0)]
    hi, lo = split(x, sb, arithmetic="cast=trunc")
    assert np.all(np.isfinite(hi)) and np.all(np.isfinite(lo))
    err = np.abs(_reconstruct(hi, lo, sb) - x)
    bound = np.maximum(2.0 ** -21 * np.abs(x.astype(np.float64)), 2.0 ** (-24 - min(sb, 11)))
    assert np.all(err < bound) and (err / bound).max() > 0.99
    normal = np.abs(x) >= 2.0 ** (-3 - min(sb, 12))
    rel = err[normal] / np.abs(x[normal])
    assert rel.max() > 2.0 ** -23, "truncation costs more than rounding to nearest"


@pytest.mark.parametrize("sb", [0, 6, 12, 16, 24])
def test_flush_split_keeps_22_bits_above_its_lower_bound(rng, sb):
    """subnormals="flush": 22 bits (21 with truncation) from split_limits(sb, flush).min_row_abs =
    2**max(8 - sb, -14) up, and the gradual range's lower binades lose more than that."""
    flush = split_limits(sb, arithmetic="subnormals=flush")
    assert flush.min_row_abs == 2.0 ** max(8 - sb, -14) and flush.max_abs == split_limits(sb).max_abs
    x = _binades(rng, int(np.log2(flush.min_row_abs)), 16, 400)
    x = x[np.abs(x) < flush.max_abs]
    for ar, bits in (("subnormals=flush", 22), (WORST, 21)):
        hi, lo = split(x, sb, arithmetic=ar)
        rel = np.abs(_reconstruct(hi, lo, sb) - x) / np.abs(x)
        assert rel.max() <= 2.0 ** -bits, (ar, rel.max())
    gradual_low = split_limits(sb).min_row_abs
    if gradual_low < flush.min_row_abs:
        y = _binades(rng, int(np.log2(gradual_low)), int(np.log2(flush.min_row_abs)), 400)
        hi, lo = split(y, sb, arithmetic="subnormals=flush")
        assert (np.abs(_reconstruct(hi, lo, sb) - y) / np.abs(y)).max() > 2.0 ** -20


def test_saturated_split_at_the_top():
    """overflow="saturate": past 65520 hi is 65504, not infinity; inside max_abs nothing changes."""
    x = np.float32([65520.0, -1e6, 32767.0])
    hi, lo = split(x, 12, arithmetic="overflow=saturate")
    assert hi.tolist() == [65504.0, -65504.0, 32768.0] and np.isfinite(lo).all()
    assert np.isinf(split(x[:2], 12)[0]).all()


def test_line_range_follows_the_subnormals():
    for sb in (0, 6, 12, 20, 24):
        gradual, flush = line_range("fp16x3", sb), line_range("fp16x3", sb, WORST)
        assert gradual == line_range("fp16x3", sb, "cast=trunc,accumulate=truncate")  # only subnormals matter
        assert flush.lower == 2.0 ** max(8 - sb, -14) and flush.lower >= gradual.lower
        assert (flush.upper, flush.top) == (gradual.upper, gradual.top)
    assert line_range("bf16x9", 12, WORST) == line_range("bf16x9", 12)
    # a row whose smallest entry is 20 binades under its largest: split under gradual, fixed up under flush
    x = np.float32([[1.0, 2.0 ** -20, 0.5]])[None]
    assert line_meta(x, -1).cls.tolist() == [[0]] and line_meta(x, -1, arithmetic=WORST).cls.tolist() == [[1]]


def _wide(rng, shape, spread):
    return (rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread, shape)).astype(np.float32)


@pytest.mark.parametrize("ar", MODELLED, ids=IDS)
@pytest.mark.parametrize("order", ["termwise", "elementwise"])
def test_model_bit_exact_with_reference(rng, ar, order):
    for spread in (2, 11):  # inside the split's range: |x| < 2**15
        m, k, n = rng.integers(1, 5), rng.integers(1, 40), rng.integers(1, 5)
        a, b = _wide(rng, (m, k), spread), _wide(rng, (k, n), spread)
        sb = int(rng.choice([0, 6, 12]))
        fast = emulated_matmul(a, b, sb=sb, order=order, arithmetic=ar)
        slow = reference_matmul(a, b, sb=sb, order=order, arithmetic=ar)
        assert np.array_equal(fast, slow), (m, k, n, sb)


def test_truncate_reaches_the_exact_fallbacks_and_stays_exact(rng, monkeypatch):
    """Chunks too wide for float64 are summed in long double or Python integers, truncated there."""
    seen = []
    original = accumulate_mod._exact_pair_sums
    monkeypatch.setattr(accumulate_mod, "_exact_pair_sums", lambda *a: seen.append(a[-1]) or original(*a))
    a = (rng.uniform(-1, 1, (4, 48)) * 2.0 ** rng.integers(-14, 15, (4, 48))).astype(np.float32)
    b = (rng.uniform(-1, 1, (48, 5)) * 2.0 ** rng.integers(-14, 15, (48, 5))).astype(np.float32)
    fast = emulated_matmul(a, b, accumulate="truncate")
    assert np.array_equal(fast, reference_matmul(a, b, accumulate="truncate"))
    assert "trunc" in seen
    assert not np.array_equal(fast, emulated_matmul(a, b))


def test_truncate_continues_across_k_blocks_and_differs(rng):
    x = rng.uniform(0, 1, (9, 160)).astype(np.float16)
    y = rng.uniform(0, 1, (160, 11)).astype(np.float16)
    whole = accumulate_product(x, y, accumulate="truncate")
    acc = None
    for k0 in range(0, 160, 32):
        acc = accumulate_product(x[:, k0:k0 + 32], y[k0:k0 + 32], accumulate="truncate", acc=acc)
    assert np.array_equal(whole, acc)
    cube16 = accumulate_product(x, y)
    assert np.all(whole <= cube16) and np.any(whole < cube16)  # positive sums: toward zero is below nearest


def test_accumulate_argument_and_arithmetic_agree():
    a = np.ones((2, 16), np.float32)
    assert np.array_equal(emulated_matmul(a, a.T, arithmetic="accumulate=sequential"),
                          emulated_matmul(a, a.T, accumulate="sequential"))
    with pytest.raises(ValueError, match="contradicts"):
        emulated_matmul(a, a.T, accumulate="sequential", arithmetic="accumulate=truncate")


def test_round_scaled_int_toward_zero(rng):
    for _ in range(2000):
        n = int(rng.integers(1, 2 ** 62)) * int(rng.choice([-1, 1])) >> int(rng.integers(0, 40))
        e = int(rng.integers(-200, 80))
        assert round_scaled_int(n, e, "trunc") == _round_to_f32(Fraction(n) * Fraction(2) ** e, "trunc")
    assert round_scaled_int((1 << 25) - 1, 0, "trunc") == np.float32(2 ** 25 - 2)
    assert round_scaled_int(1, 128, "trunc") == np.finfo(np.float32).max
    assert round_scaled_int(-1, 200, "trunc") == -np.finfo(np.float32).max
    with pytest.raises(ValueError, match="rounding"):
        round_scaled_int(1, 0, "up")


def test_add_toward_zero_is_the_exact_sum_truncated(rng):
    x = (rng.standard_normal(6000) * 2.0 ** rng.integers(-60, 60, 6000)).astype(np.float32)
    y = (rng.standard_normal(6000) * 2.0 ** rng.integers(-60, 60, 6000)).astype(np.float32)
    y[:50], y[50:100] = -x[:50], -np.nextafter(x[50:100], np.float32(0))  # exact zeros, tiny differences
    y[100:150] = x[100:150] * np.float32(2.0 ** -40)                     # far below half an ulp
    got = add_toward_zero(x, y)
    want = [_round_to_f32(Fraction(float(p)) + Fraction(float(q)), "trunc") for p, q in zip(x, y)]
    assert np.array_equal(got, np.array(want, np.float32))
    big = np.float32(3.4e38)
    assert add_toward_zero(big, big) == np.finfo(np.float32).max  # toward zero never overflows
    assert to_f32_toward_zero(np.array([1 + 2.0 ** -30, -(1 + 2.0 ** -30), 1e300])).tolist() == \
        [1.0, -1.0, float(np.finfo(np.float32).max)]
