"""The CPU backend in bounded memory.

* Cutting the product into slabs (K slabs at multiples of the chunk length,
  output tiles, blocks of line statistics, unscaling and the fix-up's
  scaling in blocks) changes no bit: a tiny ``MEMORY_BUDGET`` gives the result
  of the default one for every scheme, order and accumulation model, on awkward
  shapes (K not a multiple of 16, K = 1..40, batches, broadcasting), NaN/Inf
  lines, scaled lines and lines computed in FP32.
* The pieces: :class:`cpu_fallback.ProductAccumulator` fed slab by slab is
  :func:`cpu_fallback.emulated_matmul`; line statistics merged block by block
  are :func:`cpu_fallback.guard.line_stats`'s of the whole lines.
* A long-K product's NumPy allocations (traced by tracemalloc) stay within
  the budget, and a MemoryError names the user's product.
"""
import tracemalloc

import numpy as np
import pytest

import sgemm_cube
import sgemm_cube.backends.cpu as cpu
from sgemm_cube.cpu_fallback import ProductAccumulator, emulated_matmul
from sgemm_cube.cpu_fallback.guard import LineStats, line_stats, unscale

SCHEMES = ["fp16x3", "fp16x4", "bf16x9", "bf16x6"]
ORDERS = ["termwise", "elementwise"]
#: (a shape, b shape, kind): K = 1..40 and K not a multiple of 16, batches, broadcasting, 1-D operands.
CASES = [((5, 1), (1, 4), "normal"), ((3, 17), (17, 6), "special"), ((7, 40), (40, 3), "scaled"),
         ((6, 33), (33, 5), "wide"), ((2, 3, 33), (2, 33, 5), "special"), ((4, 1, 6, 20), (3, 20, 7), "scaled"),
         ((19,), (19, 4), "normal"), ((6, 50), (50,), "special"), ((9, 70), (70, 11), "wide"),
         ((2, 1, 5, 16), (1, 3, 16, 2), "normal")]


def _data(rng, shape, kind, lines_axis):
    """float32 data of ``kind`` whose lines (rows of a: ``lines_axis=-2``; columns of b: -1) differ."""
    x = rng.standard_normal(shape).astype(np.float32)
    if len(shape) == 1:
        return x
    x = np.moveaxis(x, lines_axis, -2)  # lines along axis -2 of this view
    n = x.shape[-2]
    if kind == "scaled":  # lines far from 1: scaled by powers of two
        x[..., ::3, :] *= np.float32(1e-30)
        x[..., 1::4, :] *= np.float32(1e30)
    elif kind == "wide":  # lines spanning many binades: computed in FP32 (fixup)
        x[..., ::2, :] *= (2.0 ** rng.integers(-40, 20, x[..., ::2, :].shape)).astype(np.float32)
    elif kind == "special":  # NaN and infinities
        x[..., 1 % n, 0] = np.nan
        x[..., n - 1, -1] = np.inf
        x[..., 0, -1] = -np.inf
    return np.moveaxis(x, -2, lines_axis)


def _operands(rng, sa, sb, kind):
    return _data(rng, sa, kind, -2), _data(rng, sb, kind, -1)


def _matmul(monkeypatch, budget, a, b, **kw):
    monkeypatch.setattr(cpu, "MEMORY_BUDGET", budget)
    with np.errstate(all="ignore"):
        return sgemm_cube.matmul(a, b, backend="cpu", **kw)


def _same_bits(x, y):
    return x.shape == y.shape and np.asarray(x).tobytes() == np.asarray(y).tobytes()


def _tiny(monkeypatch):
    """8 KiB, and K cut before the output: tiles of a few rows and columns, 16-deep K slabs, small blocks."""
    monkeypatch.setattr(cpu, "_MIN_DEPTH", 16)
    return 8 << 10


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_tiny_budget_gives_the_same_bits(monkeypatch, rng, scheme, order):
    default, tiny = cpu.MEMORY_BUDGET, _tiny(monkeypatch)
    for sa, sb, kind in CASES:
        a, b = _operands(rng, sa, sb, kind)
        for accumulate, scale, fixup, sb_ in [("cube16", "auto", True, 12), ("sequential", "rows", False, 6),
                                              ("cube16", "matrix", True, 12), ("cube16", None, True, 0)]:
            kw = dict(scheme=scheme, order=order, accumulate=accumulate, scale=scale, fixup=fixup, sb=sb_)
            want = _matmul(monkeypatch, default, a, b, **kw)
            got = _matmul(monkeypatch, tiny, a, b, **kw)
            assert _same_bits(got, want), (sa, sb, kind, kw)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_tiny_budget_cuts_the_work(monkeypatch, scheme):
    """The test above does cut K (at multiples of 16) and the output (with a remainder tile)."""
    tiny = _tiny(monkeypatch)
    for order in ORDERS:
        t = cpu._tiling(9, 11, 70, scheme, order, tiny)
        assert t.depth == 16 and t.rows * t.cols < 9 * 11 and (9 % t.rows or 11 % t.cols), t
    assert cpu._tiling(2, 5, 33, scheme, "termwise", tiny).depth == 16


