"""The CUDA backend on a real GPU, at full speed: run ``pytest tests/gpu -m gpu`` on a GPU machine.

Not part of CI (no GPU there).  Covers what ``tests/sgemm_cube/backends/cuda/test_cuda_backend.py``
covers under the interpreter, on the compiled kernels, plus large sizes:

* the split kernel equals :func:`cpu_fallback.split` bit for bit, and its
  line meta (scaling exponent, class) and fix-up lists are
  :func:`cpu_fallback.guard.line_meta`'s, for every ``scale`` mode;
* every kernel variant, odd/batched/broadcast/transposed shapes: error
  against float64 at most twice cuBLAS SGEMM's (TF32 off) on the same data,
  plus 2**-21 (the split's 22-bit floor, visible where K is tiny);
* 4096 and 8192, normal and uniform [0, 1) data: at most half SGEMM's error
  (the issue's accuracy target);
* NaN/Inf propagate through the public API like native FP32; lines the split
  cannot hold (class 1) are computed in FP32 by the fix-up programs;
* the BF16 schemes (bf16x9, bf16x6): the three-slice split equals
  :func:`cpu_fallback.split_slices` bit for bit over the range it is used on
  unscaled (subnormals up to the BF16 lines' upper limit); odd shapes and
  every variant within twice SGEMM's error plus 2**-21; 4096 and 8192 at
  most half SGEMM's error (with both accumulator layouts); an exact
  cancellation that only bf16x9 resolves; ``scheme="auto"`` (the default) is fp16x3 below
  ``launch.AUTO_MIN_FLOPS``, where rows spanning 80 binades (class 1) are computed in FP32,
  accurately, and from it on the GPU's choice: bf16x6 on those rows, fp16x3 on normal data;
* chunked split planes keep the whole product's bits, and a workspace over the free memory (a per-process
  memory cap) runs in chunks with them.
"""

import warnings

import numpy as np
import pytest

from tests.gpu import require_gpu

torch = require_gpu()
pytestmark = pytest.mark.gpu

from sgemm_cube import cpu_fallback  # noqa: E402
import sgemm_cube  # noqa: E402
from sgemm_cube.cpu_fallback.guard import (certifies, choose_scheme, line_meta, line_range, pack_meta,  # noqa: E402
                                          unpack_meta)
from sgemm_cube.cpu_fallback.guard import fixup_min_class as fixup_min_class_of  # noqa: E402
from sgemm_cube.backends import cuda  # noqa: E402
from sgemm_cube.backends.cuda import launch  # noqa: E402
from sgemm_cube.backends.cuda.gemm_tiles import VARIANTS  # noqa: E402

from tests.conftest import draw  # noqa: E402
from tests.guarantee_data import (bf16_pair_cases, check_guarantee, exact_fp32, fp16_pair_cases,  # noqa: E402
                                  same_bits_any_zero, unscale_cases)


def _rel(c, ref):
    return float(torch.linalg.norm((c.double() - ref).flatten()) / torch.linalg.norm(ref.flatten()))


def _gpu(x):
    return torch.from_numpy(np.ascontiguousarray(x)).cuda()


def _emulate(a, b, **kw):
    out = torch.full((a.shape[0], a.shape[1], b.shape[2]), float("nan"), device="cuda")
    opts = dict(sb=12, order="termwise", keep_lo_lo=False)
    opts.update(kw)
    assert cuda.matmul(a, b, out=out, **opts) is None
    torch.cuda.synchronize()
    return out


def _check(a, b, c, factor=2.0, floor=2.0 ** -21):
    ref = torch.matmul(a.double(), b.double())
    err, err32 = _rel(c, ref), _rel(torch.matmul(a, b), ref)
    assert torch.isfinite(c).all()
    assert err <= factor * err32 + floor, (err, err32)
    return err, err32


