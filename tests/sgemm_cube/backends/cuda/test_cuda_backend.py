"""The CUDA backend's Triton kernels under TRITON_INTERPRET=1 (CPU, NumPy), at small odd shapes.

What is claimed and checked here:

* the split kernel (:func:`.launch.split_operands`) computes the line
  integers of :mod:`cpu_fallback.guard` bit for bit -- ``unpack_meta(meta)``
  equals ``line_meta(x, axis, scheme=, sb=, scale=)`` for rows of A and
  columns of B, every ``scale`` mode, FP16 and BF16 schemes, NaN/Inf, zero
  and subnormal lines, every source layout, broadcast batches (split once);
* its slices are :func:`cpu_fallback.split_slices` of
  :func:`cpu_fallback.guard.scale_lines` ``(x, t, axis)`` bit for bit (so
  :func:`cpu_fallback.split` itself where no line is scaled), NaN/Inf split
  to 0, zero padding; its per-block lists hold exactly the lines of class
  ``>= fixup_min_class``, in order;
* the GEMM's arithmetic (every kernel variant, both orders, lo*lo, flush
  intervals, batches with broadcasting, transposed and strided operands)
  with ``scale=None, fixup=False`` (the paper's algorithm) agrees with
  :func:`cpu_fallback.emulated_matmul` elementwise within
  ``(2K + 8) * 2**-24 * (|A| |B|)_ij`` (two FP32 accumulations of the same
  exact FP16 products in different orders), and its error against float64
  is at most twice native FP32's on the same data plus 2**-21 (the split
  keeps 22 bits of each operand: that floor shows where K is tiny and FP32
  itself is almost exact);
* with the guarantee's options (scaling, class-1 and class-2 lines computed
  in plain FP32 by the fix-up programs, tiles that could overflow computed
  natively) it agrees with the CPU backend run with the same options within
  the same bound, gives native FP32's NaN/Inf, and ``fixup=False`` keeps the
  paper's split for class-1 lines only;
* the BF16 schemes (bf16x9, bf16x6): the split kernel is
  :func:`cpu_fallback.split_slices` bit for bit over FP32's whole range
  (subnormals, the overflow edge, signed zeros); the GEMM agrees with the CPU
  model within ``(2K + 16) * 2**-24 * (|A| |B|)_ij`` (the level-0 product's
  two accumulations, each within ``K * 2**-24 * (1 + 2**-7) |A||B|`` since a
  BF16 slice exceeds its value by at most 2**-8, plus the smaller levels and
  the combination's roundings) and is as accurate as above, also on rows
  spanning 80 binades; ``scheme="auto"`` is fp16x3 here too, and such rows
  are computed in FP32 (class 1), accurately;
* dispatch and error paths.

On a machine with a GPU the module is skipped unless the interpreter was
asked for: run ``tests/gpu/`` there instead.
"""
import numpy as np
import pytest

from tests.sgemm_cube.backends.cuda import require_interpreter

torch = require_interpreter("tests/gpu/")

from sgemm_cube import cpu_fallback  # noqa: E402
import sgemm_cube  # noqa: E402
from sgemm_cube.cpu_fallback import guard  # noqa: E402
from sgemm_cube.cpu_fallback.guard import line_meta, line_range, pack_meta, scale_lines, unpack_meta  # noqa: E402
from sgemm_cube.backends import cuda  # noqa: E402
from sgemm_cube.backends.cuda import fixup_kernel, hybrid, launch  # noqa: E402
from sgemm_cube.backends.cuda.gemm_tiles import VARIANTS  # noqa: E402

from tests.conftest import draw  # noqa: E402
from tests.guarantee_data import (bf16_pair_cases, check_guarantee, exact_fp32, fp16_pair_cases, fp32_matmul,  # noqa: E402
                                  same_bits_any_zero, unscale_cases)

# NumPy and the interpreter warn on the NaN/Inf and overflow some of these data are made of.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DISTS = ("normal", "uniform01", "wide_exponent")
#: The paper's algorithm: no scaling, no plain-FP32 lines (the GEMM's arithmetic alone).
PAPER = dict(scale=None, fixup=False)


def _t(x):
    return torch.from_numpy(np.ascontiguousarray(x))


def _rel(c, ref):
    return np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref)


def _model(a, b, **opts):
    """The CPU backend with the same options: under PAPER, :func:`cpu_fallback.emulated_matmul` itself
    (what the CPU backend computes then on finite data inside the split's range); otherwise the same
    scaling and plain-FP32 lines."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if opts.get("scale", "auto") is None and opts.get("fixup") is False:
        kw = {k: v for k, v in opts.items() if k not in ("scale", "fixup")}
        return cpu_fallback.emulated_matmul(a, b, **kw)
    return sgemm_cube.matmul(a, b, backend="cpu", **opts)


def _check_against_model(a, b, c, **opts):
    """Elementwise agreement with the CPU backend (same options), and FP32-level accuracy against float64."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    model = _model(a, b, **opts)
    slack = 16 if opts.get("scheme", "fp16x3").startswith("bf16") else 8
    bound = (2 * a.shape[1] + slack) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64))
    assert np.all(np.abs(c.astype(np.float64) - model) <= bound)
    ref = a64 @ b64
    err, err32 = _rel(c, ref), _rel(fp32_matmul(a, b), ref)
    assert err <= 2 * err32 + 2.0 ** -21, (err, err32)


def _run(a, b, *, out=None, **kw):
    """``cuda.matmul`` on (B, M, K) and (B, K, N) tensors (2-D operands get a batch axis); the result as NumPy."""
    a_t, b_t = (a if isinstance(a, torch.Tensor) else _t(a)), (b if isinstance(b, torch.Tensor) else _t(b))
    if a_t.dim() == 2:
        a_t = a_t[None]
    if b_t.dim() == 2:
        b_t = b_t[None]
    batch = max(a_t.shape[0], b_t.shape[0])
    a_t = a_t.expand(batch, *a_t.shape[1:])
    b_t = b_t.expand(batch, *b_t.shape[1:])
    if out is None:
        out = torch.full((batch, a_t.shape[1], b_t.shape[2]), float("nan"))  # poison: all must be written
    assert cuda.matmul(a_t, b_t, out=out, **kw) is None
    return out.numpy()


#: Small output tiles and 16-line split blocks: the 37-line test operands span several blocks.
SMALL = dict(BLOCK_M=16, BLOCK_N=16, split_block=(16, 16))


def _unique(x):
    """The batches a broadcast (stride-0) operand is split for: one."""
    return x[:1] if x.shape[0] > 1 and x.stride(0) == 0 else x


def _check_lines(x, slices, lines, *, axis, partner, scheme="fp16x3", sb=12, scale="auto", fixup_min_class=1):
    """Line integers, slices, padding and lists of one split operand against :mod:`cpu_fallback.guard`
    (``partner``: the product's other operand, which BF16 schemes classify the lines beside).
    ``fixup_min_class`` is the one asked for: under ``guard.certifies`` LOSES_BITS lines are emulated, and the
    lists hold SPECIAL ones."""
    xn = _unique(x).numpy()
    fixup = fixup_min_class == 1
    certify = guard.certifies(scheme, scale, fixup)
    want = line_meta(xn, axis, scheme=scheme, sb=sb, scale=scale, fixup=fixup, partner=_unique(partner).numpy(),
                     certify=certify)
    fixup_min_class = guard.fixup_min_class(fixup, certify)
    got = unpack_meta(lines.meta.numpy())
    for name, g, w in zip(("t", "cls"), got, want):
        assert np.array_equal(g, w), (name, np.argwhere(g != w)[:5].tolist())
    assert np.array_equal(lines.meta.numpy(), pack_meta(want))
    # The slices of the lines the GEMM uses (class < fixup_min_class): the split of the scaled lines (NaN/Inf
    # as 0), bit for bit; and zeros in the pad.  (The fix-up lines' slices go unused.)
    model = cpu_fallback.split_slices(scale_lines(xn, want.t, axis), cpu_fallback.get_scheme(scheme), sb)
    rows, cols = xn.shape[1:]
    assert slices.shape[:2] == (len(model), xn.shape[0])
    used = np.expand_dims(want.cls < fixup_min_class, axis)
    for got_s, want_s in zip(slices[:, :, :rows, :cols], model):
        if slices.dtype == torch.float16:
            got_bits, want_bits = got_s.numpy().view(np.uint16), want_s.view(np.uint16)
        else:  # BF16 slices as FP32 bit patterns (the model's low 16 bits are zero)
            got_bits, want_bits = got_s.float().numpy().view(np.uint32), want_s.view(np.uint32)
        assert np.array_equal(np.where(used, got_bits, 0), np.where(used, want_bits, 0))
    pad = slices.clone()
    pad[:, :, :rows, :cols] = 0
    assert not pad.float().any()  # the pad is zero, so the GEMM needs no masks
    # The lists: per block of block_l lines, the lines of class >= fixup_min_class, in order; the block's
    # other lines from the segment's end (the fix-up's column pass walks them: crossings computed once).
    counts, lists, bl = lines.counts.numpy(), lines.lists.numpy(), lines.block_l
    for i in range(xn.shape[0]):
        for p in range(lines.blocks):
            listed = np.flatnonzero(want.cls[i, p * bl:(p + 1) * bl] >= fixup_min_class) + p * bl
            rest = np.flatnonzero(want.cls[i, p * bl:(p + 1) * bl] < fixup_min_class) + p * bl
            assert counts[i, p] == listed.size
            assert np.array_equal(lists[i, p * bl:p * bl + listed.size], listed)
            assert np.array_equal(lists[i, (p + 1) * bl - rest.size:(p + 1) * bl][::-1], rest)
    # Compacted (what the fix-up programs read): per batch the listed lines in rank order, then the others.
    for i in range(xn.shape[0]):
        listed = np.flatnonzero(want.cls[i] >= fixup_min_class)
        assert lines.totals[i] == listed.size
        assert np.array_equal(lines.order[i].numpy(), np.concatenate([listed, np.flatnonzero(want.cls[i] < fixup_min_class)]))


