"""The accuracy guarantee's bookkeeping as AscendC kernels, executed on the host and checked bit for bit.

``sgemm_cube_line_stats`` (vector unit: per row of A / column of B the largest and smallest finite
magnitude and whether a NaN/Inf is there, integer operations on the bit patterns) and
``sgemm_cube_line_meta`` (scalar unit: the scaling exponent and class of every line,
``guard/line_meta.hpp``) run in the executable AscendC stand-in through
``ascendc_kernels/tests/exec_ascendc/run_line_meta.cpp``, for both chips.  Checked here:

* the packed integers equal ``cpu_fallback.guard.pack_meta(line_meta(...))`` on every adversarial
  generator of ``tests/guarantee_data.py``, for rows and columns, every ``scale`` option, several
  ``sb`` and both ``fixup`` settings; the statistics equal ``guard.line_stats``;
* shapes with several column tiles, tails, batches and meta chunks that straddle batches, and
  lines spanning the whole FP32 range (subnormals to the largest finite value);
* the flag checker is clean, and bugs planted in a copy of the sources fail;
* the meta kernels' word per batch (``kernel/batch_flags.hpp``: any line scaled, any listed) on every
  generator, and the later kernels (the split's scaling, the unscale alone or folded into the combine, the
  fix-up) skipping exactly the batches that need nothing, bit-exact with the whole bookkeeping.
"""
from __future__ import annotations

import numpy as np
import pytest

from sgemm_cube.cpu_fallback.guard import line_meta, line_stats, pack_meta
from tests.guarantee_data import GENERATORS

from .executed import LINE_META_HARNESS, PlantedBug, build_chips, control, run_line_meta
from .test_ascend_kernel_sources import CHIPS


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    return build_chips(tmp_path_factory.mktemp("exec_guard"), "run_line_meta", harness=LINE_META_HARNESS)


def _expected_stats(x: np.ndarray, axis: int):
    """guard.line_stats as the kernel's three integer arrays."""
    s = line_stats(x, axis)
    big = s.big.astype(np.float32).view(np.int32)
    small = np.where(np.isinf(s.small), np.int32(0x7FFFFFFF),
                     s.small.astype(np.float32).view(np.int32) - 1).astype(np.int32)
    return big, small, np.where(s.bad, 0, -1).astype(np.int32)


def _check(binary, x, axis, tmp_path, **opts):
    r = run_line_meta(binary, x, along_rows=axis == -1, workdir=tmp_path, **opts)
    assert r.clean, f"rc={r.rc}\n{r.stdout[-2000:]}\n{r.stderr[-1000:]}"
    for got, want, what in zip(r.stats, _expected_stats(x, axis), ("big", "small_w", "finite")):
        assert np.array_equal(got, want), f"{what}: {np.flatnonzero(got != want)[:5]}"
    meta = line_meta(x, axis, sb=opts.get("sb", 12), scale=opts.get("scale", "auto"), fixup=opts.get("fixup", True))
    want = pack_meta(meta)
    bad = np.flatnonzero(r.meta != want)
    assert bad.size == 0, f"{bad.size} lines differ, first {bad[:5]}: {r.meta.ravel()[bad[:5]]} vs {want.ravel()[bad[:5]]}"
    _check_batch_words(r.flags, meta, opts.get("fixup", True))


def _schedule_constant(name: str) -> int:
    """A constant of schedule/schedule.hpp, read from the header (its one source)."""
    import re

    from .test_ascend_kernel_sources import KERNELS

    text = (KERNELS / "include" / "sgemm_cube" / "schedule" / "schedule.hpp").read_text()
    return int(re.search(rf"\b{name} = (-?\d+);", text).group(1))


def _check_batch_words(flags, meta, fixup, extra=None):
    """The meta kernels' batch words (kernel/batch_flags.hpp): word 0 set exactly when a line of the batch has
    t != 0, word 1 exactly when one is listed (class >= fixup_min_class), word 2 exactly when a line's |t|
    exceeds schedule::kFastLineExponent, the others +0.  ``extra``: the other operand's meta, whose lines add
    to the same words."""
    from sgemm_cube.cpu_fallback.guard import fixup_min_class

    bound = _schedule_constant("kFastLineExponent")
    metas = [meta] + ([extra] if extra is not None else [])
    scaled, listed, wide = (np.zeros(meta.t.shape[0], bool) for _ in range(3))
    for m in metas:
        scaled |= (m.t != 0).reshape(m.t.shape[0], -1).any(axis=1)
        listed |= (m.cls >= fixup_min_class(fixup)).reshape(m.t.shape[0], -1).any(axis=1)
        wide |= (np.abs(m.t.astype(np.int64)) > bound).reshape(m.t.shape[0], -1).any(axis=1)
    assert np.array_equal(flags[:, 0] > 0, scaled), (flags[:, 0], scaled)
    assert np.array_equal(flags[:, 1] > 0, listed), (flags[:, 1], listed)
    assert np.array_equal(flags[:, 2] > 0, wide), (flags[:, 2], wide)
    assert not flags[:, 3:].any() and (flags >= 0).all() and np.array_equal(flags, np.round(flags))


@pytest.mark.parametrize("soc", sorted(CHIPS))
@pytest.mark.parametrize("gen", sorted(GENERATORS))
def test_meta_bit_exact_with_guard(binaries, soc, gen, tmp_path):
    rng = np.random.default_rng(sum(gen.encode()))
    a, b = GENERATORS[gen](rng, 37, 70, 45)
    for x, axis in ((a[None], -1), (b[None], -2)):
        for scale in ("auto", "rows", None, "matrix"):
            _check(binaries[soc], x, axis, tmp_path, scale=scale)
        _check(binaries[soc], x, axis, tmp_path, sb=8, fixup=False)
        _check(binaries[soc], x, axis, tmp_path, sb=20)


def _whole_range(rng, shape):
    """Entries spread over every binade of FP32, subnormals included, with zeros, signs, and a few NaN/Inf."""
    e = rng.integers(-149, 128, shape)
    x = (np.ldexp(rng.uniform(1, 2, shape), e)).astype(np.float32)
    x = np.where(np.isfinite(x), x, np.float32(3.4e38))
    x *= np.where(rng.random(shape) < 0.5, np.float32(-1), np.float32(1))
    x[rng.random(shape) < 0.05] = 0
    return x


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_meta_on_tiles_tails_batches_and_the_whole_range(binaries, soc, tmp_path):
    rng = np.random.default_rng(29)
    # 1030 lines per batch: meta chunks of 1024 straddle the batches; 300 columns: two tiles, a tail of 44.
    x = rng.standard_normal((3, 1030, 300)).astype(np.float32)
    x[0, 5] *= np.float32(1e-30)
    x[1, :, 7] = np.float32(1e30)
    x[2, 11, 13] = np.nan
    x[2, 1029, 299] = -np.inf
    wide = _whole_range(rng, (2, 40, 290))
    for scale in ("auto", "matrix"):
        _check(binaries[soc], x, -1, tmp_path, scale=scale, cores=5)
        _check(binaries[soc], x, -2, tmp_path, scale=scale, cores=5)
    for axis in (-1, -2):
        for scale in ("auto", "rows", "matrix", None):
            _check(binaries[soc], wide, axis, tmp_path, scale=scale, cores=3)