def _check_lines(lines, x, axis, partner, **kw):
    """The split pass's line meta and fix-up lists against :func:`cpu_fallback.guard.line_meta` (``partner``:
    the product's other operand, which BF16 schemes classify the lines beside).  ``fixup_min_class`` is the one
    asked for: under ``guard.certifies`` LOSES_BITS lines are emulated, and the lists hold SPECIAL ones."""
    fixup = kw.pop("fixup_min_class", 1) == 1
    certify = certifies(kw.get("scheme", "fp16x3"), kw.get("scale", "auto"), fixup)
    fixup_min_class = fixup_min_class_of(fixup, certify)
    want = line_meta(x, axis, fixup=fixup, partner=partner, certify=certify, **kw)
    assert np.array_equal(lines.meta.cpu().numpy(), pack_meta(want))
    counts, lists, bl = lines.counts.cpu().numpy(), lines.lists.cpu().numpy(), lines.block_l
    for i in range(x.shape[0]):
        for p in range(lines.blocks):
            listed = np.flatnonzero(want.cls[i, p * bl:(p + 1) * bl] >= fixup_min_class) + p * bl
            assert counts[i, p] == listed.size and np.array_equal(lists[i, p * bl:p * bl + listed.size], listed)


@pytest.mark.parametrize("dist", ["normal", "wide_exponent"])
def test_split_bit_for_bit(rng, dist):
    """x.T as A and x as B (the same lines): with scale=None, fixup=False every line is used unscaled."""
    x = draw(rng, dist, (1000, 777))
    xg = _gpu(x)
    ops = launch.split_operands(xg.T[None], xg[None], scale=None, fixup_min_class=2)
    hi, lo = cpu_fallback.split(np.ascontiguousarray(x.T), 12)
    assert np.array_equal(ops.a_hilo[0, 0, :777, :1000].cpu().numpy().view(np.uint16), hi.view(np.uint16))
    assert np.array_equal(ops.a_hilo[1, 0, :777, :1000].cpu().numpy().view(np.uint16), lo.view(np.uint16))
    assert np.array_equal(ops.b_hilo[0, 0, :1000, :777].cpu().numpy().view(np.uint16), hi.T.view(np.uint16))
    assert np.array_equal(ops.b_hilo[1, 0, :1000, :777].cpu().numpy().view(np.uint16), lo.T.view(np.uint16))
    assert not ops.a_hilo[:, :, 777:].float().any() and not ops.a_hilo[:, :, :, 1000:].float().any()
    _check_lines(ops.a_lines, x.T[None], -1, x[None], scale=None, fixup_min_class=2)
    _check_lines(ops.b_lines, x[None], -2, x.T[None], scale=None, fixup_min_class=2)


@pytest.mark.parametrize("scale", [None, "auto", "rows", "matrix"])
@pytest.mark.parametrize("scheme", ["fp16x3", "bf16x9"])
def test_line_meta_is_the_guards(rng, scale, scheme):
    """Rows spread over 80 binades, lines below and beyond the split's range, NaN/Inf, zeros."""
    x = (rng.uniform(-1, 1, (2, 700, 300)) * 2.0 ** rng.integers(-40, 40, (2, 700, 1))).astype(np.float32)
    x[0, 3, 5], x[1, 7, 200], x[0, 4, :], x[1, 9, :] = np.nan, -np.inf, 0.0, np.inf
    x[1, 12, :] = rng.uniform(0.5, 1, 300) * 2.0 ** -30
    x[0, 15, :] = rng.uniform(-1, 1, 300) * 2.0 ** rng.integers(-40, 40, 300)
    xg = _gpu(x)
    for fixup_min_class in (1, 2):
        ops = launch.split_operands(xg, xg.mT, scheme=scheme, scale=scale, fixup_min_class=fixup_min_class)
        xt = x.transpose(0, 2, 1)
        _check_lines(ops.a_lines, x, -1, xt, scheme=scheme, scale=scale, fixup_min_class=fixup_min_class)
        _check_lines(ops.b_lines, xt, -2, x, scheme=scheme, scale=scale, fixup_min_class=fixup_min_class)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("shape", [(33, 47, 65), (1, 2, 3), (257, 129, 1000), (1000, 1, 513), (4, 300, 200, 100)])
