"""The CUDA fix-up programs and issue 33's silent answers, under TRITON_INTERPRET=1 (CPU, NumPy).

The fix-up programs (``sgemm_cube/backends/cuda/fixup_kernel.py``) sum the exact FP64 products on the
FP64 tensor cores; where huge terms cancel, that sum's error can carry a result across FP32's overflow
threshold (issue 33: a finite 2.0057e38 came out -inf, an overflowing 4.04e38 came out 0.0).  Each
tile now checks whether its outputs' error bounds reach the threshold (from the lines' meta, then, if
needed, from one more pass over K), and computes an undecided tile exactly (``exact_dot``: integer
limbs, one rounding).  Checked here against the exact value from Python integers
(``tests/guarantee_data.exact_fp32``, itself checked against ``fractions.Fraction`` in
``tests/cpu_fallback/test_fixup_exact.py``):

* both issue cases through ``sgemm_cube.matmul(backend="cuda")``: the exact rounding, bit for bit (the
  CPU model's too), float64 and native FP32 beside;
* a search of 256 outputs of huge terms that cancel (fixed seed): every one the exact rounding;
* ``exact_dot`` alone: ties (also ties the FP64 head lands on), subnormal results, the overflow
  threshold, alpha, wide-range data, and IEEE special values;
* ordinary fix-up data (lines over FP32's whole range, near-overflow, NaN/Inf) never leave the FP64 path
  (neither the extra pass nor the exact one runs) and meet the guarantee.
"""
import numpy as np
import pytest

from tests.sgemm_cube.backends.cuda import require_interpreter

torch = require_interpreter("tests/gpu/test_fixup_exact_gpu.py")
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import sgemm_cube  # noqa: E402
from sgemm_cube.backends.cuda import fixup_kernel  # noqa: E402
from sgemm_cube.cpu_fallback.guard import fixup_dot as cpu_fixup_dot  # noqa: E402

from tests.guarantee_data import (GENERATORS, cancelling_huge_terms, check_guarantee, exact_fp32,  # noqa: E402
                                  ieee_special_values, rng_for, same_bits_any_zero, sequential_fp32,
                                  silent_answer_cases, emulated_overflow_cases, check_emulated_overflow)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FMAX = float(np.finfo(np.float32).max)


def _cuda(a, b, alpha=1.0):
    """The CUDA kernels (default options) on 2-D NumPy operands: ``alpha * (a @ b)``."""
    if alpha == 1.0:
        return sgemm_cube.matmul(torch.from_numpy(a), torch.from_numpy(b), backend="cuda").numpy()
    from sgemm_cube.backends.cuda import launch

    out = torch.full((1, a.shape[0], b.shape[1]), float("nan"))
    launch.run(torch.from_numpy(a)[None], torch.from_numpy(b)[None], out, sb=12, order="termwise", scheme="fp16x3",
               scale="auto", fixup=True, alpha=alpha)
    return out[0].numpy()


@pytest.mark.parametrize("case", range(2))
def test_issue_33_silent_answers_on_the_cuda_kernels(case):
    """The issue's cases through the CUDA kernels: the exact rounding (2.0057e38; +inf), as the CPU model
    gives it; the float64 sum (the former fix-up) gives -inf and 0.0, native FP32 NaN."""
    name, a, b, exact = silent_answer_cases()[case]
    c = _cuda(a, b)
    with np.errstate(all="ignore"):
        former = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert same_bits_any_zero(c, exact) and same_bits_any_zero(c, cpu_fixup_dot(a, b)), (name, c, exact, former, sequential_fp32(a, b))
    assert check_guarantee(c, a, b) == "", name
    # the same with alpha (the undecided tile is computed exactly: alpha times the exact sum, rounded once)
    assert same_bits_any_zero(_cuda(a, b, alpha=-0.5), exact_fp32(a, b, -0.5)), name


@pytest.mark.parametrize("case", [0, 1], ids=["cancelling", "certain"])
def test_emulated_lines_never_overflow_where_the_exact_result_is_finite_on_the_cuda_kernels(case):
    """As on the CPU model (``tests/cpu_fallback/test_fixup_exact.py``): scaled and split lines whose sums
    overflow on unscaling are computed again where the error bound leaves the exact result possibly finite
    (the epilogue, ``gemm_tiles.store_tile``, calls ``fixup_kernel.recheck_overflow_tile``: the exact 0s), and
    are the infinity of their sign where the exact result certainly overflows (times alpha = -0.5 too)."""
    name, a, b = emulated_overflow_cases(np.random.default_rng(1))[case]
    assert (msg := check_emulated_overflow(name, _cuda(a, b), a, b)) == "", msg
    if name == "certain":  # (alpha on the recomputed outputs: tests/gpu/test_fixup_exact_gpu.py; slow here)
        assert np.array_equal(_cuda(a, b, alpha=-0.5), exact_fp32(a, b, -0.5)), name


