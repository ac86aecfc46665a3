"""Listed lines on the cube by exponent bands: the device side, executed on the host and checked bit for bit.

The band design (``cpu_fallback/bands.py``, the one definition) cuts each banded line (class ``LOSES_BITS``)
into exponent bands and runs each band through the split, the GEMM and the combine with the unscale (a *band
pass*: the extension's ``band_pass``, ``host/binding.cpp``); the guarded product with ``bands=True`` leaves the
banded lines' outputs to those passes and fixes up only the ``SPECIAL`` lines in FP32.  Checked here, on both
chips, through ``ascendc_kernels/tests/exec_ascendc/run_kernels.cpp`` (guard modes "band" and "device"):

* the split's band cutoff (``SplitArgs::keep_from``, ``tile::ZeroBelow``): a band side's FP16 parts equal
  ``cpu_fallback.split`` of ``bands.band_values`` for bands 0, 1, 2 and one past every line's last (all +0),
  on lines spanning FP32's whole range with values on every band boundary, for sb 12 and 10 and both split
  ranges (FP16 subnormals gradual and flushed); the other side's split is the ordinary one;
* ``band_pass``'s C equals ``guard.unscale(npu_schedule.simulate(xa, xb), ta, tb, alpha)`` bit for bit (one pass
  and per term, two K groups, the 910A's epilogue combine with the unscale kernel, batch 2, alpha);
* ``matmul`` with ``bands=True``: the SPECIAL lines' outputs are the FP32 fix-up's, the banded lines' are the
  ordinary pass's (not fixed up), and ``lines`` holds the packed integers and the line statistics;
* bugs planted in a copy of the sources are caught, and the unplanted copy passes.
"""
from __future__ import annotations

import numpy as np
import pytest

from sgemm_cube.backends import npu_schedule as ns
from sgemm_cube.backends.npu import SCALE_CODE, SUBNORMALS_CODE, MatmulOptions
from sgemm_cube.cpu_fallback import bands, split
from sgemm_cube.cpu_fallback.guard import (LineClass, LineMeta, _floor_log2, line_meta, pack_meta, unpack_meta,
                                           unscale)

from .executed import PROFILE, ExecutedExtension, PlantedBug, build_chips, control, pad16, run
from .test_ascend_kernel_sources import CHIPS
from .test_executed_guard import _expected_stats, _same_where, _scaled_split_input, _whole_range

#: cpu_fallback's ``arithmetic`` for the extension's split range (``subnormals``)
RANGE = {"gradual": None, "flush": "subnormals=flush"}


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    return build_chips(tmp_path_factory.mktemp("exec_bands"))


def _wide_rows(rng, batch, lines, k, window, exponents=None):
    """(batch, lines, k) float32 rows spanning FP32's whole range (subnormals to 3.4e38, zeros, signs; or entries
    ``2**e`` times [1, 2) for e in ``exponents`` = (lo, hi)), each with the powers of two on its band boundaries
    ``2**(e + 1 - a W)`` (a band's lowest value, scaled to the window's ``lower``, and the next band's bound,
    scaled to ``2**(top + 1)``) and the values just below them; a NaN and an infinity in two rows (a band
    pass's split takes them as +0)."""
    if exponents is None:
        x = _whole_range(rng, (batch, lines, k))
    else:
        shape = (batch, lines, k)
        x = np.ldexp(rng.uniform(1, 2, shape), rng.integers(*exponents, shape)).astype(np.float32)
        x *= np.where(rng.random(shape) < 0.5, np.float32(-1), np.float32(1))
    e = _floor_log2(np.abs(x).max(axis=-1).astype(np.float64))
    x[..., 0] = np.ldexp(1.5, e).astype(np.float32)  # keeps floor(log2 big) = e whatever the entries below replace
    for a in range(1, 8):
        p = np.ldexp(1.0, e + 1 - a * window.width)
        ok = p >= 2.0 ** -149
        x[..., 2 * a][ok] = p[ok].astype(np.float32)
        x[..., 2 * a + 1][ok] = np.nextafter(p[ok].astype(np.float32), np.float32(0))
    x[0, 1, k - 1] = np.nan
    x[-1, lines - 1, k - 2] = -np.inf
    return x


def _band_t(x, axis):
    """The packed ``t`` of the lines of ``x`` as banded lines carry it: ``-floor(log2 big)`` (big: the largest
    finite magnitude)."""
    mag = np.where(np.isfinite(x), np.abs(x), np.float32(0))
    return -_floor_log2(mag.max(axis=axis).astype(np.float64))