def _check_split(ops, a, b, **kw):
    """:func:`_check_lines` for both operands of :func:`.launch.split_operands`'s result."""
    _check_lines(a, ops.a_hilo, ops.a_lines, axis=-1, partner=b, **kw)
    _check_lines(b, ops.b_hilo, ops.b_lines, axis=-2, partner=a, **kw)


# ---------------------------------------------------------------- the split

# (layout, distribution, sb): every pair of the three covered, at a third of the product's cost.
SPLIT_CASES = [("contiguous", "normal", 0), ("contiguous", "uniform01", 6), ("contiguous", "wide_exponent", 12),
               ("transposed", "normal", 6), ("transposed", "uniform01", 12), ("transposed", "wide_exponent", 0),
               ("strided", "normal", 12), ("strided", "uniform01", 0), ("strided", "wide_exponent", 6)]


def _layout(gen, rows, cols, layout):
    """A (rows, cols) tensor from ``gen(shape)`` laid out contiguously, transposed, or as a strided view."""
    if layout == "contiguous":
        return _t(gen((rows, cols)))
    if layout == "transposed":
        return _t(gen((cols, rows))).T
    return _t(gen((2 * rows, cols + 3)))[::2, 1:cols + 1]


@pytest.mark.parametrize("layout, dist, sb", SPLIT_CASES)
def test_split_is_the_cpu_model_bit_for_bit(rng, layout, dist, sb):
    rows, cols = 37, 53
    x = _layout(lambda s: draw(rng, dist, s), rows, cols, layout)
    x[0, 0] = 2.0 ** -130  # an FP32 subnormal
    # scale=None, fixup=False (fixup_min_class=2): no line is scaled and all are used (no data beyond the
    # split's overflow limit), so the slices are cpu_fallback.split's -- x as A, x.T as B (same lines)
    ops = launch.split_operands(x[None], x.T[None], sb=sb, scale=None, fixup_min_class=2, config=SMALL)
    hi, lo = cpu_fallback.split(x.numpy(), sb)
    assert np.array_equal(ops.a_hilo[0, 0, :rows, :cols].numpy().view(np.uint16), hi.view(np.uint16))
    assert np.array_equal(ops.a_hilo[1, 0, :rows, :cols].numpy().view(np.uint16), lo.view(np.uint16))
    assert np.array_equal(ops.b_hilo[0, 0, :cols, :rows].numpy().view(np.uint16), hi.T.view(np.uint16))
    assert np.array_equal(ops.b_hilo[1, 0, :cols, :rows].numpy().view(np.uint16), lo.T.view(np.uint16))
    _check_split(ops, x[None], x.T[None], sb=sb, scale=None, fixup_min_class=2)
    # the default scale="auto": only the lines that do not fit are scaled
    ops = launch.split_operands(x[None], x.T[None], sb=sb, config=SMALL)
    _check_split(ops, x[None], x.T[None], sb=sb)


def test_bf16_lines_beside_their_partners_are_the_guards(rng):
    """Issue 33: the BF16 lines' summaries (pass 2a, per block of 16 lines here) and the rule that lets one
    operand's lines reach further (``guard.bf16_rule``): on ``bf16_pair_cases`` the split's line meta,
    lists and slices are the guard's, bit for bit, and the lines listed are the cases' own."""
    for name, a, b, rows, cols in bf16_pair_cases(rng):
        at, bt = _t(a)[None], _t(b)[None]
        ops = launch.split_operands(at, bt, scheme="bf16x6", config=SMALL)
        _check_split(ops, at, bt, scheme="bf16x6")
        assert np.array_equal(unpack_meta(ops.a_lines.meta.numpy()).cls[0] > 0, rows), name
        assert np.array_equal(unpack_meta(ops.b_lines.meta.numpy()).cls[0] > 0, cols), name


@pytest.mark.parametrize("scheme", ["fp16x3", "bf16x6"])
def test_split_operands_runs_the_split_alone(rng, monkeypatch, scheme):
    """``split_operands`` launches the split's kernels and none of the GEMM's, also under ``fixup_apart``
    (two GEMM launches: before, it took every launch but the last two, and ran the tiles' launch with no
    output; the H200's table sets ``fixup_apart`` up to K = 256, where tests/gpu failed to compile it)."""
    ran = []
    real = launch._launch_public

    def recorded(lc, mem):
        ran.append(lc.kernel)
        return real(lc, mem)

    monkeypatch.setattr(launch, "_launch_public", recorded)
    a = _t(rng.standard_normal((24, 64)).astype(np.float32))[None]
    b = _t(rng.standard_normal((64, 10)).astype(np.float32))[None]
    ops = launch.split_operands(a, b, scheme=scheme, config={**SMALL, "fixup_apart": True})
    _check_split(ops, a, b, scheme=scheme)
    assert ran and launch.gemm_kernel not in ran and launch.overflow_recheck_kernel not in ran


def test_fp16_lines_beside_their_partners_are_the_guards(rng):
    """Issue 33: the FP16 lines' summaries (pass 2a: wide and loose lines per block of 16) and the rule that
    emulates one operand's wide lines beside the other's tight ones (``guard.fp16_rule``): on
    ``fp16_pair_cases`` the split's line meta, lists and slices are the guard's, bit for bit, the lines
    listed are the cases' own, and the product keeps the componentwise guarantee."""
    for name, a, b, rows, cols in fp16_pair_cases(rng):
        at, bt = _t(a)[None], _t(b)[None]
        ops = launch.split_operands(at, bt, config=SMALL)
        _check_split(ops, at, bt)
        assert np.array_equal(unpack_meta(ops.a_lines.meta.numpy()).cls[0] > 0, rows), name
        assert np.array_equal(unpack_meta(ops.b_lines.meta.numpy()).cls[0] > 0, cols), name
        c = _run(a, b, config=SMALL)[0]
        assert check_guarantee(c, a, b, frobenius=False) == "", name


def _line_zoo(rng, batch=2, lines=37, k=29):
    """(batch, lines, k) float32 with lines of each kind: NaN, -Inf, +Inf everywhere, zeros, an FP32
    subnormal, 2**-30 (below the split's range), 1e5 (beyond sb=12's), spanning 60 binades, and the
    rest at exponents +-40 (scaled by "auto", in range after it)."""
    x = (rng.uniform(-1, 1, (batch, lines, k)) * 2.0 ** rng.integers(-40, 40, (batch, lines, 1))).astype(np.float32)
    x[0, 3, 5], x[1, 7, 2], x[0, 4, :] = np.nan, -np.inf, 0.0
    x[1, 9, :] = np.inf
    x[0, 11, 6] = 2.0 ** -140
    x[1, 12, :] = rng.uniform(0.5, 1, k) * 2.0 ** -30
    x[0, 14, 3] = 1e5
    x[1, 15, :] = rng.uniform(-1, 1, k) * 2.0 ** rng.integers(-30, 30, k)
    return x


_LAYOUTS = ("contiguous", "transposed", "broadcast")
# (scheme, scale, fixup_min_class, layout of A, layout of B): every scale with both schemes and both
# fixup_min_class, the layouts rotating.
LINE_CASES = [(scheme, scale, 1 + (i + j) % 2, _LAYOUTS[(i + j) % 3], _LAYOUTS[(i + j + 1) % 3])
              for i, scheme in enumerate(("fp16x3", "bf16x9")) for j, scale in enumerate((None, "auto", "rows", "matrix"))]


def _zoo_operand(rng, layout):
    x = torch.from_numpy(_line_zoo(rng))
    if layout == "transposed":
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "broadcast":  # a stride-0 batch is split once
        return x[:1].expand(2, -1, -1)
    return x


@pytest.mark.parametrize("scheme, scale, fixup_min_class, layout_a, layout_b", LINE_CASES)
def test_line_meta_and_lists_are_the_guards(rng, scheme, scale, fixup_min_class, layout_a, layout_b):
    """Rows of A and columns of B: (t, cls) bit for bit, slices of the scaled lines, fix-up lists."""
    a = _zoo_operand(rng, layout_a)
    b = _zoo_operand(rng, layout_b).transpose(-1, -2)  # (batch, K, lines): B's columns are the lines
    ops = launch.split_operands(a, b, scheme=scheme, scale=scale, fixup_min_class=fixup_min_class, config=SMALL)
    assert ops.a_lines.meta.shape == (_unique(a).shape[0], 37) and ops.b_lines.meta.shape == (_unique(b).shape[0], 37)
    _check_split(ops, a, b, scheme=scheme, scale=scale, fixup_min_class=fixup_min_class)
    if scale is not None:  # scaled or recomputed: the used slices are finite (unscaled 1e5 overflows FP16)
        assert all(torch.isfinite(s.float()).all() for s in (ops.a_hilo, ops.b_hilo))


@pytest.mark.parametrize("tiles", [((32, 128, 1), (128, 32, 1)), (launch.STATS_TILE_A, launch.STATS_TILE_B),
                                   ((32, 128, 3), (128, 32, 3)), ((16, 64, 2), (256, 16, 5))])
@pytest.mark.parametrize("scheme", ["fp16x3", "bf16x6"])
def test_statistics_tiles_of_any_shape(rng, monkeypatch, scheme, tiles):
    """The statistics pass reads tiles of its own shape per operand (``STATS_TILE_A``, ``STATS_TILE_B``:
    lines, K per step, steps; the last one partly or wholly past K or the lines): the line meta, lists and
    slices stay the guard's.  K = 300 spans several tiles, and each line's NaN, infinity, zero, subnormal or
    largest entry sits in a different one."""
    monkeypatch.setattr(launch, "STATS_TILE_A", tiles[0])
    monkeypatch.setattr(launch, "STATS_TILE_B", tiles[1])
    a = torch.from_numpy(_line_zoo(rng, k=300))
    a[0, 3, 5], a[0, 5, 260], a[0, 6, 299], a[0, 8, 140] = 2.0 ** 20, float("nan"), float("-inf"), 2.0 ** -140
    a[0, 9, 130:] = 0.0
    a[0, 10, :] = 1.0
    a[0, 10, 290] = 2.0 ** -40  # beyond the FP16 split's range, in the last split tile only
    b = torch.from_numpy(_line_zoo(rng, k=300)).transpose(-1, -2)
    b[0, 280, 2], b[0, 131, 4] = float("inf"), 0.0
    ops = launch.split_operands(a, b, scheme=scheme, config=SMALL)
    _check_split(ops, a, b, scheme=scheme)


