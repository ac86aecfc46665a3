"""The guarantee under every hardware behaviour the AscendC documentation leaves open (issue 31).

The whole executed NPU path runs here: ``npu.run`` through ``ExecutedExtension`` (line statistics and
meta, scaled split, GEMM, combine, unscale, fix-up: the real kernels in the executable AscendC
stand-in), with the stand-in set to one alternative of :mod:`sgemm_cube.cpu_fallback.arithmetic`
(``SGEMM_CUBE_EXEC_ARITHMETIC``): each one alone (``alternatives()``), all that can cost accuracy at
once (``WORST``) and the defaults, on both chips.  Every result is checked against SGEMM's
componentwise bound (``tests/guarantee_data.check_guarantee``: float64 reference, native FP32 measured
beside), not for bit-exactness.  Two designs:

* ``unprobed``: what the NPU backend does when nothing was recorded about the chip (the split range
  that holds when FP16 subnormals flush, ``npu.arithmetic()``); it must hold under every alternative;
* ``recorded``: the chip's arithmetic recorded correctly (``SGEMM_CUBE_NPU_ARITHMETIC``): the range
  for that arithmetic, which is wider where subnormals are kept.

Data: the adversarial generators of ``tests/guarantee_data.GENERATORS`` and :data:`ATTACKS`, made for
the alternatives (entries whose FP16 parts fall where flushing removes them, residuals truncation
hurts most).  CI runs a sample (a few generators per chip and arithmetic, rotating so that every
generator runs, on 24x40x32 and on a K = 96 product cut into three K groups); the full sweep (every
generator and attack, five shapes) is opt-in::

    SGEMM_CUBE_FULL_SWEEP=1 python -m pytest -q tests/ascendc_kernels/test_guarantee_alternatives.py

Also here: the range must follow the subnormals (the gradual range on a flushing chip breaks the
bound: measured, so the attacks are real), ``l0c_to_ub=unsupported`` fails cleanly on the 910A (no
design covers it), and the model is the stand-in bit for bit under each alternative (the kernels
alone against ``npu_schedule.simulate``, the guarded path against the CPU model of it, the device's
line meta against ``guard.line_meta`` with the flush-safe range), so the CPU model's sweep
(:func:`guarded_model`, opt-in above) measures what the stand-in would.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from sgemm_cube.backends import npu, npu_model, npu_schedule
from sgemm_cube.cpu_fallback import split_limits
from sgemm_cube.cpu_fallback.arithmetic import DEFAULT, WORST, Arithmetic, alternatives
from sgemm_cube.cpu_fallback.guard import line_meta, pack_meta
from tests.guarantee_data import GENERATORS, OVERFLOW, U, UNDERFLOW_UNIT, check_guarantee, references, \
    rng_for, same_bits_any_nan, sequential_fp32

from .executed import PROFILE, ExecutedExtension, build_chips, run
from .test_ascend_kernel_sources import CHIPS

FULL = os.environ.get("SGEMM_CUBE_FULL_SWEEP", "") not in ("", "0")
SOCS = ("910a", "910b")
CORES = {"910a": 32, "910b": 20}
#: the arithmetics the sweep runs: the defaults, each alternative alone that a design can cover, all at once
ARITHMETICS = [DEFAULT] + [a for a in alternatives() if a.l0c_to_ub == "block"] + [WORST]
UNSUPPORTED = Arithmetic(l0c_to_ub="unsupported")
#: a tiling that cuts K = 96 into three K groups (their sums meet in the atomic add)
GROUPS = (32, 32, 32, 1)


# ------------------------------------------------------------------ attacks on the alternatives
def _far_partners(rng, m, k, n, depth):
    """A's rows: one entry in [1, 2), the others 2**-depth as large; B's columns the mirror image, so every
    term is in [1, 4).  Scaled (largest entry to [2**14, 2**15)), the small entries of every line sit
    ``depth`` binades under it: depth 29 puts them in [2**-15, 2**-14) (the gradual range's lowest binade,
    ``hi`` an FP16 subnormal), depth 28 in [2**-14, 2**-13) (``hi`` normal, ``lo`` subnormal)."""
    a, b = rng.uniform(1, 2, (m, k)), rng.uniform(1, 2, (k, n))
    if k > 1:
        a[:, 1:] *= 2.0 ** -depth
        b[1:, :] *= 2.0 ** depth
    return a.astype(np.float32), b.astype(np.float32)


def gen_trunc_bias(rng, m, k, n):
    """Positive entries whose FP32 mantissas are all ones below FP16's 11 bits: truncation loses the most
    of every residual, all in one direction (every term's error has the same sign)."""
    def side(shape):
        e = rng.integers(-3, 4, shape)
        hi = np.ldexp(rng.integers(1024, 2048, shape) / 1024.0, e)           # 11 significant bits
        return (hi + np.ldexp(1.0 - 2.0 ** -13, e - 10)).astype(np.float32)  # and 13 more ones
    return side((m, k)), side((k, n))


ATTACKS = {
    "flush_hi": lambda rng, m, k, n: _far_partners(rng, m, k, n, 29),
    "flush_lo": lambda rng, m, k, n: _far_partners(rng, m, k, n, 28),
    "flush_edge": lambda rng, m, k, n: _far_partners(rng, m, k, n, 18),  # the flush-safe range's lowest binade
    "trunc_bias": gen_trunc_bias,
}
DATA = {**GENERATORS, **ATTACKS}


# ------------------------------------------------------------------ the CPU model of the guarded path
def guarded_model(a, b, *, soc, arithmetic, design, sb=12, keep_lo_lo=False, scale="auto", fixup=True,
                  alpha=1.0, tiling=None, bands=True):
    """What ``npu.run`` computes on ``soc`` under ``arithmetic`` with the split range of ``design`` (an
    Arithmetic): :func:`sgemm_cube.backends.npu_model.guarded_product` with the tuner's tiling unless given."""
    m, k = a.shape
    n = b.shape[1]
    t = npu_schedule.Tiling(*tiling) if tiling else npu.choose_tiling(soc, m, n, k, terms=4 if keep_lo_lo else 3)
    return npu_model.guarded_product(a, b, soc=soc, arithmetic=arithmetic, design=design, tiling=t, sb=sb,
                                     keep_lo_lo=keep_lo_lo, scale=scale, fixup=fixup, alpha=alpha,
                                     cores=CORES[soc], bands=bands)


def bound_ratio(c, a, b) -> float:
    """The largest |C - C64| / (3 K 2**-24 |A||B| + K 2**-149) over the outputs of finite inputs whose exact
    value and native FP32's are finite (the measurement printed beside a pass)."""
    r = references(a, b)
    bound = 3 * r.k * U * r.absab + r.k * UNDERFLOW_UNIT
    ok = r.finite_in & np.isfinite(r.fp32) & (np.abs(r.c64) < OVERFLOW)
    if not ok.any():
        return 0.0
    with np.errstate(all="ignore"):
        return float(np.max(np.abs(c.astype(np.float64) - r.c64)[ok] / bound[ok]))


def design_for(kind: str, arithmetic: Arithmetic) -> Arithmetic:
    """The arithmetic the backend designs for: unprobed (``npu.arithmetic()`` with nothing recorded), or
    ``arithmetic`` recorded correctly."""
    return WORST if kind == "unprobed" else arithmetic


# ------------------------------------------------------------------ the executed path
@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return {PROFILE[soc]: path for soc, path in build_chips(tmp_path_factory.mktemp("exec_alternatives")).items()}


@pytest.fixture
def device(monkeypatch, tmp_path, kernels):
    """``install(soc, arithmetic, design, tiling)``: the npu backend runs the executed kernels under the stand-in
    arithmetic ``arithmetic``, designed as ``design`` says ("unprobed": nothing recorded; "recorded": the
    arithmetic in ``SGEMM_CUBE_NPU_ARITHMETIC``), with ``tiling`` (None: the tuner's)."""
    pytest.importorskip("torch")
    monkeypatch.setattr(npu, "ARITHMETIC_FILE", tmp_path / "absent.json")
    monkeypatch.setattr(npu, "_npu_option", lambda name: None)
    monkeypatch.setattr(npu, "unavailable_reason", lambda: "")
    tuned = npu.choose_tiling

    def install(soc, arithmetic, design, tiling=None):
        ext = ExecutedExtension(soc, CORES[soc], kernels[soc], tmp_path, arithmetic=arithmetic)
        monkeypatch.setattr(npu, "_extension", lambda: ext)
        if design == "unprobed":
            monkeypatch.delenv(npu.ARITHMETIC_ENV, raising=False)
        else:
            monkeypatch.setenv(npu.ARITHMETIC_ENV, arithmetic.spec() or "default")
        monkeypatch.setattr(npu, "choose_tiling", (lambda *args, **kw: npu_schedule.Tiling(*tiling)) if tiling
                            else tuned)
        return ext

    return install


def npu_run(a, b, **options):
    """``npu.run`` of one product (the backend protocol, as ``sgemm_cube.matmul(backend="npu")`` calls it)."""
    import torch

    from sgemm_cube.plan import make_request

    req = make_request(backend="npu", **options)
    m, k = a.shape
    n = b.shape[1]
    out = torch.empty(1, m, n)
    npu.run(npu.plan(req, 1, m, n, k), torch.from_numpy(a[None].copy()), torch.from_numpy(b[None].copy()),
            out)
    return out[0].numpy()


#: (m, k, n, tiling): the sample's shapes (the second has three K groups); the full sweep's
SHAPES = [(24, 40, 32, None), (20, 96, 24, GROUPS)]
FULL_SHAPES = SHAPES + [(16, 16, 16, None), (33, 70, 45, None), (48, 160, 40, GROUPS)]
CASES = [(soc, ar, design) for soc in SOCS for ar in ARITHMETICS for design in ("unprobed", "recorded")]


def _sample(index: int):
    """The CI sample of case ``index``: four generators rotating through GENERATORS (every one runs in some
    case), every attack, alternating shapes."""
    names = sorted(GENERATORS)
    picked = [names[(4 * index + j) % len(names)] for j in range(4)] + sorted(ATTACKS)
    return [(name, SHAPES[(index + j) % len(SHAPES)]) for j, name in enumerate(picked)]


def _plan(index: int):
    if FULL:
        return [(name, shape) for name in sorted(DATA) for shape in FULL_SHAPES]
    return _sample(index)


@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=[f"{s}-{a}-{d}" for s, a, d in CASES])
def test_guarantee_holds_under_the_alternative(device, request, case):
    """npu.run on the executed kernels under one stand-in arithmetic and one design: every output within
    SGEMM's componentwise bound (NaN/Inf as native FP32 gives them); the worst ratio to the bound is printed."""
    soc, ar, design = CASES[case]
    worst = (0.0, None)
    failures = []
    for name, (m, k, n, tiling) in _plan(case):
        device(soc, ar, design, tiling)
        rng, replay = rng_for(f"{request.node.nodeid}::{name}-{m}x{k}x{n}")
        a, b = DATA[name](rng, m, k, n)
        c = npu_run(a, b)
        msg = check_guarantee(c, a, b, frobenius=False)
        ratio = bound_ratio(c, a, b)
        worst = max(worst, (ratio, f"{name} {m}x{k}x{n}"), key=lambda w: w[0])
        if msg:
            failures.append(f"{name} {m}x{k}x{n}{' (K groups)' if tiling else ''}: {msg}\n  {replay}")
    print(f"\n{soc} arithmetic {ar} design {design}: worst |C - C64| / bound = {worst[0]:.3g} ({worst[1]})")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("soc", SOCS)
