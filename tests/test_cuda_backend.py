"""The CUDA backend's Triton kernels under TRITON_INTERPRET=1 (CPU, NumPy), at small odd shapes.

What is claimed and checked here:

* the split kernel is :func:`cpu_fallback.split` bit for bit on finite data,
  for every source layout, with zero padding, NaN/Inf split to 0 and the
  range statistics exact;
* the GEMM (every kernel variant, both orders, lo*lo, flush intervals,
  batches with broadcasting, transposed and strided operands) agrees with
  the CPU model elementwise within ``(2K + 8) * 2**-24 * (|A| |B|)_ij`` (two
  FP32 accumulations of the same exact FP16 products in different orders),
  and its error against float64 is at most twice native FP32's on the same
  data plus 2**-21 (the split keeps 22 bits of each operand: that floor
  shows where K is tiny and FP32 itself is almost exact);
* the BF16 schemes (bf16x9, bf16x6): the split kernel is
  :func:`cpu_fallback.split_slices` bit for bit over FP32's whole range
  (subnormals, the overflow edge, signed zeros); the GEMM agrees with the CPU
  model within ``(2K + 16) * 2**-24 * (|A| |B|)_ij`` (the level-0 product's
  two accumulations, each within ``K * 2**-24 * (1 + 2**-7) |A||B|`` since a
  BF16 slice exceeds its value by at most 2**-8, plus the smaller levels and
  the combination's roundings) and is as accurate as above, also on rows
  spanning 80 binades; ``scheme="auto"`` on such data runs bf16x9 here
  instead of falling back to native FP32;
* dispatch and error paths.

On a machine with a GPU the module is skipped unless the interpreter was
asked for: run ``tests/gpu/`` there instead.
"""
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET", "0") != "1":
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the kernels run natively in tests/gpu/", allow_module_level=True)
    if "triton" in sys.modules:
        pytest.fail("triton was imported before this module could set TRITON_INTERPRET=1; "
                    "set it in the environment", pytrace=False)
    # Must precede the first import of triton: it picks the interpreter when
    # its own and our @triton.jit functions are defined.
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

import cpu_fallback  # noqa: E402
import sgemm_cube  # noqa: E402
from sgemm_cube.backends import cuda  # noqa: E402
from sgemm_cube.backends.cuda import hybrid, launch  # noqa: E402
from sgemm_cube.backends.cuda.gemm_kernel import VARIANTS  # noqa: E402
from sgemm_cube.backends.cuda.split_kernel import split_operand  # noqa: E402

from .conftest import draw  # noqa: E402

DISTS = ("normal", "uniform01", "wide_exponent")


def _t(x):
    return torch.from_numpy(np.ascontiguousarray(x))


def _rel(c, ref):
    return np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref)