def test_line_classes_say_what_the_split_holds():
    """The classes of the guard on lines built to be of each kind (fp16x3, sb=12: [2**-15, 2**15))."""
    x = np.array([[1.0, 2.0 ** -15, 3.0],           # in range
                  [1.0, 2.0 ** -16, 3.0],           # one entry below: class 1 unscaled, 0 once scaled
                  [1.0, 2.0 ** -40, 3.0],           # 41 binades: class 1 even scaled
                  [1.0, 4.0e4, 3.0],                # beyond 32768: class 2 unscaled, 0 once scaled
                  [1.0, np.nan, 3.0], [0.0, 0.0, 0.0]], np.float32)[None]
    assert line_meta(x, -1, scale=None, fixup=False).cls.tolist() == [[0, 1, 1, 2, 2, 0]]
    auto = line_meta(x, -1)
    assert auto.cls.tolist() == [[0, 0, 1, 0, 2, 0]]
    assert auto.t[0, [0, 1, 3, 5]].tolist() == [0, 13, -1, 0]  # largest entry into [2**14, 2**15) if scaled
    xt = torch.from_numpy(x)
    for fixup_min_class, listed in ((1, [2, 4]), (2, [4])):
        ops = launch.split_operands(xt, xt.mT, fixup_min_class=fixup_min_class, config=SMALL)
        for lines in (ops.a_lines, ops.b_lines):
            assert np.array_equal(lines.meta.numpy(), pack_meta(line_meta(x, -1, fixup=fixup_min_class == 1)))
            assert lines.counts.numpy().tolist() == [[len(listed)]]
            assert lines.lists.numpy()[0, :len(listed)].tolist() == listed
            assert lines.totals.tolist() == [len(listed)] and lines.order[0, :len(listed)].tolist() == listed


# ---------------------------------------------------------------- the GEMM

# (variant, distribution, shape): each variant on each shape, the distributions rotating.
GEMM_CASES = [(v, DISTS[(i + j) % 3], shape) for i, v in enumerate(sorted(VARIANTS))
              for j, shape in enumerate([(33, 47, 65), (1, 2, 3), (5, 7, 200), (64, 32, 16)])]


@pytest.mark.parametrize("variant, dist, shape", GEMM_CASES)
def test_gemm_variants_match_the_model(rng, variant, dist, shape):
    m, n, k = shape
    a, b = draw(rng, dist, (m, k)), draw(rng, dist, (k, n))
    c = _run(a, b, config={"variant": variant}, **PAPER)
    _check_against_model(a, b, c[0], **PAPER)


# (order, keep_lo_lo, split_corr, flush_k): every pair of values of any two options at least once.
OPTION_CASES = [("termwise", False, False, 16), ("termwise", True, True, 48), ("termwise", False, True, 0),
                ("termwise", True, False, 0), ("elementwise", False, True, 16), ("elementwise", True, False, 16),
                ("elementwise", True, True, 0), ("elementwise", False, False, 48)]


@pytest.mark.parametrize("order, keep_lo_lo, split_corr, flush_k", OPTION_CASES)
def test_gemm_options_match_the_model(rng, order, keep_lo_lo, split_corr, flush_k):
    a, b = draw(rng, "normal", (33, 100)), draw(rng, "uniform01", (100, 30))
    c = _run(a, b, order=order, keep_lo_lo=keep_lo_lo, flush_k=flush_k, config={"split_corr": split_corr}, **PAPER)
    _check_against_model(a, b, c[0], order=order, keep_lo_lo=keep_lo_lo, **PAPER)


@pytest.mark.parametrize("sb", [0, 6, 12])
def test_gemm_scaling_exponents(rng, sb):
    a, b = draw(rng, "wide_exponent", (20, 70)), draw(rng, "normal", (70, 9))
    c = _run(a, b, sb=sb, **PAPER)
    model = cpu_fallback.emulated_matmul(a, b, sb=sb)
    bound = (2 * 70 + 8) * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert np.all(np.abs(c[0] - model) <= bound)
    # the defaults: entries of wide_exponent rows fall below sb's range, and those lines are scaled or
    # computed in FP32 as the CPU backend does it
    _check_against_model(a, b, _run(a, b, sb=sb)[0], sb=sb)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_batched_broadcast_transposed_and_strided(rng, variant):
    a = _t(draw(rng, "normal", (4, 41, 33))).transpose(1, 2)  # (4, 33, 41), M contiguous
    b_base = _t(draw(rng, "normal", (1, 2 * 41, 29)))
    b = b_base[:, ::2, :].expand(4, 41, 29)  # strided rows, batch stride 0
    c = _run(a, b, config={"variant": variant})
    for i in range(4):
        _check_against_model(a[i].numpy(), b[i].numpy(), c[i])


def test_out_with_row_stride_and_batch_broadcast_of_a(rng):
    a = _t(draw(rng, "uniform01", (1, 9, 40))).expand(3, 9, 40)
    b = _t(draw(rng, "normal", (3, 40, 11)))
    big = torch.full((3, 9, 16), float("nan"))
    out = big[:, :, 2:13]
    _run(a, b, out=out)
    assert torch.isnan(big[:, :, :2]).all() and torch.isnan(big[:, :, 13:]).all()  # nothing outside out
    for i in range(3):
        _check_against_model(a[i].numpy(), b[i].numpy(), out[i].numpy())


def _special_pattern(c):
    return np.stack([np.isnan(c), c == np.inf, c == -np.inf])


@pytest.mark.parametrize("fixup", [True, False])
def test_nonfinite_inputs_give_native_special_values(rng, fixup):
    """NaN/Inf lines are class 2: their outputs are plain FP32 in the GEMM launch (fix-up programs),
    native FP32's special values exactly, with fixup=False too; the other outputs are untouched."""
    a, b = draw(rng, "normal", (17, 30)), draw(rng, "normal", (30, 13))
    a[3, 5], b[7, 2] = np.inf, np.nan
    b[5, 4] = 0.0  # inf * 0: NaN at (3, 4), as in native SGEMM
    c = _run(a, b, fixup=fixup)[0]
    native = fp32_matmul(a, b)
    assert np.array_equal(_special_pattern(c), _special_pattern(native))
    assert np.isnan(c[3, 4]) and np.isnan(c[:, 2]).all()
    finite = np.isfinite(native)
    model = _model(a, b, fixup=fixup)
    assert np.array_equal(_special_pattern(model), _special_pattern(native))
    bound = (2 * 30 + 8) * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    with np.errstate(invalid="ignore"):
        assert np.all(np.abs(c - model)[finite] <= bound[finite])


#: The FP64 tiles :func:`.fixup_kernel.fixup_shape` gives the fix-up (short, medium, long K; four or eight warps).
FIXUP_TILES = sorted({fixup_kernel.fixup_shape(k, 1, w)[0] for k in (24, 128, 4096) for w in (4, 8)})


def test_fixup_tiles_fit_their_launch_warps():
    """The fix-up's FP64 accumulator holds at most 64 doubles per thread, whatever K: 128 (a 64 x 256 tile on four
    warps, what short and long K took until 2026-11-29) made the fused kernel spill 5.8-5.9 KB per thread, the
    tile programs' registers too (compiled for sm_90 by Triton 3.6, ``shortk_h200_20261129-091500.json``)."""
    for k in (1, 24, 96, 127, 128, 512, 4095, 4096, 16384):
        for warps in (4, 8):
            (group, block_o, _), programs = fixup_kernel.fixup_shape(k, 132, warps)
            assert group * block_o // (32 * warps) <= 64, (k, warps, group, block_o)
            assert programs == (2 if k >= fixup_kernel.LONG_K else 4) * 132


@pytest.mark.parametrize("fixup, row_step, col_step, tile", [
    (True, 2, 4, FIXUP_TILES[0]), (True, 10, 2, FIXUP_TILES[1]), (True, 2, 4, FIXUP_TILES[2]), (False, 2, 4, None)])