def test_overflow_recheck_reads_the_chosen_schemes_lines(monkeypatch):
    """scheme="auto" choosing bf16x6: rows that fp16x3 would list (an entry 2**-40 below the rest, where B
    is 0) are emulated by bf16x6, and their overflowing outputs whose exact value is 0 are computed again
    (the recheck reads bf16x6's line meta, not fp16x3's, which would leave them infinite)."""
    from sgemm_cube.backends.cuda import launch
    from sgemm_cube.cpu_fallback.guard import choose_scheme

    monkeypatch.setattr(launch, "AUTO_MIN_FLOPS", 0.0)
    name, a, b = emulated_overflow_cases(np.random.default_rng(1))[0]
    free = np.flatnonzero(b[:, 0] == 0)[0]
    a[:, free] = np.abs(a).max(axis=1) * np.float32(2.0 ** -40)
    assert choose_scheme(a[None], b[None], margin=launch.AUTO_MARGIN) == "bf16x6"
    c = sgemm_cube.matmul(torch.from_numpy(a), torch.from_numpy(b), backend="cuda").numpy()
    assert (msg := check_emulated_overflow(name, c, a, b)) == "", msg


def test_cancelling_huge_terms_search_on_the_cuda_kernels(request):
    """256 outputs of huge terms that cancel (4 draws of 8 x 48 x 8, a fixed seed): every output is the
    exact rounding."""
    rng, seed = rng_for(request.node.nodeid)
    for _ in range(4):
        a, b = cancelling_huge_terms(rng, 8, 48, 8)
        c, exact = _cuda(a, b), exact_fp32(a, b)
        bad = ~((c == exact) | ((c == 0) & (exact == 0)))
        assert not bad.any(), f"{int(bad.sum())} outputs differ, e.g. {c[bad][:3]} vs {exact[bad][:3]}\n{seed}"
        assert 0 < np.isinf(exact).sum() < exact.size


@triton.jit
def _exact_dot_kernel(x, y, o, R, C, K, alpha, RB: tl.constexpr, CB: tl.constexpr):
    r = tl.arange(0, RB)
    c = tl.arange(0, CB)
    out = fixup_kernel.exact_dot(x, r.to(tl.int64) * K, r < R, 1, y, c.to(tl.int64), c < C, C, K, alpha, RB, CB)
    tl.store(o + r[:, None] * C + c[None, :], out, mask=(r < R)[:, None] & (c < C)[None, :])


def _exact_dot(a, b, alpha=1.0):
    """``exact_dot`` on row-major (R, K) @ (K, C), R <= 8, C <= 16."""
    out = torch.full((a.shape[0], b.shape[1]), float("nan"))
    _exact_dot_kernel[(1,)](torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b)),
                            out, a.shape[0], b.shape[1], a.shape[1], alpha, 8, 16)
    return out.numpy()


#: (a row, b column) pairs whose exact sums lie on or next to FP32's rounding boundaries.
BOUNDARY_CASES = [
    ([1, 2 ** -24], [1, 1]), ([1, 2 ** -24, 2 ** -80], [1, 1, 1]), ([1, 2 ** -24, -2 ** -80], [1, 1, 1]),
    ([2 ** -75, 0], [2 ** -75, 0]), ([2 ** -75, 2 ** -100], [2 ** -75, 2 ** -100]), ([3 * 2 ** -75, 0], [2 ** -75, 0]),
    ([FMAX, 2 ** 103], [1, 1]), ([FMAX, 2 ** 103, -2 ** -100], [1, 1, 1]), ([FMAX, 2 ** 103, 2 ** -100], [-1, -1, -1]),
    ([1 + 2 ** -23, 1], [1 + 2 ** -23, -1]), ([2 ** -149, 2 ** -149], [0.5, 0.25]),
]


def _boundary_operands():
    """BOUNDARY_CASES as rows of A and columns of B (zero padded): case i is output (i, i); the others
    are exact sums too."""
    k = max(len(xs) for xs, _ in BOUNDARY_CASES)
    a = np.zeros((len(BOUNDARY_CASES), k), np.float32)
    b = np.zeros((k, len(BOUNDARY_CASES)), np.float32)
    for i, (xs, ys) in enumerate(BOUNDARY_CASES):
        a[i, :len(xs)], b[:len(ys), i] = xs, ys
    return a, b