def test_the_range_must_follow_the_subnormals(device, request, soc):
    """The attacks are real: on a chip that flushes FP16 subnormals, the range for one that keeps them (a
    wrong record) breaks the bound by far, and the unprobed default holds on the same data."""
    ar = Arithmetic(subnormals="flush")
    rng, replay = rng_for(request.node.nodeid)
    a, b = ATTACKS["flush_hi"](rng, 16, 16, 16)
    device(soc, ar, "recorded")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(npu.ARITHMETIC_ENV, "default")  # recorded wrong: "keeps subnormals"
        wrong = npu_run(a, b)
    assert check_guarantee(wrong, a, b, frobenius=False), replay
    assert bound_ratio(wrong, a, b) > 10, (bound_ratio(wrong, a, b), replay)
    device(soc, ar, "unprobed")
    right = npu_run(a, b)
    assert not check_guarantee(right, a, b, frobenius=False), replay
    assert bound_ratio(right, a, b) < 0.5


@pytest.mark.parametrize("design", ["unprobed", "recorded"])
def test_l0c_to_ub_unsupported_fails_cleanly(device, request, design):
    """No design covers l0c_to_ub=unsupported: the 910A's kernels have no other way out of L0C.  The run
    stops with the stand-in's report of the unsupported copy (never a wrong result); the 910B drains L0C by
    Fixpipe and keeps the guarantee."""
    rng, replay = rng_for(request.node.nodeid)
    a, b = GENERATORS["normal"](rng, 24, 40, 32)
    device("910a", UNSUPPORTED, design)
    with pytest.raises(AssertionError, match="L0C -> UB block copy unsupported"):
        npu_run(a, b)
    device("910b", UNSUPPORTED, design)
    assert not check_guarantee(npu_run(a, b), a, b, frobenius=False), replay


