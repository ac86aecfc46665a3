"""Issue 33's silent answers on the compiled CUDA kernels: run ``pytest tests/gpu -m gpu`` on a CUDA GPU.

The same claims as ``tests/sgemm_cube/backends/cuda/test_fixup_exact_cuda.py`` (the kernels under Triton's
interpreter), on the compiled kernels and at shapes of several tiles, against the exact value from Python
integers (``tests/guarantee_data.exact_fp32``):

* both issue cases: the exact rounding (2.0057e38; +inf), bit for bit, also times alpha;
* huge terms that cancel (``cancelling_huge_terms``) over several fix-up tiles and pieces: every output
  the exact rounding, bit for bit the CPU model's;
* lines spanning FP32's whole range (they take the extra checks, not the exact path) and ordinary
  wide-range data: within the guarantee.
"""
import numpy as np
import pytest

from tests.gpu import require_gpu

torch = require_gpu()
pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

import sgemm_cube  # noqa: E402
from sgemm_cube.backends.cuda import launch  # noqa: E402
from sgemm_cube.cpu_fallback.guard import fixup_dot  # noqa: E402

from tests.guarantee_data import (GENERATORS, cancelling_huge_terms, check_guarantee, exact_fp32,  # noqa: E402
                                  rng_for, silent_answer_cases, emulated_overflow_cases,
                                  check_emulated_overflow)


def _same(x, y):
    """Bit for bit, but +0 == -0 (the sign of an exact zero is not claimed)."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return x.shape == y.shape and bool(np.all((x.view(np.int32) == y.view(np.int32)) | ((x == 0) & (y == 0))))


def _cuda(a, b, alpha=1.0):
    ta, tb = torch.from_numpy(np.ascontiguousarray(a)).cuda(), torch.from_numpy(np.ascontiguousarray(b)).cuda()
    if alpha == 1.0:
        return sgemm_cube.matmul(ta, tb, backend="cuda").cpu().numpy()
    out = torch.full((1, a.shape[0], b.shape[1]), float("nan"), device="cuda")
    launch.run(ta[None], tb[None], out, sb=12, order="termwise", scheme="fp16x3", scale="auto", fixup=True,
               alpha=alpha)
    return out[0].cpu().numpy()


@pytest.mark.parametrize("case", range(2))
def test_issue_33_silent_answers_on_the_gpu(case):
    name, a, b, exact = silent_answer_cases()[case]
    c = _cuda(a, b)
    assert _same(c, exact), (name, c, exact)
    assert check_guarantee(c, a, b) == "", name
    assert _same(_cuda(a, b, alpha=-0.5), exact_fp32(a, b, -0.5)), name


@pytest.mark.parametrize("case", [0, 1], ids=["cancelling", "certain"])
def test_emulated_lines_never_overflow_where_the_exact_result_is_finite_on_the_gpu(case):
    """As on the CPU model (``tests/cpu_fallback/test_fixup_exact.py``): scaled and split lines whose sums
    overflow on unscaling are computed again where the error bound leaves the exact result possibly finite
    (the epilogue, ``gemm_tiles.store_tile``, calls ``fixup_kernel.recheck_overflow_tile``: the exact 0s), and
    are the infinity of their sign where the exact result certainly overflows; also times alpha = -0.5."""
    name, a, b = emulated_overflow_cases(np.random.default_rng(1))[case]
    assert (msg := check_emulated_overflow(name, _cuda(a, b), a, b)) == "", msg
    c = _cuda(a, b, alpha=-0.5)
    assert not (np.isinf(c) & np.isfinite(exact_fp32(a, b, -0.5))).any(), name
    assert name != "certain" or np.array_equal(c, exact_fp32(a, b, -0.5)), name


@pytest.mark.parametrize("shape", [(8, 48, 8), (70, 96, 150), (130, 40, 33)])
def test_cancelling_huge_terms_on_the_gpu(request, shape):
    """Every output the exact rounding, bit for bit the CPU model's, over several tiles and pieces."""
    rng, seed = rng_for(request.node.nodeid)
    for _ in range(2):
        a, b = cancelling_huge_terms(rng, *shape)
        c, exact = _cuda(a, b), exact_fp32(a, b)
        bad = ~((c == exact) | ((c == 0) & (exact == 0)))
        assert not bad.any(), f"{int(bad.sum())} of {c.size} differ, e.g. {c[bad][:3]} vs {exact[bad][:3]}\n{seed}"
        assert _same(c, fixup_dot(a, b)), seed


@pytest.mark.parametrize("gen", ["full_range_rows", "full_range_cols", "special_vs_extremes", "near_overflow",
                                 "one_huge_per_row", "cond_phi5"])
def test_wide_range_fixup_data_on_the_gpu(request, gen):
    rng, seed = rng_for(request.node.nodeid)
    for shape in [(300, 200, 100), (64, 1000, 96)]:
        a, b = GENERATORS[gen](rng, *shape)
        msg = check_guarantee(_cuda(a, b), a, b)
        assert not msg, f"{gen} {shape}\n{msg}\n{seed}"
