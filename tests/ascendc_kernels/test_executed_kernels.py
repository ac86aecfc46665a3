"""Execute the AscendC device code on the host and check it bit for bit.

``ascendc_kernels/tests/exec_ascendc/`` holds an executable stand-in for the
AscendC basic API calls the kernels make (host memory for GM, per-core byte
arrays for L1/L0A/L0B/L0C/UB, a flag and race checker) and a harness,
``run_kernels.cpp``, that includes the real ``kernel/sgemm_cube_kernels.cpp``
and runs split A, split B, GEMM and combine the way ``host/binding.cpp``
launches them.  It is built with g++ once per chip (``__NPU_ARCH__`` and the
SoC macro from ``test_ascend_kernel_sources.CHIPS``).

Checked here:
* split output (hi/lo, Zz) bit-identical to ``cpu_fallback.split``;
* C bit-identical to ``cpu_fallback.emulated_matmul(order="termwise",
  accumulate="cube16")`` when K fits one resident group, and to
  ``npu_schedule.simulate`` / ``grouped_reference`` always, on both chips,
  for both GEMM modes (all terms in one pass, one pass per term) and, on
  910A with one K group, with the terms combined in the GEMM's epilogue;
* the flag/race checker is clean;
* Mmad's in-fractal accumulation order is visible (a run with
  ``SGEMM_CUBE_EXEC_ARITHMETIC=accumulate=sequential`` matches the sequential
  model, not cube16);
* planted bugs in a copy of the kernel sources make the run fail, each with
  the message of the rule it breaks where the stand-in has one (each bug
  built from its own copy, several at a time in the background,
  ``executed.PlantedBuilds``; the unmodified sources built the same way pass).
"""
from __future__ import annotations

import numpy as np
import pytest

from sgemm_cube.backends import npu_schedule as ns
from sgemm_cube.cpu_fallback import emulated_matmul, split, split_limits

from .executed import (PLANTED_OPT, PROFILE, PlantedBug, _precompiled_for, build_chips, control, pad16,
                       planted_sources, run)
from .test_ascend_kernel_sources import CHIPS


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    return build_chips(tmp_path_factory.mktemp("exec_ascendc"))


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.shape == y.shape and np.array_equal(np.asarray(x).view(np.uint32), np.asarray(y).view(np.uint32))


def _diff(x, y) -> str:
    bad = np.argwhere(x.view(np.uint32) != y.view(np.uint32))
    i = tuple(bad[0])
    return f"{len(bad)} of {x.size} differ; first at {i}: {x[i]!r} vs {y[i]!r}"


def references(a, b, *, sb, keep_lo_lo, tiling, cube, soc, accumulate="cube16"):
    """(simulate, grouped_reference, emulated or None when K spans several groups)."""
    t = ns.Tiling(*tiling)
    sim = ns.simulate(a, b, sb=sb, keep_lo_lo=keep_lo_lo, tiling=t, cap=ns.capacity_from_profile(PROFILE[soc]),
                      cores=cube, accumulate=accumulate)
    batch, m, k = a.shape
    kb = -(-pad16(k) // t.bk)
    group_k = min(t.n_fused, kb) * t.bk
    grouped = np.stack([ns.grouped_reference(a[i], b[i], sb=sb, keep_lo_lo=keep_lo_lo, group_k=group_k,
                                             accumulate=accumulate) for i in range(batch)])
    emulated = None
    if kb <= t.n_fused:
        clean = lambda x: np.where(np.isfinite(x), x, np.float32(0))  # noqa: E731 (the split's contract)
        emulated = np.stack([emulated_matmul(clean(a[i]), clean(b[i]), sb=sb, order="termwise",
                                             accumulate=accumulate, keep_lo_lo=keep_lo_lo,
                                             scheme="fp16x4" if keep_lo_lo else "fp16x3") for i in range(batch)])
    return sim, grouped, emulated


def _fed_like_npu_run(x: np.ndarray, sb: int) -> np.ndarray:
    """sgemm_cube/backends/npu.py run(): NaN, Inf and |x| >= split_limits(sb).max_abs go in as 0."""
    max_abs = np.float32(split_limits(sb).max_abs)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x) < max_abs, x, np.float32(0)).astype(np.float32)


