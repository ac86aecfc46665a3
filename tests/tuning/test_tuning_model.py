"""The blocking model of section 3.3.1 (Eq. 8-11): paper numbers, constraints, claims."""
import math

import numpy as np
import pytest

from sgemm_cube.tuning import choose_tiling, get_profile
from sgemm_cube.tuning import model as M


@pytest.fixture(autouse=True)
def _no_user_tables(tmp_path, monkeypatch):
    # choose_tiling consults tuning tables: keep this machine's cache out of the tests.
    monkeypatch.setenv("SGEMM_CUBE_TUNING_DIR", str(tmp_path / "tables"))


# --- the paper's numbers (910A) ---------------------------------------------------------------

def test_n_fused_of_the_papers_best_block():
    # Sec. 4.2: (bm, bk, bn, N_fused) = (176, 64, 176, 44).
    assert int(M.n_fused("910a", 176, 64, 176)) == 44
    assert M.fusion_efficiency("910a", 176, 64, 176) == pytest.approx(44 * 176 * 64 / 2**19)


def test_eq11_optimum_between_86_and_90_rounds_to_96():
    x = M.bm_opt("910a")
    assert 86 < x < 90
    assert M.round_bm_opt("910a") == 96


@pytest.mark.parametrize("f", [0.92, 0.95, 0.99])
def test_eq11_is_the_minimiser_of_eq9(f):
    p = get_profile("910a")
    bms = np.linspace(40, 160, 12001)
    traffic = M.traffic_eq9(p, 8192, 8192, 8192, bms, f)
    assert bms[np.argmin(traffic)] == pytest.approx(M.bm_opt(p, f), abs=0.02)


def test_eq10_of_910a_is_the_papers_literal_inequality():
    edges = np.arange(16, 1025, 16)
    bm, bk, bn = (g.ravel() for g in np.meshgrid(edges, edges, edges, indexing="ij"))
    paper = (bm * bk <= 64 * 256) & (bk * bn <= 64 * 256) & (bm * bn * 6 <= 248 * 1024)
    paper &= (2**19 - 2 * bk * bn) // (bm * bk) >= 1  # N_fused >= 1 (Eq. 8)
    np.testing.assert_array_equal(M.feasible("910a", bm, bk, bn), paper)


def test_constraints_are_derived_from_the_profile():
    c = M.constraints("910b")
    assert (c.max_a_elems, c.max_b_elems, c.c_budget_bytes, c.l1_elems) == (16384, 16384, 128 * 1024, 2**18)


# --- every enumerated configuration satisfies its profile's constraints --------------------------

@pytest.mark.parametrize("name", ["910a", "910b"])
def test_enumerated_blocks_satisfy_the_constraints(name):
    p = get_profile(name)
    c = M.constraints(p)
    cand = M.enumerate_blocks(p)
    assert len(cand) > 500
    b = p.blocking
    for x in (cand.bm, cand.bk, cand.bn):
        assert np.all(x % 16 == 0) and np.all(x > 0)
    assert np.all(b.l0_stages * cand.bm * cand.bk * b.operand_bytes <= p.l0a_bytes)
    assert np.all(b.l0_stages * cand.bk * cand.bn * b.operand_bytes <= p.l0b_bytes)
    assert np.all(cand.bm * cand.bn * c.c_bytes_per_element
                  <= min(getattr(p, f"{x}_bytes") for x in p.c_path) - b.c_reserved_bytes)
    # N_fused A blocks and the B buffers fit in L1, and one more A block would not.
    used = (cand.n_fused * cand.bm * cand.bk + b.b_buffers * cand.bk * cand.bn) * b.operand_bytes
    assert np.all(cand.n_fused >= 1) and np.all(used <= p.l1_bytes)
    assert np.all(used + cand.bm * cand.bk * b.operand_bytes > p.l1_bytes)


def test_enumeration_is_complete():
    # Brute force over the same grid: nothing feasible is missing.
    cand = M.enumerate_blocks("910b")
    edges = np.arange(16, 1025, 16)
    bm, bk, bn = (g.ravel() for g in np.meshgrid(edges, edges, edges, indexing="ij"))
    assert len(cand) == int(M.feasible("910b", bm, bk, bn).sum())