def test_variants_odd_shapes(rng, variant, shape):
    *batch, m, n, k = shape
    batch = batch[0] if batch else 1
    a, b = _gpu(draw(rng, "normal", (batch, m, k))), _gpu(draw(rng, "uniform01", (batch, k, n)))
    c = _emulate(a, b, config={"variant": variant})
    _check(a, b, c)


def test_batched_broadcast_and_transposed(rng):
    a = _gpu(draw(rng, "normal", (6, 500, 300))).transpose(1, 2)         # (6, 300, 500), transposed
    b = _gpu(draw(rng, "normal", (1, 500, 2 * 211)))[:, :, ::2].expand(6, 500, 211)  # strided, broadcast
    c = _emulate(a, b)
    _check(a, b, c)
    ops = launch.split_operands(a, b)
    assert ops.b_lines.meta.shape == (1, 211) and ops.a_lines.meta.shape == (6, 300)  # b is split once
    _check_lines(ops.b_lines, b[:1].cpu().numpy(), -2, a.cpu().numpy())
    _check_lines(ops.a_lines, a.cpu().numpy(), -1, b[:1].cpu().numpy())


@pytest.mark.parametrize("order, keep_lo_lo", [("elementwise", False), ("termwise", True), ("elementwise", True)])
def test_orders(rng, order, keep_lo_lo):
    a, b = _gpu(draw(rng, "normal", (1, 700, 1500))), _gpu(draw(rng, "normal", (1, 1500, 600)))
    c = _emulate(a, b, order=order, keep_lo_lo=keep_lo_lo)
    _check(a, b, c)


@pytest.mark.parametrize("n", [4096, 8192])
@pytest.mark.parametrize("dist", ["normal", "uniform01"])
def test_large_sizes_beat_sgemm_accuracy(n, dist):
    gen = torch.Generator(device="cuda").manual_seed(n)
    draw_ = torch.randn if dist == "normal" else torch.rand
    a = draw_((1, n, n), device="cuda", generator=gen)
    b = draw_((1, n, n), device="cuda", generator=gen)
    c = _emulate(a, b)
    _check(a, b, c, factor=0.5, floor=0.0)


def test_special_values_through_the_api(rng):
    a, b = _gpu(draw(rng, "normal", (300, 200))), _gpu(draw(rng, "normal", (200, 150)))
    a[3, 7], a[9, 1], b[5, 4] = float("inf"), float("nan"), float("-inf")
    c = sgemm_cube.matmul(a, b, backend="cuda")
    native = torch.matmul(a, b)
    assert torch.equal(torch.isnan(c), torch.isnan(native))
    assert torch.equal(torch.isinf(c), torch.isinf(native))
    fin = torch.isfinite(native)
    assert torch.allclose(c[fin], native[fin], rtol=1e-5, atol=1e-4)


def test_class_1_lines_are_computed_in_fp32(rng):
    """Rows and columns with an entry 40 binades under the rest (class 1 even scaled), scattered over
    many blocks: the fix-up programs compute their outputs in FP32; fixup=False keeps the paper's split.
    (Every line holds a zero, so neither operand's are emulated beside the other's: ``guard.fp16_rule``.)"""
    a, b = draw(rng, "normal", (1, 1000, 700)), draw(rng, "normal", (1, 700, 900))
    a[0, ::7, 3] = 2.0 ** -40
    b[0, 5, ::5] = 2.0 ** -40
    a[0, :, 0], b[0, 0, :] = 0, 0
    a, b = _gpu(a), _gpu(b)
    ops = launch.split_operands(a, b)
    assert int(ops.a_lines.counts.sum()) == 143 and int(ops.b_lines.counts.sum()) == 180
    ref = torch.matmul(a.double(), b.double())
    bound = 3 * 700 * 2.0 ** -24 * torch.matmul(a.double().abs(), b.double().abs())  # SGEMM's componentwise
    for fixup in (True, False):
        c = _emulate(a, b, fixup=fixup)
        _check(a, b, c)
        assert ((c.double() - ref).abs() <= bound).all()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_unscaling_rounds_once(rng, variant):
    """The compiled epilogue's unscaling, both paths: the exact product rounded once where the scaled sums
    are exact, subnormal outputs of a subnormal FP32 factor included (no flush to zero)."""
    for name, a, b in unscale_cases(rng):
        c = _emulate(_gpu(a[None]), _gpu(b[None]), config={"variant": variant})
        assert same_bits_any_zero(c[0].cpu().numpy(), exact_fp32(a, b)), name