# (name, batch, m, n, k, sb, keep_lo_lo, tiling (bm, bk, bn, n_fused[, per_term[, l0c_stages]]), cube cores,
# vector cores)
# On 910A every case with one K group and fused terms combines in the GEMM's epilogue.
CASES = [
    ("one_fractal", 1, 16, 16, 16, 12, False, (16, 16, 16, 1), 1, 1),  # the bring-up's first check
    ("one_group_tails", 1, 40, 50, 70, 12, False, (32, 32, 32, 4), 4, 4),
    ("aligned_fp16x4", 1, 32, 48, 64, 12, True, (32, 32, 16, 2), 3, 5),
    ("groups3_tails", 1, 33, 47, 150, 12, False, (32, 32, 32, 2), 4, 4),
    ("groups5_sb8_fp16x4", 1, 17, 31, 300, 8, True, (16, 64, 16, 1), 2, 3),
    ("batch2_groups2_sb16", 2, 20, 36, 50, 16, False, (16, 16, 32, 2), 3, 2),
    ("batch3_one_group_sb10_fp16x4", 3, 24, 18, 40, 10, True, (16, 16, 16, 3), 5, 7),
    ("wide_split_tiles", 1, 18, 300, 20, 12, False, (16, 16, 64, 2), 2, 2),
    # one pass per term (the paper's design)
    ("per_term_one_group_tails", 1, 40, 50, 70, 12, False, (32, 32, 32, 4, 1), 4, 4),
    ("per_term_groups3_fp16x4", 1, 33, 47, 150, 12, True, (32, 32, 32, 2, 1), 4, 4),
    ("per_term_batch2_groups2_sb16", 2, 20, 36, 50, 16, False, (16, 16, 32, 2, 1), 3, 2),
    ("per_term_paper_tiling", 1, 200, 190, 300, 12, False, (176, 64, 176, 44, 1), 2, 2),
    # two L0C stages (Tiling.l0c_stages = 2): several write-backs per core, so both accumulator sets are used
    ("l0c2_one_group_tails", 1, 40, 110, 70, 12, False, (32, 32, 32, 4, 0, 2), 2, 2),  # 910A: epilogue combine
    ("l0c2_groups3_tails", 1, 33, 97, 150, 12, False, (32, 32, 32, 2, 0, 2), 2, 2),
    ("l0c2_groups5_sb8_fp16x4", 1, 40, 31, 300, 8, True, (16, 64, 16, 1, 0, 2), 2, 3),
    ("l0c2_batch2_groups2_odd_writebacks", 2, 20, 36, 50, 16, False, (16, 16, 32, 2, 0, 2), 3, 2),
    ("l0c2_per_term_groups3_fp16x4", 1, 33, 47, 150, 12, True, (32, 32, 32, 2, 1, 2), 2, 4),
    ("l0c2_per_term_one_group", 1, 40, 50, 70, 12, False, (32, 32, 32, 4, 1, 2), 1, 1),
]


def _operands(rng, batch, m, n, k, spread=True):
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(np.float32)
    if spread:  # several binades, so that the accumulation order matters
        a *= np.exp2(rng.integers(-6, 7, a.shape)).astype(np.float32)
        b *= np.exp2(rng.integers(-6, 7, b.shape)).astype(np.float32)
    return a, b