def test_fixup_lines_across_blocks_are_fp32(rng, monkeypatch, fixup, row_step, col_step, tile):
    """Class-1 lines scattered over several blocks of A's rows and B's columns, some of both: with
    fixup=True their outputs are plain FP32 (fix-up programs gather the per-block lists); with
    fixup=False they keep the paper's split, as in the CPU backend.  A list of 64 lines or more goes
    in groups of 64 (75 rows: a whole group and 11 lines; 70 columns against the 135 rows left open), a
    shorter one in groups of 16 against blocks of 64 other lines (:data:`.fixup_kernel._SMALL_GROUP`;
    35 columns against the 75 rows left open, 15 rows against every column).  Each of the fix-up's FP64
    tiles (:data:`FIXUP_TILES`) runs in one case, whatever K chooses."""
    if tile is not None:
        shape = launch.fixup_shape
        monkeypatch.setattr(launch, "fixup_shape", lambda k, sms, num_warps: (tile, shape(k, sms, num_warps)[1]))
    m, k, n = 150, 24, 140
    a, b = draw(rng, "normal", (m, k)), draw(rng, "normal", (k, n))
    a[::row_step, 7] = 2.0 ** -40  # below the split's range, 40 binades under the row: class 1 even scaled
    b[11, ::col_step] = 2.0 ** -40
    a[:, 0], b[0, :] = 0, 0  # every line holds a zero: neither operand's wide lines are emulated (guard.fp16_rule)
    rows, cols = len(range(0, m, row_step)), len(range(0, n, col_step))
    assert (line_meta(a[None], -1, partner=b[None]).cls == 1).sum() == rows
    assert (line_meta(b[None], -2, partner=a[None]).cls == 1).sum() == cols
    ops = launch.split_operands(_t(a)[None], _t(b)[None], fixup_min_class=1 if fixup else 2)
    assert ops.a_lines.blocks >= 4 and ops.a_lines.counts.sum() == (rows if fixup else 0)
    c = _run(a, b, fixup=fixup)[0]
    _check_against_model(a, b, c, fixup=fixup)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # the tiny entries are invisible at FP32 precision: every output is FP32-accurate componentwise
    comp = np.abs(c - ref) / (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert comp.max() <= 3 * k * 2.0 ** -24  # the guarantee's componentwise bound


def _short_and_long_lists(rng):
    """Two batches of A (150 x 24) against one B (24 x 140): a short list of rows (15 and 30: groups of 16) and
    a long list of 70 columns (groups of 64)."""
    m, k, n = 150, 24, 140
    a, b = np.stack([draw(rng, "normal", (m, k)) for _ in range(2)]), draw(rng, "normal", (k, n))
    a[0, ::10, 7] = 2.0 ** -40  # 15 fix-up rows in batch 0, 30 in batch 1 (class 1 even scaled)
    a[1, ::5, 7] = 2.0 ** -40
    b[11, ::2] = 2.0 ** -40  # 70 fix-up columns
    a[:, :, 0], b[0, :] = 0, 0  # every line holds a zero: neither operand's wide lines are emulated
    return a, b


def test_short_lists_over_several_k_steps(rng):
    """A short list's FP64 dots go in K steps of ``fixup_kernel._SMALL_K`` (128), the careful pass in the
    tiles' step: at K = 300 (two whole steps and a masked one) three listed rows and two listed columns (one
    output in both) come out exactly, on data whose FP64 sums are exact (integers times powers of two within
    45 binades), so any step, order or mask error shows; and the whole product agrees with the CPU model."""
    m, k, n = 40, 300, 50
    a = (rng.integers(-64, 65, (m, k)) * 2.0 ** rng.integers(-6, 1, (m, k))).astype(np.float32)
    b = (rng.integers(-64, 65, (k, n)) * 2.0 ** rng.integers(-6, 1, (k, n))).astype(np.float32)
    a[:, 0], b[0, :] = 0, 0  # every line holds a zero: neither operand's wide lines are emulated
    a[[3, 17, 38], [250, 5, 299]] = 2.0 ** -30  # three fix-up rows, entries in the masked last step too
    b[[290, 64], [7, 41]] = 2.0 ** -30  # two fix-up columns
    rows = guard.line_meta(a[None], -1, partner=b[None]).cls[0] > 0
    cols = guard.line_meta(b[None], -2, partner=a[None]).cls[0] > 0
    assert np.flatnonzero(rows).tolist() == [3, 17, 38] and np.flatnonzero(cols).tolist() == [7, 41]
    got = _run(a, b)[0]
    exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got[rows], exact[rows])
    np.testing.assert_array_equal(got[:, cols], exact[:, cols])
    _check_against_model(a, b, got)


@pytest.mark.parametrize("programs", [1, 2, 3, 12])
def test_fixup_items_go_to_the_first_programs_and_keep_their_bits(rng, monkeypatch, programs):
    """The fix-up's work items go round-robin to the first of the launched fix-up programs, at least
    ``_ITEMS_PER_PROGRAM`` each (:func:`.fixup_kernel._active_programs`), the others returning at once.  Two
    batches of A against a broadcast B, a short list of rows (groups of 16) and a long list of columns (groups
    of 64), 10-18 items: with 1, 2, 3 or 12 programs launched, every output is written (the poison is gone) and
    bit for bit the default launch's (4 programs under the interpreter), as the CPU model's."""
    a, b = _short_and_long_lists(rng)
    want = _run(a, b)
    shape = launch.fixup_shape
    monkeypatch.setattr(launch, "fixup_shape", lambda k, sms, num_warps: (shape(k, sms, num_warps)[0], programs))
    got = _run(a, b)
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got, want)
    for i in range(2):
        _check_against_model(a[i], b, got[i])


@pytest.mark.parametrize("scheme", ["fp16x3", "auto"])
def test_fixup_apart_keeps_the_bits(rng, monkeypatch, scheme):
    """``fixup_apart`` (the tiles store every output, then the fix-up programs overwrite their lines' outputs in a
    launch of their own, of four-warp programs with an item each: :func:`.fixup_kernel.apart_shape`) computes
    every output bit for bit as the fused launch: two batches of A against a broadcast B, a short list of rows
    (groups of 16) and a long list of columns (groups of 64); under ``scheme="auto"`` both schemes' launches are
    queued and the device's choice runs."""
    a, b = _short_and_long_lists(rng)
    (_, m, k), n = a.shape, b.shape[1]
    monkeypatch.setattr(launch, "AUTO_MIN_FLOPS", 0.0)  # "auto" at this size too
    at, bt = _t(a), _t(b)[None].expand(2, k, n)
    gemms = [x for x in _problem(at, bt, torch.empty(2, m, n), scheme=scheme, config={"fixup_apart": True}).launches
             if x.kernel is launch.gemm_kernel]
    assert len(gemms) == (4 if scheme == "auto" else 2)
    # the fix-up launch alone is compiled to fixup_kernel.APART_MAXNREG registers, the tiles' to ptxas's choice
    assert [(x.kwargs["HAS_TILES"], x.maxnreg) for x in gemms].count((False, launch.APART_MAXNREG)) == len(gemms) // 2
    assert [(x.kwargs["HAS_TILES"], x.maxnreg) for x in gemms].count((True, None)) == len(gemms) // 2
    plan = sgemm_cube.explain(at, bt, backend="cuda", scheme=scheme)
    assert plan.scheme == scheme
    want, got = torch.full((2, m, n), float("nan")), torch.full((2, m, n), float("nan"))  # poison
    cuda.run(plan, at, bt, want)
    cuda.run(plan.with_config(fixup_apart=True), at, bt, got)
    want, got = want.numpy(), got.numpy()
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got, want)
    for i in range(2):
        _check_against_model(a[i], b, got[i])


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fixup_apart_on_every_variant(rng, variant):
    """``fixup_apart`` on each kernel variant (TMA, persistent TMA, pointers): bf16x6 (the H200's table sets it
    for K <= 256), a batch of four with a listed row and a listed column in every matrix, small tiles: every
    output written (the poison gone where the fused launch writes a number) and bit for bit the fused launch's."""
    a, b = draw(rng, "normal", (4, 40, 33)), draw(rng, "uniform01", (4, 33, 37))
    a[:, 3, 5], b[:, 2, 7] = 1e-30, np.inf  # a row below the split's range; a column with an infinity
    config = dict(SMALL, variant=variant)
    fused = _run(a, b, scheme="bf16x6", config=config)
    apart = _run(a, b, scheme="bf16x6", config={**config, "fixup_apart": True})
    assert np.isfinite(fused[:, :, :7]).all() and np.isinf(fused[:, :, 7]).all()
    np.testing.assert_array_equal(apart, fused)


def test_tile_programs_leave_the_fixup_outputs_alone(rng, monkeypatch):
    """The tile programs store every output whose row and column are emulated and none of a fix-up
    line's (the fix-up programs write those; on a GPU the two run at once).  With no fix-up programs
    launched, the fix-up outputs keep the poison and every other output is the full launch's, bit for bit:
    tiles crossed by a fix-up row or column (the classes' mask) and tiles of emulated lines only (the
    bounds' mask, ``gemm_tiles.store_tile``), unscaled and scaled lines (the epilogue's factor)."""
    m, k, n = 97, 21, 83  # a shape of its own: no launch cached by another test
    a, b = draw(rng, "normal", (m, k)), draw(rng, "normal", (k, n))
    a[::9, 3] = 2.0 ** -40  # class 1: fix-up rows, crossing every row block
    b[5, 40:43] = 2.0 ** -40  # fix-up columns in one column block only
    a[1::9] *= np.float32(2.0 ** 100)  # scaled rows (t < 0): the epilogue's factor
    b[:, 70:] *= np.float32(2.0 ** -90)  # scaled columns (t > 0)
    a[:, 0], b[0, :] = 0, 0  # every line holds a zero: neither operand's wide lines are emulated (guard.fp16_rule)
    rows = line_meta(a[None], -1, partner=b[None]).cls[0] >= 1
    cols = line_meta(b[None], -2, partner=a[None]).cls[0] >= 1
    assert rows.sum() == len(range(0, m, 9)) and cols.sum() == 3
    full = _run(a, b)[0]
    assert np.isfinite(full).all()
    shape = launch.fixup_shape
    monkeypatch.setattr(launch, "fixup_shape", lambda k, sms, num_warps: (shape(k, sms, num_warps)[0], 0))
    tiles_only = _run(a, b)[0]
    fixup_outputs = rows[:, None] | cols[None, :]
    assert np.isnan(tiles_only[fixup_outputs]).all()
    np.testing.assert_array_equal(tiles_only[~fixup_outputs], full[~fixup_outputs])


def test_results_beyond_fp32s_range_are_infinities_of_their_sign(rng):
    """Huge lines are scaled (the emulated sums cannot overflow) and unscaled with one rounding: an
    output beyond FP32's range is the infinity of its sign, the others finite and accurate."""
    a = (rng.uniform(1, 2, (20, 16)) * 2.0 ** 63).astype(np.float32)
    b = (rng.uniform(1, 2, (16, 9)) * 2.0 ** 62).astype(np.float32)
    b[:, 0] *= np.float32(2.0 ** -10)  # a column whose outputs stay far below FP32's largest value
    b[:, 1] *= np.float32(-1)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.abs(ref[:, 1:]) > np.finfo(np.float32).max) and np.all(np.abs(ref[:, 0]) < 2.0 ** 122)
    c = _run(a, b)[0]
    assert np.all(c[:, 1] == -np.inf) and np.all(c[:, 2:] == np.inf)
    assert np.all(np.abs(c[:, 0] - ref[:, 0]) <= 16 * 2.0 ** -24 * np.abs(ref[:, 0]))