def test_auto_uses_native_for_tiny_problems(rng):
    a, b = _gpu(draw(rng, "normal", (8, 8))), _gpu(draw(rng, "normal", (8, 8)))
    assert cuda.prefers_native(1, 8, 8, 8, a.device)
    assert sgemm_cube.explain(a, b).backend == "native"
    assert torch.equal(sgemm_cube.matmul(a, b), torch.matmul(a, b))
    assert not cuda.prefers_native(1, 8192, 8192, 8192, a.device)
    # K < 16 is native FP32 whatever the shape (the hybrid rule aside)
    a, b = _gpu(draw(rng, "normal", (4096, 15))), _gpu(draw(rng, "normal", (15, 4096)))
    plan = sgemm_cube.explain(a, b)
    assert plan.backend == "native" and "K = 15" in plan.reason
    assert torch.equal(sgemm_cube.matmul(a, b), torch.matmul(a, b))


# ---------------------------------------------------------------- BF16 schemes (bf16x9, bf16x6)

BF16_SCHEMES = ("bf16x9", "bf16x6")


def _wide_rows(rng, shape, binades=80):
    """Every row spans about ``binades`` binades: beyond the FP16 split, inside BF16's range."""
    half = binades // 2
    return (rng.uniform(-1.0, 1.0, shape) * 2.0 ** rng.integers(-half, half, shape)).astype(np.float32)


def test_bf16_split_bit_for_bit(rng):
    """Values from the subnormals to the BF16 lines' upper limit (what the split sees unscaled), with
    scale=None, fixup=False: every line is used as it is."""
    top = int(np.log2(line_range("bf16x9", 12).upper))
    x = (rng.uniform(1.0, 2.0, (1000, 777)) * rng.choice([-1.0, 1.0], (1000, 777))
         * 2.0 ** rng.integers(-149, top, (1000, 777)).astype(np.float64)).astype(np.float32)
    x.flat[:7] = [2.0 ** -149, -2.0 ** -140, 0.0, -0.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8,  # subnormals, ties
                  np.nextafter(np.float32(2.0 ** top), np.float32(0))]
    xg = _gpu(x)
    ops = launch.split_operands(xg.T[None], xg[None], scheme="bf16x9", scale=None, fixup_min_class=2)
    model = cpu_fallback.split_slices(np.ascontiguousarray(x.T), cpu_fallback.get_scheme("bf16x9"), 12)
    for got, want in zip(ops.a_hilo[:, 0, :777, :1000].float().cpu().numpy(), model):
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    for got, want in zip(ops.b_hilo[:, 0, :1000, :777].float().cpu().numpy(), model):
        assert np.array_equal(got.view(np.uint32), want.T.view(np.uint32))
    assert not ops.a_hilo[:, :, 777:].float().any() and not ops.a_hilo[:, :, :, 1000:].float().any()
    _check_lines(ops.a_lines, x.T[None], -1, x[None], scheme="bf16x9", scale=None, fixup_min_class=2)


