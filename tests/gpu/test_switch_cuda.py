"""The drop-in switch on CUDA tensors: run ``pytest tests/gpu`` on a GPU (not part of CI).

``tests/sgemm_cube/test_torch_switch.py`` makes every claim on the CPU; checked here on
the GPU, with shapes the hybrid rule sends to the emulation (2048^3):

* the emulation's fingerprint (24-bit data times 0/1 selection matrices:
  cuBLAS returns the data exactly, sgemm_cube as its split holds them) for
  the ATen operators and the public functions that reach them, ``out=``
  and in-place variants included, and the GELU epilogue of
  ``_addmm_activation`` as cuBLAS computes it;
* ``alpha`` applied before the one rounding (GEMM epilogue and fix-up
  programs), and NaN at ``alpha = 0`` exactly where PyTorch's CUDA kernels give it;
* small products (``mv``, ``dot``, skinny shapes) are taken by the switch and
  run by cuBLAS, as the hybrid rule says (same bits as with the switch off);
* ``torch.compile`` (default and ``mode="reduce-overhead"``: CUDA graphs) and a
  manually captured CUDA graph run sgemm_cube while the switch is on;
* nn.TransformerEncoderLayer's fused fast path is routed.
"""
import numpy as np
import pytest

from tests.gpu import require_gpu

torch = require_gpu()
pytestmark = pytest.mark.gpu

import torch.nn.functional as F  # noqa: E402

import sgemm_cube  # noqa: E402
from sgemm_cube import switch  # noqa: E402

X24 = 1.0 + 2.0 ** -11 + 2.0 ** -23
N = 2048


@pytest.fixture(autouse=True)
def _switch_off():
    yield
    leaked = switch.is_enabled()
    while switch.is_enabled():
        switch.disable()
    assert not leaked


def data(rng, *shape):
    e = rng.integers(-3, 4, shape)
    return torch.from_numpy((rng.choice([-1.0, 1.0], shape) * X24 * 2.0 ** e).astype(np.float32)).cuda()


def selection(rng, k, n, batch=None):
    if batch is not None:
        return torch.stack([selection(rng, k, n) for _ in range(batch)])
    p = torch.zeros(k, n)
    p[torch.from_numpy(rng.integers(0, k, n)), torch.arange(n)] = 1.0
    return p.cuda()


def round22(x):
    hi, lo = sgemm_cube.split(x.cpu().numpy(), sb=12)
    return torch.from_numpy((hi.astype(np.float64) + lo.astype(np.float64) * 2.0 ** -12).astype(np.float32)).cuda()


def addend(rng, *shape):
    return torch.from_numpy((rng.integers(0, 4, shape) * 2.0 ** -22).astype(np.float32)).cuda()


def _out(fn):
    def call(*args):
        out = torch.empty(0, device="cuda")
        assert fn(*args, out=out) is out
        return out
    return call