@pytest.mark.parametrize("soc", sorted(CHIPS))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_kernels_bit_exact(binaries, case, soc, tmp_path):
    name, batch, m, n, k, sb, keep, tiling, cube, vector = case
    rng = np.random.default_rng(sum(name.encode()))
    a, b = _operands(rng, batch, m, n, k)
    r = run(binaries[soc], a, b, sb=sb, keep_lo_lo=keep, tiling=tiling, cube=cube, vector=vector, workdir=tmp_path)
    assert r.clean, f"{soc} {name}: rc={r.rc}\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}"
    # the split kernel against cpu_fallback.split
    for x, (hi, lo), rows, cols in ((a, r.parts[0:2], pad16(m), pad16(k)), (b, r.parts[2:4], pad16(k), pad16(n))):
        padded = np.zeros((batch, rows, cols), np.float32)
        padded[:, : x.shape[1], : x.shape[2]] = x
        ehi, elo = split(padded, sb)
        assert np.array_equal(hi.view(np.uint16), ehi.view(np.uint16)), "split hi differs"
        assert np.array_equal(lo.view(np.uint16), elo.view(np.uint16)), "split lo differs"
    sim, grouped, emulated = references(a, b, sb=sb, keep_lo_lo=keep, tiling=tiling, cube=cube, soc=soc)
    assert _same_bits(sim, grouped)
    assert _same_bits(r.c, sim), f"{soc} {name} vs simulate: {_diff(r.c, sim)}"
    if emulated is not None:
        assert _same_bits(r.c, emulated), f"{soc} {name} vs emulated_matmul: {_diff(r.c, emulated)}"
    if len(tiling) > 5 and tiling[5] == 2:
        # two L0C stages: some core writes back from both accumulator sets, and the bits are those of one stage
        g = ns.make_geometry(batch, m, n, k, ns.Tiling(*tiling), cube, 4 if keep else 3,
                             ns.capacity_from_profile(PROFILE[soc]))
        assert g.plan.l0c_stages == 2 and "l0c_stages=2" in r.stdout
        assert any({s.l0c_stage for s in ns.core_steps(g, core) if s.last_k} == {0, 1} for core in range(g.cores))
        one = run(binaries[soc], a, b, sb=sb, keep_lo_lo=keep, tiling=tiling[:5] + (1,), cube=cube, vector=vector,
                  workdir=tmp_path)
        assert one.clean and "l0c_stages=1" in one.stdout and _same_bits(r.c, one.c), f"{soc} {name}: 2 vs 1 stage"


@pytest.mark.parametrize("soc", sorted(CHIPS))
@pytest.mark.parametrize("feed", ["raw", "npu_run"])
def test_special_values(binaries, soc, feed, tmp_path):
    """NaN, Inf and overflowing lines: raw (the split zeroes non-finite values itself) or fed the
    way npu.py's run() feeds them (also zeroing |x| >= split_limits(sb).max_abs)."""
    sb = 12
    rng = np.random.default_rng(7)
    a, b = _operands(rng, 1, 35, 33, 100)
    a[0, 3, :] = np.nan
    a[0, 5, 7] = np.inf
    a[0, 6, 9] = -np.inf
    b[0, 11, 4] = np.nan
    b[0, :, 20] = -np.inf
    big = np.float32(split_limits(sb).max_abs)
    a[0, 8, 2] = big * 4  # overflow: not representable by the split
    b[0, 30, 30] = -big * 2
    a[0, 9, 3] = np.nextafter(big, np.float32(0))  # largest value the split holds
    if feed == "raw":
        # Overflowing finite values are outside the kernels' contract: only NaN / Inf are fed raw.
        a[0, 8, 2] = b[0, 30, 30] = 0
    else:
        a, b = _fed_like_npu_run(a, sb), _fed_like_npu_run(b, sb)
    tiling = (16, 32, 32, 2)
    r = run(binaries[soc], a, b, sb=sb, tiling=tiling, cube=3, vector=3, workdir=tmp_path)
    assert r.clean, r.stdout[-3000:] + r.stderr[-2000:]
    sim, grouped, _ = references(a, b, sb=sb, keep_lo_lo=False, tiling=tiling, cube=3, soc=soc)
    assert np.isfinite(r.c).all()
    assert _same_bits(r.c, sim), _diff(r.c, sim)
    assert _same_bits(r.c, grouped)


