"""The Python model of the AscendC kernel schedule (sgemm_cube.backends.npu_schedule).

Claims tested here:

* with one K group the blocked, multi-core, ping-pong schedule gives exactly
  ``cpu_fallback.emulated_matmul(..., order="termwise")`` (``np.array_equal``)
  under both accumulation models, with tails in every dimension and several
  tilings and core counts;
* with several K groups (partial C blocks re-accumulated in FP32 through GM)
  it equals :func:`npu_schedule.grouped_reference` exactly, and its error
  against a float64 reference stays within 1.5x the native FP32 product's
  (measured beside it) on several distributions;
* the tiling the tuner chooses with the kernel's blocking constants is one the
  kernel's buffer plan accepts, and :func:`fit_tiling` repairs the others.
"""
from __future__ import annotations

import numpy as np
import pytest

import sgemm_cube.cpu_fallback as cpu_fallback
from sgemm_cube.backends import npu_schedule as ns
from tests.guarantee_data import fp32_matmul

CAP = {soc: ns.capacity_from_profile(soc) for soc in ("910a", "910b")}


def _data(rng, dist: str, shape) -> np.ndarray:
    if dist == "normal":
        x = rng.standard_normal(shape)
    elif dist == "uniform":  # [0, 1): no cancellation, the case where accumulation order shows
        x = rng.random(shape)
    elif dist == "wide":     # random signs, magnitudes over 2^-6 .. 2^6
        x = rng.choice([-1.0, 1.0], shape) * 2.0 ** rng.uniform(-6, 6, shape)
    elif dist == "rows":     # rows of very different scale
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-8, 8, shape[:-1] + (1,))
    else:
        raise ValueError(dist)
    x = x.astype(np.float32)
    x[x == 0] = np.float32(1e-3)  # never zeros
    return x


def _rel(c, ref) -> float:
    return float(np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref))


# soc, (m, n, k), tiling, cores: every case has one K group (n_fused * bk >= padded K)
SINGLE_GROUP = [
    ("910b", (1, 2, 3), (16, 16, 16, 1), 20),
    ("910b", (17, 33, 65), (16, 32, 16, 5), 3),
    ("910b", (100, 90, 130), (32, 32, 32, 8), 4),
    ("910b", (64, 48, 200), (48, 64, 32, 4), 7),
    ("910b", (31, 100, 47), (16, 16, 48, 3), 20),
    ("910a", (100, 90, 130), (64, 64, 64, 3), 32),
    ("910a", (130, 70, 96), (128, 32, 64, 3), 2),
]


@pytest.mark.parametrize("accumulate", ["cube16", "sequential"])
@pytest.mark.parametrize("dist", ["normal", "uniform", "wide"])
@pytest.mark.parametrize("case", SINGLE_GROUP, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[2]}")
def test_single_group_is_bit_exact_with_cpu_fallback(case, dist, accumulate):
    soc, (m, n, k), tiling, cores = case
    rng = np.random.default_rng([m, n, k, len(dist)])
    a, b = _data(rng, dist, (m, k)), _data(rng, dist, (k, n))
    g = ns.make_geometry(1, m, n, k, ns.Tiling(*tiling), cores, 3, CAP[soc])
    assert g.groups == 1
    got = ns.simulate(a, b, tiling=ns.Tiling(*tiling), cap=CAP[soc], cores=cores, accumulate=accumulate)
    want = cpu_fallback.emulated_matmul(a, b, order="termwise", accumulate=accumulate)
    assert got.dtype == np.float32 and got.shape == (m, n)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("sb", [0, 6, 12])
@pytest.mark.parametrize("keep_lo_lo", [False, True])
def test_options_and_batch_are_bit_exact(sb, keep_lo_lo):
    rng = np.random.default_rng([sb, keep_lo_lo])
    batch, m, n, k = 3, 37, 29, 81
    a, b = _data(rng, "rows", (batch, m, k)), _data(rng, "normal", (batch, k, n))
    tiling = ns.Tiling(16, 32, 16, 3)
    got = ns.simulate(a, b, sb=sb, keep_lo_lo=keep_lo_lo, tiling=tiling, cap=CAP["910b"], cores=5)
    assert got.shape == (batch, m, n)
    for i in range(batch):
        want = cpu_fallback.emulated_matmul(a[i], b[i], sb=sb, keep_lo_lo=keep_lo_lo)
        assert np.array_equal(got[i], want)