def _packed(t):
    return pack_meta(LineMeta(np.asarray(t, np.int32), np.full(np.shape(t), int(LineClass.LOSES_BITS), np.int32)))


def _parts_equal(got_hi, got_lo, x, sb) -> bool:
    """Whether the split kernel's parts (padded, Zz-decoded) are ``cpu_fallback.split`` of ``x`` zero-padded."""
    batch, rows, cols = x.shape
    padded = np.zeros((batch, pad16(rows), pad16(cols)), np.float32)
    padded[:, :rows, :cols] = x
    hi, lo = split(padded, sb)
    return np.array_equal(got_hi.view(np.uint16), hi.view(np.uint16)) and \
        np.array_equal(got_lo.view(np.uint16), lo.view(np.uint16))


def _band_pass(binary, soc, a, b, ta, tb, *, band_a, band_b, sb=12, subnormals="flush", tiling=(16, 32, 16, 1),
               alpha=1.0, tmp_path, cores=3):
    """One band pass through the harness and what it must give: (run, xa, xb, expected C)."""
    window = bands.band_window(sb, RANGE[subnormals])
    r = run(binary, a, b, sb=sb, tiling=tiling, cube=cores, vector=cores, workdir=tmp_path, guard="band",
            meta_a=_packed(ta), meta_b=_packed(tb), band_a=band_a, band_b=band_b, subnormals=subnormals,
            alpha=alpha)
    xa = bands.band_values(a, ta, -1, window) if band_a else _scaled_split_input(a, ta, -1, sb)
    xb = bands.band_values(b, tb, -2, window) if band_b else _scaled_split_input(b, tb, -2, sb)
    want = unscale(ns.simulate(xa, xb, sb=sb, tiling=ns.Tiling(*tiling), cap=ns.capacity_from_profile(PROFILE[soc]),
                               cores=cores), ta, tb, alpha)
    return r, xa, xb, want


def _clean(r):
    assert r.clean, f"rc={r.rc}\n{r.stdout[-2000:]}\n{r.stderr[-1000:]}"


def _band_split_failures(binary, soc, tmp_path, combos, band_list):
    """The band split checks (module docstring) for (sb, subnormals) in ``combos``: messages of what failed."""
    failures = []
    rng = np.random.default_rng(71)
    for sb, subnormals in combos:
        window = bands.band_window(sb, RANGE[subnormals])
        a = _wide_rows(rng, 1, 20, 40, window)
        b = np.ascontiguousarray(_wide_rows(rng, 1, 24, 40, window).transpose(0, 2, 1))  # banded columns
        t_a, t_b = _band_t(a, -1), _band_t(b, -2)
        past = int(max(bands.band_counts(a, -1, window).max(), bands.band_counts(b, -2, window).max()))
        for band in (*band_list, past):
            ta, tb = bands.band_exponents(t_a, band, window), bands.band_exponents(t_b, band, window)
            r, xa, xb, want = _band_pass(binary, soc, a, b, ta, tb, band_a=True, band_b=True, sb=sb,
                                         subnormals=subnormals, tmp_path=tmp_path)
            what = f"sb={sb} {subnormals} band {band}"
            if band == past:
                assert not xa.any() and not xb.any()  # the model: a band past every line's last is all +0
            if not r.clean:
                failures.append(f"{what}: rc={r.rc}\n{r.stdout[-2000:]}")
                continue
            if not _parts_equal(*r.parts[0:2], xa, sb):
                failures.append(f"{what}: A's band split differs")
            if not _parts_equal(*r.parts[2:4], xb, sb):
                failures.append(f"{what}: B's band split differs")
            if _same_where(r.c, want, np.ones(want.shape, bool)):
                failures.append(f"{what}: C {_same_where(r.c, want, np.ones(want.shape, bool))}")
        # One side banded, the other ordinary (its lines' own integers, guard.line_meta): the ordinary split.
        ma = line_meta(a, -1, sb=sb, arithmetic=RANGE[subnormals])
        mb = line_meta(b, -2, sb=sb, arithmetic=RANGE[subnormals])
        assert (ma.cls == LineClass.LOSES_BITS).any() and (mb.cls == LineClass.LOSES_BITS).any()
        ta, tb = bands.band_exponents(t_a, 1, window), bands.band_exponents(t_b, 1, window)
        for band_a, (xta, xtb) in ((True, (ta, mb.t)), (False, (ma.t, tb))):
            r, xa, xb, want = _band_pass(binary, soc, a, b, xta, xtb, band_a=band_a, band_b=not band_a, sb=sb,
                                         subnormals=subnormals, tmp_path=tmp_path)
            what = f"sb={sb} {subnormals} band_a={band_a}"
            if not r.clean:
                failures.append(f"{what}: rc={r.rc}\n{r.stdout[-2000:]}")
                continue
            side = "B" if band_a else "A"
            if not _parts_equal(*(r.parts[2:4] if band_a else r.parts[0:2]), xb if band_a else xa, sb):
                failures.append(f"{what}: {side}'s ordinary split differs")
            if not _parts_equal(*(r.parts[0:2] if band_a else r.parts[2:4]), xa if band_a else xb, sb):
                failures.append(f"{what}: the band split differs")
            if _same_where(r.c, want, np.ones(want.shape, bool)):
                failures.append(f"{what}: C {_same_where(r.c, want, np.ones(want.shape, bool))}")
    return failures


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_band_split_is_band_values_through_the_split(binaries, soc, tmp_path):
    failures = _band_split_failures(binaries[soc], soc, tmp_path,
                                    [(12, "flush"), (12, "gradual"), (10, "flush"), (10, "gradual")], (0, 1, 2))
    assert not failures, "\n".join(failures[:5])


