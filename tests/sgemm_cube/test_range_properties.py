"""Randomized special values and extreme exponents (hypothesis): NaN/Inf reach what they touch, never
turn finite, and finite representable results stay finite, for every scheme and scaling option.

Its own module so that a missing hypothesis skips only these tests (``pytest.importorskip``).  The
examples are fixed by default (tests/conftest.py loads a derandomized profile) and fresh, drawn from
the session seed, under ``SGEMM_CUBE_TEST_SEED=random`` or ``=<int>``.
"""
import numpy as np
import pytest

import sgemm_cube

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

FLT_MAX = float(np.finfo(np.float32).max)

_values = st.one_of(
    st.floats(width=32, allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e4, max_value=1e4, width=32),
    st.sampled_from([0.0, 1.0, -1.0, 1e-45, 3e38, -3e38]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a busy 2-core CI
@given(a=hnp.arrays(np.float32, st.tuples(st.integers(1, 5), st.integers(1, 20)), elements=_values),
       n=st.integers(1, 5), seed=st.integers(0, 2 ** 32 - 1),
       options=st.sampled_from([{}, {"backend": "cpu"}, {"backend": "cpu", "scheme": "bf16x9"},
                                {"backend": "cpu", "scale": "rows"}, {"backend": "cpu", "scale": None},
                                {"backend": "cpu", "scale": None, "fixup": False}]))
def test_special_values_and_extremes_never_turn_finite(a, n, seed, options):
    """K is 1 to 20: backend="cpu" makes the emulation run below K = 16 too (auto runs native there)."""
    rng = np.random.default_rng(seed)
    b = (rng.uniform(-1, 1, (a.shape[1], n)) * 2.0 ** rng.integers(-60, 60, (a.shape[1], n))).astype(np.float32)
    with np.errstate(all="ignore"):
        ref = a.astype(np.float64) @ b.astype(np.float64)
    with np.errstate(all="ignore"):
        c = sgemm_cube.matmul(a, b, **options)
    assert c.shape == ref.shape and c.dtype == np.float32
    nan, inf = np.isnan(ref), np.isinf(ref)
    assert np.all(np.isnan(c[nan]))                                    # NaN reaches what it touches
    assert np.all(~np.isfinite(c[inf]))                                # an Inf may become NaN, never finite
    assert np.all(np.sign(c[inf & ~np.isnan(c)]) == np.sign(ref[inf & ~np.isnan(c)]))
    # |A| @ |B| below FLT_MAX / 2: no partial sum can overflow, in any summation order (outputs that K < 16
    # or scale=None leave to this host's FP32 BLAS included)
    with np.errstate(all="ignore"):
        absab = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    representable = np.isfinite(absab) & (absab < FLT_MAX / 2)
    assert np.all(np.isfinite(c[representable]))                       # no spurious NaN/Inf