@pytest.mark.parametrize("scheme", ["fp16x3", "bf16x6", "bf16x9"])
def test_unscaling_rounds_once(rng, scheme):
    """The epilogue's unscaling, both of its paths (one FP32 multiply where the tile's factors are FP32
    numbers and its products cannot overflow, FP64 elsewhere): on products whose scaled sums are exact, the
    output is the exact product rounded once, subnormal and infinite outputs included.  (The cases' scaled
    entries are exact in BF16 slices too.)"""
    for name, a, b in unscale_cases(rng):
        assert same_bits_any_zero(_run(a, b, scheme=scheme)[0], exact_fp32(a, b)), name


@pytest.mark.parametrize("gen", ["full_range_rows", "full_range_cols", "special_vs_extremes"])
def test_lines_spanning_fp32s_range_lose_nothing(gen):
    """Lines over FP32's whole range (2**-149 .. 2**127) and infinities against partners at both ends: the
    fix-up programs' FP64 products of the unscaled lines keep every entry (an FP32 fix-up of scaled
    lines gave 0 for outputs near 24 and NaN for inf * 1e-30)."""
    from tests.guarantee_data import GENERATORS, check_guarantee

    for shape in ((5, 16, 7), (40, 64, 33)):
        a, b = GENERATORS[gen](np.random.default_rng(3), *shape)
        c = _run(a, b)[0]
        msg = check_guarantee(c, a, b)
        assert not msg, (shape, msg)


def test_empty_problems_write_zeros():
    out = torch.full((2, 3, 4), float("nan"))
    assert cuda.matmul(torch.ones(2, 3, 0), torch.ones(2, 0, 4), sb=12, order="termwise", out=out) is None
    assert out.eq(0).all()


# ---------------------------------------------------------------- through the public API


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_public_api_runs_the_kernels(rng, kind):
    a, b = draw(rng, "normal", (2, 21, 35)), draw(rng, "normal", (35, 6))
    a[1, 2, 3] = np.nan
    x, y = (_t(a), _t(b)) if kind == "torch" else (a, b)
    assert sgemm_cube.explain(x, y, backend="cuda").backend == "cuda"
    c = sgemm_cube.matmul(x, y, backend="cuda")
    c = c.numpy() if kind == "torch" else c
    assert np.isnan(c[1, 2]).all() and np.isfinite(np.delete(c[1], 2, axis=0)).all()
    _check_against_model(a[0], b, c[0])


@pytest.mark.parametrize("factor_a, factor_b", [(1e5, 1.0), (1e-8, 1.0), (1.0, 1e-8), (1e30, 1e-30)])
def test_public_api_out_of_range_data_are_scaled_not_refused(rng, factor_a, factor_b):
    """Data beyond the split's range (once a ValueError from the kernel statistics): scaled on the
    device as the CPU backend scales them, no error, FP32 accuracy."""
    a = draw(rng, "normal", (8, 16)) * np.float32(factor_a)
    b = draw(rng, "normal", (16, 4)) * np.float32(factor_b)
    c = sgemm_cube.matmul(_t(a), _t(b), backend="cuda").numpy()
    _check_against_model(a, b, c)


# ---------------------------------------------------------------- configuration and errors


def test_flush_interval_sets_block_k():
    assert launch.flush_steps(128, 64) == (64, 2)
    assert launch.flush_steps(64, 64) == (64, 1)
    assert launch.flush_steps(96, 64) == (32, 3)
    assert launch.flush_steps(16, 64) == (16, 1)
    assert launch.flush_steps(0, 64) == (64, 0)
    for bad in (40, -1, 1.5, True):
        with pytest.raises(ValueError, match="flush_k"):
            launch.flush_steps(bad, 64)


def test_line_meta_constants_are_the_guards():
    """The kernels' packed line meta (:mod:`.line_meta`) has guard.pack_meta's layout and guard.LineClass's classes."""
    from sgemm_cube.backends.cuda import line_meta as lm
    from sgemm_cube.cpu_fallback.guard import LineClass, LineMeta

    t = np.arange(-1024, 1024, dtype=np.int32)
    cls = (np.arange(t.size) % 3).astype(np.int32)
    packed = pack_meta(LineMeta(t, cls))
    assert np.array_equal(packed, cls | ((t + lm.META_T_BIAS.value) << lm.META_CLS_BITS.value))
    assert np.array_equal(packed & lm.META_CLS_MASK.value, cls)
    assert np.array_equal(((packed >> lm.META_CLS_BITS.value) & lm.META_T_MASK.value) - lm.META_T_BIAS.value, t)
    pad = pack_meta(LineMeta(np.zeros(1, np.int32), np.full(1, LineClass.SPLIT, np.int32)))
    assert lm.PAD_META.value == int(pad[0]) == 4096
    assert [lm.SPLIT.value, lm.LOSES_BITS.value, lm.SPECIAL.value] == [int(c) for c in LineClass]


def _problem(a, b, out, **options):
    opts = dict(sb=12, order="termwise", scheme="fp16x3", scale="auto", fixup_min_class=1, flush_k=None, config=None)
    opts.update(options)
    return launch._problem(tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), out.stride(), a.device, **opts)


@pytest.mark.parametrize("scheme, variant", [("fp16x3", "tma"), ("bf16x6", "ptr")])
def test_every_launch_names_every_kernel_parameter(scheme, variant):
    """A product is six launches here (the lines' summaries first: a BF16 scheme, and an FP16 scheme from
    K = 16), each with exactly its kernel's parameters (the cached replay passes them positionally in that
    order)."""
    a, b, out = torch.ones(2, 20, 30), torch.ones(2, 30, 25), torch.empty(2, 20, 25)
    prob = _problem(a, b, out, scheme=scheme, config={"variant": variant})
    kernels = [launch.tile_stats_kernel, launch.line_summary_kernel, launch.line_meta_kernel, launch.split_scaled_kernel,
               launch.gemm_kernel, launch.overflow_recheck_kernel]
    assert [x.kernel for x in prob.launches] == kernels
    for x in prob.launches:
        assert list(launch._positional(x)) == [x.kwargs[name] for name in launch._param_names(x.kernel)]
    gemm = kernels.index(launch.gemm_kernel)
    broken = prob.launches[gemm]._replace(kwargs={**prob.launches[gemm].kwargs, "BLOCK_Q": 1})
    broken.kwargs.pop("Kp")
    with pytest.raises(TypeError, match=r"missing \['Kp'\], unknown \['BLOCK_Q'\]"):
        launch._positional(broken)


@pytest.mark.parametrize("variant, chunks", [("ptr", 1), ("tma", 1), ("tma", 2)])
def test_cached_replay_passes_the_call_memory_in_parameter_order(monkeypatch, variant, chunks):
    """What the private launcher receives on a cached call (GPU only, so checked here with a stand-in launcher):
    every kernel argument in parameter order, this call's addresses and alpha in place of the memory refs
    (a chunk's operands and output from its first line on)."""
    a, b, out = torch.ones(1, 70, 30), torch.ones(1, 30, 65), torch.empty(1, 70, 65)
    prob = _problem(a, b, out, config={"variant": variant, "row_chunks": chunks, "col_chunks": chunks})
    assert any(isinstance(x, launch._Ref) and x.role == "out" and x.offset
               for launch_ in prob.launches for x in launch_.kwargs.values()) == (chunks > 1)
    seen = []
    launchers = [lambda stream, args, kernel=x.kernel: seen.append((kernel, stream, list(args))) for x in prob.launches]
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 7, raising=False)
    ws = launch._Cached(prob, launchers)(a, b, out, 0.5)
    assert [k for k, _, _ in seen] == [x.kernel for x in prob.launches]
    for (kernel, stream, args), x in zip(seen, prob.launches):
        assert stream == 7
        for name, value in zip(launch._param_names(kernel), args, strict=True):
            given = x.kwargs[name]
            if not isinstance(given, launch._Ref):
                assert value == given, name
            elif given.role == "desc":
                assert value.base.data_ptr() == ws.data_ptr() + given.offset and value.block_shape == list(given.block)
            else:
                expected = {"a": a.data_ptr() + 4 * given.offset, "b": b.data_ptr() + 4 * given.offset,
                            "out": out.data_ptr() + 4 * given.offset, "alpha": 0.5,
                            "ws": ws.data_ptr() + given.offset}[given.role]
                assert value == expected, name


def test_private_launcher_checks_the_triton_version(monkeypatch):
    """Triton's private launcher is driven only on the Triton releases it was checked against, as Triton's own
    dispatch drives it; elsewhere, or where a compiled kernel lacks its parts, a warning says every call takes
    the public path."""
    calls = []

    class Compiled:
        function, packed_metadata = "function", "metadata"

        def run(self, *args):
            calls.append(args)

    first, last = launch.PRIVATE_LAUNCH_TRITON
    assert first == (3, 3) and first <= last
    monkeypatch.setattr(launch, "_triton_version", lambda: last)
    launch._private_launcher(Compiled(), (6, 2))("stream", [1, 2.5])
    launch._private_launcher(Compiled(), (9,))("stream", [])
    assert calls == [(6, 2, 1, "stream", "function", "metadata", None, None, None, 1, 2.5),
                     (9, 1, 1, "stream", "function", "metadata", None, None, None)]
    assert launch._private_launcher(None, (1,)) is None
    for version in ((last[0], last[1] + 1), (last[0] + 1, 0), (3, 2)):
        monkeypatch.setattr(launch, "_triton_version", lambda: version)
        launch._private_launch_supported.cache_clear()
        with pytest.warns(RuntimeWarning, match="public launch path"):
            assert launch._private_launcher(Compiled(), (6,)) is None
    monkeypatch.setattr(launch, "_triton_version", lambda: first)
    with pytest.warns(RuntimeWarning, match="no 'run'"):
        assert launch._private_launcher(object(), (6,)) is None
    launch._private_launch_supported.cache_clear()


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(order="rowwise"), ValueError, "order"),
    (dict(sb=25), ValueError, "sb"),
    (dict(sb=True), TypeError, "sb"),  # checked once, by make_request (as sgemm_cube.matmul's sb)
    (dict(flush_k=40), ValueError, "flush_k"),
    (dict(config={"BLOCK_Q": 4}), ValueError, "unknown config keys"),
    (dict(config={"variant": "wgmma"}), ValueError, "unknown kernel variant"),
])
def test_option_errors(kwargs, exc, match):
    a, b = torch.ones(1, 4, 8), torch.ones(1, 8, 3)
    opts = dict(sb=12, order="termwise", keep_lo_lo=False, out=torch.empty(1, 4, 3))
    opts.update(kwargs)
    with pytest.raises(exc, match=match):
        cuda.matmul(a, b, **opts)