# (bm, bk, bn, n_fused[, per_term]) on K = 60: one pass and per term in two K groups; one group (on the 910A the
# GEMM's epilogue combines, then the unscale kernel runs without batch words)
BAND_PASS_TILINGS = [(16, 32, 16, 1), (16, 32, 16, 1, 1), (32, 32, 32, 4)]


def _ordinary(rng, shape, axis):
    """Normal data with a banded line (entries 1e-25 beside ones near 1), a NaN line and a scaled one."""
    x = rng.standard_normal(shape).astype(np.float32)
    line = (lambda i: (0, slice(None), i)) if axis == -2 else (lambda i: (0, i))
    x[line(3)][: shape[-1 if axis == -1 else -2] // 2] *= np.float32(1e-25)
    x[line(5)][7] = np.nan
    x[line(9)] *= np.float32(1e20)
    return x


@pytest.mark.parametrize("soc", sorted(CHIPS))
@pytest.mark.parametrize("tiling", BAND_PASS_TILINGS, ids=str)
def test_band_pass_is_the_unscaled_emulated_product(binaries, soc, tiling, tmp_path):
    rng = np.random.default_rng(73)
    window = bands.band_window(12, RANGE["flush"])
    # bands of lines spanning 2^-110 .. 2^20 (outputs in FP32's range, subnormal ones included), against ordinary
    # operands (their own integers, guard.line_meta) and against each other
    a_band = _wide_rows(rng, 2, 20, 60, window, exponents=(-110, 21))
    b_band = np.ascontiguousarray(_wide_rows(rng, 2, 24, 60, window, exponents=(-110, 21)).transpose(0, 2, 1))
    a_ord, b_ord = _ordinary(rng, (2, 20, 60), -1), _ordinary(rng, (2, 60, 24), -2)
    # every row and column in a band of its own (0..3), as the host stacks them
    ta = np.minimum(_band_t(a_band, -1) + window.top + (np.arange(20) % 4) * window.width, window.zero_exponent)
    tb = np.minimum(_band_t(b_band, -2) + window.top + (np.arange(24) % 4) * window.width, window.zero_exponent)
    ma, mb = line_meta(a_ord, -1, arithmetic=RANGE["flush"]), line_meta(b_ord, -2, arithmetic=RANGE["flush"])
    assert (ma.cls == LineClass.LOSES_BITS).any() and (mb.cls == LineClass.SPECIAL).any()
    groups = ns.make_geometry(2, 20, 24, 60, ns.Tiling(*tiling), 3, 3, ns.capacity_from_profile(PROFILE[soc])).groups
    assert groups == (1 if tiling[3] == 4 else 2)
    for band_a, band_b in ((True, False), (False, True), (True, True)):
        a, xta = (a_band, ta) if band_a else (a_ord, ma.t)
        b, xtb = (b_band, tb) if band_b else (b_ord, mb.t)
        for alpha in (-0.5, 0.37):
            r, _, _, want = _band_pass(binaries[soc], soc, a, b, xta, xtb, band_a=band_a, band_b=band_b,
                                       tiling=tiling, alpha=alpha, tmp_path=tmp_path)
            _clean(r)
            assert ("combine_in_epilogue=1" in r.stdout) == (soc == "910A" and groups == 1 and len(tiling) == 4)
            # alpha not a power of two: a subnormal output may be rounded twice (test_executed_guard's
            # test_unscale_with_alpha), at most 2^-149 away
            sub = (np.abs(want) < np.float32(1.1754944e-38)) & (want != 0) if alpha != -0.5 else np.zeros(want.shape, bool)
            assert not _same_where(r.c, want, ~sub), (band_a, band_b, alpha, _same_where(r.c, want, ~sub))
            assert (np.abs(r.c[sub].astype(np.float64) - want[sub].astype(np.float64)) <= 2.0 ** -149).all()
            finite = np.isfinite(want) & (want != 0)
            assert finite.sum() > want.size // 2, (band_a, band_b, finite.sum())  # the passes carry values


# ------------------------------------------------------------- matmul with bands=True
def _special_and_banded(rng):
    """(2, 40, 70) and (2, 70, 50): SPECIAL rows and columns (NaN, Inf), banded ones (entries far below the
    line's largest), a row of subnormals (scaled, class 0)."""
    a = rng.standard_normal((2, 40, 70)).astype(np.float32)
    b = rng.standard_normal((2, 70, 50)).astype(np.float32)
    a[0, 3, 5] = np.inf                       # SPECIAL
    a[1, 7, :35] *= np.float32(1e-25)         # banded
    a[0, 20, ::3] *= np.float32(1e-12)        # banded
    a[1, 9, 11] = np.nan                      # SPECIAL
    a[0, 12, :] *= np.float32(2.0 ** -130)    # subnormals: scaled into range
    b[0, 2, 4] = -np.inf                      # a SPECIAL column
    b[1, :30, 6] *= np.float32(1e-25)         # a banded column
    b[0, 10:, 8] *= np.float32(1e-20)         # a banded column meeting the banded rows of batch 0
    return a, b


def _bands_matmul_failures(binary, soc, tmp_path):
    """``ExecutedExtension.matmul`` with bands=True and ``lines`` against the model (module docstring)."""
    import torch

    from tests.guarantee_data import sequential_fp32

    rng = np.random.default_rng(79)
    a, b = _special_and_banded(rng)
    tiling, alpha = (16, 32, 16, 2), -0.5
    ext = ExecutedExtension(soc, 3, binary, tmp_path)  # 3 cube cores (910B: 6 vector cores)
    opts = MatmulOptions(sb=12, keep_lo_lo=False, bm=tiling[0], bk=tiling[1], bn=tiling[2], n_fused=tiling[3],
                         guard=True, scale=SCALE_CODE["auto"], fixup=True, alpha=alpha,
                         subnormals=SUBNORMALS_CODE["flush"], bands=True)
    out = torch.empty((2, 40, 50), dtype=torch.float32)
    lines = torch.full((4, 2 * (40 + 50)), 12345, dtype=torch.int32)
    ext.matmul(torch.from_numpy(a), torch.from_numpy(b), out, opts, lines=lines)
    got, got_lines = out.numpy(), lines.numpy()

    ma, mb = line_meta(a, -1, arithmetic=RANGE["flush"]), line_meta(b, -2, arithmetic=RANGE["flush"])
    failures = []
    special_a, special_b = ma.cls == LineClass.SPECIAL, mb.cls == LineClass.SPECIAL
    banded_a, banded_b = ma.cls == LineClass.LOSES_BITS, mb.cls == LineClass.LOSES_BITS
    assert special_a.sum() == 2 and special_b.sum() == 1 and banded_a.sum() == 2 and banded_b.sum() == 2
    xa, xb = _scaled_split_input(a, ma.t, -1, 12), _scaled_split_input(b, mb.t, -2, 12)
    ordinary = unscale(ns.simulate(xa, xb, sb=12, tiling=ns.Tiling(*tiling), cores=3,
                                   cap=ns.capacity_from_profile(PROFILE[soc])), ma.t, mb.t, alpha)
    with np.errstate(all="ignore"):
        fp32 = unscale(sequential_fp32(a, b), np.zeros_like(ma.t), np.zeros_like(mb.t), alpha)
    special = special_a[:, :, None] | special_b[:, None, :]
    want = np.where(special, fp32, ordinary)
    if _same_where(got, want, np.ones(want.shape, bool)):
        failures.append(f"C: {_same_where(got, want, np.ones(want.shape, bool))}")
    banded_only = (banded_a[:, :, None] | banded_b[:, None, :]) & ~special
    if np.array_equal(got[banded_only].view(np.uint32), fp32[banded_only].view(np.uint32)):
        failures.append("the banded lines' outputs are the FP32 fix-up's")
    want_lines = [np.concatenate([pack_meta(ma).ravel(), pack_meta(mb).ravel()])]
    want_lines += [np.concatenate([x.ravel(), y.ravel()]) for x, y in zip(_expected_stats(a, -1), _expected_stats(b, -2))]
    for row, what in enumerate(("packed integers", "big", "small_w", "finite")):
        if not np.array_equal(got_lines[row], want_lines[row]):
            failures.append(f"lines[{row}] ({what}) differs at {np.flatnonzero(got_lines[row] != want_lines[row])[:5]}")
    return failures


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_matmul_with_bands_fixes_up_only_special_lines(binaries, soc, tmp_path):
    failures = _bands_matmul_failures(binaries[soc], soc, tmp_path)
    assert not failures, "\n".join(failures)


def test_extension_checks_lines_and_band_pass_arguments(binaries, tmp_path):
    """The stand-in refuses ``lines`` without the guarantee's bookkeeping, as the extension does."""
    import torch

    ext = ExecutedExtension("910B", 2, binaries["910B"], tmp_path)
    a, b = torch.ones((1, 16, 16)), torch.ones((1, 16, 16))
    opts = MatmulOptions(sb=12, keep_lo_lo=False, bm=16, bk=16, bn=16, n_fused=1)
    with pytest.raises(AssertionError, match="guard"):
        ext.matmul(a, b, torch.empty((1, 16, 16)), opts, lines=torch.empty((4, 32), dtype=torch.int32))
    out = torch.empty((1, 16, 16))
    meta = torch.from_numpy(_packed(np.zeros((1, 16), np.int32)))
    ext.band_pass(a, b, out, meta, meta, opts._replace(band_a=True))  # t = 0: 1 lies in [lower, 2^15)
    assert (out.numpy() == 16).all() and ext.band_calls == [(16, 16, 16, 1, False, True, False)]


# ---------------------------------------------------------------- planted bugs
# (name, file under ascendc_kernels/, pattern, replacement, chip); each must make a check above fail.
PLANTED = [
    ("band_cutoff_le_instead_of_lt", "include/sgemm_cube/tile/split_tile.hpp",
     "const int32_t below = int32_t(keep_from) - 1;", "const int32_t below = int32_t(keep_from);", "910A"),
    ("keep_from_ignored", "include/sgemm_cube/kernel/split_kernel.hpp",
     "if (args.keep_from != 0) {", "if (args.keep_from == 1) {", "910B"),
    ("band_cutoff_on_the_ordinary_side", "include/sgemm_cube/guard/line_meta.hpp",
     "return band ? SplitCutoff{", "return (band || r.top >= 0) ? SplitCutoff{", "910B"),
    ("fixup_class_1_with_bands", "include/sgemm_cube/guard/line_meta.hpp",
     "return fixup && !bands ? 1u : 2u;", "return fixup && (bands || !bands) ? 1u : 2u;", "910A"),
]
PLANTED_BUGS = [PlantedBug(name, rel, pattern, replacement, soc) for name, rel, pattern, replacement, soc in PLANTED]


def _planted_failures(binary, soc, tmp_path):
    return (_band_split_failures(binary, soc, tmp_path, [(12, "flush")], (0, 2))
            + _bands_matmul_failures(binary, soc, tmp_path))


@pytest.mark.parametrize("bug", [control(soc) for soc in sorted(CHIPS)], ids=PlantedBug.id.fget)
def test_planted_machinery_without_a_bug_passes_the_band_checks(bug, planted_binary, tmp_path):
    failures = _planted_failures(planted_binary, bug.soc, tmp_path)
    assert not failures, "\n".join(failures[:5])


@pytest.mark.parametrize("bug", PLANTED_BUGS, ids=PlantedBug.id.fget)
def test_planted_bug_in_the_bands_fails(bug, planted_binary, tmp_path):
    failures = _planted_failures(planted_binary, bug.soc, tmp_path)
    assert failures, f"planted bug {bug.name} on {bug.soc} went unnoticed"