def test_modes_are_what_the_cases_say(binaries, tmp_path):
    """The harness's geometry line: the 910A's one-group fused cases combine in the epilogue, the
    per-term cases run one pass per term, and the paper's tiling runs with one ND tile in UB."""
    rng = np.random.default_rng(5)
    a, b = _operands(rng, 1, 40, 50, 70)
    fused = run(binaries["910A"], a, b, tiling=(32, 32, 32, 4), workdir=tmp_path)
    assert "passes=1 combine_in_epilogue=1 ub_tiles=3" in fused.stdout
    assert "combine_in_epilogue=0" in run(binaries["910B"], a, b, tiling=(32, 32, 32, 4), workdir=tmp_path).stdout
    assert "combine_in_epilogue=0" in run(binaries["910A"], a, b, tiling=(32, 32, 32, 2), workdir=tmp_path).stdout
    per_term = run(binaries["910A"], a, b, tiling=(32, 32, 32, 4, 1), workdir=tmp_path)
    assert "passes=3 combine_in_epilogue=0" in per_term.stdout
    two = run(binaries["910A"], a, b, tiling=(32, 32, 32, 4, 0, 2), workdir=tmp_path)  # two L0C stages
    assert "passes=1 combine_in_epilogue=1 ub_tiles=3 l0c_stages=2" in two.stdout
    assert "l0c_stages=1" in fused.stdout
    a, b = _operands(rng, 1, 200, 190, 300)
    paper = run(binaries["910A"], a, b, tiling=(176, 64, 176, 44, 1), cube=2, vector=2, workdir=tmp_path)
    assert "n_fused=5 " in paper.stdout and "l0_stages=2 passes=3 combine_in_epilogue=0 ub_tiles=2" in paper.stdout


def test_accumulation_order_is_visible(binaries, tmp_path):
    """The same build with Mmad accumulating one FP32 add per product (``accumulate=sequential`` at run
    time) matches that model and not cube16: the bit-exact checks above do test the cube16 in-fractal order."""
    rng = np.random.default_rng(3)
    a, b = _operands(rng, 1, 32, 32, 64)
    tiling = (32, 64, 32, 1)
    r16 = run(binaries["910B"], a, b, tiling=tiling, workdir=tmp_path)
    rsq = run(binaries["910B"], a, b, tiling=tiling, workdir=tmp_path, arithmetic="accumulate=sequential")
    assert r16.clean and rsq.clean
    assert "ARITHMETIC default" in r16.stdout and "ARITHMETIC accumulate=sequential" in rsq.stdout
    _, _, e16 = references(a, b, sb=12, keep_lo_lo=False, tiling=tiling, cube=4, soc="910B")
    _, _, esq = references(a, b, sb=12, keep_lo_lo=False, tiling=tiling, cube=4, soc="910B", accumulate="sequential")
    assert not _same_bits(e16, esq), "operands do not separate the two models"
    assert _same_bits(r16.c, e16) and _same_bits(rsq.c, esq)
    assert not _same_bits(rsq.c, e16)