CASES = {
    "mm": (torch.mm, lambda r: ([data(r, N, N), selection(r, N, N)], 0)),
    "matmul 3-D @ 2-D": (torch.matmul, lambda r: ([data(r, 4, 512, N), selection(r, N, N)], 0)),
    "@ selection on the left": (lambda p, x: p @ x, lambda r: ([selection(r, N, N).T.contiguous(), data(r, N, N)], 1)),
    "mm out=": (_out(torch.mm), lambda r: ([data(r, N, N), selection(r, N, N)], 0)),
    "bmm": (torch.bmm, lambda r: ([data(r, 4, 1024, 1024), selection(r, 1024, 1024, batch=4)], 0)),
    "einsum": (lambda a, b: torch.einsum("bik,bkj->bij", a, b),
               lambda r: ([data(r, 4, 1024, 1024), selection(r, 1024, 1024, batch=4)], 0)),
    "addmm": (torch.addmm, lambda r: ([addend(r, N, N), data(r, N, N), selection(r, N, N)], 1)),
    "addmm_": (lambda c, a, b: c.addmm_(a, b), lambda r: ([addend(r, N, N), data(r, N, N), selection(r, N, N)], 1)),
    "F.linear bias": (lambda c, x, p: F.linear(x, p.T, c), lambda r: ([addend(r, N), data(r, N, N), selection(r, N, N)], 1)),
    "baddbmm": (torch.baddbmm, lambda r: ([addend(r, 4, 1024, 1024), data(r, 4, 1024, 1024),
                                           selection(r, 1024, 1024, batch=4)], 1)),
    "_addmm_activation relu": (lambda c, a, b: torch._addmm_activation(c, a, b),
                               lambda r: ([addend(r, N, N), data(r, N, N), selection(r, N, N)], 1)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fingerprint_on_cuda(rng, name):
    call, build = CASES[name]
    args, wide = build(rng)
    native = call(*[a.clone() for a in args])
    as_split = call(*[round22(a) if i == wide else a.clone() for i, a in enumerate(args)])
    assert not torch.equal(native, as_split)
    with switch.enabled():
        got = call(*[a.clone() for a in args])
        assert switch.routed_calls()
    assert got.shape == native.shape and got.stride() == native.stride() and torch.equal(got, as_split)


def test_gelu_epilogue_is_cublass(rng):
    c, a, p = addend(rng, N, N), data(rng, N, N), selection(rng, N, N)
    native = torch._addmm_activation(c, a, p, use_gelu=True)
    pre = torch.addmm(c, a, p)
    approx = switch._GELU_APPROXIMATION["cuda"]
    other = "none" if approx == "tanh" else "tanh"
    # cuBLAS's epilogue is the approximation the switch uses (closer than the other one by far)
    assert (native - F.gelu(pre, approximate=approx)).abs().max() < 0.1 * (native - F.gelu(pre, approximate=other)).abs().max()
    with switch.enabled():
        got = torch._addmm_activation(c, a, p, use_gelu=True)
    assert torch.equal(got, F.gelu(round22(a) @ p + c, approximate=approx))


#: Operators with scalars on (input, mat1, mat2) N x N operands (the hybrid rule emulates these shapes).
SCALED = {
    "addmm": lambda c, a, b, **kw: torch.addmm(c, a, b, **kw),
    "addmm_": lambda c, a, b, **kw: c.clone().addmm_(a, b, **kw),
    "baddbmm": lambda c, a, b, **kw: torch.baddbmm(c[None], a[None], b[None], **kw)[0],
    "baddbmm_": lambda c, a, b, **kw: c[None].clone().baddbmm_(a[None], b[None], **kw)[0],
    "addbmm": lambda c, a, b, **kw: torch.addbmm(c, torch.stack([a, torch.zeros_like(a)]), torch.stack([b, b]), **kw),
    "_addmm_activation": lambda c, a, b, **kw: torch._addmm_activation(c, a, b, **kw),
}


@pytest.mark.parametrize("name", list(SCALED))
def test_alpha_scales_before_the_rounding_on_cuda(rng, name):
    """The GEMM epilogue and the fix-up programs multiply by alpha before their one rounding: a product
    beyond FP32's range times a small alpha is finite and within SGEMM's bound (cuBLAS's is printed)."""
    a, b = torch.full((N, N), 1.5e19, device="cuda"), torch.full((N, N), 1.5e19, device="cuda")
    a[3, 7] = 2.0 ** -140  # row 3 spans ~200 binades: computed by the fix-up programs
    c = torch.zeros(N, N, device="cuda")
    call = SCALED[name]
    native = call(c, a, b, alpha=1e-4)
    with switch.enabled():
        got = call(c, a, b, alpha=1e-4)
        assert switch.routed_calls()
    alpha = float(np.float32(1e-4))
    exact = alpha * (a.double() @ b.double())
    bound = 3 * N * 2.0 ** -24 * alpha * (a.double().abs() @ b.double().abs())
    print(f"{name}: cuBLAS finite {bool(torch.isfinite(native).all())}, switch finite {bool(torch.isfinite(got).all())}")
    assert torch.isfinite(got).all() and ((got.double() - exact).abs() <= bound).all()
    x, p = data(rng, N, N), selection(rng, N, N)  # an exact alpha keeps the fingerprint
    with switch.enabled():
        half = call(torch.zeros(N, N, device="cuda"), x, p, alpha=0.5)
    assert torch.equal(half, (0.5 * (round22(x) @ p)).relu() if name == "_addmm_activation" else 0.5 * (round22(x) @ p))


@pytest.mark.parametrize("name", list(SCALED))
def test_zero_alpha_propagates_nan_where_cublas_does(rng, name):
    """alpha = 0 with NaN in an operand: the switch gives NaN exactly where PyTorch's CUDA kernel does, and
    switch.PRODUCT_AT_ZERO_ALPHA["cuda"] says which kernels compute the product."""
    a, p = data(rng, N, N), selection(rng, N, N)
    a[0, 1], a[1, 2] = float("nan"), float("inf")
    c = addend(rng, N, N)
    call = SCALED[name]
    native = call(c, a, p, alpha=0, beta=2)
    with switch.enabled():
        got = call(c, a, p, alpha=0, beta=2)
    print(f"{name}: PyTorch's CUDA kernel at alpha=0 gives NaN: {bool(native.isnan().any())}")
    assert torch.equal(got.isnan(), native.isnan()) and torch.equal(torch.nan_to_num(got), torch.nan_to_num(native))
    assert bool(native.isnan().any()) == (name.rstrip("_") in switch.PRODUCT_AT_ZERO_ALPHA["cuda"])


@pytest.mark.parametrize("call", [lambda a, v: torch.mv(a, v), lambda a, v: torch.dot(a[0], v),
                                  lambda a, v: a[:8] @ a.T])
def test_small_products_run_cublas(rng, call):
    a, v = data(rng, N, N), data(rng, N)
    native = call(a, v)
    torch.backends.cuda.matmul.allow_tf32 = True  # the switch runs them in true FP32 all the same
    with switch.enabled():
        got = call(a, v)
        assert switch.routed_calls() == {}  # the hybrid rule: cuBLAS's kernel, not counted
    assert torch.equal(got, native)


def test_compiled_and_graphed(rng):
    a, p = data(rng, N, N), selection(rng, N, N)
    expected = round22(a) @ p
    torch.compiler.reset()
    f = torch.compile(lambda x, w: torch.relu(x @ w), fullgraph=True)
    g = torch.compile(lambda x, w: x @ w, mode="reduce-overhead")
    with switch.enabled():
        assert torch.equal(f(a, p), torch.relu(expected))
        for _ in range(3):  # warm-up, recording, replay
            got = g(a, p).clone()
        assert torch.equal(got, expected)
        static_a, out = a.clone(), None
        torch.mm(static_a, p)  # prepare the launches outside capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = torch.mm(static_a, p)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, expected)  # the graph recorded sgemm_cube's kernels
    torch.compiler.reset()


def test_transformer_fast_path_is_routed(rng):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True).cuda().eval()
    x = torch.randn(8, 512, 512, device="cuda")
    with torch.no_grad():
        native = layer(x)
        with switch.enabled():
            got = layer(x)
            calls = switch.routed_calls()
        ref = layer.double()(x.double())
    assert calls.get("addmm", 0) + calls.get("_addmm_activation", 0) >= 3, calls
    err = float((got.double() - ref).norm() / ref.norm())
    err_native = float((native.double() - ref).norm() / ref.norm())
    assert err <= 2 * err_native, (err, err_native)