@pytest.mark.parametrize("scheme", BF16_SCHEMES)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("shape", [(33, 47, 65), (1, 2, 3), (257, 129, 1000), (4, 300, 200, 100)])
def test_bf16_variants_odd_shapes(rng, scheme, variant, shape):
    *batch, m, n, k = shape
    batch = batch[0] if batch else 1
    a, b = _gpu(draw(rng, "normal", (batch, m, k))), _gpu(draw(rng, "uniform01", (batch, k, n)))
    c = _emulate(a, b, scheme=scheme, config={"variant": variant})
    _check(a, b, c)


@pytest.mark.parametrize("scheme", BF16_SCHEMES)
@pytest.mark.parametrize("order, merge_levels", [("elementwise", False), ("termwise", True), ("elementwise", True)])
def test_bf16_orders_and_accumulators(rng, scheme, order, merge_levels):
    a, b = _gpu(draw(rng, "normal", (1, 700, 1500))), _gpu(draw(rng, "wide_exponent", (1, 1500, 600)))
    c = _emulate(a, b, scheme=scheme, order=order, config={"merge_levels": merge_levels})
    _check(a, b, c)


@pytest.mark.parametrize("scheme, n, merge_levels", [("bf16x9", 4096, False), ("bf16x9", 8192, False),
                                                     ("bf16x9", 4096, True), ("bf16x6", 4096, False),
                                                     ("bf16x6", 8192, True)])