def test_matmul_forces_a_variant_through_the_plan(monkeypatch):
    """cuda.matmul's options become a plan (gemlite's ``kernel=`` override: ``config={"variant": ...}``), and
    cuda.run reads only that plan."""
    seen = []
    monkeypatch.setattr(cuda, "run", lambda plan, a, b, out, alpha=1.0: seen.append(plan))
    a, b, out = torch.ones(1, 4, 8), torch.ones(1, 8, 3), torch.empty(1, 4, 3)
    cuda.matmul(a, b, out=out, sb=6, order="elementwise", fixup=False, flush_k=64, config={"variant": "ptr"})
    plan, = seen
    assert (plan.backend, plan.scheme, plan.sb, plan.order, plan.fixup) == ("cuda", "fp16x3", 6, "elementwise", False)
    resolved = dict(launch.plan_config(1, 4, 3, 8, "cpu", order="elementwise", scheme="fp16x3"))
    assert dict(plan.config) == {**resolved, "variant": "ptr", "flush_k": 64}
    # explain shows the launch configuration that runs (the stored tables' choice for the shape)
    shown = sgemm_cube.explain(a[0], b[0], backend="cuda").config
    assert shown == launch._frozen(launch.resolve_config(1, 4, 3, 8, "cpu"))


@pytest.mark.parametrize("a, b, out, exc, match", [
    (torch.ones(4, 8), torch.ones(8, 3), torch.empty(4, 3), ValueError, "3-D"),
    (torch.ones(1, 4, 8), torch.ones(1, 7, 3), torch.empty(1, 4, 3), ValueError, "do not match"),
    (torch.ones(1, 4, 8).double(), torch.ones(1, 8, 3), torch.empty(1, 4, 3), TypeError, "float32"),
    (torch.ones(1, 4, 8), torch.ones(1, 8, 3), torch.empty(1, 3, 4).transpose(1, 2), ValueError, "last stride"),
])
def test_operand_errors(a, b, out, exc, match):
    with pytest.raises(exc, match=match):
        cuda.matmul(a, b, sb=12, order="termwise", keep_lo_lo=False, out=out)


def test_cpu_tensors_need_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="CUDA tensors"):
        cuda.matmul(torch.ones(1, 2, 2), torch.ones(1, 2, 2), sb=12, order="termwise", keep_lo_lo=False,
                    out=torch.empty(1, 2, 2))
    assert not cuda.is_available() and "CUDA GPU" in cuda.unavailable_reason()
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert cuda.is_available() and cuda.unavailable_reason() == ""


def test_config_resolution_order(monkeypatch):
    launch._stored_config.cache_clear()
    monkeypatch.setattr(launch, "interpreter_active", lambda: False)
    monkeypatch.setattr(launch, "device_key", lambda device: "h100")
    monkeypatch.setattr(launch, "_tuned", lambda *a: {"BLOCK_K": 32, "flush_k": 256})
    monkeypatch.setattr(launch, "_has_tma", lambda device: True)
    monkeypatch.setattr(launch, "load_device_table", lambda key: {
        "gemm_termwise": [{"max_flops": 1e6, "config": {"BLOCK_M": 64}}, {"max_k": 500, "config": {"BLOCK_N": 32}},
                          {"config": {}}],
        "gemm_lo_lo": [{"max_flops": None, "config": {"BLOCK_N": 64}}]})
    small_k, big_k = launch.SMALL_K_FLUSH[0], launch.SMALL_K_FLUSH[0] + 1
    small = launch.resolve_config(1, 10, 10, 10, "cpu")
    assert small["BLOCK_M"] == 64 and small["BLOCK_N"] == 128  # the table's first entry: max_flops
    # K up to SMALL_K_FLUSH flushes every 32 (tables and tuner alike); the tuner's values beyond it
    assert {k: small[k] for k in launch.SMALL_K_FLUSH[1]} == launch.SMALL_K_FLUSH[1]
    assert launch.resolve_config(1, 100, 100, small_k, "cpu")["flush_k"] == launch.SMALL_K_FLUSH[1]["flush_k"]
    big = launch.resolve_config(1, 1000, 1000, big_k, "cpu", config={"num_stages": 4})
    assert big["BLOCK_M"] == 128 and big["BLOCK_N"] == 128 and big["num_stages"] == 4
    assert big["BLOCK_K"] == 32 and big["flush_k"] == 256  # the tuner's table
    assert launch.resolve_config(1, 1000, 1000, 400, "cpu")["BLOCK_N"] == 32  # max_k
    lolo = launch.resolve_config(1, 1000, 1000, big_k, "cpu", keep_lo_lo=True)
    assert lolo["BLOCK_N"] == 64 and lolo["BLOCK_M"] == 64 and lolo["BLOCK_K"] == 64  # the tuner's table: termwise only
    assert launch.resolve_config(1, 1000, 1000, 1000, "cpu", order="elementwise")["split_corr"] is False
    explicit = launch.resolve_config(1, 10, 10, 10, "cpu", config={"flush_k": 128, "BLOCK_K": 64})
    assert (explicit["flush_k"], explicit["BLOCK_K"]) == (128, 64)  # config= beats everything
    monkeypatch.setattr(launch, "_has_tma", lambda device: False)
    launch._stored_config.cache_clear()
    assert launch.resolve_config(1, 1000, 1000, 1000, "cpu")["variant"] == "ptr"
    launch._stored_config.cache_clear()


def test_hybrid_rule_reads_the_table(monkeypatch):
    monkeypatch.setattr(hybrid, "device_key", lambda device: "test")
    monkeypatch.setattr(hybrid, "load_device_table", lambda key: {"hybrid": {
        "min_flops": 2.0 * 512 ** 3, "min_flops_per_matrix": 2.0 * 256 ** 3, "min_mn": 128, "min_k": 64,
        "min_tiles": 64}})
    assert set(hybrid.native_rule("test")) == set(hybrid._DEFAULT_RULE)
    assert hybrid.prefers_native(1, 256, 256, 256, "cuda")        # too few flops
    assert not hybrid.prefers_native(1, 1024, 1024, 1024, "cuda")
    assert hybrid.prefers_native(1, 65536, 64, 4096, "cuda")      # skinny: N below min_mn
    assert hybrid.prefers_native(1, 8192, 8192, 32, "cuda")       # short K
    assert not hybrid.prefers_native(64, 256, 256, 256, "cuda")   # a batch adds up ...
    assert hybrid.prefers_native(1024, 128, 128, 128, "cuda")     # ... but not from tiny matrices
    assert hybrid.prefers_native(1, 2048, 256, 8192, "cuda")      # 32 output tiles, below min_tiles


def test_plan_runs_native_below_k_16_and_where_the_hybrid_rule_says(monkeypatch):
    a, b = torch.ones(4, 15), torch.ones(15, 3)
    plan = sgemm_cube.explain(a, b, backend="auto")
    assert (plan.scheme, plan.backend) == ("native", "native")
    assert sgemm_cube.explain(a, b, backend="cuda").backend == "cuda"  # an explicit backend always emulates
    monkeypatch.setattr(cuda, "prefers_native", lambda *args: True)
    like = torch.ones(1, 64, 64)
    req = sgemm_cube.plan.make_request()
    assert cuda.plan(req, 1, 64, 64, 64, like).backend == "native"
    assert cuda.plan(sgemm_cube.plan.make_request(backend="cuda"), 1, 64, 64, 64, like).backend == "cuda"


def test_shipped_tables_are_valid():
    for path in sorted(hybrid._CONFIG_DIR.glob("*.json")):
        table = hybrid.load_device_table(path.stem)
        rule = hybrid.native_rule(path.stem)
        assert set(rule) == set(hybrid._DEFAULT_RULE)
        assert all(isinstance(v, (int, float)) and v >= 0 for v in rule.values()), path
        for mode in ("termwise", "elementwise", "lo_lo", "bf16x9", "bf16x6"):
            for entry in table.get(f"gemm_{mode}", []):
                assert set(entry["config"]) <= set(launch._CONFIG_KEYS), path
                assert entry["config"].get("variant", "tma") in VARIANTS


# ---------------------------------------------------------------- BF16 schemes (bf16x9, bf16x6)

BF16_SCHEMES = ("bf16x9", "bf16x6")
#: The BF16 lines' range (cpu_fallback.guard): lines with an entry at or above UPPER are recomputed.
BF16_LINES = line_range("bf16x9", 12)