def _check_wide_word_at_its_bound(binary, tmp_path):
    """Word kFlagWide (schedule::kFastLineExponent = T) on lines at the bound: per batch one line with t = T, T + 1,
    -T, -T - 1 (the others moderate); the word is set exactly for the batches with |t| > T, as rows and as
    columns.  t of a line scaled by 2^e is found with guard.line_meta, so the data follow the guard's rule."""
    bound = _schedule_constant("kFastLineExponent")
    rng = np.random.default_rng(61)
    base = rng.standard_normal(48).astype(np.float32)
    probe = np.stack([base * np.float32(2.0 ** e) for e in range(-120, 121)])[None]
    t_of = dict(zip(line_meta(probe, -1, sb=12, scale="auto", fixup=True).t[0].tolist(), range(-120, 121)))
    targets = [bound, bound + 1, -bound, -bound - 1]
    x = rng.standard_normal((len(targets) + 1, 16, 48)).astype(np.float32)
    for b, t in enumerate(targets):
        x[b, 3] = base * np.float32(2.0 ** t_of[t])
    for axis, xs in ((-1, x), (-2, np.ascontiguousarray(np.swapaxes(x, 1, 2)))):
        r = run_line_meta(binary, xs, along_rows=axis == -1, workdir=tmp_path)
        assert r.clean, r.stdout[-2000:]
        meta = line_meta(xs, axis, sb=12, scale="auto", fixup=True)
        assert sorted(np.abs(meta.t).max(axis=1).tolist())[-2:] == [bound + 1, bound + 1]
        _check_batch_words(r.flags, meta, True)
        assert (r.flags[:, 2] > 0).tolist() == [False, True, False, True, False], r.flags[:, 2]


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_wide_word_at_its_bound(binaries, soc, tmp_path):
    _check_wide_word_at_its_bound(binaries[soc], tmp_path)


# ---------------------------------------------------------------- planted bugs
# (name, file under ascendc_kernels/, pattern, replacement, chips); each must make a check above fail.
PLANTED = [
    ("subnormal_exponent_off_by_one", "include/sgemm_cube/guard/line_meta.hpp",
     "const int32_t shift = leading_zeros(bits & kMantMask) - 8;",
     "const int32_t shift = leading_zeros(bits & kMantMask) - 7;", ["910B"]),
    ("nonfinite_not_below_finite", "include/sgemm_cube/tile/line_stats_tile.hpp",
     "        AscendC::Or(pu, pu, sign_", "        AscendC::Or(pu, pu, pu", ["910A"]),
    ("partial_tile_not_zeroed", "include/sgemm_cube/kernel/line_stats_kernel.hpp",
     "    if (cols < kCols) {  // zeros are neutral", "    if (false) {  // zeros are neutral", ["910B"]),
    ("scalar_reads_before_the_vector_unit_is_done", "include/sgemm_cube/kernel/line_stats_kernel.hpp",
     "        tile::Handoff<AscendC::HardEvent::V_S>(0);", "        AscendC::SetFlag<AscendC::HardEvent::V_S>(0);",
     ["910A"]),
    ("last_tile_of_an_item_not_accumulated", "include/sgemm_cube/kernel/line_stats_kernel.hpp",
     "        stats.Step4(last);\n", "", ["910B"]),
    ("row_fold_stops_at_16", "include/sgemm_cube/tile/line_stats_tile.hpp",
     "for (uint32_t m = 32; m >= 8; m /= 2)", "for (uint32_t m = 32; m >= 16; m /= 2)", ["910A"]),
    ("stage_freed_before_it_is_read", "include/sgemm_cube/kernel/line_stats_kernel.hpp",
     "            stats.Back(s, pair, i > 0, ps);\n            stages.InputRead(s);\n",
     "            stages.InputRead(s);\n            stats.Back(s, pair, i > 0, ps);\n",
     ["910B"]),
    ("meta_reads_before_the_load_is_done", "include/sgemm_cube/kernel/line_meta_kernel.hpp",
     "        AscendC::WaitFlag<AscendC::HardEvent::MTE2_S>(0);\n", "", ["910B"]),
    ("wide_word_never_set", "include/sgemm_cube/kernel/line_meta_kernel.hpp",
     "flag_.SetValue(schedule::kFlagWide, wide ? 1.0f : 0.0f);", "flag_.SetValue(schedule::kFlagWide, 0.0f);",
     ["910A"]),
    ("wide_word_for_positive_t_only", "include/sgemm_cube/schedule/schedule.hpp",
     "return t >= -kFastLineExponent && t <= kFastLineExponent;", "return t <= kFastLineExponent;", ["910B"]),
    ("matrix_scale_from_the_first_chunk_only", "include/sgemm_cube/kernel/line_meta_kernel.hpp",
     "at < uint64_t(b + 1) * args.lines; at += kChunk)",
     "at < uint64_t(b) * args.lines + kChunk && at < uint64_t(b + 1) * args.lines; at += kChunk)", ["910A"]),
]
CHECKER_ONLY = {
    "scalar_reads_before_the_vector_unit_is_done": "race RAW on UB: S access not ordered after V access",
    "stage_freed_before_it_is_read": "race WAR on UB: MTE2 access not ordered after V access",
    "meta_reads_before_the_load_is_done": "race RAW on UB: S access not ordered after MTE2 access",
}
PLANTED_BUGS = [PlantedBug(name, rel, pattern, replacement, soc, LINE_META_HARNESS)
                for name, rel, pattern, replacement, socs in PLANTED for soc in socs]


def _planted_failures(binary, tmp_path):
    """The checks a planted bug in the line meta must fail (their messages)."""
    rng = np.random.default_rng(41)
    x = _whole_range(rng, (2, 1030, 300))  # tails, two chunks per batch
    x[1, 3, 17] = np.nan
    x[0, 7, :] = np.ldexp(rng.uniform(1, 2, 300), rng.integers(-149, -126, 300)).astype(np.float32)  # subnormal lines
    x[1, :, 9] = np.ldexp(rng.uniform(1, 2, 1030), rng.integers(-149, -126, 1030)).astype(np.float32)
    x = np.clip(x, np.float32(-1e30), np.float32(1e30))
    x[0, 1029, 5] = np.float32(3e38)  # the batch's largest entry in a row past the first meta chunk
    failures = []
    for axis in (-1, -2):
        for scale in ("auto", "matrix"):
            try:
                _check(binary, x, axis, tmp_path, scale=scale, cores=3)
            except AssertionError as exc:
                failures.append(str(exc))
    try:
        _check_wide_word_at_its_bound(binary, tmp_path)
    except AssertionError as exc:
        failures.append(str(exc))
    return failures


@pytest.mark.parametrize("bug", [control(soc, LINE_META_HARNESS) for soc in sorted(CHIPS)],
                         ids=PlantedBug.id.fget)
def test_planted_machinery_without_a_bug_passes(bug, planted_binary, tmp_path):
    """The unmodified sources, copied and built as a planted bug is, pass the planted bugs' checks."""
    failures = _planted_failures(planted_binary, tmp_path)
    assert not failures, failures[0][:2000]


@pytest.mark.parametrize("bug", PLANTED_BUGS, ids=PlantedBug.id.fget)
def test_planted_bug_fails(bug, planted_binary, tmp_path):
    name, soc = bug.name, bug.soc
    failures = _planted_failures(planted_binary, tmp_path)
    assert failures, f"planted bug {name} on {soc} went unnoticed"
    if name in CHECKER_ONLY:
        assert any(CHECKER_ONLY[name] in f for f in failures), failures[0][:2000]


# ------------------------------------------------- the splits scale the lines (device integers)
@pytest.fixture(scope="module")
def gemm_binaries(tmp_path_factory):
    return build_chips(tmp_path_factory.mktemp("exec_guard_gemm"))


def _scaled_split_input(x: np.ndarray, t: np.ndarray, axis: int, sb: int) -> np.ndarray:
    """What the split must see: guard.scale_lines, then NaN/Inf and |x| >= split_limits(sb).max_abs as 0
    (``npu_model.ordinary_split_input``)."""
    from sgemm_cube.backends.npu_model import ordinary_split_input

    return ordinary_split_input(x, t, axis, sb)


def _expected(a, b, meta_a, meta_b, scaled_product, *, fixup=True, alpha=1.0):
    """What the device computes: guard.unscale of the emulated product of the scaled lines, except in the
    fix-up rows of A and columns of B (class >= fixup_min_class), recomputed in FP32 by recursive summation of the
    unscaled lines (NaN/Inf as IEEE gives them), times alpha.  Also returns the mask of the outputs to
    compare (all)."""
    from sgemm_cube.cpu_fallback.guard import fixup_min_class, unpack_meta, unscale
    from tests.guarantee_data import sequential_fp32

    ma, mb = unpack_meta(meta_a), unpack_meta(meta_b)
    want = unscale(scaled_product, ma.t, mb.t, alpha)
    rows = ma.cls >= fixup_min_class(fixup)  # (batch, m)
    cols = mb.cls >= fixup_min_class(fixup)  # (batch, n)
    with np.errstate(all="ignore"):
        fp32 = unscale(sequential_fp32(a, b), np.zeros_like(ma.t), np.zeros_like(mb.t), alpha)
    want = np.where(rows[:, :, None] | cols[:, None, :], fp32, want)
    return want, np.ones(want.shape, bool)


