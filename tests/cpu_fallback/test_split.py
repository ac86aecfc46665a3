"""The split (cpu_fallback/split.py): bit-exact rule and documented guarantees."""
import math

import numpy as np
import pytest

from sgemm_cube.cpu_fallback import split, split_limits
from sgemm_cube.cpu_fallback.reference import reference_split


def _reconstruct(hi, lo, sb):
    return hi.astype(np.float64) + lo.astype(np.float64) * 2.0 ** -sb


def _binade_samples(rng, lo_exp, hi_exp, per=2000):
    x = np.concatenate([rng.uniform(1, 2, per) * 2.0 ** e for e in range(lo_exp, hi_exp)])
    return (x * rng.choice([-1, 1], x.size)).astype(np.float32)


@pytest.mark.parametrize("sb", [0, 6, 12, 16])
def test_split_matches_scalar_reference(rng, sb):
    x = _binade_samples(rng, -30, 15, per=40)
    x = x[np.abs(x) < split_limits(sb).max_abs]
    hi, lo = split(x, sb)
    expected = np.array([reference_split(v, sb) for v in x])
    assert np.array_equal(hi.astype(np.float64), expected[:, 0])
    assert np.array_equal(lo.astype(np.float64), expected[:, 1])


@pytest.mark.parametrize("sb", [0, 6, 12, 16, 24])
def test_error_bound_over_the_whole_range(rng, sb):
    limits = split_limits(sb)
    x = _binade_samples(rng, -149, 16, per=300)
    x = x[(np.abs(x) < limits.max_abs) & (x != 0)]
    hi, lo = split(x, sb)
    err = np.abs(_reconstruct(hi, lo, sb) - x)
    bound = np.maximum(2.0 ** -22 * np.abs(x.astype(np.float64)), 2.0 ** (-25 - min(sb, 12)))
    assert np.all(np.isfinite(hi)) and np.all(np.isfinite(lo))
    assert np.all(err <= bound)


@pytest.mark.parametrize("sb", [0, 6, 12])
def test_22_bits_inside_eq6_range(rng, sb):
    limits = split_limits(sb)
    x = _binade_samples(rng, -3 - sb, 16)
    x = x[np.abs(x) < limits.max_abs]
    hi, lo = split(x, sb)
    rel = np.abs(_reconstruct(hi, lo, sb) - x) / np.abs(x)
    assert rel.max() <= 2.0 ** -22
    # and plain FP16 alone keeps only 11 bits there: the low part matters
    assert np.max(np.abs(hi.astype(np.float64) - x) / np.abs(x)) > 2.0 ** -13


def test_sb12_covers_fp16_normal_range_as_the_paper_says():
    assert split_limits(12).min_row_abs == 2.0 ** -15 and split_limits(12).max_abs == 2.0 ** 15
    assert split_limits(0).max_abs == 65520.0


@pytest.mark.parametrize("sb", [0, 12, 16])
def test_overflow_bound_is_tight(sb):
    limits = split_limits(sb)
    below = np.nextafter(np.float32(limits.max_abs), np.float32(0))
    candidates = np.float32(below) - np.arange(0, 4096, dtype=np.float32) * np.spacing(np.float32(below))
    hi, lo = split(candidates.astype(np.float32), sb)
    assert np.all(np.isfinite(hi)) and np.all(np.isfinite(lo))
    above = (limits.max_abs + np.arange(1, 4096) * float(np.spacing(np.float32(limits.max_abs)))).astype(np.float32)
    hi, lo = split(above, sb)
    assert not (np.all(np.isfinite(hi)) and np.all(np.isfinite(lo))), "bound not tight: everything above fits"


def test_special_values_keep_their_value_in_hi_only():
    x = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    hi, lo = split(x, 12)
    assert math.isnan(hi[0]) and hi[1] == np.inf and hi[2] == -np.inf
    assert np.array_equal(lo[:3], np.zeros(3, np.float16))  # never inf - inf = NaN


def test_subnormal_fp32_inputs_split_to_finite_tiny_parts():
    x = np.array([1e-45, -3e-42, 1e-39, 2.0 ** -126], np.float32)
    for sb in (0, 12, 24):
        hi, lo = split(x, sb)
        assert np.all(np.isfinite(hi)) and np.all(np.isfinite(lo))
        assert np.all(np.abs(_reconstruct(hi, lo, sb) - x) <= 2.0 ** (-25 - min(sb, 12)))


@pytest.mark.parametrize("bad", [np.float64, np.float16, np.int32])
def test_split_refuses_other_dtypes(bad):
    with pytest.raises(TypeError, match="float32"):
        split(np.ones(3, bad), 12)


@pytest.mark.parametrize("sb", [-1, 25, 1.5, True])
def test_split_refuses_bad_sb(sb):
    with pytest.raises((TypeError, ValueError)):
        split(np.ones(3, np.float32), sb)