def _check_against_model(a, b, c, *, order="termwise", keep_lo_lo=False, sb=12, scheme="fp16x3"):
    """Elementwise agreement with the CPU model, and FP32-level accuracy against float64."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    model = cpu_fallback.emulated_matmul(a, b, sb=sb, order=order, keep_lo_lo=keep_lo_lo, scheme=scheme)
    slack = 16 if scheme.startswith("bf16") else 8
    bound = (2 * a.shape[1] + slack) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64))
    assert np.all(np.abs(c.astype(np.float64) - model) <= bound)
    ref = a64 @ b64
    err, err32 = _rel(c, ref), _rel(a @ b, ref)
    assert err <= 2 * err32 + 2.0 ** -21, (err, err32)


def _run(a, b, *, out=None, **kw):
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
    opts = dict(sb=12, order="termwise", keep_lo_lo=False)
    opts.update(kw)
    stats = cuda.matmul(a_t, b_t, out=out, **opts)
    return out.numpy(), stats


# ---------------------------------------------------------------- the split


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("dist", DISTS)
@pytest.mark.parametrize("sb", [0, 6, 12])
def test_split_is_the_cpu_model_bit_for_bit(rng, layout, dist, sb):
    rows, cols = 37, 53
    if layout == "contiguous":
        x = _t(draw(rng, dist, (rows, cols)))
    elif layout == "transposed":
        x = _t(draw(rng, dist, (cols, rows))).T
    else:
        x = _t(draw(rng, dist, (2 * rows, cols + 3)))[::2, 1:cols + 1]
    x[0, 0] = 2.0 ** -130  # an FP32 subnormal
    hilo, _, _ = split_operand(x[None], sb=sb, rows_pad=48, cols_pad=64, k_axis=1, block=(16, 32))
    hi, lo = cpu_fallback.split(x.numpy(), sb)
    assert np.array_equal(hilo[0, 0, :rows, :cols].numpy().view(np.uint16), hi.view(np.uint16))
    assert np.array_equal(hilo[1, 0, :rows, :cols].numpy().view(np.uint16), lo.view(np.uint16))
    pad = hilo.clone()
    pad[:, :, :rows, :cols] = 0
    assert not pad.any()  # the pad is zero, so the GEMM needs no masks


@pytest.mark.parametrize("k_axis", [0, 1])
def test_split_statistics_and_special_values(rng, k_axis):
    x = _t(draw(rng, "normal", (3, 21, 19)))
    x[1, 4, 7] = float("nan")
    x[2, 0, 3] = float("-inf")
    hilo, maxabs, bad = split_operand(x, sb=12, rows_pad=32, cols_pad=32, k_axis=k_axis, block=(16, 16))
    finite = torch.where(torch.isfinite(x), x.abs(), torch.zeros(()))
    assert torch.equal(maxabs, finite.amax(dim=2 if k_axis == 1 else 1))
    assert bool(bad)
    assert hilo[:, 1, 4, 7].eq(0).all() and hilo[:, 2, 0, 3].eq(0).all()  # non-finite -> 0, never NaN
    assert torch.isfinite(hilo.float()).all()
    _, _, clean = split_operand(x.nan_to_num(0.0, 0.0, 0.0), sb=12, rows_pad=21, cols_pad=19, k_axis=k_axis)
    assert not bool(clean)


# ---------------------------------------------------------------- the GEMM


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("dist", DISTS)
@pytest.mark.parametrize("shape", [(33, 47, 65), (1, 2, 3), (5, 7, 200), (64, 32, 16)])
def test_gemm_variants_match_the_model(rng, variant, dist, shape):
    m, n, k = shape
    a, b = draw(rng, dist, (m, k)), draw(rng, dist, (k, n))
    c, _ = _run(a, b, config={"variant": variant})
    _check_against_model(a, b, c[0])


@pytest.mark.parametrize("order", ["termwise", "elementwise"])
@pytest.mark.parametrize("keep_lo_lo", [False, True])
@pytest.mark.parametrize("split_corr", [False, True])
@pytest.mark.parametrize("flush_k", [16, 48, 0])
def test_gemm_options_match_the_model(rng, order, keep_lo_lo, split_corr, flush_k):
    a, b = draw(rng, "normal", (33, 129)), draw(rng, "uniform01", (129, 47))
    c, _ = _run(a, b, order=order, keep_lo_lo=keep_lo_lo, flush_k=flush_k, config={"split_corr": split_corr})
    _check_against_model(a, b, c[0], order=order, keep_lo_lo=keep_lo_lo)


@pytest.mark.parametrize("sb", [0, 6, 12])
def test_gemm_scaling_exponents(rng, sb):
    a, b = draw(rng, "wide_exponent", (20, 70)), draw(rng, "normal", (70, 9))
    c, _ = _run(a, b, sb=sb)
    model = cpu_fallback.emulated_matmul(a, b, sb=sb)
    bound = (2 * 70 + 8) * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert np.all(np.abs(c[0] - model) <= bound)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_batched_broadcast_transposed_and_strided(rng, variant):
    a = _t(draw(rng, "normal", (4, 41, 33))).transpose(1, 2)  # (4, 33, 41), M contiguous
    b_base = _t(draw(rng, "normal", (1, 2 * 41, 29)))
    b = b_base[:, ::2, :].expand(4, 41, 29)  # strided rows, batch stride 0
    c, stats = _run(a, b, config={"variant": variant})
    for i in range(4):
        _check_against_model(a[i].numpy(), b[i].numpy(), c[i])
    assert stats.a_rowmax.shape == (4, 33) and stats.b_colmax.shape == (4, 29)
    assert torch.equal(stats.a_rowmax, a.abs().amax(dim=2))
    assert torch.equal(stats.b_colmax, b.abs().amax(dim=1))


def test_out_with_row_stride_and_batch_broadcast_of_a(rng):
    a = _t(draw(rng, "uniform01", (1, 9, 40))).expand(3, 9, 40)
    b = _t(draw(rng, "normal", (3, 40, 11)))
    big = torch.full((3, 9, 16), float("nan"))
    out = big[:, :, 2:13]
    _run(a, b, out=out)
    assert torch.isnan(big[:, :, :2]).all() and torch.isnan(big[:, :, 13:]).all()  # nothing outside out
    for i in range(3):
        _check_against_model(a[i].numpy(), b[i].numpy(), out[i].numpy())


def test_nonfinite_inputs_give_no_nan(rng):
    a, b = draw(rng, "normal", (17, 30)), draw(rng, "normal", (30, 13))
    a[3, 5], b[7, 2] = np.inf, np.nan
    c, stats = _run(a, b)
    assert np.isfinite(c).all()  # the kernels see 0; the API layer patches the specials
    assert bool(stats.a_nonfinite) and bool(stats.b_nonfinite)
    a0, b0 = np.nan_to_num(a, posinf=0), np.nan_to_num(b)
    _check_against_model(a0, b0, c[0])


def test_empty_problems_write_zeros():
    out = torch.full((2, 3, 4), float("nan"))
    stats = cuda.matmul(torch.ones(2, 3, 0), torch.ones(2, 0, 4), sb=12, order="termwise", keep_lo_lo=False,
                        out=out)
    assert out.eq(0).all() and stats.a_rowmax.shape == (2, 3)


# ---------------------------------------------------------------- through the public API


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_public_api_runs_the_kernels(rng, kind):
    a, b = draw(rng, "normal", (2, 21, 35)), draw(rng, "normal", (35, 6))
    a[1, 2, 3] = np.nan
    x, y = (_t(a), _t(b)) if kind == "torch" else (a, b)
    c = sgemm_cube.matmul(x, y, backend="cuda")
    c = c.numpy() if kind == "torch" else c
    assert np.isnan(c[1, 2]).all() and np.isfinite(np.delete(c[1], 2, axis=0)).all()
    _check_against_model(a[0], b, c[0])


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_public_api_range_check_uses_the_kernel_statistics(rng):
    a, b = draw(rng, "normal", (8, 16)), draw(rng, "normal", (16, 4))
    with pytest.raises(ValueError, match="32768"):
        sgemm_cube.matmul(_t(a * np.float32(1e5)), _t(b), backend="cuda")


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


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(order="rowwise"), ValueError, "order"),
    (dict(sb=25), ValueError, "sb"),
    (dict(sb=True), ValueError, "sb"),
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
    small = launch.resolve_config(1, 10, 10, 10, "cpu")
    assert small["BLOCK_M"] == 64 and small["BLOCK_K"] == 32 and small["flush_k"] == 256
    big = launch.resolve_config(1, 1000, 1000, 1000, "cpu", config={"num_stages": 4})
    assert big["BLOCK_M"] == 128 and big["BLOCK_N"] == 128 and big["num_stages"] == 4
    assert launch.resolve_config(1, 1000, 1000, 400, "cpu")["BLOCK_N"] == 32
    lolo = launch.resolve_config(1, 1000, 1000, 1000, "cpu", keep_lo_lo=True)
    assert lolo["BLOCK_N"] == 64 and lolo["BLOCK_M"] == 64 and lolo["BLOCK_K"] == 64  # the tuner's table: termwise only
    assert launch.resolve_config(1, 1000, 1000, 1000, "cpu", order="elementwise")["split_corr"] is False
    monkeypatch.setattr(launch, "_has_tma", lambda device: False)
    launch._stored_config.cache_clear()
    assert launch.resolve_config(1, 1000, 1000, 1000, "cpu")["variant"] == "ptr"
    launch._stored_config.cache_clear()


def test_hybrid_rule_reads_the_table(monkeypatch):
    monkeypatch.setattr(hybrid, "device_key", lambda device: "test")
    monkeypatch.setattr(hybrid, "load_device_table",
                        lambda key: {"hybrid": {"min_flops": 2.0 * 512 ** 3, "min_mn": 128, "min_k": 64}})
    assert hybrid.prefers_native(1, 256, 256, 256, "cuda")       # too few flops
    assert not hybrid.prefers_native(1, 1024, 1024, 1024, "cuda")
    assert hybrid.prefers_native(1, 65536, 64, 4096, "cuda")     # skinny: N below min_mn
    assert hybrid.prefers_native(1, 8192, 8192, 32, "cuda")      # short K
    assert not hybrid.prefers_native(64, 256, 256, 256, "cuda")  # a batch adds up


def test_shipped_tables_are_valid():
    for path in sorted(hybrid._CONFIG_DIR.glob("*.json")):
        table = hybrid.load_device_table(path.stem)
        assert set(hybrid.native_rule(path.stem)) == {"min_flops", "min_mn", "min_k"}
        for mode in ("termwise", "elementwise", "lo_lo", "bf16x9", "bf16x6"):
            for entry in table.get(f"gemm_{mode}", []):
                assert set(entry["config"]) <= set(launch._CONFIG_KEYS), path
                assert entry["config"].get("variant", "tma") in VARIANTS


# ---------------------------------------------------------------- BF16 schemes (bf16x9, bf16x6)

BF16_SCHEMES = ("bf16x9", "bf16x6")


def _full_range(rng, shape):
    """FP32 values over the whole exponent range, with the split's edge cases in the first row."""
    x = (rng.uniform(1.0, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
         * 2.0 ** rng.integers(-149, 127, shape).astype(np.float64)).astype(np.float32)
    edge = np.array([np.finfo(np.float32).max, -np.finfo(np.float32).max,  # would round past BF16's max
                     3.3961775e38, 2.0 ** -149, -2.0 ** -140, 2.0 ** -126 * 1.00390625, 0.0, -0.0,
                     1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 - 2.0 ** -24],  # ties to even both ways
                    dtype=np.float32)
    x.flat[:edge.size] = edge
    return x


def _wide_rows(rng, shape, binades=80):
    """Every row spans about ``binades`` binades: beyond the FP16 split, inside BF16's range."""
    half = binades // 2
    return (rng.uniform(-1.0, 1.0, shape) * 2.0 ** rng.integers(-half, half, shape)).astype(np.float32)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("dist", ["normal", "wide_exponent", "full_range"])
def test_bf16_split_is_the_cpu_model_bit_for_bit(rng, layout, dist):
    rows, cols = 37, 53
    gen = (lambda s: _full_range(rng, s)) if dist == "full_range" else (lambda s: draw(rng, dist, s))
    if layout == "contiguous":
        x = _t(gen((rows, cols)))
    elif layout == "transposed":
        x = _t(gen((cols, rows))).T
    else:
        x = _t(gen((2 * rows, cols + 3)))[::2, 1:cols + 1]
    slices, maxabs, bad = split_operand(x[None], sb=12, rows_pad=48, cols_pad=64, k_axis=1, block=(16, 32),
                                        scheme="bf16x9")
    assert slices.dtype == torch.bfloat16 and slices.shape == (3, 1, 48, 64)
    model = cpu_fallback.split_slices(x.numpy(), cpu_fallback.get_scheme("bf16x9"), 12)
    for got, want in zip(slices[:, 0, :rows, :cols], model):
        assert np.array_equal(got.float().numpy().view(np.uint32), want.view(np.uint32))
    pad = slices.clone()
    pad[:, :, :rows, :cols] = 0
    assert not pad.float().any()
    assert torch.equal(maxabs[0], x.abs().amax(dim=1)) and not bool(bad)


def test_bf16_split_special_values_give_zero_slices(rng):
    x = _t(draw(rng, "normal", (2, 19, 21)))
    x[0, 3, 4], x[1, 0, 0], x[1, 7, 20] = float("nan"), float("inf"), float("-inf")
    slices, maxabs, bad = split_operand(x, sb=12, rows_pad=19, cols_pad=32, k_axis=0, scheme="bf16x6")
    assert bool(bad) and torch.isfinite(slices.float()).all()
    for i, r, c in ((0, 3, 4), (1, 0, 0), (1, 7, 20)):
        assert slices[:, i, r, c].eq(0).all()
    assert torch.equal(maxabs, torch.where(torch.isfinite(x), x.abs(), torch.zeros(())).amax(dim=1))


@pytest.mark.parametrize("scheme", BF16_SCHEMES)
@pytest.mark.parametrize("order", ["termwise", "elementwise"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_bf16_gemm_matches_the_model(rng, scheme, order, variant):
    a, b = draw(rng, "normal", (33, 129)), draw(rng, "uniform01", (129, 47))
    c, _ = _run(a, b, order=order, scheme=scheme, config={"variant": variant})
    _check_against_model(a, b, c[0], order=order, scheme=scheme)


@pytest.mark.parametrize("scheme", BF16_SCHEMES)
@pytest.mark.parametrize("dist, shape", [("wide_rows", (21, 15, 70)), ("lognormal", (1, 2, 3)),
                                         ("uniform_pm1", (40, 33, 16)), ("wide_exponent", (5, 7, 200))])
def test_bf16_gemm_shapes_and_ranges(rng, scheme, dist, shape):
    m, n, k = shape
    gen = (lambda s: _wide_rows(rng, s)) if dist == "wide_rows" else (lambda s: draw(rng, dist, s))
    a, b = gen((m, k)), gen((k, n))
    c, _ = _run(a, b, scheme=scheme)
    _check_against_model(a, b, c[0], scheme=scheme)


@pytest.mark.parametrize("scheme, order, merge_levels, split_corr, flush_k", [
    ("bf16x9", "termwise", True, False, 64), ("bf16x6", "elementwise", True, False, 64),
    ("bf16x9", "elementwise", True, True, 32), ("bf16x9", "termwise", False, True, 16),
    ("bf16x6", "termwise", False, False, 0), ("bf16x9", "elementwise", False, False, 48)])
def test_bf16_gemm_options(rng, scheme, order, merge_levels, split_corr, flush_k):
    a, b = draw(rng, "normal", (17, 100)), draw(rng, "uniform01", (100, 30))
    c, _ = _run(a, b, scheme=scheme, order=order, flush_k=flush_k,
                config={"split_corr": split_corr, "merge_levels": merge_levels})
    _check_against_model(a, b, c[0], scheme=scheme, order=order)


def test_bf16_batched_broadcast_and_transposed(rng):
    a = _t(draw(rng, "normal", (3, 41, 33))).transpose(1, 2)
    b = _t(draw(rng, "wide_exponent", (1, 41, 2 * 29)))[:, :, ::2].expand(3, 41, 29)
    c, stats = _run(a, b, scheme="bf16x6")
    for i in range(3):
        _check_against_model(a[i].numpy(), b[i].numpy(), c[i], scheme="bf16x6")
    assert torch.equal(stats.b_colmax, b.abs().amax(dim=1))


@pytest.mark.parametrize("scheme", BF16_SCHEMES)
def test_bf16_through_the_public_api(rng, scheme):
    a, b = _wide_rows(rng, (2, 13, 40)), draw(rng, "normal", (40, 11))
    a[1, 4, 5] = np.inf
    c = sgemm_cube.matmul(_t(a), _t(b), backend="cuda", scheme=scheme)
    assert isinstance(c, torch.Tensor) and c.shape == (2, 13, 11)
    native = a @ b
    assert np.array_equal(np.isnan(c.numpy()), np.isnan(native)) and np.array_equal(np.isinf(c.numpy()),
                                                                                     np.isinf(native))
    _check_against_model(a[0], b, c.numpy()[0], scheme=scheme)


def test_auto_scheme_picks_bf16x9_on_the_cuda_backend(rng):
    a, b = _t(_wide_rows(rng, (24, 36))), _t(draw(rng, "normal", (36, 10)))
    assert "bf16x9" in cuda.SCHEMES
    plan = sgemm_cube.explain(a, b, backend="cuda", scheme="auto")
    assert (plan.scheme, plan.backend, plan.scale) == ("bf16x9", "cuda", "rows"), plan
    c = sgemm_cube.matmul(a, b, backend="cuda", scheme="auto")
    ref = a.double() @ b.double()
    err, err32 = _rel(c.numpy(), ref.numpy()), _rel((a @ b).numpy(), ref.numpy())
    assert err <= 2 * err32 + 2.0 ** -21, (err, err32)


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
    for order in ("termwise", "elementwise"):
        nine = launch.resolve_config(1, 1000, 1000, 1000, "cpu", order=order, scheme="bf16x9")
        assert (nine["BLOCK_M"], nine["BLOCK_N"], nine["BLOCK_K"], nine["num_stages"]) == (128, 64, 64, 2)
        six = launch.resolve_config(1, 1000, 1000, 1000, "cpu", order=order, scheme="bf16x6")
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
    nine, _ = _run(a, b, scheme="bf16x9")
    six, _ = _run(a, b, scheme="bf16x6")
    assert np.all(nine == exact) and np.all(nine == cpu_fallback.emulated_matmul(a, b, scheme="bf16x9"))
    assert np.all(six == cpu_fallback.emulated_matmul(a, b, scheme="bf16x6"))
    assert np.all(np.abs(six.astype(np.float64) - exact) >= 2.0 ** -27)
    assert np.all((a @ b) != exact)


# ---------------------------------------------------------------- range reduction (scheme="auto")


@pytest.mark.parametrize("axis", [-1, -2])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
def test_row_ranges_kernel_matches_torch(rng, axis, layout):
    from sgemm_cube.backends.cuda.range_kernel import row_ranges

    x = torch.from_numpy((rng.uniform(-1, 1, (2, 37, 53)) * 2.0 ** rng.integers(-40, 40, (2, 37, 53)))
                         .astype(np.float32))
    x[0, 3, 5], x[1, 7, 2], x[0, 4, :] = np.nan, -np.inf, 0.0
    x[1, 9, :] = np.inf
    if layout == "transposed":
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif layout == "broadcast":
        x = x[:1].expand(3, -1, -1)
    big, small = row_ranges(x, axis)
    mag = x.abs()
    finite = torch.isfinite(x)
    want_big = torch.where(finite, mag, torch.zeros(())).amax(dim=axis)
    want_small = torch.where(finite & (mag > 0), mag, torch.full((), np.inf)).amin(dim=axis)
    assert torch.equal(big, want_big) and torch.equal(small, want_small)