def _same_where(got, want, mask) -> str:
    bad = np.flatnonzero((got.view(np.uint32) != want.view(np.uint32)) & mask)
    return "" if bad.size == 0 else (f"{bad.size} outputs differ, first {bad[:4]}: {got.ravel()[bad[:4]]} vs "
                                     f"{want.ravel()[bad[:4]]}")


@pytest.mark.parametrize("soc", sorted(CHIPS))
@pytest.mark.parametrize("gen", ["row_span_120", "subnormal_rows", "scale_1e30_1e-30", "near_overflow",
                                 "specials_half_scaled", "one_huge_per_row", "underflow", "normal"])
def test_splits_scale_the_lines_by_the_device_integers(gemm_binaries, soc, gen, tmp_path):
    from sgemm_cube.backends import npu_schedule as ns
    from sgemm_cube.cpu_fallback import split
    from sgemm_cube.cpu_fallback.guard import unpack_meta

    from .executed import PROFILE, pad16, run

    rng = np.random.default_rng(sum(gen.encode()) + 1)
    a, b = GENERATORS[gen](rng, 37, 70, 45)
    a, b = a[None], b[None]
    for sb, scale, tiling in ((12, "auto", (32, 32, 32, 4)), (10, "rows", (16, 32, 32, 2, 1)), (16, "matrix", (32, 32, 16, 1))):
        r = run(gemm_binaries[soc], a, b, sb=sb, tiling=tiling, cube=3, vector=3, workdir=tmp_path, guard="device",
                scale=scale)
        assert r.clean, f"rc={r.rc}\n{r.stdout[-2000:]}\n{r.stderr[-1000:]}"
        ma, mb = line_meta(a, -1, sb=sb, scale=scale), line_meta(b, -2, sb=sb, scale=scale)
        assert np.array_equal(r.meta[0], pack_meta(ma)) and np.array_equal(r.meta[1], pack_meta(mb))
        ta, tb = unpack_meta(r.meta[0]).t, unpack_meta(r.meta[1]).t
        xa, xb = _scaled_split_input(a, ta, -1, sb), _scaled_split_input(b, tb, -2, sb)
        for x, (hi, lo), rows, cols in ((xa, r.parts[0:2], pad16(37), pad16(70)), (xb, r.parts[2:4], pad16(70), pad16(45))):
            padded = np.zeros((1, rows, cols), np.float32)
            padded[:, : x.shape[1], : x.shape[2]] = x
            ehi, elo = split(padded, sb)
            assert np.array_equal(hi.view(np.uint16), ehi.view(np.uint16)), f"{scale}: split hi differs"
            assert np.array_equal(lo.view(np.uint16), elo.view(np.uint16)), f"{scale}: split lo differs"
        scaled = ns.simulate(xa, xb, sb=sb, tiling=ns.Tiling(*tiling), cap=ns.capacity_from_profile(PROFILE[soc]),
                             cores=3)
        want, computed = _expected(a, b, r.meta[0], r.meta[1], scaled)
        assert not _same_where(r.c, want, computed), f"{scale}: {_same_where(r.c, want, computed)}"


def _column_groups_wrong(binary, tmp_path) -> str:
    """B's scaled split over batches 2 and 3 of five strips each on 2 cores (core 0's strips 0, 2, 4 in batch
    0, then 6, 8 in batch 1: a core's groups change batch between strips), two column tiles, every column
    scaled by its own power of two: what differs from the CPU split of the scaled lines ('' if nothing)."""
    from sgemm_cube.cpu_fallback import split
    from sgemm_cube.cpu_fallback.guard import unpack_meta

    from .executed import pad16, run

    rng = np.random.default_rng(59)
    for batch in (2, 3):
        a = rng.standard_normal((batch, 20, 80)).astype(np.float32)
        b = rng.standard_normal((batch, 80, 300)).astype(np.float32)
        b *= (np.float32(2.0) ** rng.integers(-140, 100, (batch, 1, 300))).astype(np.float32)
        r = run(binary, a, b, tiling=(16, 32, 32, 2), cube=2, vector=2, workdir=tmp_path, guard="device")
        if not r.clean or r.meta is None:
            return f"batch {batch}: rc={r.rc}\n{r.stdout[-2000:]}\n{r.stderr[-1000:]}"
        tb = unpack_meta(r.meta[1]).t
        assert np.count_nonzero(tb) > 250 and len(np.unique(tb)) > 100  # the case scales every column
        padded = np.zeros((batch, 80, pad16(300)), np.float32)
        padded[:, :, :300] = _scaled_split_input(b, tb, -2, 12)
        for got, want, part in zip(r.parts[2:4], split(padded, 12), ("hi", "lo")):
            if not np.array_equal(got.view(np.uint16), want.view(np.uint16)):
                return f"batch {batch}: split {part} of B differs"
    return ""


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_column_factors_built_once_per_batch_and_tile_keep_the_bits(gemm_binaries, soc, tmp_path):
    """B's scaled split takes a core's strips of one batch tile by tile, building each column factor tile once
    for them all (``_column_groups_wrong``): the split parts are the CPU split's bit for bit."""
    wrong = _column_groups_wrong(gemm_binaries[soc], tmp_path)
    assert not wrong, wrong


PLANTED_COLUMN_GROUPS = [PlantedBug(*bug) for bug in [
    ("column_factors_built_for_the_first_tile_only", "include/sgemm_cube/kernel/split_kernel.hpp",
     "const bool builds = per_column ? g == 0 : t == 0;", "const bool builds = per_column ? g == 0 && t == 0 : t == 0;",
     "910B"),
    ("column_group_runs_into_the_next_batch", "include/sgemm_cube/kernel/split_kernel.hpp",
     "const uint32_t batch_end = (batch + 1) * s.strips_per_batch;", "const uint32_t batch_end = s.strips;", "910A"),
]]


@pytest.mark.parametrize("bug", PLANTED_COLUMN_GROUPS, ids=PlantedBug.id.fget)
def test_planted_bug_in_the_column_groups_fails(bug, planted_binary, tmp_path):
    assert _column_groups_wrong(planted_binary, tmp_path), f"planted bug {bug.name} on {bug.soc} went unnoticed"


# two L0C stages (Tiling.l0c_stages = 2) under the guarantee's bookkeeping: 910A one K group (the epilogue
# combines, the unscale its own pass), several K groups (the combine with the unscale folded in), per term
L0C2_GUARD_TILINGS = [(32, 32, 32, 4, 0, 2), (16, 32, 16, 2, 0, 2), (16, 32, 32, 2, 1, 2)]


@pytest.mark.parametrize("soc", sorted(CHIPS))
@pytest.mark.parametrize("tiling", L0C2_GUARD_TILINGS, ids=str)
def test_gemm_with_two_l0c_stages_gives_the_bits_of_one(gemm_binaries, soc, tiling, tmp_path):
    """The whole device product (line statistics and meta, scaled splits, GEMM, combine and unscale) with two
    accumulator sets in L0C is bit for bit the one with one set, flag checker clean, every core writing back
    from both sets."""
    from sgemm_cube.backends import npu_schedule as ns

    from .executed import PROFILE, run

    rng = np.random.default_rng(31)
    a, b = GENERATORS["row_span_120"](rng, 37, 70, 45)
    a, b = a[None], b[None]
    two = run(gemm_binaries[soc], a, b, tiling=tiling, cube=2, vector=2, workdir=tmp_path, guard="device")
    one = run(gemm_binaries[soc], a, b, tiling=tiling[:5] + (1,), cube=2, vector=2, workdir=tmp_path,
              guard="device")
    assert two.clean and one.clean, f"rc={two.rc}\n{two.stdout[-2000:]}\n{two.stderr[-1000:]}"
    assert "l0c_stages=2" in two.stdout and "l0c_stages=1" in one.stdout
    assert ("combine_in_epilogue=1" in two.stdout) == (soc == "910A" and tiling[3] == 4 and not tiling[4])
    assert np.array_equal(two.c.view(np.uint32), one.c.view(np.uint32))
    g = ns.make_geometry(1, 37, 45, 70, ns.Tiling(*tiling), 2, 3, ns.capacity_from_profile(PROFILE[soc]))
    assert all({s.l0c_stage for s in ns.core_steps(g, core) if s.last_k} == {0, 1} for core in range(g.cores))