def test_exact_dot_rounds_once():
    """``exact_dot`` is the exact rounding, bit for bit: rounding boundaries (the tie, the subnormal tie,
    the overflow threshold), with alpha; wide-range (2**-149 .. 2**127), normal and subnormal-result data."""
    rng = np.random.default_rng(5)
    a, b = _boundary_operands()
    for alpha in (1.0, 0.75, -1.0, 2.0 ** -10, 3e30):
        for r0 in range(0, a.shape[0], 8):
            assert same_bits_any_zero(_exact_dot(a[r0:r0 + 8], b, alpha), exact_fp32(a[r0:r0 + 8], b, alpha)), (r0, alpha)
    for alpha in (1.0, -0.3, 1e-38):
        x = rng.uniform(1, 2, (8, 20)) * rng.choice([-1, 1], (8, 20)) * 2.0 ** rng.integers(-149, 128, (8, 20))
        y = rng.uniform(1, 2, (20, 16)) * rng.choice([-1, 1], (20, 16)) * 2.0 ** rng.integers(-149, 128, (20, 16))
        a, b = np.clip(x, -FMAX, FMAX).astype(np.float32), np.clip(y, -FMAX, FMAX).astype(np.float32)
        assert same_bits_any_zero(_exact_dot(a, b, alpha), exact_fp32(a, b, alpha)), alpha
        a, b = (rng.standard_normal((8, 9)) * 1e-30).astype(np.float32), (rng.standard_normal((9, 16)) * 1e-15).astype(np.float32)
        assert same_bits_any_zero(_exact_dot(a, b, alpha), exact_fp32(a, b, alpha)), alpha
    a, b = cancelling_huge_terms(rng, 8, 40, 16)
    assert same_bits_any_zero(_exact_dot(a, b), exact_fp32(a, b))


def test_exact_dot_special_values_are_ieee():
    """NaN and infinities: IEEE arithmetic's sum of the products (inf * 0 and inf - inf NaN), times alpha."""
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 6)).astype(np.float32)
    a[0, 1], a[1, 2], b[3, 2], b[1, 4], a[2, 3], a[3, 0], b[0, 5] = np.inf, np.nan, -np.inf, 0, 0, -np.inf, np.inf
    rows, cols = np.isfinite(a).all(axis=1), np.isfinite(b).all(axis=0)
    for alpha in (1.0, -2.0, 0.0):
        c, ieee = _exact_dot(a, b, alpha), (ieee_special_values(a, b) * float(np.float32(alpha))).astype(np.float32)
        for test in (np.isnan, np.isposinf, np.isneginf):
            assert np.array_equal(test(c), test(ieee)), (alpha, test.__name__, c, ieee)
        # outputs of finite rows and columns beside them: the exact rounding
        assert same_bits_any_zero(c[rows][:, cols], exact_fp32(a[rows], b[:, cols], alpha)), alpha


def _count_calls(monkeypatch):
    """Count the extra passes and the exact path the fix-up programs take (the interpreter calls the
    module's functions by name)."""
    calls = {"_check_tile": 0, "_col_maxima": 0, "_abs_dot": 0, "exact_dot": 0}
    for name in calls:
        real = getattr(fixup_kernel, name)

        def counted(*args, _real=real, _name=name, **kw):
            calls[_name] += 1
            return _real(*args, **kw)

        monkeypatch.setattr(fixup_kernel, name, counted)
    return calls


#: (generator, the extra work its fix-up programs do).  Every program reads its tiles back and checks them
#: (``_check_tile``, bounds from the line meta): most data clear there.  A tile is recomputed with the other
#: lines' maxima (``_col_maxima``, a pass of loads) where a line near FP32's top (3e38) meets unscaled lines
#: (bounded by the split's upper limit only), or where it holds an infinite output (the check does not tell an
#: infinity of the operands from an overflow); with sum |x y| too (``_abs_dot``, an FP64 dot) where lines span
#: FP32's whole range on both sides (every bound from sizes alone is ~2**254).  Never the exact path.
ORDINARY = [("one_huge_per_row", ("_check_tile",)), ("half_scaled_1e-10", ("_check_tile",)),
            ("cond_phi5", ("_check_tile",)), ("row_span_120", ("_check_tile",)),
            ("specials_half_scaled", ("_check_tile", "_col_maxima")),
            ("special_vs_extremes", ("_check_tile", "_col_maxima")),
            ("full_range_rows", ("_check_tile", "_col_maxima", "_abs_dot")),
            ("full_range_cols", ("_check_tile", "_col_maxima", "_abs_dot"))]


