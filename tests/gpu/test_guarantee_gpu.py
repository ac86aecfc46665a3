"""The accuracy guarantee of ``sgemm_cube.matmul`` on a CUDA GPU: run ``pytest tests/gpu -m gpu`` there.

Not part of CI (no GPU there); ``tests/sgemm_cube/test_guarantee.py`` makes the same claims on the CPU (the
NumPy model, and the Triton kernels under the interpreter at shapes <= 48).  Here, on the compiled
kernels, with CUDA tensors:

* the guarantee (``tests/guarantee_data.py`` states it; checked against float64 and ``np.matmul``
  in float32 on the host) for every attack generator at 256 and odd shapes up to 1024, at 4096 for
  a few, under ``backend="cuda"`` and ``"auto"``, and for the options that keep it;
* K < 16 under ``backend="auto"`` is native FP32 (cuBLAS, TF32 off) bit for bit;
* the issue's cases, special values, overflow, ``fixup=False``'s documented trade;
* no host synchronisation inside ``sgemm_cube.matmul`` for every scheme on NaN/Inf, out-of-range
  (1e30) and mixed-magnitude data (``torch.cuda.set_sync_debug_mode("error")``);
* CUDA graphs: ``sgemm_cube.matmul(a, b, out=c)`` captured once on normal data, replayed on new
  data copied into a and b (normal, NaN/Inf, 1e30, mixed magnitudes, ...), each replay within
  the guarantee.
"""
from types import SimpleNamespace

import numpy as np
import pytest

from tests.gpu import require_gpu

torch = require_gpu()
# numpy/torch warn on the overflow and NaN these data are made of
pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

import sgemm_cube  # noqa: E402
import sgemm_cube.backends.native  # noqa: E402

from tests.guarantee_data import (FINITE, GENERATORS, OPTIONS, SPECIAL, U, References,  # noqa: E402
                              check_guarantee, frobenius_errors, ieee_special_values, issue_64x64,
                              native_overflow_ok, nextafter_2_64, normwise_claimed, option_id, overflow_case,
                              padded_issue_case, references, rng_for, special_case)

SCHEMES = ("fp16x3", "fp16x4", "bf16x9", "bf16x6", "auto")
BACKENDS = ("cuda", "auto")
SHAPES = [(256, 256, 256), (513, 1024, 257), (1000, 96, 777)]


@pytest.fixture(autouse=True)
def _sync_debug_off():
    yield
    torch.cuda.set_sync_debug_mode(0)


@pytest.fixture
def data(request):
    """A fixed-seed generator for this test (``SGEMM_CUBE_TEST_SEED=random``: fresh) and its replay line."""
    rng, seed = rng_for(request.node.nodeid)
    return SimpleNamespace(rng=rng, seed=seed)


def _gpu(x):
    return torch.from_numpy(np.ascontiguousarray(x)).cuda()


def _run(a, b, backend="cuda", **kw):
    """``sgemm_cube.matmul`` on CUDA copies of a, b; the result on the host.  Checks that the result is
    a float32 CUDA tensor and that the operands come back unchanged."""
    ta, tb = _gpu(a), _gpu(b)
    c = sgemm_cube.matmul(ta, tb, backend=backend, **kw)
    assert isinstance(c, torch.Tensor) and c.is_cuda and c.dtype == torch.float32
    torch.cuda.synchronize()
    assert np.array_equal(ta.cpu().numpy().view(np.uint32), a.view(np.uint32)), "matmul modified a"
    assert np.array_equal(tb.cpu().numpy().view(np.uint32), b.view(np.uint32)), "matmul modified b"
    return c.cpu().numpy()


def _refs(a, b) -> References:
    """:func:`references`, with the two float64 products on the GPU (4096^3 on the host is slow);
    native stays ``np.matmul`` in float32, as the guarantee is stated."""
    fa, fb = np.isfinite(a), np.isfinite(b)
    a0 = _gpu(np.where(fa, a, 0)).double()
    b0 = _gpu(np.where(fb, b, 0)).double()
    c64 = torch.matmul(a0, b0).cpu().numpy()
    absab = torch.matmul(a0.abs(), b0.abs()).cpu().numpy()
    with np.errstate(all="ignore"):
        native = np.matmul(a, b)
    # sequential_fp32 on the GPU: FP32 multiplies and adds, each its own correctly rounded kernel (never
    # fused), in order of k: the same bits as the host's sequential_fp32, much faster at these sizes
    ga, gb = _gpu(a), _gpu(b)
    acc = torch.zeros(native.shape, dtype=torch.float32, device="cuda")
    for p in range(a.shape[-1]):
        acc += ga[..., :, p, None] * gb[..., None, p, :]
    finite_in = fa.all(axis=-1)[..., :, None] & fb.all(axis=-2)[..., None, :]
    return References(c64, absab, acc.cpu().numpy(), native, np.broadcast_to(finite_in, native.shape), a.shape[-1])


