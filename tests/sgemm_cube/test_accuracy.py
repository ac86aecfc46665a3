"""Accuracy claims, each against float64 with native FP32 measured beside it (Eq. 12)."""
import numpy as np
import pytest

import sgemm_cube
from sgemm_cube.cpu_fallback import accumulate_product
from sgemm_cube.metrics import reference_matmul64, relative_error

from tests.conftest import draw
from tests.guarantee_data import check_guarantee, fp32_matmul


@pytest.mark.parametrize("dist", ["normal", "uniform01", "uniform_pm1", "lognormal"])
@pytest.mark.parametrize("shape,term_bound,elem_bound", [
    ((96, 512, 80), 1.0, 1.5),   # termwise at least as accurate as native FP32 (measured ratio 0.45-0.7)
    ((33, 1000, 47), 2.0, 2.0),  # odd shape: NumPy's own kernel changes order here; the guarantee's 2x
])
def test_accuracy_against_native_fp32(rng, dist, shape, term_bound, elem_bound):
    """The defaults (termwise) meet the README's guarantee on every distribution: SGEMM's componentwise
    bound and the Frobenius error within twice max(native FP32's, 2**-24); on the light-tailed
    distributions they are at least as accurate as native FP32 at 96x512x80.

    order="elementwise" (an option, outside the guarantee) meets the componentwise bound everywhere
    and the 2x Frobenius claim on the light-tailed distributions only.  Signed log-normal (heavy
    tails: one huge entry decides both errors, native FP32 is sometimes lucky): err / max(native,
    2**-24) over 171 draws had median 0.65 / 0.80 (96x512x80 / 33x1000x47), maximum 2.53 /
    2.01, above 2 on 2 draws of 171; there the claim is FP32-level, err <= 6 * max(native, 2**-23).
    (Termwise on the same draws: maximum 1.69 / 1.55, the guarantee held on all.)
    """
    m, k, n = shape
    a, b = draw(rng, dist, (m, k)), draw(rng, dist, (k, n))
    ref = reference_matmul64(a, b)
    native = relative_error(fp32_matmul(a, b), ref)
    c_term, c_elem = sgemm_cube.matmul(a, b, 12), sgemm_cube.matmul(a, b, 12, order="elementwise")
    termwise, elementwise = relative_error(c_term, ref), relative_error(c_elem, ref)
    fp16 = relative_error(accumulate_product(a.astype(np.float16), b.astype(np.float16)), ref)
    assert check_guarantee(c_term, a, b) == ""
    assert check_guarantee(c_elem, a, b, frobenius=False) == ""
    if dist == "lognormal":
        assert elementwise <= 6.0 * max(native, 2.0 ** -23), (elementwise, native)
    else:
        assert termwise <= term_bound * native, (termwise, native)
        assert elementwise <= elem_bound * native, (elementwise, native)
    assert fp16 > 20 * native  # plain FP16 is far worse: the split is doing the work


def test_termwise_beats_elementwise_on_average(rng):
    """Fig. 7/8 of the paper: small terms first is more accurate."""
    ratios = []
    for dist in ["normal", "uniform01", "uniform_pm1"]:
        a, b = draw(rng, dist, (64, 768)), draw(rng, dist, (768, 64))
        ref = reference_matmul64(a, b)
        ratios.append(relative_error(sgemm_cube.matmul(a, b), ref)
                      / relative_error(sgemm_cube.matmul(a, b, order="elementwise"), ref))
    assert np.mean(ratios) < 1.0, ratios


@pytest.mark.parametrize("exp", [-12, -9])
def test_sb12_beats_sb0_on_small_exponents(rng, exp):
    """SGEMM-cube Fig. 8: the paper's split (no scaling, no FP32 fix-up) needs sb=12 there."""
    a = draw(rng, "uniform01", (64, 400), scale_exp=exp)
    b = draw(rng, "uniform01", (400, 48), scale_exp=exp)
    ref = reference_matmul64(a, b)
    native = relative_error(fp32_matmul(a, b), ref)
    sb12 = relative_error(sgemm_cube.matmul(a, b, 12, scale=None, fixup=False), ref)
    sb0 = relative_error(sgemm_cube.matmul(a, b, 0, scale=None, fixup=False), ref)
    assert sb12 <= native
    assert sb0 > 4 * sb12
    # The defaults hold every sb to FP32 accuracy (lines scaled into the split's range, or computed in FP32).
    for sb in (0, 12):
        assert relative_error(sgemm_cube.matmul(a, b, sb), ref) <= native, sb


def test_sequential_model_is_also_fp32_accurate(rng):
    a, b = draw(rng, "normal", (40, 300)), draw(rng, "normal", (300, 30))
    ref = reference_matmul64(a, b)
    err = relative_error(sgemm_cube.matmul(a, b, accumulate="sequential"), ref)
    assert err <= 2 * relative_error(fp32_matmul(a, b), ref)


def test_fourth_term_changes_little(rng):
    a, b = draw(rng, "normal", (50, 200)), draw(rng, "normal", (200, 40))
    ref = reference_matmul64(a, b)
    three = relative_error(sgemm_cube.matmul(a, b), ref)
    four = relative_error(sgemm_cube.matmul(a, b, scheme="fp16x4"), ref)
    assert four <= three * 1.1
