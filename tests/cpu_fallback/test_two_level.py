"""The two-level accumulation of cpu_fallback's termwise product (``k_group``, default ``K_GROUP`` = 1024).

Claims tested here:

* the fast model equals the scalar reference bit for bit with short groups (so several groups occur on
  small shapes), under the default arithmetic and under ``WORST`` (truncating second-level adds);
* K slabs of any length that keeps chunks whole give the same bits as one call, the groups' boundaries
  falling inside slabs or on them;
* the error stays flat in K (issue 32's target): on uniform [0, 1) data, 64 x K x 64, the default
  product at K = 32,768 is within 2x of its K = 1,024 error, and on normal data it is no worse than the
  one-level product's; native FP32 (float32 BLAS) is measured beside it, as a figure, not a bound.
"""
from __future__ import annotations

import numpy as np
import pytest

import sgemm_cube
from sgemm_cube.cpu_fallback import K_GROUP, ProductAccumulator, emulated_matmul
from sgemm_cube.cpu_fallback.arithmetic import WORST
from sgemm_cube.cpu_fallback.reference import reference_matmul
from sgemm_cube.metrics import reference_matmul64, relative_error


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.mark.parametrize("arithmetic", [None, WORST], ids=["default", "worst"])
@pytest.mark.parametrize("k, k_group", [(100, 32), (70, 48), (33, 16), (16, 16), (5, 16)])
@pytest.mark.parametrize("scheme", ["fp16x3", "fp16x4"])
def test_fast_model_equals_scalar_reference_in_groups(k, k_group, arithmetic, scheme):
    rng = np.random.default_rng([k, k_group])
    a = (rng.random((3, k)) * 2.0 ** rng.integers(-6, 6, (3, k))).astype(np.float32)
    b = rng.standard_normal((k, 4)).astype(np.float32)
    got = emulated_matmul(a, b, k_group=k_group, arithmetic=arithmetic, scheme=scheme)
    want = reference_matmul(a, b, k_group=k_group, arithmetic=arithmetic, scheme=scheme)
    assert np.array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("slab", [16, 48, 64, 112])
def test_slabs_cut_anywhere_on_chunks_give_the_same_bits(slab):
    rng = np.random.default_rng(slab)
    k = 3000  # three groups of 1024, the last ragged
    a, b = rng.random((5, k)).astype(np.float32), rng.random((k, 6)).astype(np.float32)
    acc = ProductAccumulator((5, 6))
    for k0 in range(0, k, slab):
        acc.add(a[:, k0:k0 + slab], b[k0:k0 + slab])
    assert np.array_equal(_bits(acc.result()), _bits(emulated_matmul(a, b)))


def test_k_group_is_checked():
    for bad in (0, 24, -16, 16.5):
        with pytest.raises(ValueError, match="k_group"):
            emulated_matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), k_group=bad)


def test_error_is_flat_in_k():
    """Issue 32's target, through the public API (backend="cpu", the model of the NPU arithmetic)."""
    rng = np.random.default_rng(32768)
    err, native, one_level = {}, {}, {}
    for dist in ("uniform", "normal"):
        for k in (1024, 32768):
            draw = rng.random if dist == "uniform" else rng.standard_normal
            a, b = draw((64, k)).astype(np.float32), draw((k, 64)).astype(np.float32)
            ref = reference_matmul64(a, b)
            err[dist, k] = relative_error(sgemm_cube.matmul(a, b), ref)
            native[dist, k] = relative_error(a @ b, ref)  # measured beside, never a bound (host BLAS)
            one_level[dist, k] = relative_error(emulated_matmul(a, b, k_group=None), ref)
    msg = f"two-level {err}, one level {one_level}, native {native}"
    assert err["uniform", 32768] <= 2.0 * err["uniform", 1024], msg
    assert one_level["uniform", 32768] > 3.0 * one_level["uniform", 1024], msg  # what the second level removes
    assert err["normal", 32768] <= one_level["normal", 32768], msg
    assert err["uniform", 32768] <= 2.0 ** -22 and err["normal", 32768] <= 2.0 ** -21, msg
    assert K_GROUP == 1024
