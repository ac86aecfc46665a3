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


def _check_against_model(a, b, c, *, order="termwise", keep_lo_lo=False, sb=12):
    """Elementwise agreement with the CPU model, and FP32-level accuracy against float64."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    model = cpu_fallback.emulated_matmul(a, b, sb=sb, order=order, keep_lo_lo=keep_lo_lo)
    bound = (2 * a.shape[1] + 8) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64))
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
        for mode in ("termwise", "elementwise", "lo_lo"):
            for entry in table.get(f"gemm_{mode}", []):
                assert set(entry["config"]) <= set(launch._CONFIG_KEYS), path
                assert entry["config"].get("variant", "tma") in VARIANTS