@pytest.mark.parametrize("m,n,k", [(8192, 8192, 8192), (1000, 300, 77), (1, 2, 3), (333, 444, 555)])
@pytest.mark.parametrize("name", ["910a", "910b"])
def test_ranked_blocks_are_feasible_and_sorted(name, m, n, k):
    rows = M.rank(name, m, n, k, top=50)
    assert rows
    assert all(M.feasible(name, r.bm, r.bk, r.bn) for r in rows)
    assert all(1 <= r.n_fused <= -(-k // r.bk) for r in rows)
    keys = [round(r.t_double / rows[0].t_double, 2) for r in rows]
    assert keys == sorted(keys)
    t = choose_tiling(name, m, n, k, blocking="paper")
    assert (t.bm, t.bk, t.bn, t.n_fused) == rows[0][:4]


# --- the model's monotonic claims (Fig. 5) ---------------------------------------------------

@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.0])
def test_n_fused_falls_as_bm_bk_grows(ratio):
    cand = M.enumerate_blocks("910a")
    sel = cand.bn == ratio * cand.bm
    area, nf = cand.bm[sel] * cand.bk[sel], cand.n_fused[sel]
    order = np.argsort(area, kind="stable")
    area, nf = area[order], nf[order]
    # Non-increasing along bm*bk, strictly lower where the area at least doubles.
    for i in range(len(area)):
        assert np.all(nf[area > area[i]] <= nf[i])
        assert np.all(nf[area >= 2 * area[i]] < nf[i])


def test_f_between_0_9_and_1_for_moderate_aspect_on_910a():
    cand = M.enumerate_blocks("910a")
    r = cand.bn / cand.bm
    f = cand.f[(r >= 0.5) & (r <= 2)]
    assert f.size > 900
    assert f.min() >= 0.9 and f.max() <= 1.0
    assert f.min() == pytest.approx(0.92, abs=0.005)  # the paper's "0.92 <= f <= 1"


def test_f_falls_as_bn_over_bm_grows():
    p = get_profile("910a")
    for bm, bk in [(64, 64), (96, 64), (176, 64), (128, 32)]:
        bns = np.arange(16, 1025, 16)
        bns = bns[M.feasible(p, bm, bk, bns)]
        f = M.fusion_efficiency(p, bm, bk, bns)
        assert np.all(np.diff(f) <= 0)


# --- traffic and time ------------------------------------------------------------------------

@pytest.mark.parametrize("bm,bk,bn", [(176, 64, 176), (96, 64, 96), (64, 128, 128)])
def test_blockwise_traffic_equals_eq9_when_blocks_divide(bm, bk, bn):
    p = get_profile("910a")
    nf = int(M.n_fused(p, bm, bk, bn))
    m, n, k = bm * 40, bn * 7, nf * bk * 3
    a_r, b_r, c_rw = M.traffic(p, m, n, k, bm, bk, bn)
    f = float(M.fusion_efficiency(p, bm, bk, bn))
    assert float(a_r + b_r + c_rw) == pytest.approx(float(M.traffic_eq9(p, m, n, k, bm, f)), rel=1e-12)


def test_c_is_written_at_least_once():
    _, _, c_rw = M.traffic("910a", 4096, 4096, 16, 96, 64, 96)
    assert float(c_rw) == 2 * 4096 * 4096


@pytest.mark.parametrize("m,n,k", [(8192, 8192, 8192), (100, 37, 5)])
def test_single_and_double_buffered_times(m, n, k):
    cand = M.enumerate_blocks("910a", max_bm=m, max_bk=k, max_bn=n)
    pr = M.predict("910a", m, n, k, cand.bm, cand.bk, cand.bn)
    np.testing.assert_array_equal(pr.t_single, pr.t_comp + pr.t_mem)
    np.testing.assert_array_equal(pr.t_double, np.maximum(pr.t_comp, pr.t_mem))
    # No prediction beats the FP32-equivalent peak of three FP16 products.
    assert pr.tflops_double.max() <= 256 / 3 * (1 + 1e-12)


def test_large_square_problem_reaches_the_peak_over_three():
    best = M.rank("910a", 8192, 8192, 8192, top=1)[0]
    assert best.tflops_double == pytest.approx(256 / 3)
    assert best.t_mem < best.t_comp


