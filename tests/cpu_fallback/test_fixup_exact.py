"""The fix-up's outputs are the exact dot products rounded once to FP32 (issue 33's silent answers), on the CPU.

:func:`sgemm_cube.cpu_fallback.guard.fixup_dot` computes the outputs of the fix-up lines (rows of A and
columns of B the split cannot hold) from the unscaled operands.  Before, it returned the float64 sum of
the exact products rounded to FP32, and where huge terms cancel that sum is wrong by far more than FP32's
range: issue 33's K = 31 case came out -inf (exact 2.0057e38), its K = 48 case 0.0 (exact 4.04e38, +inf
in FP32).  Checked here, with the exact value from Python integers (``tests/guarantee_data.exact_fp32``,
itself checked against ``fractions.Fraction``), float64 and native FP32 (recursive summation) beside:

* both issue cases, through ``fixup_dot`` and ``sgemm_cube.matmul(backend="cpu")``: bit for bit the
  exact rounding, and within the guarantee against the (now exact near overflow) C64;
* a search of 384 outputs of huge terms that cancel (fixed seed): every one the exact rounding, where
  the float64 sum gets the finiteness or the sign wrong for a good share of them;
* exact rounding everywhere, not only there: wide-range, subnormal and near-overflow data, ties (also
  ties the float64 sum lands on), the overflow threshold, alpha;
* NaN and infinities in the operands as IEEE arithmetic gives them;
* the checker's C64 is the exact sum rounded to float64 where the float64 sum could decide overflow.
"""
from fractions import Fraction

import numpy as np
import pytest

import sgemm_cube
from sgemm_cube.cpu_fallback.guard import fixup_dot
from tests.guarantee_data import (GENERATORS, OVERFLOW, cancelling_huge_terms, check_emulated_overflow,
                                  check_guarantee, emulated_overflow_cases, exact_fp32, ieee_special_values,
                                  references, rng_for, same_bits_any_zero, sequential_fp32, silent_answer_cases)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FMAX = float(np.finfo(np.float32).max)


def _float64_sum(a, b, alpha=1.0):
    """The former fix-up: the float64 sum of the exact products, times alpha, rounded to FP32."""
    with np.errstate(all="ignore"):
        return (a.astype(np.float64) @ b.astype(np.float64) * float(np.float32(alpha))).astype(np.float32)