@pytest.mark.parametrize("gen, passes", ORDINARY)
def test_ordinary_fixup_data_stay_on_the_fp64_path(monkeypatch, gen, passes):
    """Fix-up lines of ordinary data (FP32's whole range, huge single entries, NaN/Inf) never take the exact
    path, and most no extra pass over K; within the guarantee."""
    calls = _count_calls(monkeypatch)
    a, b = GENERATORS[gen](np.random.default_rng(3), 33, 48, 29)
    c = _cuda(a, b)
    assert {name for name, n in calls.items() if n} == set(passes), (gen, calls)
    assert check_guarantee(c, a, b) == "", gen


def test_the_issue_cases_take_the_exact_path(monkeypatch):
    calls = _count_calls(monkeypatch)
    for _, a, b, exact in silent_answer_cases():
        assert same_bits_any_zero(_cuda(a, b), exact)
    assert all(n >= 2 for n in calls.values()), calls


def _cancelling_wide_lines(rng, m, k, n, rows, cols):
    """Wide rows (an entry 2**-40 below each row's largest, against a zero row of B) whose outputs in ``rows``
    and ``cols`` cancel to a term 2**-26 below the top, which the certificate (``scale="rows"``) fails; the
    other outputs keep a term at the top.  Half of K holds X and X against Y and -Y, every entry with few bits,
    so that the failing outputs' sums are exact in FP64 in any order.  Returns a, b and the failing outputs."""
    half = k // 2 - 2
    x = np.round(rng.standard_normal((m, half)) * 32) / 32
    y = np.round(rng.standard_normal((half, n)) * 32) / 32
    a, b = np.zeros((m, k)), np.zeros((k, n))
    a[:, :half], a[:, half:2 * half], b[:half], b[half:2 * half] = x, x, y, -y
    top = 2.0 ** np.ceil(np.log2(np.abs(x).max(axis=1)))
    a[:, -3], b[-3] = top * 2.0 ** -40, 0.0                 # the wide entry
    a[:, -2], b[-2] = top * 2.0 ** -26, np.round(rng.standard_normal(n) * 32) / 32
    a[:, -1], b[-1] = top, 1.0
    a[rows, -1], b[-1, cols] = 0.0, 0.0
    failing = np.zeros((m, n), bool)
    failing[rows], failing[:, cols] = True, True
    return a.astype(np.float32), b.astype(np.float32), failing


@pytest.mark.parametrize("rows, cols, piece_dots", [([3], [], False), ([3], [2], False), ([5], [1, 7], True)],
                         ids=["12", "59", "74-and-32"])
def test_certified_recheck_few_outputs_and_whole_pieces_agree(monkeypatch, rows, cols, piece_dots):
    """The recheck computes the outputs the certificate fails one by one where a piece (32 x 64 outputs) holds
    at most ``fixup_kernel._FEW_MAX`` (64) of them (``_few_outputs``, in gathers of ``_FEW``), and by the
    piece's FP64 dots beyond (in the last case the first piece holds 74, the second 32; forced everywhere by
    setting ``_FEW_MAX`` to 0): the same bits either way, and on the failing outputs, whose FP64 sums are
    exact, the exact rounding; within the guarantee; the other outputs are the split's (their bits without
    recomputation)."""
    a, b, failing = _cancelling_wide_lines(np.random.default_rng(7), 48, 40, 12, rows, cols)
    run = lambda **kw: sgemm_cube.matmul(torch.from_numpy(a), torch.from_numpy(b), backend="cuda",  # noqa: E731
                                         scheme="fp16x3", scale="rows", **kw).numpy()
    calls = _count_calls(monkeypatch)
    few = run()
    assert (calls["_abs_dot"] > 0) == piece_dots, calls
    monkeypatch.setattr(fixup_kernel, "_FEW_MAX", tl.constexpr(0))
    pieces = run()
    assert calls["_abs_dot"] > 0, calls
    assert same_bits_any_zero(few, pieces)
    assert same_bits_any_zero(few[failing], exact_fp32(a, b)[failing])
    assert same_bits_any_zero(few[~failing], run(fixup=False)[~failing])
    assert check_guarantee(few, a, b) == ""