# soc, (m, n, k), tiling, cores: several K groups
MULTI_GROUP = [
    ("910b", (40, 30, 200), (16, 32, 16, 2), 5),
    ("910b", (33, 65, 1000), (32, 64, 32, 3), 4),
    ("910a", (70, 50, 600), (64, 64, 32, 2), 3),
]


@pytest.mark.parametrize("keep_lo_lo", [False, True])
@pytest.mark.parametrize("case", MULTI_GROUP, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}-{c[2]}")
def test_multi_group_equals_grouped_reference(case, keep_lo_lo):
    soc, (m, n, k), tiling, cores = case
    rng = np.random.default_rng([m, n, k])
    a, b = _data(rng, "normal", (m, k)), _data(rng, "wide", (k, n))
    t = ns.Tiling(*tiling)
    g = ns.make_geometry(1, m, n, k, t, cores, 4 if keep_lo_lo else 3, CAP[soc])
    assert g.groups > 1
    got = ns.simulate(a, b, keep_lo_lo=keep_lo_lo, tiling=t, cap=CAP[soc], cores=cores)
    want = ns.grouped_reference(a, b, keep_lo_lo=keep_lo_lo, group_k=g.n_fused * g.bk)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("soc", ["910a", "910b"])
@pytest.mark.parametrize("arithmetic", [None, "WORST"])
def test_the_backends_tilings_are_cpu_fallbacks_default_bit_for_bit(soc, arithmetic):
    """The two-level accumulation: with the tiling the backend runs (fit_tiling: K groups of K_GROUP = 1024),
    the kernel's schedule at K = 2100 (three groups, the last ragged) is cpu_fallback's default product."""
    from sgemm_cube.cpu_fallback.arithmetic import WORST

    ar = WORST if arithmetic else None
    rng = np.random.default_rng(2100)
    m, n, k = 20, 24, 2100
    a, b = _data(rng, "uniform", (m, k)), _data(rng, "wide", (k, n))
    t = ns.fit_tiling(CAP[soc], ns.Tiling(16, 64, 16, 1 << 20), k=k, terms=3)
    g = ns.make_geometry(1, m, n, k, t, 3, 3, CAP[soc])
    assert (g.groups, g.n_fused * g.bk) == (3, ns.K_GROUP)
    arith = ns.chip_arithmetic(soc, ar)
    got = ns.simulate(a, b, tiling=t, cap=CAP[soc], cores=3, arithmetic=arith)
    assert np.array_equal(got, cpu_fallback.emulated_matmul(a, b, arithmetic=arith))
    # and not the one-level product (the second level changes the rounding on this data)
    assert not np.array_equal(got, cpu_fallback.emulated_matmul(a, b, arithmetic=arith, k_group=None))


@pytest.mark.parametrize("dist", ["normal", "uniform", "wide", "rows"])
def test_multi_group_accuracy_against_float64(dist):
    rng = np.random.default_rng(len(dist))
    m, n, k = 48, 40, 1536
    a, b = _data(rng, dist, (m, k)), _data(rng, dist if dist != "rows" else "normal", (k, n))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    t = ns.Tiling(16, 64, 16, 4)  # six groups of 256
    got = ns.simulate(a, b, tiling=t, cap=CAP["910b"], cores=4)
    err = _rel(got, ref)
    err_fp32 = _rel(fp32_matmul(a, b), ref)  # native FP32 (sequential sums: the same on every host)
    err_chain = _rel(cpu_fallback.emulated_matmul(a, b), ref)
    assert err <= 1.5 * err_fp32, (err, err_fp32)
    assert err <= 1.5 * err_chain, (err, err_chain)