def _assert_guarantee(c, a, b, seed, what="", refs=None, **kw):
    msg = check_guarantee(c, a, b, refs=refs if refs is not None else _refs(a, b), **kw)
    assert not msg, f"{what}\n{msg}\n{seed}"


def test_gpu_references_match_the_host(data):
    """The references computed on the GPU agree with the host's: the sequential FP32 sums bit for bit, the
    float64 ones within float64 rounding."""
    for gen in ("cond_phi5", "nan_inf", "underflow", "near_overflow", "subnormal_mixed"):
        a, b = GENERATORS[gen](data.rng, 200, 300, 100)
        g, h = _refs(a, b), references(a, b)
        assert np.array_equal(g.finite_in, h.finite_in) and np.array_equal(g.fp32, h.fp32, equal_nan=True), gen
        tol = 300 * 2.0 ** -52 * h.absab + 2.0 ** -1000
        assert np.all(np.abs(g.c64 - h.c64) <= tol) and np.all(np.abs(g.absab - h.absab) <= tol), gen


# ================================================================ the guarantee


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("gen", list(GENERATORS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_default_options_meet_the_guarantee(data, backend, gen, shape):
    a, b = GENERATORS[gen](data.rng, *shape)
    c = _run(a, b, backend)
    if not _ran_native(c, a, b, backend):
        _assert_guarantee(c, a, b, data.seed, f"{backend} {gen} {shape}")


def _ran_native(c, a, b, backend) -> bool:
    """Whether the plan is native FP32 (the hybrid rule) -- then the result must be cuBLAS SGEMM's, bit for bit:
    native is not checked against itself (cuBLAS, like any FP32 sum, can overflow part-way on near-overflow data)."""
    ta, tb = _gpu(a), _gpu(b)
    if sgemm_cube.explain(ta, tb, backend=backend).backend != "native":
        return False
    want = sgemm_cube.backends.native.matmul(ta, tb, out=None).cpu().numpy()
    assert np.array_equal(c, want, equal_nan=True), "the native plan did not return cuBLAS SGEMM's result"
    return True


@pytest.mark.parametrize("gen", ["normal", "cond_phi5", "half_scaled_1e-10", "specials_half_scaled",
                                 "near_overflow", "one_tiny_per_row"])
def test_4096(data, gen):
    a, b = GENERATORS[gen](data.rng, 4096, 4096, 4096)
    c = _run(a, b, "auto")
    if not _ran_native(c, a, b, "auto"):
        _assert_guarantee(c, a, b, data.seed, gen)


ATTACKS = ("half_scaled_1e-10", "row_span_120", "one_tiny_per_row", "alt_cols_1e-10", "cond_phi5",
           "scale_1e30", "underflow", "subnormal_rows", "near_overflow", "specials_half_scaled", "wide_cancel")


@pytest.mark.parametrize("opts", OPTIONS, ids=option_id)
def test_options_keep_the_guarantee(data, opts):
    bad = []
    for gen in ATTACKS:
        a, b = GENERATORS[gen](data.rng, 384, 512, 320)
        c = _run(a, b, "cuda", **opts)
        msg = check_guarantee(c, a, b, refs=_refs(a, b), native_overflow_ok=native_overflow_ok(opts),
                              frobenius=normwise_claimed(opts, gen))
        if msg:
            bad.append(f"[{gen}] {msg}")
    assert not bad, "\n".join(bad) + f"\n{data.seed}"


@pytest.mark.parametrize("k", [1, 2, 3, 4, 15])
def test_small_k_under_auto_is_native_fp32(data, k):
    """K < 16 under backend="auto" runs native FP32 (cuBLAS, TF32 off): the same bits."""
    bad = []
    for gen in GENERATORS:
        for m, n in [(300, 200), (1, 1)]:
            a, b = GENERATORS[gen](data.rng, m, k, n)
            c = _run(a, b, "auto")
            native = torch.matmul(_gpu(a), _gpu(b)).cpu().numpy()
            if not np.array_equal(c, native, equal_nan=True):
                bad.append(f"{gen} {(m, k, n)}")
    assert not bad, f"differs from native FP32: {bad}\n{data.seed}"


@pytest.mark.parametrize("s", [1e-6, 1e-10])
@pytest.mark.parametrize("backend", BACKENDS)
def test_issue_half_scaled_64x64(data, backend, s):
    """The issue: native 1.3e-7, the old default 5.7e-2 (s=1e-10)."""
    a, b = issue_64x64(data.rng, s)
    c = _run(a, b, backend)
    _assert_guarantee(c, a, b, data.seed, f"errors (ours, native)={frobenius_errors(c, a, b)}")


def test_issue_small_cases(data):
    a = np.array([[1.0, 1e-6]], np.float32)
    b = np.array([[1e-6], [1.0]], np.float32)
    c = _run(a, b, "auto")
    assert np.array_equal(c, torch.matmul(_gpu(a), _gpu(b)).cpu().numpy())
    _assert_guarantee(c, a, b, data.seed)
    a, b = padded_issue_case(16)
    exact = float(a[0, 0]) * float(b[0, 0]) + float(a[0, 1]) * float(b[1, 0])
    for backend in BACKENDS:
        c = _run(a, b, backend)
        _assert_guarantee(c, a, b, data.seed, backend)
        assert abs(float(c[0, 0]) - exact) <= 2.0 ** -23 * abs(exact), (backend, float(c[0, 0]), exact)


def test_nextafter_2_64_squared_is_finite(data):
    for k, backend in ((1, "auto"), (16, "cuda"), (16, "auto")):
        a, b = nextafter_2_64(k)
        c = _run(a, b, backend)
        assert np.isfinite(c).all(), (k, backend, c)
        _assert_guarantee(c, a, b, data.seed, f"K={k} {backend}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_special_values_and_overflow(data, backend):
    a, b, expected = special_case()
    ieee = ieee_special_values(a, b)
    c = _run(a, b, backend)
    for test in (np.isnan, np.isposinf, np.isneginf):
        assert np.array_equal(test(ieee), expected[test.__name__])
        assert np.array_equal(test(c), expected[test.__name__]), (test.__name__, c)
    _assert_guarantee(c, a, b, data.seed)
    a, b = overflow_case()
    c = _run(a, b, backend)
    assert c[0, 0] == np.inf and c[0, 2] == np.inf and c[0, 1] == -np.inf, c
    assert np.isfinite(c[1:]).all(), c
    _assert_guarantee(c, a, b, data.seed)


def test_batched_operands_of_different_kinds(data):
    gens = ("normal", "half_scaled_1e-10", "nan_inf", "scale_1e30", "near_overflow", "one_tiny_per_row")
    pairs = [GENERATORS[g](data.rng, 300, 200, 100) for g in gens]
    a, b = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
    c = _run(a, b)
    _assert_guarantee(c, a, b, data.seed, "batched", refs=references(a, b))
    b1 = GENERATORS["half_scaled_1e-10"](data.rng, 300, 200, 100)[1]  # |b1| < ~5: no new overflow
    c = _run(a, b1)
    bb = np.ascontiguousarray(np.broadcast_to(b1, b.shape))
    _assert_guarantee(c, a, bb, data.seed, "broadcast b", refs=references(a, bb))


# ================================================================ fixup=False


def test_fixup_false(data):
    """The trade: the issue's case far worse than native without the fix-up; special values still
    native FP32's and no infinity from finite data whose native product is finite."""
    a, b = issue_64x64(data.rng, 1e-10)
    _assert_guarantee(_run(a, b, fixup=True), a, b, data.seed, "fixup=True")
    raw = _run(a, b, fixup=False)
    ours, native = frobenius_errors(raw, a, b)
    assert np.isfinite(raw).all() and ours > 10 * 2 * max(native, U), (ours, native, data.seed)
    assert check_guarantee(raw, a, b), "fixup=False met the guarantee here: the test no longer documents the trade"
    bad = []
    for gen in SPECIAL + FINITE:
        a, b = GENERATORS[gen](data.rng, 256, 384, 192)
        c = _run(a, b, fixup=False)
        r = references(a, b)
        if not np.array_equal(c[~r.finite_in], r.fp32[~r.finite_in], equal_nan=True):
            bad.append(f"{gen}: special values differ from native FP32's")
        if not np.isfinite(c[r.finite_in & np.isfinite(r.fp32)]).all():
            bad.append(f"{gen}: non-finite outputs where native FP32 is finite")
    assert not bad, f"{bad}\n{data.seed}"


# ================================================================ no host synchronisation


SYNC_DATA = ("nan_inf", "specials_half_scaled", "scale_1e30", "half_scaled_1e-10", "row_span_120",
             "one_tiny_per_row")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_no_host_synchronisation(data, scheme):
    """No host synchronisation inside sgemm_cube.matmul on CUDA tensors, whatever the data need (special
    values, scaling, fixed-up rows).  A first call per input compiles/tunes the kernels outside the check."""
    _no_host_synchronisation(data, scheme)


def test_no_host_synchronisation_where_the_gpu_chooses_the_scheme(data, monkeypatch):
    """scheme="auto" from its size on (forced here at 256 x 384 x 192): the choice between fp16x3 and bf16x6
    is made on the GPU, with no host synchronisation either."""
    from sgemm_cube.backends.cuda import launch

    monkeypatch.setattr(launch, "AUTO_MIN_FLOPS", 0.0)
    _no_host_synchronisation(data, "auto")


def _no_host_synchronisation(data, scheme):
    inputs = []
    for gen in SYNC_DATA:
        a, b = GENERATORS[gen](data.rng, 256, 384, 192)
        ta, tb = _gpu(a), _gpu(b)
        sgemm_cube.matmul(ta, tb, scheme=scheme)  # warm-up: compilation, autotuning
        inputs.append((gen, a, b, ta, tb, torch.full((256, 192), float("nan"), device="cuda")))
    torch.cuda.synchronize()
    results = []
    torch.cuda.set_sync_debug_mode("error")
    try:
        for gen, a, b, ta, tb, out in inputs:
            results.append(sgemm_cube.matmul(ta, tb, scheme=scheme))
            sgemm_cube.matmul(ta, tb, scheme=scheme, out=out)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    for (gen, a, b, _, _, out), c in zip(inputs, results):
        refs = _refs(a, b)
        _assert_guarantee(c.cpu().numpy(), a, b, data.seed, f"{scheme} {gen}", refs=refs)
        _assert_guarantee(out.cpu().numpy(), a, b, data.seed, f"{scheme} {gen} out=", refs=refs)


# ================================================================ CUDA graphs


GRAPH_DATA = ("normal", "nan_inf", "scale_1e30", "half_scaled_1e-10", "row_span_120", "one_tiny_per_row",
              "specials_half_scaled", "near_overflow", "underflow", "normal")


def test_cuda_graph_capture_and_replay(data):
    """Captured once on normal data; replays on new data copied into the same operands follow the data
    (scaling, fix-up and special values decided on the device), each within the guarantee.  The
    emulation is forced: under backend="auto" the hybrid rule runs cuBLAS at this size."""
    m, k, n = 384, 512, 256
    a0, b0 = GENERATORS["normal"](data.rng, m, k, n)
    a, b = _gpu(a0), _gpu(b0)
    c = torch.full((m, n), float("nan"), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as the PyTorch docs ask
        for _ in range(3):
            sgemm_cube.matmul(a, b, out=c, backend="cuda")
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    _assert_guarantee(c.cpu().numpy(), a0, b0, data.seed, "eager warm-up")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ret = sgemm_cube.matmul(a, b, out=c, backend="cuda")
    assert ret is c
    for step, gen in enumerate(GRAPH_DATA):
        an, bn = GENERATORS[gen](data.rng, m, k, n)
        a.copy_(torch.from_numpy(an))
        b.copy_(torch.from_numpy(bn))
        c.fill_(float("nan"))  # the replay must write every output
        graph.replay()
        torch.cuda.synchronize()
        _assert_guarantee(c.cpu().numpy(), an, bn, data.seed, f"replay {step}: {gen}")