def test_default_budget_takes_1024_cubed_whole():
    """At the default budget a 1024^3 product is not cut (bf16x9 elementwise: K in two slabs)."""
    for scheme in SCHEMES:
        for order in ORDERS:
            t = cpu._tiling(1024, 1024, 1024, scheme, order, cpu.MEMORY_BUDGET)
            assert (t.rows, t.cols) == (1024, 1024)
            assert t.depth == 1024 or (scheme, order) == ("bf16x9", "elementwise"), (scheme, order, t)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("accumulate,slab", [("cube16", 16), ("cube16", 48), ("sequential", 7)])
def test_accumulator_over_k_slabs_is_the_whole_product(rng, order, accumulate, slab):
    a = rng.standard_normal((6, 101)).astype(np.float32)
    b = rng.standard_normal((101, 5)).astype(np.float32)
    for scheme in SCHEMES:
        acc = ProductAccumulator((6, 5), order=order, accumulate=accumulate, scheme=scheme)
        for k0 in range(0, 101, slab):
            acc.add(a[:, k0:k0 + slab], b[k0:k0 + slab])
        want = emulated_matmul(a, b, order=order, accumulate=accumulate, scheme=scheme)
        assert _same_bits(acc.result(), want), scheme


def test_accumulator_refuses_a_slab_after_a_cut_chunk():
    acc = ProductAccumulator((2, 2))
    acc.add(np.ones((2, 20), np.float32), np.ones((20, 2), np.float32))  # ends inside the second chunk
    with pytest.raises(ValueError, match="multiple of 16"):
        acc.add(np.ones((2, 16), np.float32), np.ones((16, 2), np.float32))


@pytest.mark.parametrize("axis", [-1, -2])
def test_line_statistics_merge_over_blocks(monkeypatch, rng, axis):
    x = _data(rng, (3, 37, 41), "scaled", -2 if axis == -1 else -1)
    x[1, 5, 7] = np.nan
    x[2, 0, 0] = -np.inf
    x[0, 3:, 2:] = 0
    stats = LineStats.empty(line_stats(x, axis).big.shape)
    for k0 in range(0, 41, 10):
        block = x[:, :, k0:k0 + 10] if axis == -1 else x[:, k0:k0 + 10, :]
        stats.merge((slice(None), slice(None)), line_stats(block, axis))
    whole = line_stats(x, axis)
    assert all(_same_bits(s, w) for s, w in zip(stats, whole))
    monkeypatch.setattr(cpu, "MEMORY_BUDGET", 1 << 10)  # blocks of 64 elements: lines cut along K
    got = cpu._line_stats(x, axis)
    assert all(_same_bits(g, w) for g, w in zip(got, whole))


def test_unscaling_in_blocks(rng):
    """Row blocks of unscaling: the same bits as unscaling at once."""
    c = rng.standard_normal((50, 7)).astype(np.float32)
    ta, tb = rng.integers(-30, 30, 50).astype(np.int32), rng.integers(-30, 30, 7).astype(np.int32)
    for alpha in (1.0, 0.05):
        blocks = list(cpu._unscaled(c, ta, tb, 1 << 10, alpha))
        assert len(blocks) > 1
        assert _same_bits(np.concatenate([v for _, v in blocks]), unscale(c, ta, tb, alpha))


def test_long_k_runs_within_the_budget(monkeypatch):
    """(2, K) @ (K, 2) with K = 2**20 and broadcast (zero-stride) operands: NumPy allocates at most the budget.

    Before slabs this product's temporaries were about 20 bytes per operand element (80 MiB here; 3 GiB
    and a MemoryError at K = 4e8).
    """
    k = 1 << 20
    a = np.broadcast_to(np.float32(1.1), (2, k))
    b = np.broadcast_to(np.float32(-0.7), (k, 2))
    budget = 4 << 20
    monkeypatch.setattr(cpu, "MEMORY_BUDGET", budget)
    tracemalloc.start()
    try:
        got = sgemm_cube.matmul(a, b, backend="cpu")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < budget + (1 << 20), peak / 2**20
    exact = k * np.float64(np.float32(1.1)) * np.float64(np.float32(-0.7))
    assert np.all(got == got[0, 0]) and abs(got[0, 0] / exact - 1) < 1e-3  # 65536 FP32 additions of equal chunk sums


def test_memory_error_names_the_product(monkeypatch):
    def fail(*args, **kwargs):
        raise MemoryError("Unable to allocate 3.0 GiB for an array with shape (400000000,)")

    monkeypatch.setattr(cpu.ProductAccumulator, "add", fail)
    a = np.ones((2, 3, 40), np.float32)
    b = np.ones((40, 5), np.float32)
    with pytest.raises(MemoryError, match=r"\(2, 3, 40\) @ \(2, 40, 5\) float32 product needs about") as info:
        sgemm_cube.matmul(a, b, backend="cpu")
    assert "the result alone is" in str(info.value)
    assert isinstance(info.value.__cause__, MemoryError) and "3.0 GiB" in str(info.value.__cause__)