def test_non_finite_inputs_are_zeroed_by_the_split():
    rng = np.random.default_rng(7)
    a, b = _data(rng, "normal", (20, 40)), _data(rng, "normal", (40, 24))
    bad = a.copy()
    bad[3, 5], bad[7, 0], bad[19, 39] = np.nan, np.inf, -np.inf
    clean = a.copy()
    clean[3, 5] = clean[7, 0] = clean[19, 39] = 0
    kw = dict(tiling=ns.Tiling(16, 16, 16, 3), cap=CAP["910b"], cores=3)
    assert np.array_equal(ns.simulate(bad, b, **kw), ns.simulate(clean, b, **kw))


@pytest.mark.parametrize("soc", ["910a", "910b"])
@pytest.mark.parametrize("terms", [3, 4])
@pytest.mark.parametrize("shape", [(64, 64, 64), (1000, 1000, 1000), (4096, 4096, 4096), (128, 8192, 20000)])
def test_tuner_tiling_fits_the_kernel(soc, terms, shape):
    tuning = pytest.importorskip("sgemm_cube.tuning")
    m, n, k = shape
    t = tuning.choose_tiling(soc, m, n, k, n_terms=terms, use_table=False,
                             blocking="kernel")
    tiling = ns.Tiling(*t)
    ns.make_buffer_plan(CAP[soc], tiling.bm, tiling.bk, tiling.bn, tiling.n_fused, terms)  # raises if it does not fit
    assert ns.fit_tiling(CAP[soc], tiling, k=k, terms=terms) == tiling


@pytest.mark.parametrize("soc", ["910a", "910b"])
def test_fit_tiling_repairs_what_does_not_fit(soc):
    cap = CAP[soc]
    # n_fused makes K groups of K_GROUP = 1024 elements (the two-level accumulation cpu_fallback mirrors)
    fitted = ns.fit_tiling(cap, ns.Tiling(96, 64, 96, 10 ** 6), k=10 ** 6, terms=3)
    assert fitted[:3] == (96, 64, 96) and fitted.n_fused == ns.K_GROUP // 64 <= ns.max_n_fused(cap, 96, 64, 96)
    assert ns.fit_tiling(cap, ns.Tiling(96, 64, 96, 50), k=100, terms=3).n_fused == 2  # ceil(112 / 64)
    assert ns.fit_tiling(cap, ns.Tiling(96, 64, 96, 1), k=1024, terms=3).n_fused == 16  # one group
    # bk must divide the group at longer K: 80 -> 64, 48 -> 32; any bk while K fits one group
    assert ns.fit_tiling(cap, ns.Tiling(96, 80, 96, 1), k=5000, terms=3)[:4] == (96, 64, 96, 16)
    assert ns.fit_tiling(cap, ns.Tiling(64, 48, 64, 1), k=5000, terms=3)[:4] == (64, 32, 64, 32)
    assert ns.fit_tiling(cap, ns.Tiling(64, 48, 64, 1), k=1000, terms=3)[:4] == (64, 48, 64, 21)
    for k in (1, 1000, 1024, 1025, 5000, 10 ** 6):
        t = ns.fit_tiling(cap, None, k=k, terms=3)
        g = ns.make_geometry(1, 64, 64, k, t, 1, 3, cap)
        assert (g.groups == 1 and g.kp <= ns.K_GROUP) or g.n_fused * g.bk == ns.K_GROUP, (k, t)
    for bad in [ns.Tiling(176, 64, 176, 44), ns.Tiling(24, 64, 96, 1), None]:
        t = ns.fit_tiling(cap, bad, k=4096, terms=4)
        ns.make_buffer_plan(cap, t.bm, t.bk, t.bn, t.n_fused, 4)


def test_plan_rejections_carry_the_reason():
    with pytest.raises(ns.TilingError, match="L0C") as err:
        ns.make_buffer_plan(CAP["910b"], 128, 64, 128, 1, 3)
    assert err.value.status == ns.Status.L0C
    with pytest.raises(ns.TilingError, match="L1"):
        ns.make_buffer_plan(CAP["910b"], 96, 64, 96, ns.max_n_fused(CAP["910b"], 96, 64, 96) + 1, 3)
    with pytest.raises(ns.TilingError, match="multiples of 16"):
        ns.make_geometry(1, 8, 8, 8, ns.Tiling(16, 24, 16, 1), 1, 3, CAP["910a"])