def _fraction_fp32(a, b, alpha=1.0):
    """The exact value by ``fractions.Fraction``, rounded to float32 by the same integer rule."""
    from tests.guarantee_data import _round_int_fp32

    out = np.empty((a.shape[0], b.shape[1]), np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            v = Fraction(float(np.float32(alpha))) * sum(
                (Fraction(float(p)) * Fraction(float(q)) for p, q in zip(a[i], b[:, j])), Fraction(0))
            num, den = v.numerator, v.denominator  # den is a power of two
            out[i, j] = _round_int_fp32(num, -(den.bit_length() - 1))
    return out


@pytest.fixture
def data(request):
    rng, seed = rng_for(request.node.nodeid)
    return rng, seed


def test_the_exact_reference_is_fractions():
    """``exact_fp32`` (integers) agrees with Fraction arithmetic, on the issue cases, huge cancelling terms,
    subnormal results and the whole range, with alpha."""
    rng = np.random.default_rng(33)
    pairs = [(a, b) for _, a, b, _ in silent_answer_cases()]
    pairs += [cancelling_huge_terms(rng, 4, 48, 5), GENERATORS["full_range_rows"](rng, 3, 40, 4),
              GENERATORS["underflow"](rng, 3, 20, 4), GENERATORS["near_overflow"](rng, 3, 20, 4)]
    for a, b in pairs:
        for alpha in (1.0, -0.3, 3e30):
            assert same_bits_any_zero(exact_fp32(a, b, alpha), _fraction_fp32(a, b, alpha))


@pytest.mark.parametrize("case", range(2))
def test_issue_33_silent_answers_are_exact(case):
    """The issue's cases: the exact product's rounding, finite (2.0057e38) and +inf (4.04e38), bit for bit;
    the float64 sum (the former fix-up) gave -inf and 0.0, native FP32 gives NaN."""
    name, a, b, exact = silent_answer_cases()[case]
    assert exact[0, 0] == (np.float32(2.0057011e38) if case == 0 else np.inf), (name, exact)
    native, former = sequential_fp32(a, b), _float64_sum(a, b)
    assert np.isnan(native[0, 0]) and former[0, 0] == (-np.inf if case == 0 else 0.0), (name, native, former)
    for c in (fixup_dot(a, b), sgemm_cube.matmul(a, b, backend="cpu"), sgemm_cube.matmul(a, b)):
        assert same_bits_any_zero(c, exact), (name, c, exact, native, former)
        assert check_guarantee(c, a, b) == "", name
    # The checker (its C64 exact here) rejects the former -inf for a finite result; the former 0.0 for an
    # overflowing one it accepts: the bound, 3 K 2**-24 |A||B| ~ 2e58 here, admits any finite value, so
    # only the comparison with the exact rounding above sees that answer.
    assert (check_guarantee(former, a, b) != "") == (case == 0), name


def test_cancelling_huge_terms_search_is_exact(data):
    """384 outputs of huge terms that cancel (6 draws of 8 x 48 x 8, a fixed seed): every output of the
    fix-up and of the public API is the exact rounding; the float64 sum gets the finiteness or the sign of
    many of them wrong (a search the former fix-up fails), native FP32 none right (its products overflow)."""
    rng, seed = data
    outputs = wrong_class = finite = 0
    for _ in range(6):
        a, b = cancelling_huge_terms(rng, 8, 48, 8)
        exact = exact_fp32(a, b)
        former = _float64_sum(a, b)
        for c in (fixup_dot(a, b), sgemm_cube.matmul(a, b, backend="cpu")):
            bad = ~((c == exact) | ((c == 0) & (exact == 0)))
            assert not bad.any(), f"{int(bad.sum())} outputs differ from the exact rounding, e.g. " \
                f"{c[bad][:3]} vs {exact[bad][:3]}\n{seed}"
            assert check_guarantee(c, a, b) == "", seed
        outputs += exact.size
        finite += int(np.isfinite(exact).sum())
        wrong_class += int((np.isinf(former) != np.isinf(exact)).sum() + (np.sign(former) != np.sign(exact)).sum())
        assert not np.isfinite(sequential_fp32(a, b)).any()
    assert outputs == 384 and 0.2 * outputs < finite < 0.8 * outputs, finite
    assert wrong_class > 0.1 * outputs, wrong_class  # the former fix-up's silent answers, found by this search


_F = np.float32
#: Operand pairs (a row, b column) whose exact sums lie on or next to FP32's rounding boundaries.
BOUNDARY_CASES = [
    ([1, 2 ** -24], [1, 1]),                              # a tie: to even (1)
    ([1, 2 ** -24, 2 ** -80], [1, 1, 1]),                 # the float64 sum lands on the tie; the rest is up
    ([1, 2 ** -24, -2 ** -80], [1, 1, 1]),                # ... down
    ([2 ** -75, 0], [2 ** -75, 0]),                       # 2**-150: the subnormal tie, to 0
    ([2 ** -75, 2 ** -100], [2 ** -75, 2 ** -100]),       # 2**-150 + 2**-200: up to 2**-149
    ([3 * 2 ** -75, 0], [2 ** -75, 0]),                   # 3 * 2**-150: the tie to 2**-148
    ([FMAX, 2 ** 103], [1, 1]),                           # the overflow threshold itself: inf
    ([FMAX, 2 ** 103, -2 ** -100], [1, 1, 1]),            # just below it: the largest finite value
    ([FMAX, 2 ** 103, 2 ** -100], [-1, -1, -1]),          # just beyond it, negative: -inf
    ([1 + 2 ** -23, 1], [1 + 2 ** -23, -1]),              # 2**-22 + 2**-46, exactly
]


@pytest.mark.parametrize("alpha", [1.0, 0.75, -1.0, 2.0 ** -10, 3e30])
def test_rounding_boundaries_and_alpha(alpha):
    for xs, ys in BOUNDARY_CASES:
        a, b = np.array([xs], _F), np.array(ys, _F)[:, None]
        want = exact_fp32(a, b, alpha)
        assert same_bits_any_zero(fixup_dot(a, b, alpha), want), (xs, ys, alpha, fixup_dot(a, b, alpha), want)


@pytest.mark.parametrize("gen", ["normal", "row_span_120", "one_tiny_per_row", "cond_phi5", "near_overflow",
                                 "overflow_edge", "underflow", "subnormal_mixed", "full_range_rows"])
def test_every_output_is_the_exact_rounding(data, gen):
    """Not only where terms cancel: wide-range, subnormal and near-overflow data, with alpha; and within the
    guarantee against float64 (native FP32 beside it in the checker)."""
    rng, seed = data
    for alpha in (1.0, 0.3, -2.5e-3, 1e-30):
        a, b = GENERATORS[gen](rng, 9, 37, 7)
        c = fixup_dot(a, b, alpha)
        assert same_bits_any_zero(c, exact_fp32(a, b, alpha)), (gen, alpha, seed)
        if alpha == 1.0:
            assert check_guarantee(c, a, b) == "", (gen, seed)


@pytest.mark.parametrize("gen", ["nan_inf", "inf_zero", "inf_opposite", "special_vs_extremes"])
def test_special_values_are_ieee(data, gen):
    """NaN and infinities in the operands come out as IEEE arithmetic sums the exact products; the finite
    outputs beside them are exact."""
    rng, seed = data
    a, b = GENERATORS[gen](rng, 9, 37, 7)
    c, ieee = fixup_dot(a, b), ieee_special_values(a, b)
    for test in (np.isnan, np.isposinf, np.isneginf):
        assert np.array_equal(test(c), test(ieee)), (gen, test.__name__, seed)
    rows, cols = np.isfinite(a).all(axis=1), np.isfinite(b).all(axis=0)
    assert same_bits_any_zero(c[rows][:, cols], exact_fp32(a[rows], b[:, cols])), (gen, seed)


def test_batched_and_strided_operands():
    """Broadcast batches and strided views give each product's exact rounding."""
    rng = np.random.default_rng(7)
    a = np.stack([cancelling_huge_terms(rng, 5, 32, 4)[0] for _ in range(3)])
    b = cancelling_huge_terms(rng, 5, 32, 4)[1]
    c = fixup_dot(a, b[None])
    for i in range(3):
        assert same_bits_any_zero(c[i], exact_fp32(a[i], b))
    at, bt = np.asfortranarray(a[1]), b[:, ::-1]
    assert same_bits_any_zero(fixup_dot(at, bt, -2.0), exact_fp32(a[1], np.ascontiguousarray(bt), -2.0))


@pytest.mark.parametrize("case", [0, 1], ids=["cancelling", "certain"])
def test_emulated_lines_never_overflow_where_the_exact_result_is_finite(case):
    """Issue 33's family outside the fix-up (``emulated_overflow_cases``): lines scaled and split, not fixed
    up, whose emulated sums overflow on unscaling.  Where the emulation's error bound leaves the exact
    result possibly finite the output is computed again exactly (6 of the 64 exact zeros had come out
    infinite: now 0), where the exact result certainly overflows it is the infinity of its sign; the
    guarantee holds."""
    from sgemm_cube.cpu_fallback.guard import LineClass, line_meta

    name, a, b = emulated_overflow_cases(np.random.default_rng(1))[case]
    for x, axis in ((a, -1), (b, -2)):
        assert (line_meta(x[None], axis).cls == LineClass.SPLIT).all()
    c = sgemm_cube.matmul(a, b, backend="cpu")
    assert (msg := check_emulated_overflow(name, c, a, b)) == "", msg
    c = sgemm_cube.matmul(a, b, backend="cpu", out=np.empty((a.shape[0], b.shape[1]), np.float32))
    assert (msg := check_emulated_overflow(name, c, a, b)) == "", msg


def test_undecided_overflow_is_where_the_error_bound_cannot_tell():
    """``guard.undecided_overflow``: an unscaled value at or beyond FP32's overflow threshold is decided
    where ``|c| - error_bound`` is beyond it too; alpha takes part; a non-finite alpha decides nothing."""
    from sgemm_cube.cpu_fallback.guard import undecided_overflow, unscale

    c = np.array([[2.5, -2.5, 1.5, 1.875]], np.float32)  # times 2**127: the first two and the last x 2 overflow
    ta, tb = np.array([-127], np.int32), np.zeros(4, np.int32)
    assert unscale(c, ta, tb).tolist() == [[np.inf, -np.inf, 1.5 * 2.0 ** 127, 1.875 * 2.0 ** 127]]
    assert undecided_overflow(c, ta, tb, 1.0, 2.0 ** -4).tolist() == [[False] * 4]
    assert undecided_overflow(c, ta, tb, 1.0, 1.0).tolist() == [[True, True, False, False]]
    assert undecided_overflow(c, ta, tb, 2.0, 2.0 ** -4).tolist() == [[False] * 4]  # 3.625 * 2**127 still over
    assert undecided_overflow(c, ta, tb, 2.0, 1.0).tolist() == [[False, False, True, True]]
    assert not undecided_overflow(c, ta, tb, 0.5, 1.0).any()  # nothing overflows
    assert not undecided_overflow(c, ta, tb, np.inf, 1.0).any()


def test_the_checkers_c64_is_exact_near_overflow():
    """references(): C64 is the float64 matmul, but where its error bound reaches FP32's overflow
    threshold it is the exact sum rounded once to float64 (math.fsum), so which results overflow, and
    their signs, are the exact product's."""
    rng = np.random.default_rng(11)
    for a, b in [(x, y) for _, x, y, _ in silent_answer_cases()] + [cancelling_huge_terms(rng, 8, 48, 8)]:
        c64, exact = references(a, b).c64, exact_fp32(a, b)
        assert np.array_equal(np.abs(c64) >= OVERFLOW, np.isinf(exact))
        assert np.array_equal(np.sign(c64), np.sign(exact))
    a, b = GENERATORS["normal"](rng, 6, 40, 5)  # ordinary data: the float64 matmul itself
    assert np.array_equal(references(a, b).c64, a.astype(np.float64) @ b.astype(np.float64))