# ---------------------------------------------------------------- planted bugs
# (name, file under ascendc_kernels/, pattern, replacement, chips)
PLANTED = [
    ("l0b_load_not_transposed", "include/sgemm_cube/tile/copy.hpp",
     "p.ifTranspose = true;", "p.ifTranspose = false;", ["910B"]),
    ("gm_a_gap_off_by_one_block", "include/sgemm_cube/schedule/schedule.hpp",
     "return FractalRuns{rows / kCube, cols, g.kp - cols};",
     "return FractalRuns{rows / kCube, cols, g.kp - cols + 1};", ["910B"]),
    ("l0a_load_src_stride_2", "include/sgemm_cube/tile/copy.hpp",
     "p.srcStride = 1;   // consecutive fractals", "p.srcStride = 2;", ["910B"]),
    ("l1_b_offset_one_fractal_off", "include/sgemm_cube/schedule/schedule.hpp",
     "return p.l1_b + (slot * p.planes + pos) * p.b_tile;",
     "return p.l1_b + (slot * p.planes + pos) * p.b_tile + 512;", ["910B"]),
    ("split_ub_row_offset_off_by_one_row", "include/sgemm_cube/schedule/schedule.hpp",
     "split_ub_row_offset(uint32_t r) { return r * kCube; }",
     "split_ub_row_offset(uint32_t r) { return (r + 1) * kCube; }", ["910A"]),
    ("waitflag_b_slot_removed", "include/sgemm_cube/schedule/schedule.hpp",
     "        v.wait(Sync::kMte2ToMte1, Event::kBSlot0 + int32_t(cur.b_slot));\n        v.load_l0(cur);",
     "        v.load_l0(cur);", ["910A", "910B"]),
    ("waitflag_combine_mte2_v_removed", "include/sgemm_cube/kernel/combine_kernel.hpp",
     "        stage.AwaitLoaded(0);\n", "", ["910B"]),
    ("pipe_barrier_v_removed_in_split", "include/sgemm_cube/tile/split_tile.hpp",
     "// hi = fp16(x)\n    AscendC::PipeBarrier<PIPE_V>();", "// hi = fp16(x)", ["910A"]),
    ("l0c_accumulator_shared_by_two_terms", "include/sgemm_cube/schedule/schedule.hpp",
     "    return (stage * p.accumulators + acc) * p.c_tile;",
     "    return (stage * p.accumulators + (acc == kHiLo ? kLoHi : acc)) * p.c_tile;",
     ["910A", "910B"]),
    ("pipe_barrier_m_removed_small_mmad", "include/sgemm_cube/tile/copy.hpp",
     "        AscendC::PipeBarrier<PIPE_M>();\n", "", ["910B"]),
    ("waitflag_without_setflag", "include/sgemm_cube/kernel/combine_kernel.hpp",
     "    stage.Close();\n}",
     "    stage.Close();\n    AscendC::WaitFlag<AscendC::HardEvent::MTE3_MTE2>(0);\n}",
     ["910B"]),
    # one pass per term: a pass reads the wrong plane, or every pass writes the HH buffer
    ("per_term_pass_reads_hi_plane_of_a", "include/sgemm_cube/schedule/schedule.hpp",
     "return g.passes == 1 ? pos : term_a_part(pass_index);",
     "return g.passes == 1 ? pos : term_a_part(pass_index) * 0u;", ["910A", "910B"]),
    ("per_term_passes_share_one_term_buffer", "include/sgemm_cube/schedule/schedule.hpp",
     "return g.passes == 1 ? acc : pass_index;", "return g.passes == 1 ? acc : pass_index * 0u;", ["910B"]),
    # the 910A's combine in the GEMM's epilogue: HH added before the scaling, a barrier removed
    ("epilogue_combine_scales_after_adding_hh", "include/sgemm_cube/tile/accumulator_store.hpp",
     "        AscendC::Muls(nz_, nz_, inv_scale, count);     // corr * 2^-sb\n", "", ["910A"]),
    ("epilogue_combine_pipe_barrier_removed", "include/sgemm_cube/tile/accumulator_store.hpp",
     "        ToUb(nz2_, acc[schedule::kHiHi], m, n);\n        AscendC::PipeBarrier<PIPE_V>();\n",
     "        ToUb(nz2_, acc[schedule::kHiHi], m, n);\n", ["910A"]),
    # what the docs require of every call (the stand-in's rules): start addresses, no GEMV
    ("combine_ub_tile_16_bytes_off", "include/sgemm_cube/kernel/combine_kernel.hpp",
     "LocalTensor<float> vhl = base[2 * kTile];", "LocalTensor<float> vhl = base[2 * kTile + 4];", ["910B"]),
    ("mmad_issued_as_gemv", "include/sgemm_cube/tile/copy.hpp", "p.m = uint16_t(m);", "p.m = 1;", ["910A"]),
    # two L0C stages: both sets at one offset (the cube refills what the previous write-back still reads),
    # or the Mmads of a C block not waiting for their set's previous write-back (Out -> M flag)
    ("l0c_stages_share_one_offset", "include/sgemm_cube/schedule/schedule.hpp",
     "    return (stage * p.accumulators + acc) * p.c_tile;", "    return (0 * stage * p.accumulators + acc) * p.c_tile;",
     ["910A", "910B"]),
    ("l0c_stage_out_to_m_wait_removed", "include/sgemm_cube/schedule/schedule.hpp",
     "        if (cur.first_k) {\n            v.wait(Sync::kOutToM, Event::kCTile + int32_t(cur.l0c_stage));\n        }\n",
     "", ["910A", "910B"]),
    ("l0c_stages_share_one_event_id", "include/sgemm_cube/schedule/schedule.hpp",
     "            v.set(Sync::kOutToM, Event::kCTile + int32_t(cur.l0c_stage));",
     "            v.set(Sync::kOutToM, Event::kCTile);", ["910B"]),
]
# The tiling a planted bug runs with when it is not the default (32, 32, 32, 2): K = 80 in two groups.
PLANTED_TILING = {
    "per_term_pass_reads_hi_plane_of_a": (32, 32, 32, 2, 1),
    "per_term_passes_share_one_term_buffer": (32, 32, 32, 2, 1),
    "epilogue_combine_scales_after_adding_hh": (32, 32, 32, 4),  # one K group: the epilogue combines
    "epilogue_combine_pipe_barrier_removed": (32, 32, 32, 4),
    # two L0C stages; K = 80 in two groups, two column blocks per core: four write-backs on core 0
    "l0c_stages_share_one_offset": (32, 32, 32, 2, 0, 2),
    "l0c_stage_out_to_m_wait_removed": (32, 32, 32, 2, 0, 2),
    "l0c_stages_share_one_event_id": (32, 32, 32, 2, 0, 2),
}
# Bugs that sequential execution computes correctly: only the flag checker can see them, and it must
# name them (fragments of its report).
CHECKER_ONLY = {
    "waitflag_b_slot_removed": ["race RAW on L1: MTE1 access not ordered after MTE2 access", "while the flag is still set",
                                "left set"],
    "waitflag_combine_mte2_v_removed": ["race RAW on UB: V access not ordered after MTE2 access"],
    "pipe_barrier_v_removed_in_split": ["race RAW on UB: V access not ordered after V access"],
    "waitflag_without_setflag": ["with no earlier matching SetFlag"],
    # (m/16)*(n/16) = 4 < 10 with the default planted tiling: Mmad.md's rule, and the race it causes
    "pipe_barrier_m_removed_small_mmad": ["without PipeBarrier<PIPE_M> in between (Mmad.md)",
                                          "race RAW on L0C: M access not ordered after M access"],
    "epilogue_combine_pipe_barrier_removed": ["race RAW on UB: V access not ordered after V access"],
    "combine_ub_tile_16_bytes_off": ["misaligned operand: UB start address not 32-byte aligned"],
    # two L0C stages: the cube refills accumulators the previous write-back (V on 910A, FIX on 910B) still reads
    "l0c_stages_share_one_offset": ["race WAR on L0C: M access not ordered after"],
    "l0c_stage_out_to_m_wait_removed": ["race WAR on L0C: M access not ordered after", "while the flag is still set",
                                        "left set"],
    "l0c_stages_share_one_event_id": ["race WAR on L0C: M access not ordered after FIX access",
                                      "with no earlier matching SetFlag"],
}
# Bugs the stand-in refuses outright (exit 2): a fragment of its fatal message.
FATAL = {
    "mmad_issued_as_gemv": "GEMV mode not modelled; the kernels never issue it",
}
PLANTED_BUGS = [PlantedBug(name, rel, pattern, replacement, soc)
                for name, rel, pattern, replacement, socs in PLANTED for soc in socs]


