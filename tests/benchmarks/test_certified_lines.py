"""``benchmarks/certified_lines.py``'s count of failing outputs is the library's: on the CPU model, with every
line scaled to the top (``scale="rows"``), the outputs the certified product computes again (those that differ
from the same product without the fix-up) are among those the script's certificate fails, and positive wide
data fails none.  (The certificate itself is tested where the library applies it: ``tests/sgemm_cube/
test_guarantee.py``, ``test_certified_*``.)"""
import numpy as np
import pytest
import torch

import sgemm_cube
from benchmarks.certified_lines import failing_tiles, line_meta, uncertified
from sgemm_cube.cpu_fallback.guard import certificate_threshold
from tests.guarantee_data import GENERATORS, rng_for


def _script_and_library(a, b):
    """The outputs the script's certificate fails on the proxy's output, and where the certified product
    differs from the proxy."""
    proxy = sgemm_cube.matmul(a, b, backend="cpu", scheme="fp16x3", scale="rows", fixup=False)
    certified = sgemm_cube.matmul(a, b, backend="cpu", scheme="fp16x3", scale="rows")
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    fail = uncertified(torch.from_numpy(proxy), line_meta(ta, 0), line_meta(tb, 1), certificate_threshold(a.shape[1]))
    return fail.numpy(), certified.view(np.uint32) != proxy.view(np.uint32)


@pytest.mark.parametrize("k", [16, 48, 256])
def test_recomputed_outputs_are_those_the_script_counts(k, request):
    gen, replay = rng_for(request.node.nodeid)
    a, b = GENERATORS["wide_cancel"](gen, 24, k, 20)
    fail, recomputed = _script_and_library(a, b)
    assert recomputed.any(), replay
    assert not (recomputed & ~fail).any(), replay


def test_positive_wide_lines_fail_nothing(request):
    gen, replay = rng_for(request.node.nodeid)
    a = np.exp(3 * gen.standard_normal((24, 512)))
    b = np.exp(3 * gen.standard_normal((512, 20)))
    a[:, 0] = 2.0 ** -40 * a.max(axis=1)  # every line reaches below the split's range
    b[0, :] = 2.0 ** -40 * b.max(axis=0)
    fail, recomputed = _script_and_library(a.astype(np.float32), b.astype(np.float32))
    assert not fail.any() and not recomputed.any(), replay


def test_failing_tiles_cover_the_failing_outputs():
    fail = torch.zeros(300, 200, dtype=torch.bool)
    fail[0, 0] = fail[299, 130] = True
    tiles = failing_tiles(fail)
    assert tiles.shape == (3, 2) and tiles.sum() == 2 and tiles[0, 0] and tiles[2, 1]