PLANTED_SPLIT = [
    ("column_factors_replicated_to_the_wrong_rows", "include/sgemm_cube/kernel/split_kernel.hpp",
     "const uint16_t gap = uint16_t((kPiece - n) * 4 / schedule::kBlockBytes);",
     "const uint16_t gap = uint16_t((kPiece - n) * 4 / schedule::kBlockBytes - 2);", ["910B"]),
    ("bound_mask_not_clamped_to_zero", "include/sgemm_cube/tile/split_tile.hpp",
     "    AscendC::Mins(ti, ti, int32_t(0), int32_t(count));                                 // m\n", "", ["910A"]),
    ("factors_rewritten_while_the_vector_unit_reads_them", "include/sgemm_cube/kernel/split_kernel.hpp",
     "    AscendC::WaitFlag<AscendC::HardEvent::V_S>(0);     // the previous factors are no longer read\n", "",
     ["910B"]),
]
PLANTED_SPLIT_BUGS = [PlantedBug(name, rel, pattern, replacement, soc)
                      for name, rel, pattern, replacement, socs in PLANTED_SPLIT for soc in socs]


def _scaled_split_same(good, binary, tmp_path):
    """(whether ``binary`` gives the ordinary build's splits and C on the planted case, its run)."""
    from .executed import run

    rng = np.random.default_rng(43)
    a, b = GENERATORS["specials_half_scaled"](rng, 40, 300, 300)  # two column tiles of B, NaN/Inf lines
    a, b = a[None], b[None]
    ok = run(good, a, b, tiling=(32, 32, 32, 4), cube=2, vector=2, workdir=tmp_path, guard="device")
    got = run(binary, a, b, tiling=(32, 32, 32, 4), cube=2, vector=2, workdir=tmp_path, guard="device")
    assert ok.clean
    same = got.c is not None and all(np.array_equal(x.view(np.uint16), y.view(np.uint16))
                                     for x, y in zip(got.parts, ok.parts)) \
        and np.array_equal(got.c.view(np.uint32), ok.c.view(np.uint32))  # bits: C has NaNs
    return same, got


@pytest.mark.parametrize("bug", PLANTED_SPLIT_BUGS, ids=PlantedBug.id.fget)
def test_planted_bug_in_the_scaled_split_fails(gemm_binaries, bug, planted_binary, tmp_path):
    name, soc = bug.name, bug.soc
    same, got = _scaled_split_same(gemm_binaries[soc], planted_binary, tmp_path)
    assert not (same and got.clean), f"planted bug {name} on {soc} went unnoticed"
    if name == "factors_rewritten_while_the_vector_unit_reads_them":
        assert "race WAR on UB: S access not ordered after V access" in got.stdout, got.stdout[-2000:]


# --------------------------------------------------------------- the unscale kernel
def _unscale_case(gemm_binaries, soc, a, b, tmp_path, *, alpha=1.0, tiling=(32, 32, 32, 4), scale="auto",
                  keep_lo_lo=False, fixup=True):
    from sgemm_cube.backends import npu_schedule as ns
    from sgemm_cube.cpu_fallback.guard import unpack_meta

    from .executed import PROFILE, run

    r = run(gemm_binaries[soc], a, b, tiling=tiling, cube=3, vector=3, workdir=tmp_path, guard="device",
            scale=scale, alpha=alpha, keep_lo_lo=keep_lo_lo, fixup=fixup)
    if r.meta is None:
        return r, None
    ta, tb = unpack_meta(r.meta[0]).t, unpack_meta(r.meta[1]).t
    xa, xb = _scaled_split_input(a, ta, -1, 12), _scaled_split_input(b, tb, -2, 12)
    scaled = ns.simulate(xa, xb, tiling=ns.Tiling(*tiling), cap=ns.capacity_from_profile(PROFILE[soc]), cores=3,
                         keep_lo_lo=keep_lo_lo)
    return r, _expected(a, b, r.meta[0], r.meta[1], scaled, alpha=alpha, fixup=fixup)


def _clean(r):
    assert r.clean, f"rc={r.rc}\n{r.stdout[-2000:]}\n{r.stderr[-1000:]}"
    return r.c


def _extreme_lines(rng, batch, m, k, n):
    """Rows and columns scaled by powers of two from 2^-140 to 2^70, so that the unscaled outputs run from
    below the smallest subnormal to beyond FP32's largest value."""
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(np.float32)
    a *= np.exp2(rng.integers(-140, 71, (batch, m, 1))).astype(np.float32)
    b *= np.exp2(rng.integers(-140, 71, (batch, 1, n))).astype(np.float32)
    return a, b


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_unscale_is_one_rounding_over_the_whole_range(gemm_binaries, soc, tmp_path):
    rng = np.random.default_rng(53)
    # 2 batches; 24 x 6200 outputs: one row per unit in two column chunks (3104 and 3096 of 6208 padded)
    a, b = _extreme_lines(rng, 2, 24, 30, 6200)
    r, (want, computed) = _unscale_case(gemm_binaries, soc, a, b, tmp_path, tiling=(16, 32, 64, 1))
    got = _clean(r)
    assert not _same_where(got, want, computed), _same_where(got, want, computed)
    tiny = (np.abs(want) < np.float32(1.1754944e-38)) & (want != 0)
    assert tiny.sum() > 10 and np.isinf(want).sum() > 10 and (want == 0).sum() > 10  # every branch is exercised
    # 16 columns: many rows per unit, rows of both batches in one unit
    a, b = _extreme_lines(rng, 3, 50, 20, 16)
    for scale in ("auto", "matrix", "rows"):
        r, (want, computed) = _unscale_case(gemm_binaries, soc, a, b, tmp_path, scale=scale, tiling=(16, 32, 16, 1))
        got = _clean(r)
        assert not _same_where(got, want, computed), (scale, _same_where(got, want, computed))


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_unscale_with_alpha(gemm_binaries, soc, tmp_path):
    """alpha = m 2^e: one rounding wherever the output is a normal number or overflows; in the subnormal
    range the output may be rounded twice (C m, then to the subnormal), at most one unit of 2^-149 away."""
    rng = np.random.default_rng(59)
    a, b = _extreme_lines(rng, 1, 40, 30, 70)
    for alpha in (0.37, -3.0, 2.0 ** -100, 0.0, 1.5 * 2.0 ** 60):
        r, (want, computed) = _unscale_case(gemm_binaries, soc, a, b, tmp_path, alpha=alpha)
        got = _clean(r)
        sub = (np.abs(want) < np.float32(1.1754944e-38)) & (want != 0)
        assert not _same_where(got, want, computed & ~sub), (alpha, _same_where(got, want, computed & ~sub))
        step = np.abs(got[computed & sub].astype(np.float64) - want[computed & sub].astype(np.float64))
        assert (step <= 2.0 ** -149).all(), alpha
        assert np.array_equal(np.signbit(got[computed]), np.signbit(want[computed])), alpha