def _planted_run(binary, tiling, tmp_path):
    """The planted bugs' product: K spans two groups and two column blocks per core, so every buffer is
    reused.  Returns (a, b, cube, run)."""
    a, b = _operands(np.random.default_rng(11), 1, 40, 64, 80)
    return a, b, 2, run(binary, a, b, tiling=tiling, cube=2, vector=2, workdir=tmp_path)


def test_precompiled_model_never_hides_a_planted_header(tmp_path):
    """Planted builds include the model's kernel_operator.h precompiled from the original sources, with the
    kernel headers it pulls in (arch.hpp); a copy that changed one of those is built without it."""
    clean = planted_sources(tmp_path / "clean", "none", None, None)
    assert "-include" in _precompiled_for(clean, "910B", PLANTED_OPT)
    changed = planted_sources(tmp_path / "changed", "arch", "include/sgemm_cube/arch/arch.hpp",
                              "struct Capacity {", "struct Capacity {  // changed")
    assert _precompiled_for(changed, "910B", PLANTED_OPT) == []


@pytest.mark.parametrize("bug", [control(soc) for soc in CHIPS], ids=PlantedBug.id.fget)
def test_planted_machinery_without_a_bug_passes(bug, planted_binary, binaries, tmp_path):
    """The unmodified sources, copied and built as a planted bug is (``executed.PLANTED_OPT``), run every
    planted tiling clean, bit-exact with the model and with the ordinary build: a planted bug's failure
    is its own, not the machinery's."""
    for tiling in sorted({(32, 32, 32, 2), *PLANTED_TILING.values()}):
        a, b, cube, r = _planted_run(planted_binary, tiling, tmp_path)
        sim, _, _ = references(a, b, sb=12, keep_lo_lo=False, tiling=tiling, cube=cube, soc=bug.soc)
        assert r.clean, f"{tiling}: rc={r.rc}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        assert _same_bits(r.c, sim), (tiling, _diff(r.c, sim))
        ordinary = _planted_run(binaries[bug.soc], tiling, tmp_path)[3]
        assert r.stdout == ordinary.stdout and all(_same_bits(x, y) for x, y in zip(r.parts, ordinary.parts))