def test_four_terms_cost_a_third_more():
    three = M.predict("910a", 4096, 4096, 4096, 128, 64, 128, n_terms=3)
    four = M.predict("910a", 4096, 4096, 4096, 128, 64, 128, n_terms=4)
    assert float(four.t_comp) == pytest.approx(float(three.t_comp) * 4 / 3)


@pytest.mark.parametrize("kw", [{"buffering": "triple"}, {"sort": "speed"}, {"min_l0_intensity": 1.5}])
def test_rank_rejects_bad_options(kw):
    with pytest.raises(ValueError):
        M.rank("910a", 64, 64, 64, **kw)


def test_l0_intensity_filter_drops_thin_blocks():
    rows = M.rank("910a", 8192, 8192, 8192, top=None)
    best_i = max(M.l0_intensity(r.bm, r.bn) for r in rows)
    assert min(M.l0_intensity(r.bm, r.bn) for r in rows) >= 0.5 * best_i - 1e-9
    everything = M.rank("910a", 8192, 8192, 8192, min_l0_intensity=0.0)
    assert len(everything) > len(rows)
    assert math.isclose(M.l0_intensity(16, 16), 8.0)


# --- a kernel design other than the paper's ------------------------------------------------

FUSED = dict(operand_bytes=4, l0_stages=2, b_buffers=2, c_bytes_per_element=12, c_reserved_bytes=8192,
             fused_terms=True)


def test_fused_design_blocks_fit_hi_and_lo_planes():
    from sgemm_cube.tuning.hardware import Blocking

    b = Blocking(**FUSED)
    p = get_profile("910a")
    rows = M.rank(p, 4096, 4096, 4096, blocking=b, top=None)
    for r in rows:
        assert 2 * r.bm * r.bk * 4 <= p.l0a_bytes and 2 * r.bk * r.bn * 4 <= p.l0b_bytes
        assert r.bm * r.bn * 12 <= 248 * 1024
        assert (r.n_fused * r.bm * r.bk + 2 * r.bk * r.bn) * 4 <= p.l1_bytes
    t = choose_tiling(p, 4096, 4096, 4096, blocking=b)
    assert tuple(t)[:4] == tuple(rows[0][:4])


def test_fused_design_streams_the_operands_once():
    import dataclasses

    from sgemm_cube.tuning.hardware import Blocking

    paper = get_profile("910a")
    fused = dataclasses.replace(paper, blocking=Blocking(**FUSED))
    one = M.predict(fused, 4096, 4096, 4096, 64, 64, 64)
    # Same blocks, same number of N_fused groups: a fused pass moves 4-byte operands once,
    # the paper's three passes move 2-byte operands three times.
    a_r, b_r, c_rw = M.traffic(fused, 4096, 4096, 4096, 64, 64, 64)
    assert float(one.traffic_bytes) == pytest.approx(float(4 * (a_r + b_r) + 4 * c_rw))


@pytest.mark.parametrize("terms", [3, 4])
@pytest.mark.parametrize("name", ["910a", "910b"])
@pytest.mark.parametrize("m,n,k", [(8192, 8192, 8192), (4096, 1024, 16384), (1, 2, 3), (333, 444, 555),
                                   (100000, 64, 64)])
def test_default_tiling_fits_the_ascendc_kernel(name, terms, m, n, k):
    p = get_profile(name)
    t = choose_tiling(p, m, n, k, n_terms=terms)
    from sgemm_cube.backends import npu_schedule as ns

    status, _ = ns.buffer_plan_status(ns.capacity_from_profile(p), t.bm, t.bk, t.bn, t.n_fused, terms)
    assert status == ns.Status.OK  # the kernel's own checks (schedule::make_buffer_plan, mirrored)
    assert 1 <= t.n_fused <= -(-k // t.bk) and not t.per_term
    t = choose_tiling(p, m, n, k, n_terms=terms, blocking="kernel-per-term")
    status, _ = ns.buffer_plan_status(ns.capacity_from_profile(p), t.bm, t.bk, t.bn, t.n_fused, terms, True)
    assert status == ns.Status.OK and t.per_term  # one pass per term: one plane, one accumulator


def test_kernel_blocking_rejects_other_term_counts():
    with pytest.raises(ValueError):
        M.kernel_blocking("910a", n_terms=2)
    with pytest.raises(ValueError):
        choose_tiling("910a", 64, 64, 64, blocking="fast")
