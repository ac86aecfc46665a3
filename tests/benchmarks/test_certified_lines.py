"""``benchmarks/certified_lines.py``'s certificate on the CPU model (no GPU, no interpreter): with every line
scaled to the top and every wide line emulated (``scale="rows"``, ``fixup=False``), the outputs the
certificate passes keep the guarantee ``|C - C64| <= 3 K 2**-24 (|A| @ |B|) + K 2**-149`` on adversarial data,
and it fails outputs planted to break it."""
import numpy as np
import pytest
import torch

import sgemm_cube
from benchmarks.certified_lines import certificate_threshold, failing_tiles, line_meta, uncertified
from tests.guarantee_data import rng_for

# The split's range at sb = 12 once a line's largest is in [2**14, 2**15): entries below 2**-15 lose bits.
LOWER, TOP = 2.0 ** -15, 14


def _certify(a, b):
    """The proxy's output (the CPU model), which outputs fail the certificate, and each output's error as a
    fraction of the guarantee's bound."""
    c = sgemm_cube.matmul(a, b, backend="cpu", scheme="fp16x3", scale="rows", fixup=False)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    fail = uncertified(torch.from_numpy(c), line_meta(ta, 0), line_meta(tb, 1), certificate_threshold(a.shape[1]))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    k = a.shape[1]
    bound = 3 * k * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64)) + k * 2.0 ** -149
    return c, fail.numpy(), np.abs(c - a64 @ b64) / bound


def test_threshold_is_a_power_of_two_growing_with_k():
    values = [certificate_threshold(k) for k in (16, 64, 1024, 4096, 8192, 16384, 65536)]
    assert values[:3] == [128.0] * 3 and values[3:5] == [256.0] * 2
    assert all(v == 2.0 ** round(np.log2(v)) for v in values)
    assert values == sorted(values) and values[-1] > values[2]


@pytest.mark.parametrize("k", [32, 512])
def test_positive_wide_lines_are_certified(k, request):
    """Log-normal data (sigma 3) on both operands, every line given one entry 2**-40 of its largest (all
    lines wide): an output is a sum of positive terms, its own ``|A| @ |B|``, so the certificate fails it
    exactly where that (scaled) is below the threshold, which few are."""
    gen, replay = rng_for(request.node.nodeid)
    a = np.exp(3 * gen.standard_normal((24, k)))
    b = np.exp(3 * gen.standard_normal((k, 20)))
    a[:, 0] = 2.0 ** -40 * a.max(axis=1)
    b[0, :] = 2.0 ** -40 * b.max(axis=0)
    a, b = a.astype(np.float32), b.astype(np.float32)
    (ta, wide_a), (tb, wide_b) = line_meta(torch.from_numpy(a), 0), line_meta(torch.from_numpy(b), 1)
    assert wide_a.all() and wide_b.all(), replay
    _, fail, used = _certify(a, b)
    scaled = np.ldexp(a.astype(np.float64) @ b.astype(np.float64), (ta[:, None] + tb[None, :]).numpy())
    assert (fail == (scaled < certificate_threshold(k))).all(), replay
    assert fail.mean() <= 0.02, replay
    assert used[~fail].max() <= 1.0, replay


def _planted(k, gen):
    """Row 0: one entry 1, the rest 2**-40 (1 + 31 * 2**-16), whose low part the split rounds down by
    about 2**-11 of it once the row is scaled (below the range: all of it in ``lo``); column 0: 0 where
    row 0 has its 1, else 2**40.  Output (0, 0) rests on the tiny entries alone, their errors add: about
    ``K 2**-11`` of the output against the guarantee's ``3 K**2 2**-24``, broken for K < 2**13 / 3."""
    a = gen.standard_normal((4, k)).astype(np.float32)
    b = gen.standard_normal((k, 3)).astype(np.float32)
    a[0] = np.float32(2.0 ** -40 * (1 + 31 * 2.0 ** -16))
    a[0, 0] = 1.0
    b[:, 0] = 2.0 ** 40
    b[0, 0] = 0.0
    return a, b


@pytest.mark.parametrize("k", [64, 1024])
def test_a_planted_violation_fails_the_certificate(k, request):
    gen, replay = rng_for(request.node.nodeid)
    a, b = _planted(k, gen)
    _, fail, used = _certify(a, b)
    assert used[0, 0] > 1.0, f"the plant should break the guarantee without its certificate; {replay}"
    assert fail[0, 0], replay
    assert (used[~fail] <= 1.0).all(), replay


def _adversarial(k, gen):
    """Rows and columns of random sign whose entries are scaled by 2**-e, e drawn from {0, 20, 40, 60}
    (many lines reach below the range), with planted cancellation: rows whose halves repeat against
    columns whose halves are negated (exact output 0 up to the middle entry) and rows whose tiny entries
    meet the columns' largest."""
    m, n = 24, 20
    a = gen.standard_normal((m, k)) * np.exp2(-gen.choice([0, 20, 40, 60], (m, k)))
    b = gen.standard_normal((k, n)) * np.exp2(-gen.choice([0, 20, 40, 60], (k, n)))
    h = k // 2
    a[:4, h:2 * h] = a[:4, :h]
    b[h:2 * h, :4] = -b[:h, :4]
    a[4:8] = np.where(np.abs(a[4:8]) > 2.0 ** -10, 2.0 ** -50 * a[4:8], a[4:8])  # tiny where b is large
    a[4:8, 0] = 1.0
    b[0, 4:8] *= 2.0 ** -30
    a[8:12] *= np.exp2(gen.integers(-100, 100, (4, 1)))  # lines far from 1 (the scaling's range)
    return a.astype(np.float32), b.astype(np.float32)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [16, 48, 256])
def test_certified_outputs_keep_the_guarantee(seed, k, request):
    gen, replay = rng_for(request.node.nodeid)
    a, b = _adversarial(k, gen)
    (_, wide_a), (_, wide_b) = line_meta(torch.from_numpy(a), 0), line_meta(torch.from_numpy(b), 1)
    assert wide_a.float().mean() > 0.5 and wide_b.float().mean() > 0.5, replay
    _, fail, used = _certify(a, b)
    assert fail.any(), f"the data should hold outputs the certificate cannot pass; {replay}"
    assert (used[~fail] <= 1.0).all(), f"largest bound fraction of a certified output {used[~fail].max()}; {replay}"


def test_failing_tiles_cover_the_failing_outputs():
    fail = torch.zeros(300, 200, dtype=torch.bool)
    fail[0, 0] = fail[299, 130] = True
    tiles = failing_tiles(fail)
    assert tiles.shape == (3, 2) and tiles.sum() == 2 and tiles[0, 0] and tiles[2, 1]