# ------------------------------------------------------------------ the model is the stand-in
def _mixed(rng, shape, saturate):
    """Normal data over FP16's whole range: entries whose parts are FP16 subnormals (flush), residuals of
    every size (trunc), positive runs (the truncating sums), and beyond 65520 where saturation keeps them
    finite (otherwise an infinite hi would reach the cube)."""
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-30, 14, shape)
    x[:, : shape[1] // 3] = np.abs(x[:, : shape[1] // 3])
    if saturate:
        x[rng.random(shape) < 0.05] = 7e4
    return x.astype(np.float32)


@pytest.mark.parametrize("soc", SOCS)
def test_kernels_alone_are_the_model_under_each_alternative(kernels, tmp_path, soc):
    """split, GEMM (three K groups: the atomic add) and combine, unguarded: C bit-identical to
    ``npu_schedule.simulate`` under the chip's arithmetic, for each alternative and WORST, and each
    alternative that acts on the chip changes C."""
    rng = np.random.default_rng(31)
    base = None
    for ar in ARITHMETICS:
        a = _mixed(rng, (1, 40, 96), ar.overflow == "saturate")
        b = _mixed(rng, (1, 96, 36), ar.overflow == "saturate")
        r = run(kernels[soc], a, b, tiling=GROUPS, cube=3, vector=3, workdir=tmp_path, arithmetic=ar)
        assert r.clean, f"{ar}: rc={r.rc}\n{r.stdout[-2000:]}\n{r.stderr[-1000:]}"
        want = npu_schedule.simulate(a, b, tiling=npu_schedule.Tiling(*GROUPS), cores=3,
                                     cap=npu_schedule.capacity_from_profile(soc),
                                     arithmetic=npu_schedule.chip_arithmetic(soc, ar))
        assert np.array_equal(r.c.view(np.uint32), want.view(np.uint32)), f"{soc} {ar}"
        if ar == DEFAULT:
            base = (a, b, r.c)
    for ar in ARITHMETICS[1:-1]:
        if ar.overflow == "saturate" or npu_schedule.chip_arithmetic(soc, ar) == DEFAULT:
            continue  # saturation shows only past 65520 (other data); the 910B's split ignores `cast`
        r = run(kernels[soc], base[0], base[1], tiling=GROUPS, cube=3, vector=3, workdir=tmp_path, arithmetic=ar)
        assert not np.array_equal(r.c, base[2]), f"{soc} {ar} changed nothing"


@pytest.mark.parametrize("soc", SOCS)
def test_guarded_path_is_the_model(device, request, soc):
    """npu.run on the executed kernels equals :func:`guarded_model` bit for bit (a NaN's sign and payload
    aside: ``same_bits_any_nan``), under the alternatives that matter to the attacks and for both designs (so
    the CPU model's sweep measures the stand-in's)."""
    for ar in (Arithmetic(subnormals="flush"), Arithmetic(cast="trunc"), WORST):
        for design in ("unprobed", "recorded"):
            for name, (m, k, n, tiling) in (("flush_hi", SHAPES[0]), ("half_scaled_1e-6", SHAPES[1]),
                                            ("nan_inf", SHAPES[0])):
                device(soc, ar, design, tiling)
                rng, replay = rng_for(f"{request.node.nodeid}::{name}-{ar}-{design}")
                a, b = DATA[name](rng, m, k, n)
                got = npu_run(a, b)
                want = guarded_model(a, b, soc=soc, arithmetic=ar, design=design_for(design, ar), tiling=tiling)
                assert same_bits_any_nan(got, want), f"{ar} {design} {name}: {replay}"


@pytest.mark.parametrize("soc", SOCS)
def test_band_passes_are_the_model(device, request, soc):
    """Listed lines on the cube (``npu_bands``: the read-back, the stacked bands through ``band_pass``, the FP32
    sums): npu.run on the executed kernels equals :func:`guarded_model` (bands) bit for bit (a NaN's sign and
    payload aside), with banded rows,
    banded columns, both, lines with NaN/Inf beside them, a batch of two, alpha, and the scale options; and
    at most three band passes per batch."""
    import torch

    from sgemm_cube.backends import npu_bands
    from sgemm_cube.plan import make_request

    device(soc, WORST, "unprobed", GROUPS)
    calls = []
    real = npu_bands.run_band_passes

    def counted(*args, **kwargs):
        calls.append(real(*args, **kwargs))
        return calls[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(npu_bands, "run_band_passes", counted)
        for opts, names in (({}, ("alt_cols_1e-10", "row_span_120")), ({"scale": "rows"}, ("full_range_cols",
                            "special_vs_extremes")), ({"fixup": False}, ("row_span_120", "nan_inf"))):
            rng, replay = rng_for(f"{request.node.nodeid}::{opts}")
            pairs = [DATA[name](rng, 20, 96, 24) for name in names]
            a, b = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
            plan = npu.plan(make_request(backend="npu", **opts), 2, 20, 24, 96)
            out = torch.empty(2, 20, 24)
            npu.run(plan, torch.from_numpy(a), torch.from_numpy(b), out, alpha=-1.5)
            for i in range(2):
                want = guarded_model(a[i], b[i], soc=soc, arithmetic=WORST, design=WORST, tiling=GROUPS,
                                     alpha=-1.5, scale=plan.scale, fixup=plan.fixup)
                got = out[i].numpy()
                assert same_bits_any_nan(got, want), f"{opts} {names[i]}: {replay}"
    # fixup=False lists nothing for bands: no read-back, no pass; the others at most three passes a batch
    assert len(calls) == 2 and all(0 < c <= 6 for c in calls), calls


@pytest.mark.parametrize("soc", SOCS)
def test_device_meta_with_the_flush_safe_range(kernels, tmp_path, soc):
    """The line-meta kernel with subnormals = 1 (line_meta.hpp's flush-safe lower bound 2**max(8 - sb, -14)),
    as the harness launches it for the product, equals guard.line_meta under subnormals="flush" bit for
    bit, for A's rows and B's columns; and it differs from the gradual range's."""
    rng = np.random.default_rng(37)
    differs = False
    for name in ("flush_hi", "flush_edge", "half_scaled_1e-6", "cond_phi2", "row_span_120", "nan_inf"):
        a, b = DATA[name](rng, 37, 70, 45)
        for sb, scale, fixup in ((12, "auto", True), (0, "rows", True), (20, "auto", False), (6, None, True)):
            r = run(kernels[soc], a[None], b[None], sb=sb, tiling=(32, 32, 32, 4), cube=3, vector=3,
                    workdir=tmp_path, guard="device", scale=scale, fixup=fixup, subnormals="flush")
            assert r.clean, f"rc={r.rc}\n{r.stdout[-2000:]}"
            for got, x, axis in ((r.meta[0], a[None], -1), (r.meta[1], b[None], -2)):
                want = pack_meta(line_meta(x, axis, sb=sb, scale=scale, fixup=fixup, arithmetic=WORST))
                assert np.array_equal(got, want), (name, axis, sb, scale)
                differs |= not np.array_equal(want, pack_meta(line_meta(x, axis, sb=sb, scale=scale, fixup=fixup)))
    assert differs


# ------------------------------------------------------------------ the CPU model's sweep (opt-in)
@pytest.mark.skipif(not FULL, reason="the CPU model's sweep: SGEMM_CUBE_FULL_SWEEP=1")
@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{s}-{a}-{d}" for s, a, d in CASES])
def test_cpu_model_sweep(request, case):
    """:func:`guarded_model` (the executed path's model, bit for bit) on every generator and attack, every
    full-sweep shape: the same check as the executed sweep, ~20 ms a product."""
    soc, ar, design = CASES[case]
    failures, worst = [], (0.0, None)
    for name in sorted(DATA):
        for m, k, n, tiling in FULL_SHAPES:
            rng, replay = rng_for(f"{request.node.nodeid}::{name}-{m}x{k}x{n}")
            a, b = DATA[name](rng, m, k, n)
            c = guarded_model(a, b, soc=soc, arithmetic=ar, design=design_for(design, ar), tiling=tiling)
            msg = check_guarantee(c, a, b, frobenius=False)
            worst = max(worst, (bound_ratio(c, a, b), f"{name} {m}x{k}x{n}"), key=lambda w: w[0])
            if msg:
                failures.append(f"{name} {m}x{k}x{n}: {msg}\n  {replay}")
    print(f"\n{soc} arithmetic {ar} design {design} (CPU model): worst ratio {worst[0]:.3g} ({worst[1]})")
    assert not failures, "\n".join(failures)