@pytest.mark.parametrize("dist", ["normal", "uniform01"])
def test_bf16_large_sizes_beat_sgemm_accuracy(scheme, n, merge_levels, dist):
    gen = torch.Generator(device="cuda").manual_seed(n)
    draw_ = torch.randn if dist == "normal" else torch.rand
    a = draw_((1, n, n), device="cuda", generator=gen)
    b = draw_((1, n, n), device="cuda", generator=gen)
    # 128x128 BF16 tiles: 96 KiB per stage, so two stages (the table's default tile is 128x64, 3 stages)
    config = {"merge_levels": True, "BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 2} if merge_levels else None
    c = _emulate(a, b, scheme=scheme, config=config)
    err, err32 = _check(a, b, c, factor=0.5, floor=0.0)
    print(f"{scheme} n={n} {dist} merge_levels={merge_levels}: error {err:.3g}, SGEMM {err32:.3g}")


def test_bf16x9_keeps_the_smallest_levels():
    # x*x - 1 with x = 1 + 2**-9 + 2**-18 comes level by level; its level-3 part
    # is 2**-18 of the result (tests/sgemm_cube/backends/cuda/test_cuda_backend.py explains the numbers).
    x = np.float32(1 + 2.0 ** -9 + 2.0 ** -18)
    a = _gpu(np.array([[[x, -1.0]] * 3], np.float32))
    b = _gpu(np.array([[[x] * 2, [1.0] * 2]], np.float32))
    exact = float(np.float32(np.float64(x) ** 2 - 1))
    nine = _emulate(a, b, scheme="bf16x9")
    six = _emulate(a, b, scheme="bf16x6")
    assert nine.eq(exact).all(), nine
    assert (six.double() - exact).abs().ge(2.0 ** -27).all(), six


@pytest.mark.parametrize("n", [1000, 3000])
def test_auto_scheme_on_wide_rows(rng, n):
    """scheme="auto" (the default) on rows spanning 80 binades (class 1 for fp16x3: no power of two brings
    them into its split's range; BF16 slices hold them) beside columns holding a zero (so fp16x3 lists the
    rows: ``guard.fp16_rule``).  Below launch.AUTO_MIN_FLOPS (n = 1000) it is fp16x3, and those rows are
    computed in FP32, accurately; from it on (n = 3000) the GPU chooses bf16x6, whose result it gives bit
    for bit, and on normal data fp16x3's.  Beside random normal columns fp16x3 emulates the wide rows and
    lists only the few columns that are not tight (spanning more than 23 binades: about one in 2,000
    columns of 1,000 normal entries), as the guard does, and is chosen."""
    a, b = _gpu(_wide_rows(rng, (n, n))), _gpu(draw(rng, "normal", (n, n)))
    tight = b.clone()
    b[0] = 0
    plan = sgemm_cube.explain(a, b, backend="cuda")
    big = 2.0 * n ** 3 >= launch.AUTO_MIN_FLOPS
    assert (plan.scheme, plan.backend, plan.scale) == ("auto" if big else "fp16x3", "cuda", "auto"), plan
    assert int(launch.split_operands(a[None], b[None]).a_lines.counts.sum()) == n  # fp16x3 lists every row
    c = sgemm_cube.matmul(a, b, backend="cuda")
    _check(a[None], b[None], c[None])
    if big:
        assert torch.equal(c.view(torch.int32), sgemm_cube.matmul(a, b, scheme="bf16x6").view(torch.int32))
        normal = _gpu(draw(rng, "normal", (n, n)))
        assert torch.equal(sgemm_cube.matmul(normal, b).view(torch.int32),
                           sgemm_cube.matmul(normal, b, scheme="fp16x3").view(torch.int32))
    ops = launch.split_operands(a[None], tight[None])
    loose = line_meta(tight.cpu().numpy()[None], -2, partner=a.cpu().numpy()[None]).cls >= 1
    assert int(ops.a_lines.counts.sum()) == 0 and int(ops.b_lines.counts.sum()) == int(loose.sum()) <= n // 100
    c = sgemm_cube.matmul(a, tight, backend="cuda")
    bound = 3 * n * 2.0 ** -24 * torch.matmul(a.double().abs(), tight.double().abs())  # SGEMM's componentwise
    assert ((c.double() - torch.matmul(a.double(), tight.double())).abs() <= bound).all()
    fp16x3 = sgemm_cube.matmul(a, tight, backend="cuda", scheme="fp16x3")
    assert torch.equal(c.view(torch.int32), fp16x3.view(torch.int32))


@pytest.mark.parametrize("scheme", BF16_SCHEMES)
def test_bf16_special_values_through_the_api(rng, scheme):
    a, b = _gpu(draw(rng, "normal", (300, 200))), _gpu(draw(rng, "normal", (200, 150)))
    a[3, 7], a[9, 1], b[5, 4] = float("inf"), float("nan"), float("-inf")
    c = sgemm_cube.matmul(a, b, backend="cuda", scheme=scheme)
    native = torch.matmul(a, b)
    assert torch.equal(torch.isnan(c), torch.isnan(native))
    assert torch.equal(torch.isinf(c), torch.isinf(native))
    fin = torch.isfinite(native)
    assert torch.allclose(c[fin], native[fin], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("scheme", BF16_SCHEMES)
def test_bf16_lines_beside_their_partners(rng, scheme):
    """Issue 33: BF16 lines spanning more than 99 binades (``bf16_pair_cases``): the compiled split lists
    exactly the lines ``guard.line_meta`` lists beside the other operand, and the guarantee holds.  (A
    planted bug that ignored the other operand's lowest binade listed nothing in "wide rows, a low
    column"; on an H100 its outputs still met the guarantee, BF16 tensor-core products near 2**-136 being
    kept, so the meta comparison is what caught it.)"""
    for name, a, b, rows, cols in bf16_pair_cases(rng):
        ag, bg = _gpu(a), _gpu(b)
        ops = launch.split_operands(ag[None], bg[None], scheme=scheme)
        _check_lines(ops.a_lines, a[None], -1, b[None], scheme=scheme)
        _check_lines(ops.b_lines, b[None], -2, a[None], scheme=scheme)
        assert np.array_equal(unpack_meta(ops.a_lines.meta.cpu().numpy()).cls[0] > 0, rows), name
        assert np.array_equal(unpack_meta(ops.b_lines.meta.cpu().numpy()).cls[0] > 0, cols), name
        c = sgemm_cube.matmul(ag, bg, scheme=scheme).cpu().numpy()
        assert check_guarantee(c, a, b) == "", name


@pytest.mark.parametrize("scheme", ["fp16x3", "auto"])
def test_fp16_lines_beside_their_partners(rng, monkeypatch, scheme):
    """Issue 33: FP16 lines reaching below the split's range beside tight partners (``fp16_pair_cases``,
    ``guard.fp16_rule``): the compiled split lists exactly the lines ``guard.line_meta`` lists beside the
    other operand, and the product keeps the componentwise guarantee on the tensor cores (FP16 subnormal
    inputs kept); ``scheme="auto"`` (its threshold lowered to 0) chooses fp16x3 there, whose wide lines
    are no longer listed."""
    monkeypatch.setattr(launch, "AUTO_MIN_FLOPS", 0.0)
    for name, a, b, rows, cols in fp16_pair_cases(rng):
        ag, bg = _gpu(a), _gpu(b)
        ops = launch.split_operands(ag[None], bg[None])
        _check_lines(ops.a_lines, a[None], -1, b[None])
        _check_lines(ops.b_lines, b[None], -2, a[None])
        assert np.array_equal(unpack_meta(ops.a_lines.meta.cpu().numpy()).cls[0] > 0, rows), name
        assert np.array_equal(unpack_meta(ops.b_lines.meta.cpu().numpy()).cls[0] > 0, cols), name
        c = sgemm_cube.matmul(ag, bg, backend="cuda", scheme=scheme)
        assert check_guarantee(c.cpu().numpy(), a, b, frobenius=False) == "", name
        if scheme == "auto":
            want = choose_scheme(a[None], b[None], margin=launch.AUTO_MARGIN)
            assert want == "fp16x3" or name == "zeros everywhere", (name, want)
            chosen = sgemm_cube.matmul(ag, bg, backend="cuda", scheme=want)
            assert torch.equal(c.view(torch.int32), chosen.view(torch.int32)), name


@pytest.mark.parametrize("scheme", ["fp16x3", "bf16x6", "auto"])
@pytest.mark.parametrize("variant", ["tma", "tma_persistent", "ptr"])
def test_chunked_planes_have_the_bits_of_the_whole(rng, scheme, variant):
    """Config keys ``row_chunks``/``col_chunks`` (the split planes a chunk at a time, ``launch._chunked_launches``)
    on the compiled kernels, first call and cached replay: the bits of the product unchunked, on data with
    listed, scaled and NaN/Inf lines and on the cancelling huge terms whose overflowing outputs the recheck
    computes again (rows 256.., a chunk away from the origin); so too with ``fixup_apart`` (the tiles storing
    every output 16 bytes at a time, the fix-up overwriting its lines' outputs in a launch after theirs),
    whole and chunked."""
    from tests.guarantee_data import check_emulated_overflow, emulated_overflow_cases

    name, ra, rb = emulated_overflow_cases(np.random.default_rng(1))[0]
    a = rng.standard_normal((1, 700, 96)).astype(np.float32)
    b = rng.standard_normal((1, 96, 650)).astype(np.float32)
    a[0, 256:320], b[0, :, 300] = ra, rb[:, 0]
    a[0, 5, 3], a[0, 600, :] = 1e-30, a[0, 600, :] * np.float32(1e20)
    b[0, 7, 60], b[0, :, 33] = np.inf, b[0, :, 33] * np.float32(2.0 ** -60)
    ta, tb = _gpu(a), _gpu(b)
    cfg = {"variant": variant}
    whole = torch.empty(1, 700, 650, device="cuda")
    launch.run(ta, tb, whole, sb=12, order="termwise", scheme=scheme, scale="auto", fixup=True, config=cfg)
    for rows, cols, apart in ((3, 2, False), (1, 4, False), (5, 1, False), (1, 1, True), (3, 2, True)):
        for _ in range(2):  # the first call compiles, the second replays through the private launcher
            out = torch.full_like(whole, float("nan"))
            launch.run(ta, tb, out, sb=12, order="termwise", scheme=scheme, scale="auto", fixup=True,
                       config={**cfg, "row_chunks": rows, "col_chunks": cols, "fixup_apart": apart})
            torch.cuda.synchronize()
            assert torch.equal(out.view(torch.int32), whole.view(torch.int32)), (rows, cols, apart)
    if scheme == "fp16x3":  # where those rows are emulated and some of their sums overflow
        c = whole[0].cpu().numpy()
        assert (msg := check_emulated_overflow(name, c[256:320, 300:301], ra, rb)) == "", msg


def _twice_under_a_memory_cap(call, out, expected, headroom: int, warning: str):
    """Under a per-process memory cap (this worker only) of ``headroom`` bytes beyond what the worker holds:
    the cap binds (the allocator's own out-of-memory error), ``call()`` warns (``warning``) and writes
    ``expected``'s bits to ``out``, and a second call, from the plan the first cached, writes them without a
    warning.

    The cap limits only new segments, so the calls allocate from a memory pool of their own, empty at the
    start (``torch.cuda.MemPool``): free space that earlier tests left inside this worker's segments (12-32 MiB
    measured under xdist on an H200) would otherwise hold part of the workspace beyond the cap."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    pool = torch.cuda.MemPool()
    try:
        torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_reserved() + headroom) / total)
        with torch.cuda.use_mem_pool(pool):
            with pytest.raises(torch.OutOfMemoryError):
                torch.empty(headroom + 2 ** 22, dtype=torch.uint8, device="cuda")
            with pytest.warns(UserWarning, match=warning):
                call()
            torch.cuda.synchronize()
            assert torch.equal(out.view(torch.int32), expected.view(torch.int32))
            out.fill_(float("nan"))
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # the plan the first call cached: no second warning
                call()
            torch.cuda.synchronize()
            assert torch.equal(out.view(torch.int32), expected.view(torch.int32))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        del pool
        torch.cuda.empty_cache()


def test_a_workspace_over_the_free_memory_runs_in_chunks():
    """A product whose workspace does not fit runs in the first chunks of ``launch.OOM_CHUNKS`` that fit, with a
    warning, on the compiled kernels, with the bits of the whole product: where a cached plan of the whole no
    longer fits, and then from the chunked plan that call cached."""
    n = 2048
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=gen)
    b = torch.exp(3.0 * torch.randn(n, n, device="cuda", generator=gen))  # listed, scaled lines too
    a[5] *= 2.0 ** 40
    opts = dict(sb=12, order="termwise", scheme="auto", scale="auto", fixup=True)
    whole = torch.empty(n, n, device="cuda")
    launch.run(a[None], b[None], whole[None], **opts)  # cached: the next call replays it
    out = torch.full_like(whole, float("nan"))
    _twice_under_a_memory_cap(lambda: launch.run(a[None], b[None], out[None], **opts), out, whole,
                              headroom=2 * n * n * 4,  # the whole workspace needs about 3 outputs
                              warning="did not fit in the GPU's free memory")


def test_a_batch_over_the_free_memory_runs_in_slices():
    """A batch whose workspace does not fit runs in slices of its matrices, with a warning, each matrix with the
    bits of its product called alone; the next call replays the slices from the cache, without a warning.
    B broadcast (a stride-0 batch)."""
    n = 2048
    gen = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(3, n, n, device="cuda", generator=gen)
    a[1] = torch.exp(3.0 * a[1])
    b = torch.randn(1, n, n, device="cuda", generator=gen).expand(3, -1, -1)
    opts = dict(sb=12, order="termwise", scheme="auto", scale="auto", fixup=True)
    alone = torch.empty(3, n, n, device="cuda")
    for i in range(3):
        launch.run(a[i:i + 1], b[i:i + 1], alone[i:i + 1], **opts)
    out = torch.full_like(alone, float("nan"))
    _twice_under_a_memory_cap(lambda: launch.run(a, b, out, **opts), out, alone,
                              headroom=4 * n * n * 4,  # one matrix's workspace (about 4 outputs) fits
                              warning="slices of at most 2 matrices")