def _unscale_paths(meta_a, meta_b, n_cols, alpha=1.0):
    """(fast units, careful units) of the unscale for these (batch, m) and (batch, n) packed integers
    (m a multiple of 16 and n of the tiling's bn: no padding): tile::SumsInNormalRange per unit of
    schedule::make_unscale_geometry, alpha = m 2^e as the harness splits it."""
    import math

    from sgemm_cube.backends import npu_schedule as ns
    from sgemm_cube.cpu_fallback.guard import unpack_meta

    ta, tb = unpack_meta(meta_a).t.astype(np.int64), unpack_meta(meta_b).t.astype(np.int64)
    batch, mp = ta.shape
    unit = ns.UNSCALE_UNIT
    rows_per_unit = unit // n_cols if n_cols <= unit else 1
    chunks = -(-n_cols // unit)
    chunk_cols = -(-(-(-n_cols // chunks)) // 16) * 16
    e = 0 if alpha == 0 else math.frexp(np.float32(alpha))[1] - 1
    rows = ta.reshape(-1)
    fast = careful = 0
    for row0 in range(0, batch * mp, rows_per_unit):
        for chunk in range(chunks):
            r = np.arange(row0, min(row0 + rows_per_unit, batch * mp))
            cols = tb[r // mp][:, chunk * chunk_cols:(chunk + 1) * chunk_cols]
            s_lo, s_hi = e - rows[r].max() - cols.max(), e - rows[r].min() - cols.min()
            if s_lo >= -126 and s_hi <= 127:
                fast += 1
            else:
                careful += 1
    return fast, careful


def _moderate_lines(rng, batch, m, k, n, extreme=None):
    """Lines whose unit exponent sums stay in [-126, 127] (the unscale's fast path) while the outputs run
    from subnormal to infinite: normal lines, lines scaled by 2^64 (t about -51: products overflow), and
    lines of largest entry 2^-48 (t = 62) whose other entries are 2^17 smaller, the large entry of a row
    meeting a zero of a column and the reverse (outputs about 2^-130: subnormal).  ``extreme``: {batch: e},
    that batch's columns scaled by 2^e instead (e = -120: t = 134, sums below the normal range; e = 100:
    t = -86, above it: the careful path), but its first column normal (t = 0)."""
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(np.float32)
    small_a = (rng.uniform(1, 2, (batch, m, k)) * rng.choice([-1, 1], (batch, m, k))).astype(np.float32)
    small_b = (rng.uniform(1, 2, (batch, k, n)) * rng.choice([-1, 1], (batch, k, n))).astype(np.float32)
    kind_a, kind_b = rng.integers(0, 3, (batch, m)), rng.integers(0, 3, (batch, n))
    tiny_a = np.concatenate([np.ones((batch, m, 1)), np.zeros((batch, m, 1)), small_a[:, :, 2:] * 2.0 ** -17], axis=2)
    tiny_b = np.concatenate([np.zeros((batch, 1, n)), np.ones((batch, 1, n)), small_b[:, 2:, :] * 2.0 ** -17], axis=1)
    a = np.where((kind_a == 0)[:, :, None], a, np.where((kind_a == 1)[:, :, None], a * 2.0 ** 64,
                                                         tiny_a * 2.0 ** -48)).astype(np.float32)
    b = np.where((kind_b == 0)[:, None, :], b, np.where((kind_b == 1)[:, None, :], b * 2.0 ** 64,
                                                         tiny_b * 2.0 ** -48)).astype(np.float32)
    for i, e in (extreme or {}).items():
        b[i] = (rng.standard_normal((k, n)) * 2.0 ** e).astype(np.float32)
        b[i, :, 0] = rng.standard_normal(k).astype(np.float32)
    return a, b


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_unscale_fast_path_is_one_rounding(gemm_binaries, soc, tmp_path):
    """Units whose exponent sums all lie in [-126, 127] take the fast path (one Mul by 2^s): bit for bit
    guard.unscale with alpha 1 and the careful path's bits with alpha (normal outputs one rounding, subnormal
    ones at most 2^-149 away), over subnormal, overflowing and zero outputs; beside units of a batch with
    extreme columns (the careful path): one row per unit in two column chunks, many rows per unit with both
    batches in a unit, alone (910A: the epilogue combined) or folded into the combine (910B; 910A with the
    paper's one pass per term)."""
    rng = np.random.default_rng(67)
    cases = [((2, 16, 40, 6208), (16, 32, 64, 1)), ((2, 64, 40, 208), (16, 32, 16, 1)),
             ((2, 64, 40, 208), (16, 32, 16, 1, 1))]
    for (batch, m, k, n), tiling in cases:
        a, b = _moderate_lines(rng, batch, m, k, n)
        for alpha in (1.0, 0.37, 1.5 * 2.0 ** 10):
            r, (want, computed) = _unscale_case(gemm_binaries, soc, a, b, tmp_path, tiling=tiling, alpha=alpha)
            got = _clean(r)
            assert _unscale_paths(r.meta[0], r.meta[1], n, alpha)[1] == 0  # every unit on the fast path
            sub = (np.abs(want) < np.float32(1.1754944e-38)) & (want != 0)
            exact = computed if alpha == 1.0 else computed & ~sub
            assert not _same_where(got, want, exact), (tiling, alpha, _same_where(got, want, exact))
            step = np.abs(got[computed & sub].astype(np.float64) - want[computed & sub].astype(np.float64))
            assert (step <= 2.0 ** -149).all(), (tiling, alpha)
            if alpha == 1.0:  # subnormal, infinite and zero outputs of the fast path are exercised
                assert (computed & sub).sum() > 10 and np.isinf(want[computed]).sum() > 10, tiling
                assert (want[computed] == 0).sum() + (computed & sub).sum() > 10, tiling
        a, b = _moderate_lines(rng, batch + 1, m, k, n, extreme={1: -120, 2: 100})
        r, (want, computed) = _unscale_case(gemm_binaries, soc, a, b, tmp_path, tiling=tiling)
        got = _clean(r)
        fast, careful = _unscale_paths(r.meta[0], r.meta[1], n)
        assert fast > 0 and careful > 0, (tiling, fast, careful)
        assert not _same_where(got, want, computed), (tiling, _same_where(got, want, computed))


PLANTED_UNSCALE = [
    ("subnormal_outputs_rounded_twice", "include/sgemm_cube/tile/unscale_tile.hpp",
     "    AscendC::Muls(v.w1, v.t, int32_t(64), n);\n", "    AscendC::Muls(v.w1, v.t, int32_t(0), n);\n",
     ["910B"]),
    ("overflow_past_the_third_factor", "include/sgemm_cube/tile/unscale_tile.hpp",
     "    for (int32_t step = 0; step < 3; ++step) {", "    for (int32_t step = 0; step < 1; ++step) {",
     ["910A"]),
    ("row_exponents_read_one_row_off", "include/sgemm_cube/tile/unscale_tile.hpp",
     "v.rows_meta.GetValue(row0 + r - first8)", "v.rows_meta.GetValue(row0 + r - first8 + (r > 0 ? 1 : 0))",
     ["910B"]),
    ("rows_integers_reloaded_while_read", "include/sgemm_cube/kernel/unscale_kernel.hpp",
     "        AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(0);  // the previous unit's rows' integers were read\n",
     "", ["910A"]),
]
PLANTED_UNSCALE_BUGS = [PlantedBug(name, rel, pattern, replacement, soc)
                        for name, rel, pattern, replacement, socs in PLANTED_UNSCALE for soc in socs]
# The fast path (tile::SumsInNormalRange, RowFactorBits, FastPow2) and the two UB stages: caught on
# _planted_fast_case's data.
PLANTED_FAST = [
    ("fast_path_below_the_normal_range", "include/sgemm_cube/tile/unscale_tile.hpp",
     "return alpha_exp - ta_hi - tb_hi >= -126 && alpha_exp", "return alpha_exp - ta_hi - tb_hi >= -252 && alpha_exp",
     ["910A"]),
    ("fast_path_above_the_normal_range", "include/sgemm_cube/tile/unscale_tile.hpp",
     "alpha_exp - ta_lo - tb_lo <= 127;", "alpha_exp - ta_lo - tb_lo <= 254;", ["910B"]),
    ("fast_factor_off_by_one", "include/sgemm_cube/tile/unscale_tile.hpp",
     "4 * (alpha_exp - ta + 1151)", "4 * (alpha_exp - ta + 1152)", ["910A"]),
    ("fast_factor_keeps_the_class_bits", "include/sgemm_cube/tile/unscale_tile.hpp",
     "AscendC::Duplicate<int32_t>(low_bits, int32_t(-4),", "AscendC::Duplicate<int32_t>(low_bits, int32_t(-1),",
     ["910B"]),
    ("column_bounds_kept_across_batches", "include/sgemm_cube/tile/unscale_tile.hpp",
     "const uint32_t key = batch * col_chunks + chunk,", "const uint32_t key = 0 * batch * col_chunks + chunk,",
     ["910A"]),
    ("column_bounds_of_the_first_column_only", "include/sgemm_cube/tile/unscale_tile.hpp",
     "for (uint32_t j = 1; j < w; ++j) {", "for (uint32_t j = 1; j < 1; ++j) {", ["910B"]),
    ("fast_path_ignores_alpha_mantissa", "include/sgemm_cube/kernel/unscale_kernel.hpp",
     "                tile::RowFactorBits(v, row0, first8, rows, w, args.alpha_exp);\n"
     "                AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);  // the rows' and columns' integers were read\n"
     "                if (args.alpha_mant != 1.0f) {",
     "                tile::RowFactorBits(v, row0, first8, rows, w, args.alpha_exp);\n"
     "                AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);  // the rows' and columns' integers were read\n"
     "                if (false) {", ["910A"]),
    ("stages_share_their_tiles", "include/sgemm_cube/kernel/unscale_kernel.hpp",
     "const tile::UnscaleTile& v = views[st];", "const tile::UnscaleTile& v = views[0];", ["910B"]),
]
PLANTED_FAST_BUGS = [PlantedBug(name, rel, pattern, replacement, soc)
                     for name, rel, pattern, replacement, socs in PLANTED_FAST for soc in socs]


def _planted_unscale_case(binary, soc, tmp_path):
    a, b = _extreme_lines(np.random.default_rng(61), 2, 40, 30, 50)
    return _unscale_case({soc: binary}, soc, a, b, tmp_path, tiling=(16, 32, 16, 1))


@pytest.mark.parametrize("bug", PLANTED_UNSCALE_BUGS, ids=PlantedBug.id.fget)
def test_planted_bug_in_the_unscale_fails(bug, planted_binary, tmp_path):
    name, soc = bug.name, bug.soc
    r, expected = _planted_unscale_case(planted_binary, soc, tmp_path)
    if name == "rows_integers_reloaded_while_read":  # the checker sees the unbalanced flag
        assert r.rc == 1 and "while the flag is still set" in r.stdout, r.stdout[-2000:]
        return
    wrong = expected is None or r.c is None or bool(_same_where(r.c, *expected))
    assert wrong or not r.clean, f"planted bug {name} on {soc} went unnoticed"


def _planted_fast_case(binary, soc, tmp_path):
    """Three batches of 64 x 208 outputs, 18 rows per unit on 3 cores (units with rows of two batches, a
    core's units of batch 0 then 1 then 2): batch 0's lines moderate (the fast path, subnormal and infinite
    outputs among them), batch 1's and 2's columns extreme but the first (the careful path: the sums below,
    then above the normal range), alpha = 0.37 (also through the fast path); every 7th column of batch 0
    loses bits in the split (class 1: its packed integer's class bits set), not fixed up."""
    a, b = _moderate_lines(np.random.default_rng(71), 3, 64, 40, 208, extreme={1: -120, 2: 100})
    b[0, 2, ::7] *= np.float32(2.0 ** -30)
    return _unscale_case({soc: binary}, soc, a, b, tmp_path, tiling=(16, 32, 16, 1), alpha=0.37, fixup=False)


@pytest.mark.parametrize("bug", PLANTED_FAST_BUGS, ids=PlantedBug.id.fget)
def test_planted_bug_in_the_unscale_fast_path_fails(bug, planted_binary, tmp_path):
    r, expected = _planted_fast_case(planted_binary, bug.soc, tmp_path)
    if expected is None or r.c is None:
        return
    want, computed = expected
    sub = (np.abs(want) < np.float32(1.1754944e-38)) & (want != 0)
    wrong = bool(_same_where(r.c, want, computed & ~sub))
    assert wrong or not r.clean, f"planted bug {bug.name} on {bug.soc} went unnoticed"


# ------------------------------------------------------ the fix-up rows, in FP32 on the device
@pytest.mark.parametrize("soc", sorted(CHIPS))
@pytest.mark.parametrize("fixup", [True, False])
def test_listed_rows_are_recursive_fp32_sums(gemm_binaries, soc, fixup, tmp_path):
    """Rows of A with NaN/Inf, with entries the split cannot hold or (fixup) would lose bits in: computed by
    sgemm_cube_fixup_rows as recursive summation of the unscaled lines, NaN and Inf as IEEE gives them."""
    from sgemm_cube.backends import npu_schedule as ns
    from sgemm_cube.cpu_fallback.guard import fixup_min_class, unpack_meta

    from .executed import PROFILE, run

    rng = np.random.default_rng(67)
    a = rng.standard_normal((2, 40, 70)).astype(np.float32)
    b = rng.standard_normal((2, 70, 50)).astype(np.float32)
    a[0, 3, 5] = np.inf                       # class 2
    a[1, 7, :35] *= np.float32(1e-25)         # 35 tiny entries: class 1 (listed with fixup)
    a[1, 9, 11] = np.nan
    a[0, 12, :] *= np.float32(2.0 ** -130)    # a row of subnormals: scaled into range, not listed
    b[0, 2, 4] = -np.inf                      # a class-2 column: meets the Inf row (inf * -inf)
    tiling = (16, 32, 16, 2)
    r = run(gemm_binaries[soc], a, b, tiling=tiling, cube=3, vector=3, workdir=tmp_path, guard="device",
            fixup=fixup)
    got = _clean(r)
    rows = unpack_meta(r.meta[0]).cls >= fixup_min_class(fixup)
    assert rows.sum() == (3 if fixup else 2)
    ta, tb = unpack_meta(r.meta[0]).t, unpack_meta(r.meta[1]).t
    xa, xb = _scaled_split_input(a, ta, -1, 12), _scaled_split_input(b, tb, -2, 12)
    scaled = ns.simulate(xa, xb, tiling=ns.Tiling(*tiling), cap=ns.capacity_from_profile(PROFILE[soc]), cores=3)
    want, computed = _expected(a, b, r.meta[0], r.meta[1], scaled, fixup=fixup)
    assert not _same_where(got, want, computed), _same_where(got, want, computed)
    assert not np.isfinite(got[0, 3]).any()  # every output of the Inf row meets it (inf, or NaN against -inf)


PLANTED_FIXUP = [
    ("accumulators_not_cleared_for_the_next_row", "include/sgemm_cube/kernel/fixup_kernel.hpp",
     "            AscendC::Duplicate<float>(v.c, 0.0f, n);               // the accumulators\n", ""),
    ("class_threshold_off_by_one", "include/sgemm_cube/kernel/fixup_kernel.hpp",
     "if (row.cls < int32_t(args.fixup_min_class)) {", "if (row.cls <= int32_t(args.fixup_min_class)) {"),
    ("sum_past_the_products_k", "include/sgemm_cube/kernel/fixup_kernel.hpp",
     "for (uint32_t k0 = 0; k0 < args.k; k0 += kW) {\n                const uint32_t ka = schedule::min_u32(kW, args.k - k0);",
     "for (uint32_t k0 = 0; k0 < args.k; k0 += kW) {\n                const uint32_t ka = schedule::min_u32(kW, args.k - k0) - 1;"),
    # the fix-up columns
    ("column_fixup_transposes_the_wrong_column", "include/sgemm_cube/kernel/fixup_cols_kernel.hpp",
     "col.SetValue(i, blk.GetValue(i * 8 + (k - k0)));", "col.SetValue(i, blk.GetValue(i * 8 + (7 - (k - k0))));"),
    ("column_fixup_writes_the_neighbouring_element", "include/sgemm_cube/kernel/fixup_cols_kernel.hpp",
     "bb.SetValue(j & 7u, v.c.GetValue(i));", "bb.SetValue((j + 1) & 7u, v.c.GetValue(i));"),
]


PLANTED_FIXUP_BUGS = [PlantedBug(name, rel, pattern, replacement, "910B")
                      for name, rel, pattern, replacement in PLANTED_FIXUP]


def _planted_fixup_case(binary, tmp_path):
    rng = np.random.default_rng(71)
    a, b = _extreme_lines(rng, 1, 40, 30, 50)
    a[0, 3, 5] = np.inf
    a[0, 6, :15] *= np.float32(1e-25)
    b[0, :, 7] = np.ldexp(rng.uniform(1, 2, 30), -140).astype(np.float32)  # a column scaled by 2^144 > 2^127
    b[0, 4, 20] = np.nan  # a listed column
    b[0, :, 33] = rng.standard_normal(30).astype(np.float32)
    b[0, :15, 33] *= np.float32(1e-25)  # a listed column (fixup) with finite outputs
    return _unscale_case({"910B": binary}, "910B", a, b, tmp_path, tiling=(16, 32, 16, 1))


@pytest.mark.parametrize("bug", PLANTED_FIXUP_BUGS, ids=[b.name for b in PLANTED_FIXUP_BUGS])
def test_planted_bug_in_the_fixup_fails(bug, planted_binary, tmp_path):
    r, expected = _planted_fixup_case(planted_binary, tmp_path)
    wrong = expected is None or r.c is None or bool(_same_where(r.c, *expected))
    assert wrong or not r.clean, f"planted bug {bug.name} went unnoticed"


# ------------------------------------------- the batch words: work skipped where a batch needs none
def _mixed_batches(rng):
    """Three batches of 40 x 30 @ 30 x 200: the first needs nothing (normal data, scale="auto"); the second
    has one scaled row of A (entries around 2^-130: t != 0, not listed) and one listed column of B (15 tiny
    entries: class 1, listed with fixup); the third a listed row of A (an infinity).  With 208 padded
    columns an unscale unit holds 29 rows, so units straddle the batches (rows 29-57: batch 0 and the
    second batch's scaled row 5)."""
    a = rng.standard_normal((3, 40, 30)).astype(np.float32)
    b = rng.standard_normal((3, 30, 200)).astype(np.float32)
    a[1, 5, :] *= np.float32(2.0 ** -130)
    b[1, :15, 9] *= np.float32(1e-25)
    a[2, 7, 3] = np.inf
    return a, b


def _batch_words_case(binaries, soc, tiling, tmp_path, alpha=1.0):
    from sgemm_cube.cpu_fallback.guard import unpack_meta

    a, b = _mixed_batches(np.random.default_rng(73))
    # the 910B's case with the fourth term (A_lo B_lo), combined in UB before the unscale
    r, expected = _unscale_case(binaries, soc, a, b, tmp_path, tiling=tiling, alpha=alpha, keep_lo_lo=soc == "910B")
    return r, expected, (unpack_meta(r.meta[0]), unpack_meta(r.meta[1])) if r.meta is not None else None


# the 910A with one K group combines in the GEMM's epilogue (the unscale its own pass); per term, or on the
# 910B, the combine kernel runs with the unscale folded in
BATCH_WORD_CASES = [("910A", (16, 32, 16, 2)), ("910A", (16, 32, 16, 2, 1)), ("910B", (16, 32, 16, 2))]


@pytest.mark.parametrize("soc,tiling", BATCH_WORD_CASES, ids=["910A-epilogue", "910A-folded", "910B-folded"])
def test_batch_words_skip_only_batches_that_need_nothing(gemm_binaries, soc, tiling, tmp_path):
    """The meta kernels' word per batch says which batches have a scaled or a listed line; the split's
    scaling, the unscale (alone or folded into the combine) and the fix-up skip the others, and the result is
    what the whole bookkeeping gives, bit for bit (alpha = 1: units of the first batch are not unscaled;
    alpha != 1: every unit is, as alpha asks)."""
    r, (want, computed), (ma, mb) = _batch_words_case(gemm_binaries, soc, tiling, tmp_path)
    got = _clean(r)
    _check_batch_words(r.flags, ma, True, extra=mb)
    assert (r.flags[:, 0] > 0).tolist() == [False, True, True] and (r.flags[:, 1] > 0).tolist() == [False, True, True]
    assert not _same_where(got, want, computed), _same_where(got, want, computed)
    assert ("combine_in_epilogue=1" in r.stdout) == (soc == "910A" and len(tiling) == 4)
    r, (want, computed), _ = _batch_words_case(gemm_binaries, soc, tiling, tmp_path, alpha=0.37)
    got = _clean(r)
    sub = (np.abs(want) < np.float32(1.1754944e-38)) & (want != 0)  # as test_unscale_with_alpha
    assert not _same_where(got, want, computed & ~sub), _same_where(got, want, computed & ~sub)
    assert np.array_equal(got[0], (want[0])) and not np.array_equal(got[0], _batch_words_case(
        gemm_binaries, soc, tiling, tmp_path)[0].c[0])  # the first batch too is times alpha


# ------------------------------------------------- the unscale in the 910A's GEMM epilogue (issue 32)
def _epilogue_batches(rng):
    """Four batches of 40 x 30 times 30 x 200: the first and third with rows and columns scaled by 2^e, e in
    [-40, 40] (every |t| far below kFastLineExponent: the epilogue unscales them, with column integers that differ
    from tile to tile), the second with one row of A below 2^-130 (a wide line: the unscale pass's careful path),
    the last needing no scaling (alpha = 1: nothing to do; alpha != 1: the epilogue multiplies)."""
    a = rng.standard_normal((4, 40, 30)).astype(np.float32)
    b = rng.standard_normal((4, 30, 200)).astype(np.float32)
    for i in (0, 2):
        a[i] *= np.exp2(rng.integers(-40, 41, (40, 1))).astype(np.float32)
        b[i] *= np.exp2(rng.integers(-40, 41, (1, 200))).astype(np.float32)
    a[1, 5, :] *= np.float32(2.0 ** -130)
    return a, b


EPILOGUE_TILING, FOLDED_TILING = (16, 32, 16, 2), (16, 32, 16, 2, 1)


def _epilogue_case(binaries, tmp_path, alpha, tiling=EPILOGUE_TILING):
    a, b = _epilogue_batches(np.random.default_rng(97))
    r, expected = _unscale_case(binaries, "910A", a, b, tmp_path, tiling=tiling, alpha=alpha)
    if expected is not None and alpha != 1.0:  # as test_unscale_with_alpha: guard.unscale rounds subnormals once
        want, computed = expected
        expected = (want, computed & ~((np.abs(want) < np.float32(1.1754944e-38)) & (want != 0)))
    return r, expected


@pytest.mark.parametrize("alpha", [1.0, 0.37])
def test_epilogue_unscales_fast_batches_bit_exact(gemm_binaries, alpha, tmp_path):
    """The 910A with one K group combines C in the GEMM's epilogue and there unscales the batches whose words
    allow the fast path (schedule::epilogue_unscales); the unscale pass does the wide batch alone.  The result
    is the whole bookkeeping's, bit for bit, and equals (every bit, subnormals included) the route where the
    combine kernel runs with the unscale folded in (per-term passes), which has no epilogue unscale."""
    from sgemm_cube.cpu_fallback.guard import unpack_meta

    r, (want, computed) = _epilogue_case(gemm_binaries, tmp_path, alpha)
    got = _clean(r)
    assert "EPILOGUE_UNSCALE on" in r.stdout and "combine_in_epilogue=1" in r.stdout
    ma, mb = unpack_meta(r.meta[0]), unpack_meta(r.meta[1])
    _check_batch_words(r.flags, ma, True, extra=mb)
    assert (r.flags[:, 2] > 0).tolist() == [False, True, False, False]  # one wide batch, the others fast
    assert (r.flags[:, 0] > 0).tolist() == [True, True, True, False]
    assert not _same_where(got, want, computed), _same_where(got, want, computed)
    folded, _ = _epilogue_case(gemm_binaries, tmp_path, alpha, tiling=FOLDED_TILING)
    assert "EPILOGUE_UNSCALE on" not in folded.stdout and "combine_in_epilogue=0" in folded.stdout
    assert np.array_equal(got.view(np.uint32), _clean(folded).view(np.uint32))


# (name, file, pattern, replacement): each must make _epilogue_case (alpha = 1 or 0.37) differ or fail.
PLANTED_EPILOGUE = [
    ("pass_does_not_skip_what_the_epilogue_unscaled", "include/sgemm_cube/kernel/unscale_kernel.hpp",
     "const bool after_epilogue = args.epilogue != 0 &&", "const bool after_epilogue = false && args.epilogue != 0 &&"),
    ("epilogue_does_not_unscale", "include/sgemm_cube/tile/accumulator_store.hpp",
     "        if (unscale_ && BatchUnscaled(lines.batch)) {", "        if (false && BatchUnscaled(lines.batch)) {"),
    ("wide_word_not_set_for_a_wide_line", "include/sgemm_cube/kernel/line_meta_kernel.hpp",
     "flag_.SetValue(schedule::kFlagWide, wide ? 1.0f : 0.0f);", "flag_.SetValue(schedule::kFlagWide, 0.0f);"),
    ("epilogue_reads_the_first_column_tiles_integers", "include/sgemm_cube/block/block_mmad_resident_a.hpp",
     "uint64_t(s.batch) * g_.np + uint64_t(s.col_block) * g_.bn}", "uint64_t(s.batch) * g_.np}"),
    ("epilogue_skips_alpha_mant", "include/sgemm_cube/tile/accumulator_store.hpp",
     "        if (alpha_mant_ != 1.0f) {\n            AscendC::Muls(nd, nd,", "        if (false) {\n            AscendC::Muls(nd, nd,"),
    ("piece_runs_on_into_the_next_batch", "include/sgemm_cube/kernel/unscale_kernel.hpp",
     "end = schedule::min_u32(unit_end, (e + 1) * u.mp);", "end = unit_end;"),
    ("piece_starts_at_the_units_first_row", "include/sgemm_cube/kernel/unscale_kernel.hpp",
     "row0 = schedule::max_u32(row0, b * u.mp);", "row0 = row0 + 0 * b;"),
]
PLANTED_EPILOGUE_BUGS = [PlantedBug(name, rel, pattern, replacement, "910A")
                         for name, rel, pattern, replacement in PLANTED_EPILOGUE]


@pytest.mark.parametrize("bug", PLANTED_EPILOGUE_BUGS, ids=[b.name for b in PLANTED_EPILOGUE_BUGS])
def test_planted_bug_in_the_epilogue_unscale_fails(bug, planted_binary, tmp_path):
    caught = []
    for alpha in (1.0, 0.37):
        r, expected = _epilogue_case({"910A": planted_binary}, tmp_path, alpha)
        caught.append(expected is None or r.c is None or not r.clean or bool(_same_where(r.c, *expected)))
    assert any(caught), f"planted bug {bug.name} went unnoticed"


# (name, file, pattern, replacement, chip, tiling); CHECKER_ONLY_BATCH_WORDS: what the flag checker must say.
# The words themselves are checked against guard.line_meta on every generator (_check_batch_words).
PLANTED_BATCH_WORDS = [
    ("meta_lists_class_2_only", "include/sgemm_cube/kernel/line_meta_kernel.hpp",
     "listed = listed || m.cls >= listed_from;", "listed = listed || m.cls > listed_from;", "910A", (16, 32, 16, 2)),
    ("split_reads_the_first_batch_word_only", "include/sgemm_cube/kernel/split_kernel.hpp",
     "const uint32_t batch = first / s.strips_per_batch;", "const uint32_t batch = 0;", "910A", (16, 32, 16, 2)),
    ("unscale_unit_reads_its_first_batch_only", "include/sgemm_cube/kernel/unscale_kernel.hpp",
     "Any(first_batch, last_batch, schedule::kFlagScaled)", "Any(first_batch, last_batch > first_batch ? first_batch : last_batch, schedule::kFlagScaled)",
     "910A", (16, 32, 16, 2, 1)),  # folded into the combine, a unit straddling batches 0 and 1 is only combined
    # (after the epilogue's unscale the pass's pieces hold the wide batch alone: PLANTED_EPILOGUE has its bugs)
    ("folded_combine_does_not_scale_the_correction", "include/sgemm_cube/tile/unscale_tile.hpp",
     "    AscendC::Muls(v.lh, v.lh, inv_scale, n);  // corr * 2^-sb\n", "", "910A", (16, 32, 16, 2, 1)),
    ("batch_word_read_before_it_arrives", "include/sgemm_cube/kernel/batch_flags.hpp",
     "            AscendC::WaitFlag<AscendC::HardEvent::MTE2_S>(kEvent);\n", "", "910B", (16, 32, 16, 2)),
    ("folded_unit_without_integers_leaves_its_flag_unset", "include/sgemm_cube/kernel/unscale_kernel.hpp",
     "            AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);  // no integers were read\n", "", "910B",
     (16, 32, 16, 2)),
]
CHECKER_ONLY_BATCH_WORDS = {
    "batch_word_read_before_it_arrives": "race RAW on UB: S access not ordered after MTE2 access",
    "folded_unit_without_integers_leaves_its_flag_unset": "with no earlier matching SetFlag",
}


PLANTED_BATCH_WORDS_BUGS = [PlantedBug(name, rel, pattern, replacement, soc)
                            for name, rel, pattern, replacement, soc, _ in PLANTED_BATCH_WORDS]


@pytest.mark.parametrize("bug", PLANTED_BATCH_WORDS_BUGS, ids=[b.name for b in PLANTED_BATCH_WORDS_BUGS])
def test_planted_bug_in_the_batch_words_fails(bug, planted_binary, tmp_path):
    name, soc = bug.name, bug.soc
    tiling = next(p[5] for p in PLANTED_BATCH_WORDS if p[0] == name)
    r, expected, _ = _batch_words_case({soc: planted_binary}, soc, tiling, tmp_path)
    if name in CHECKER_ONLY_BATCH_WORDS:
        assert r.rc == 1 and CHECKER_ONLY_BATCH_WORDS[name] in r.stdout, r.stdout[-2000:]
        return
    wrong = expected is None or r.c is None or bool(_same_where(r.c, *expected))
    assert wrong or not r.clean, f"planted bug {name} on {soc} went unnoticed"


@pytest.mark.parametrize("bug", [control(soc) for soc in sorted(CHIPS)], ids=PlantedBug.id.fget)
def test_planted_machinery_without_a_bug_passes_the_gemm_checks(gemm_binaries, bug, planted_binary, tmp_path):
    """The unmodified sources, copied and built as a planted bug is (``executed.PLANTED_OPT``), pass every
    check above that a planted bug in the split, the unscale, the fix-up or the batch words must fail: the
    ordinary build's bits, clean runs, the expected C."""
    soc = bug.soc
    same, got = _scaled_split_same(gemm_binaries[soc], planted_binary, tmp_path)
    assert same and got.clean, got.stdout[-2000:]
    cases = [_planted_unscale_case(planted_binary, soc, tmp_path)]
    r, (want, computed) = _planted_fast_case(planted_binary, soc, tmp_path)
    assert _unscale_paths(r.meta[0], r.meta[1], 208, 0.37)[0] > 0  # the fast path is taken there
    sub = (np.abs(want) < np.float32(1.1754944e-38)) & (want != 0)
    cases.append((r, (want, computed & ~sub)))
    if soc == "910B":
        cases.append(_planted_fixup_case(planted_binary, tmp_path))
    for tiling in sorted({p[5] for p in PLANTED_BATCH_WORDS if p[4] == soc}):
        cases.append(_batch_words_case({soc: planted_binary}, soc, tiling, tmp_path)[:2])
    if soc == "910A":
        cases += [_epilogue_case({soc: planted_binary}, tmp_path, alpha) for alpha in (1.0, 0.37)]
    for r, expected in cases:
        assert r.clean and expected is not None and r.c is not None, r.stdout[-2000:]
        assert not _same_where(r.c, *expected), _same_where(r.c, *expected)