@pytest.mark.parametrize("bug", PLANTED_BUGS, ids=PlantedBug.id.fget)
def test_planted_bug_fails(bug, planted_binary, tmp_path):
    name, soc = bug.name, bug.soc
    tiling = PLANTED_TILING.get(name, (32, 32, 32, 2))
    a, b, cube, r = _planted_run(planted_binary, tiling, tmp_path)
    if name in FATAL:
        assert r.rc == 2 and FATAL[name] in r.stderr, f"{name}: rc={r.rc}\n{r.stderr[-2000:]}"
        return
    if r.rc == 2:
        assert "EXEC-ASCENDC FATAL" in r.stderr
        return
    sim, _, _ = references(a, b, sb=12, keep_lo_lo=False, tiling=tiling, cube=cube, soc=soc)
    wrong = r.c is None or not _same_bits(r.c, sim)
    if name in CHECKER_ONLY:
        assert r.rc == 1 and not wrong, f"{name}: rc={r.rc}, wrong numbers: {wrong}\n{r.stdout[-2000:]}"
        for fragment in CHECKER_ONLY[name]:
            assert fragment in r.stdout, f"{name}: checker report lacks {fragment!r}:\n{r.stdout[-3000:]}"
        return
    assert wrong or not r.clean, f"planted bug {name} on {soc} went unnoticed:\n{r.stdout[-2000:]}"