def _below_upper(rng, shape):
    """FP32 values from the subnormals up to the BF16 lines' upper limit (the range the BF16 split is
    used on unscaled), with the split's edge cases in the first row: subnormals, signed zeros, ties."""
    top = int(np.log2(BF16_LINES.upper))
    x = (rng.uniform(1.0, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
         * 2.0 ** rng.integers(-149, top, shape).astype(np.float64)).astype(np.float32)
    edge = np.array([2.0 ** -149, -2.0 ** -140, 2.0 ** -126 * 1.00390625, 0.0, -0.0,
                     1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 - 2.0 ** -24,  # ties to even both ways
                     np.nextafter(np.float32(BF16_LINES.upper), np.float32(0))], dtype=np.float32)
    x.flat[:edge.size] = edge
    return x


def _full_range(rng, shape):
    """FP32 values over the whole exponent range, FP32's largest magnitudes in the first row."""
    x = (rng.uniform(1.0, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
         * 2.0 ** rng.integers(-149, 127, shape).astype(np.float64)).astype(np.float32)
    x.flat[:3] = [np.finfo(np.float32).max, -np.finfo(np.float32).max, 3.3961775e38]
    return x


def _wide_rows(rng, shape, binades=80):
    """Every row spans about ``binades`` binades: beyond the FP16 split, inside BF16's range."""
    half = binades // 2
    return (rng.uniform(-1.0, 1.0, shape) * 2.0 ** rng.integers(-half, half, shape)).astype(np.float32)


@pytest.mark.parametrize("layout, dist", [("contiguous", "below_upper"), ("transposed", "below_upper"),
                                          ("strided", "below_upper"), ("transposed", "normal"),
                                          ("strided", "wide_exponent")])
def test_bf16_split_is_the_cpu_model_bit_for_bit(rng, layout, dist):
    """scale=None, fixup=False: no line is scaled and every line is used (none reaches the BF16 lines'
    upper limit), so the slices are cpu_fallback.split_slices', subnormals and ties included."""
    rows, cols = 37, 53
    gen = (lambda s: _below_upper(rng, s)) if dist == "below_upper" else (lambda s: draw(rng, dist, s))
    x = _layout(gen, rows, cols, layout)
    ops = launch.split_operands(x[None], x.T[None], scheme="bf16x9", scale=None, fixup_min_class=2, config=SMALL)
    assert ops.a_hilo.dtype == torch.bfloat16 and ops.a_hilo.shape == (3, 1, 48, 64)
    model = cpu_fallback.split_slices(x.numpy(), cpu_fallback.get_scheme("bf16x9"), 12)
    for got_a, got_b, want in zip(ops.a_hilo[:, 0, :rows, :cols], ops.b_hilo[:, 0, :cols, :rows], model):
        assert np.array_equal(got_a.float().numpy().view(np.uint32), want.view(np.uint32))
        assert np.array_equal(got_b.float().numpy().view(np.uint32), want.T.view(np.uint32))
    _check_split(ops, x[None], x.T[None], scheme="bf16x9", scale=None, fixup_min_class=2)


@pytest.mark.parametrize("scale", [None, "auto"])
def test_bf16_lines_beyond_the_upper_limit(rng, scale):
    """Lines over FP32's whole range (up to its largest values): class 2 unscaled, scaled by "auto";
    the line meta and the used slices are the guard's, and no slice is infinite."""
    x = _t(_full_range(rng, (37, 53)))
    ops = launch.split_operands(x[None], x.T[None], scheme="bf16x9", scale=scale, config=SMALL)
    _check_split(ops, x[None], x.T[None], scheme="bf16x9", scale=scale)
    assert torch.isfinite(ops.a_hilo.float()).all() and torch.isfinite(ops.b_hilo.float()).all()
    if scale is None:
        assert (unpack_meta(ops.a_lines.meta.numpy()).cls == 2).all()


def test_bf16_split_special_values_give_zero_slices(rng):
    x = _t(draw(rng, "normal", (2, 19, 21)))
    x[0, 3, 4], x[1, 0, 0], x[1, 7, 20] = float("nan"), float("inf"), float("-inf")
    a = _t(draw(rng, "normal", (2, 5, 19)))
    ops = launch.split_operands(a, x, scheme="bf16x6", config=SMALL)  # (batch, K, N): the lines are B's columns
    assert torch.isfinite(ops.b_hilo.float()).all()
    for i, r, c in ((0, 3, 4), (1, 0, 0), (1, 7, 20)):
        assert ops.b_hilo[:, i, r, c].eq(0).all()
    cls = unpack_meta(ops.b_lines.meta.numpy()).cls
    assert cls[0, 4] == cls[1, 0] == cls[1, 20] == 2 and cls.sum() == 6  # NaN/Inf lines: class 2, only them
    _check_split(ops, a, x, scheme="bf16x6")


# (scheme, order, variant): each scheme with each order, the variants rotating.
BF16_GEMM_CASES = [("bf16x9", "termwise", "ptr"), ("bf16x9", "elementwise", "tma"),
                   ("bf16x6", "termwise", "tma_persistent"), ("bf16x6", "elementwise", "ptr")]


@pytest.mark.parametrize("scheme, order, variant", BF16_GEMM_CASES)
def test_bf16_gemm_matches_the_model(rng, scheme, order, variant):
    a, b = draw(rng, "normal", (33, 97)), draw(rng, "uniform01", (97, 47))
    c = _run(a, b, order=order, scheme=scheme, config={"variant": variant}, **PAPER)
    _check_against_model(a, b, c[0], order=order, scheme=scheme, **PAPER)


@pytest.mark.parametrize("scheme, dist, shape", [("bf16x9", "wide_rows", (21, 15, 70)), ("bf16x6", "wide_rows", (21, 15, 70)),
                                                 ("bf16x6", "lognormal", (1, 2, 3)),
                                                 ("bf16x9", "uniform_pm1", (40, 33, 16)),
                                                 ("bf16x6", "wide_exponent", (5, 7, 200))])
def test_bf16_gemm_shapes_and_ranges(rng, scheme, dist, shape):
    m, n, k = shape
    gen = (lambda s: _wide_rows(rng, s)) if dist == "wide_rows" else (lambda s: draw(rng, dist, s))
    a, b = gen((m, k)), gen((k, n))
    c = _run(a, b, scheme=scheme, **PAPER)
    _check_against_model(a, b, c[0], scheme=scheme, **PAPER)


@pytest.mark.parametrize("scheme, order, merge_levels, split_corr, flush_k", [
    ("bf16x9", "termwise", True, False, 64), ("bf16x6", "elementwise", True, False, 64),
    ("bf16x9", "elementwise", True, True, 32), ("bf16x9", "termwise", False, True, 16),
    ("bf16x6", "termwise", False, False, 0), ("bf16x9", "elementwise", False, False, 48)])
def test_bf16_gemm_options(rng, scheme, order, merge_levels, split_corr, flush_k):
    a, b = draw(rng, "normal", (17, 100)), draw(rng, "uniform01", (100, 30))
    c = _run(a, b, scheme=scheme, order=order, flush_k=flush_k,
             config={"split_corr": split_corr, "merge_levels": merge_levels}, **PAPER)
    _check_against_model(a, b, c[0], scheme=scheme, order=order, **PAPER)


def test_bf16_batched_broadcast_and_transposed(rng):
    a = _t(draw(rng, "normal", (3, 41, 33))).transpose(1, 2)
    b = _t(draw(rng, "wide_exponent", (1, 41, 2 * 29)))[:, :, ::2].expand(3, 41, 29)
    c = _run(a, b, scheme="bf16x6")
    for i in range(3):
        _check_against_model(a[i].numpy(), b[i].numpy(), c[i], scheme="bf16x6")


@pytest.mark.parametrize("scheme", BF16_SCHEMES)
def test_bf16_through_the_public_api(rng, scheme):
    a, b = _wide_rows(rng, (2, 13, 40)), draw(rng, "normal", (40, 11))
    a[1, 4, 5] = np.inf
    c = sgemm_cube.matmul(_t(a), _t(b), backend="cuda", scheme=scheme)
    assert isinstance(c, torch.Tensor) and c.shape == (2, 13, 11)
    native = fp32_matmul(a, b)
    assert np.array_equal(_special_pattern(c.numpy()), _special_pattern(native))
    _check_against_model(a[0], b, c.numpy()[0], scheme=scheme)


def test_auto_scheme_is_fp16x3_and_wide_rows_are_computed_in_fp32(rng):
    """scheme="auto" once ran bf16x9 on rows spanning 80 binades; it is fp16x3 now, and such rows
    (class 1: no power of two brings them into the split's range) are plain FP32 beside columns holding
    a zero, and emulated beside random normal columns (``guard.fp16_rule``): the model's either way."""
    a, b = _wide_rows(rng, (24, 36)), draw(rng, "normal", (36, 10))
    sparse = b.copy()
    sparse[0] = 0
    assert (line_meta(a[None], -1, partner=sparse[None]).cls == 1).all()
    assert (line_meta(a[None], -1, partner=b[None]).cls == 0).all()
    for partner in (sparse, b):
        plan = sgemm_cube.explain(_t(a), _t(partner), backend="cuda", scheme="auto")
        assert (plan.scheme, plan.backend, plan.scale) == ("fp16x3", "cuda", "auto"), plan
        c = sgemm_cube.matmul(_t(a), _t(partner), backend="cuda", scheme="auto").numpy()
        _check_against_model(a, partner, c)


def _lognormal_rows(rng, shape, sigma=6.0, axis=-1):
    """exp(sigma * N(0, 1)) entries whose lines along ``axis`` (rows by default) each span 40 binades or more
    (the first entry set to 2**-40 times the largest of the others), whatever the seed: more than fp16x3's
    split holds (29) and than a tight partner line spans (22), fewer than BF16's 99."""
    x = np.exp(sigma * rng.standard_normal(shape)).astype(np.float32)
    lines = np.moveaxis(x, axis, -1)  # a view: writes go to x
    lines[..., 0] = lines[..., 1:].max(axis=-1) * np.float32(2.0 ** -40)
    return x


@pytest.mark.parametrize("kind", ["normal", "wide_a", "wide_a_tight_b", "wide_both", "specials", "broadcast"])
def test_auto_scheme_runs_the_scheme_the_rule_chooses(rng, monkeypatch, kind):
    """scheme="auto" from launch.AUTO_MIN_FLOPS on: the GPU chooses between fp16x3 and bf16x6 from the lines
    each would list (split_kernel.scheme_choice_kernel), with no host synchronisation; the result is that
    scheme's, bit for bit, and guard.choose_scheme predicts which.  Wide rows of A beside columns of B that
    hold a zero are listed by fp16x3 (bf16x6 chosen); beside random normal columns fp16x3 emulates them
    (``guard.fp16_rule``) and is chosen."""
    from sgemm_cube.cpu_fallback.guard import choose_scheme

    monkeypatch.setattr(launch, "AUTO_MIN_FLOPS", 0.0)
    batch, m, k, n = (2, 33, 40, 20) if kind == "broadcast" else (1, 37, 45, 26)
    a, b = draw(rng, "normal", (batch, m, k)), draw(rng, "normal", (batch, k, n))
    if kind in ("wide_a", "wide_a_tight_b", "wide_both", "broadcast"):
        a = _lognormal_rows(rng, a.shape)
    if kind in ("wide_a", "broadcast"):
        b[..., 0, :] = 0  # every column holds a zero: not tight beside A's wide rows
    if kind == "wide_both":
        b = _lognormal_rows(rng, b.shape, axis=-2)  # B's lines are its columns
    if kind == "specials":  # NaN/Inf lines are listed by both schemes: no reason to leave fp16x3
        a[:, ::2, 3] = np.inf
    ta, tb = _t(a), _t(b)
    if kind == "broadcast":  # B broadcast over the batch: split once, its lines counted once
        b = b[:1]
        tb = _t(b).expand(batch, k, n)
    plan = sgemm_cube.explain(ta, tb, backend="cuda")
    assert plan.scheme == "auto" and "the GPU chooses per call" in plan.reason, plan
    want = choose_scheme(a, b, margin=launch.AUTO_MARGIN)
    assert want == ("bf16x6" if kind in ("wide_a", "wide_both", "broadcast") else "fp16x3")
    c = sgemm_cube.matmul(ta, tb, backend="cuda").numpy()
    chosen = sgemm_cube.matmul(ta, tb, backend="cuda", scheme=want).numpy()
    other = sgemm_cube.matmul(ta, tb, backend="cuda", scheme={"fp16x3": "bf16x6", "bf16x6": "fp16x3"}[want]).numpy()
    assert np.array_equal(c.view(np.uint32), chosen.view(np.uint32))
    if kind != "specials":  # (NaN/Inf rows: both schemes give native FP32's special values)
        assert not np.array_equal(c.view(np.uint32), other.view(np.uint32))  # the test can tell them apart
        _check_against_model(a, np.broadcast_to(b, (batch, k, n)), c, scheme=want)


@pytest.mark.parametrize("k", [8, 45])
def test_auto_scheme_classifies_both_schemes_lines_in_two_launches(rng, monkeypatch, k):
    """scheme="auto" queues eight launches: both schemes' summaries in one (bf16x6's alone below K = 16, where
    fp16x3 has none) and both schemes' line meta in one, each over twice one scheme's programs; the result is
    the chosen scheme's, bit for bit, with wide rows of A (bf16x6 chosen) and without (fp16x3)."""
    from sgemm_cube.cpu_fallback.guard import choose_scheme

    monkeypatch.setattr(launch, "AUTO_MIN_FLOPS", 0.0)
    m, n = 37, 26
    prob = launch._problem((1, m, k), (m * k, k, 1), (1, k, n), (k * n, n, 1), (m * n, n, 1), torch.device("cpu"),
                           sb=12, order="termwise", scheme="auto", scale="auto", fixup_min_class=1, flush_k=None,
                           config=None)
    names = [x.kernel.fn.__name__ for x in prob.launches]
    assert names == ["tile_stats_kernel", "line_summary_kernel", "line_meta_kernel", "scheme_choice_kernel",
                     "split_scaled_kernel", "gemm_kernel", "gemm_kernel", "overflow_recheck_kernel"], names
    summary, meta = prob.launches[1], prob.launches[2]
    one = meta.kwargs["programs_job"]
    assert meta.grid == (2 * one,) and meta.kwargs["BOTH"] and summary.kwargs["BOTH"]
    assert summary.grid == ((1 if k < 16 else 2) * one,) and summary.kwargs["programs_job"] == (0 if k < 16 else one)
    for wide in (False, True):
        a, b = draw(rng, "normal", (1, m, k)), draw(rng, "normal", (1, k, n))
        if wide:
            a = _lognormal_rows(rng, a.shape)
            b[..., 0, :] = 0  # every column holds a zero: fp16x3 lists A's wide rows
        want = choose_scheme(a, b, margin=launch.AUTO_MARGIN)
        assert want == ("bf16x6" if wide else "fp16x3")
        c = sgemm_cube.matmul(_t(a), _t(b), backend="cuda").numpy()
        chosen = sgemm_cube.matmul(_t(a), _t(b), backend="cuda", scheme=want).numpy()
        assert np.array_equal(c.view(np.uint32), chosen.view(np.uint32)), (k, wide)


def test_auto_scheme_below_its_size_is_fp16x3_and_elsewhere_a_fixed_scheme(rng):
    """Below AUTO_MIN_FLOPS and AUTO_MIN_K (the extra launches would cost more than they save), with order="elementwise"
    and with scale="matrix", scheme="auto" plans fp16x3 on CUDA, as on every other backend."""
    a, b = _t(draw(rng, "normal", (8, 32))), _t(draw(rng, "normal", (32, 8)))
    assert 2 * 8 * 8 * 32 < launch.AUTO_MIN_FLOPS and 32 < launch.AUTO_MIN_K
    for opts in (dict(), dict(order="elementwise"), dict(scale="matrix")):
        assert sgemm_cube.explain(a, b, backend="cuda", **opts).scheme == "fp16x3", opts


def test_auto_scheme_threshold_is_the_documented_one():
    """The GPU chooses from 2*batch*m*n*k >= 2**34 (2048^3) or from K = 1024, as the ``matmul`` docstring and
    README say (``configs/default.json``, ``auto_scheme.min_flops`` and ``min_k``): plans only, nothing
    launched."""
    assert (launch.AUTO_MIN_FLOPS, launch.AUTO_MIN_K) == (2.0 ** 34, 1024)
    assert "2**34 (2048^3) or from K = 1024" in " ".join(sgemm_cube.matmul.__doc__.split())
    for shape_a, shape_b, scheme in (((2048, 1000), (1000, 4196), "auto"), ((2047, 1000), (1000, 4196), "fp16x3"),
                                     ((2, 1024, 1023), (1023, 4200), "auto"), ((8192, 128), (128, 4096), "fp16x3"),
                                     ((1536, 1536), (1536, 1536), "auto"), ((64, 1024), (1024, 8), "auto"),
                                     ((64, 1023), (1023, 8), "fp16x3")):
        plan = sgemm_cube.explain(torch.empty(shape_a), torch.empty(shape_b), backend="cuda")
        assert plan.scheme == scheme, (shape_a, shape_b, plan)


def test_choose_scheme_margin_is_a_fraction_of_the_outputs(rng):
    """The host rule: a quarter of A's rows listed under fp16x3 and none under bf16x6 is 0.25 of the
    outputs; margins just below and at it decide it."""
    from sgemm_cube.cpu_fallback.guard import choose_scheme

    a, b = draw(rng, "normal", (1, 16, 32)), draw(rng, "normal", (1, 32, 8))
    a[0, :4] = _lognormal_rows(rng, (4, 32))
    b[0, 0, :] = 0  # every column holds a zero: fp16x3 lists A's wide rows (guard.fp16_rule)
    assert choose_scheme(a, b, margin=0.2499) == "bf16x6"
    assert choose_scheme(a, b, margin=0.25) == "fp16x3"
    assert choose_scheme(a, b, margin=0.2499, fixup=False) == "fp16x3"  # fixup=False lists the specials only


@pytest.mark.parametrize("kwargs, match", [
    (dict(scheme="fp32x2"), "unknown scheme"),
    (dict(scheme="bf16x9", keep_lo_lo=True), "keep_lo_lo"),
])
def test_scheme_errors(kwargs, match):
    opts = dict(sb=12, order="termwise", keep_lo_lo=False, out=torch.empty(1, 4, 3))
    opts.update(kwargs)
    with pytest.raises(ValueError, match=match):
        cuda.matmul(torch.ones(1, 4, 8), torch.ones(1, 8, 3), **opts)


def test_bf16_configs_have_their_own_table_entries(monkeypatch):
    launch._stored_config.cache_clear()
    monkeypatch.setattr(launch, "interpreter_active", lambda: False)
    monkeypatch.setattr(launch, "device_key", lambda device: "h100")
    monkeypatch.setattr(launch, "_tuned", lambda *a: {"BLOCK_K": 32})
    monkeypatch.setattr(launch, "_has_tma", lambda device: True)
    monkeypatch.setattr(launch, "load_device_table", lambda key: {"gemm_bf16x6": [{"config": {"BLOCK_N": 32}}]})
    k = launch.SMALL_K_FLUSH[0] + 1  # beyond the small-K flush override
    for order in ("termwise", "elementwise"):
        nine = launch.resolve_config(1, 1000, 1000, k, "cpu", order=order, scheme="bf16x9")
        assert (nine["BLOCK_M"], nine["BLOCK_N"], nine["BLOCK_K"], nine["num_stages"]) == (128, 64, 64, 2)
        six = launch.resolve_config(1, 1000, 1000, k, "cpu", order=order, scheme="bf16x6")
        assert six["BLOCK_N"] == 32 and six["BLOCK_K"] == 64 and not six["merge_levels"]  # its own table
        # entry; the tuner's table (BLOCK_K 32 here) is fp16x3's
    assert launch.resolve_config(1, 1000, 1000, 1000, "cpu", scheme="bf16x6",
                                 config={"BLOCK_N": 128, "merge_levels": True})["merge_levels"]
    launch._stored_config.cache_clear()


def test_bf16x9_keeps_the_smallest_levels():
    # x = 1 + 2**-9 + 2**-18 splits into exactly (1, 2**-9, 2**-18), so x*x - 1 =
    # 2**-8 + 3*2**-18 + 2**-26 + 2**-36 comes level by level (levels 0..4); the
    # level-3 term 2**-26 is 2**-18 of the result: bf16x9 keeps it, bf16x6 drops
    # it by definition, and native FP32 loses it when it rounds x*x.
    x = np.float32(1 + 2.0 ** -9 + 2.0 ** -18)
    a = np.array([[x, -1.0]] * 3, np.float32)
    b = np.array([[x] * 2, [1.0] * 2], np.float32)
    exact = np.float32(np.float64(x) ** 2 - 1)
    nine = _run(a, b, scheme="bf16x9")
    six = _run(a, b, scheme="bf16x6")
    assert np.all(nine == exact) and np.all(nine == cpu_fallback.emulated_matmul(a, b, scheme="bf16x9"))
    assert np.all(six == cpu_fallback.emulated_matmul(a, b, scheme="bf16x6"))
    assert np.all(np.abs(six.astype(np.float64) - exact) >= 2.0 ** -27)
    assert np.all(fp32_matmul(a, b) != exact)  # FP32 rounds x * x first (an FMA would not)
