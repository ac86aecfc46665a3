"""A slice of PyTorch's own matmul tests, ported to float32 CPU tensors with sgemm_cube's switch on.

The module-scoped fixture turns the dispatcher-level drop-in switch on for the whole module
(``sgemm_cube.enable(devices=("cpu",))``, undone at the end): while it is on, float32 CPU
``aten::mm, addmm, addmm_, bmm, baddbmm, addbmm, addmv, dot, vdot, _addmm_activation`` and their
``out=`` variants are computed by sgemm_cube, and with them everything PyTorch builds on them
(``matmul``/``@``, ``mv``, ``F.linear``, ``nn.Linear``, ``einsum``, ``tensordot``, ``inner``,
``linalg.multi_dot``, ``chain_matmul``, autograd's backward products).

Ported from PyTorch's ``test/test_linalg.py`` (``TestLinalg``; the GEMM tests as they stand in its
``TestBasicGEMM`` copy), float32 on the CPU only:

* ``test_matmul_small_brute_force_1d_Nd``, ``..._2d_Nd``, ``..._3d_Nd`` (with ``check_single_matmul``
  and ``gen_sizes_matmul``, zero sizes included), plus the same shapes with K >= 16;
* ``test_matmul_out_kernel_errors_with_autograd`` (64 x 512 x 32 products instead of 256 x 512 x 128),
  and ``test_matmul_out`` of PyTorch's ``test/test_torch.py``;
* ``test_addmm`` (``_test_addmm_impl``, ``_test_addmm_addmv``), ``test_addmm_relu``, ``test_addmm_gelu``
  (``torch._addmm_activation``), ``test_addmm_sizes``, ``test_addmm_badmm_scalar_tnesor_input`` [sic];
* ``test_addmv``, ``test_addmv_rowmajor_colmajor_incx_incy_lda``, ``test_linear_algebra_scalar_raises``;
* ``test_mm``, ``test_bmm``, ``test_strided_mm_bmm``, ``test_1_sized_with_0_strided``,
  ``test_mm_empty_inputs_mixed_dtype_errors``;
* ``test_addbmm``, ``test_baddbmm`` (``_test_addbmm_baddbmm``: in-place, deprecated overloads,
  ``beta=0`` with NaN input, ``out=``), ``test_baddbmm_nan_input_with_zero_beta``,
  ``test_baddbmm_input_dtypes_compatibility``;
* ``test_blas_empty``, ``test_blas_alpha_beta_empty``, ``test_blas_nan_out``;
* ``test_dot_vs_numpy``, ``test_vdot_vs_numpy`` (``_test_dot_vdot_vs_numpy``), ``test_dot_invalid_args``,
  ``test_vdot_invalid_args``;
* ``test_broadcast_fused_matmul``, ``test_broadcast_batched_matmul`` (fixed seeds);
* ``test_tensordot``, ``test_inner``, ``test_multi_dot``, ``test_multi_dot_errors``, ``test_chain_matmul``,
  ``test_einsum_corner_cases``, the shape cases of ``test_einsum_error_cases``, and contractions in the
  spirit of ``test_einsum``;
* ``F.linear`` / ``nn.Linear`` with and without bias (as ``test/test_nn.py`` exercises them).

Added here: zero-size shapes, shape-mismatch errors, ``out=`` semantics (empty ``out`` resized
silently, wrong-shaped ``out`` resized with torch's warning, dtype mismatch raising, strided ``out``
kept), the in-place variants ``addmm_ / baddbmm_ / addbmm_ / addmv_`` (strided ``self``, ``self``
aliasing an operand), alpha/beta including
``beta=0`` with NaN in ``input``, autograd through the switch, dtypes the switch must leave alone,
and a routing check per operator (``test_switch_routes``).

What changes from PyTorch's versions:

* Every value is compared with the same call on float64 copies (the switch leaves float64 alone) with
  SGEMM's componentwise bound, which sgemm_cube guarantees: ``|C - C64| <= (3 K + 4) 2**-24 M +
  (K + 1) 2**-149``, where ``M`` is the same call on ``|inputs|`` and ``|alpha|, |beta|`` (the ``+ 4``
  covers the ``alpha``/``beta`` combination).  PyTorch's own tolerances are looser.
* Every error is raised with the switch off and with it on: same exception type, same message (and
  PyTorch's regex where its test has one); warnings likewise (category and text; the "(Triggered
  internally at <C++ file>)" location PyTorch appends to its C++ warnings is not compared).
* Shapes, dtypes, strides and ``out`` identity are compared with the switch-off call where PyTorch
  defines them.
* Each shape family also runs with K >= 16, so that sgemm_cube's emulation runs (below K = 16 it
  computes native FP32 by design); K < 16 and K = 0 stay in.  A few loops are thinned: the ``perm3``
  layouts of ``test_bmm``/``test_addbmm``/``test_baddbmm`` cycle over the inputs instead of multiplying
  them, and their K >= 16 variants run 6 of the 36 transposed pairs, 13 of the 64 broadcast ones and all
  zero-sized ones (``_kept``).  PyTorch's intra-op threads are set to 1 for the module (restored after).
  The module runs in about 15 s on two cores.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import math
import numbers
import random
import re
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.testing import make_tensor

import sgemm_cube

from tests.conftest import SESSION_SEED

DEVICES = ("cpu",)
U = 2.0 ** -24
TINY = 2.0 ** -149


# --------------------------------------------------------------------------- the switch

@pytest.fixture(scope="module", autouse=True)
def switch_on():
    """The dispatcher-level switch, on for the CPU for the whole module, off at the end."""
    if "devices" not in inspect.signature(sgemm_cube.enable).parameters:
        pytest.fail("sgemm_cube.enable() takes no devices= argument: the dispatcher-level switch "
                    "(sgemm_cube.enable(devices=('cpu',))) is not there", pytrace=False)
    # The products here are tiny: PyTorch's intra-op threads only cost time (and on a busy two-core machine
    # OpenMP's waiting makes a 20 x 20 product take milliseconds).  Restored at the end.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    sgemm_cube.enable(devices=DEVICES)
    assert sgemm_cube.is_enabled()
    yield
    sgemm_cube.disable()
    torch.set_num_threads(threads)
    assert not sgemm_cube.is_enabled()


@pytest.fixture(autouse=True)
def seeded(node_seed):
    """Seeds per test (torch, random) from the session seed and the test's id (tests/conftest.py)."""
    torch.manual_seed(node_seed)
    random.seed(node_seed)
    assert sgemm_cube.is_enabled(), "the switch must be on in every test"
    yield


@contextlib.contextmanager
def switch_off():
    """Turn the module's switch off inside the block (and back on after)."""
    sgemm_cube.disable()
    assert not sgemm_cube.is_enabled()
    try:
        yield
    finally:
        sgemm_cube.enable(devices=DEVICES)


def off(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with the switch off."""
    with switch_off():
        return fn(*args, **kwargs)


def raises_same(fn, exc=RuntimeError, match=None):
    """``fn()`` raises the same exception (type and message) with the switch off and on; returns it."""
    def raised():
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            return e
        return None

    with switch_off():
        e_off = raised()
    e_on = raised()
    assert e_off is not None, "switch off: PyTorch raised nothing"
    assert isinstance(e_off, exc), f"switch off: {type(e_off).__name__}: {e_off}"
    assert e_on is not None, \
        f"switch on: no exception, where PyTorch (switch off) raises {type(e_off).__name__}: {e_off}"
    assert (type(e_on), str(e_on)) == (type(e_off), str(e_off)), \
        f"switch on raised {type(e_on).__name__}: {e_on}\nswitch off raised {type(e_off).__name__}: {e_off}"
    if match is not None:
        assert re.search(match, str(e_on)), (match, str(e_on))
    return e_on


_TRIGGERED = re.compile(r" \(Triggered internally at [^)]*\)$")


def _record(fn):
    """``fn()``'s result and warnings (category, message without PyTorch's C++ source location)."""
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            res = fn()
    finally:
        torch.set_warn_always(always)
    return res, [(x.category, _TRIGGERED.sub("", str(x.message))) for x in w]


def warns_same(fn_off, fn_on):
    """Both calls warn alike (category and message; the "(Triggered internally at <C++ file>)" suffix of
    PyTorch's C++ warnings is location, not message, and is left out); returns (result off, result on, warnings)."""
    with switch_off():
        r_off, w_off = _record(fn_off)
    r_on, w_on = _record(fn_on)
    assert w_on == w_off, f"switch on warned {w_on}\nswitch off warned {w_off}"
    return r_off, r_on, w_on


def assert_same_layout(res, res_off, what=""):
    """What torch defines about the result: type, shape, dtype, device, strides."""
    assert type(res) is type(res_off), what
    assert res.shape == res_off.shape, (what, res.shape, res_off.shape)
    assert res.dtype == res_off.dtype, (what, res.dtype, res_off.dtype)
    assert res.device == res_off.device, what
    assert res.stride() == res_off.stride(), (what, res.stride(), res_off.stride())


# --------------------------------------------------------------------------- references

def _f64(x):
    return x.detach().to(torch.float64) if isinstance(x, torch.Tensor) else x


def _abs64(x):
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float64).abs()
    if isinstance(x, numbers.Number) and not isinstance(x, bool):
        return abs(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_abs64(v) for v in x)
    return x


def ref_mag(fn, *args, **kwargs):
    """The call on float64 copies, and on their magnitudes (with |alpha|, |beta|)."""
    ref = fn(*(_f64(a) if not isinstance(a, (list, tuple)) else type(a)(_f64(v) for v in a) for a in args),
             **kwargs)
    mag = fn(*(_abs64(a) for a in args), **{k: _abs64(v) for k, v in kwargs.items()})
    return ref, mag


def check_close(res, ref, mag, k, what="", *, factor=1.0, rel_extra=0.0):
    """``res`` (float32) within SGEMM's componentwise bound of the float64 ``ref``; NaN/Inf where ``ref`` has them."""
    assert isinstance(res, torch.Tensor), (what, type(res))
    assert res.dtype == torch.float32, (what, res.dtype)
    assert tuple(res.shape) == tuple(ref.shape), (what, tuple(res.shape), tuple(ref.shape))
    r = res.detach().to(torch.float64)
    ref = ref.to(torch.float64)
    nan_ref, nan_r = ref.isnan(), r.isnan()
    if not torch.equal(nan_ref, nan_r):
        idx = (nan_ref != nan_r).nonzero()[0].tolist()
        raise AssertionError(f"{what}: NaN mismatch at {idx}: got {r[tuple(idx)].item()!r}, "
                             f"float64 reference {ref[tuple(idx)].item()!r}")
    inf_ref = ref.isinf()
    if not torch.equal(r[inf_ref], ref[inf_ref]):
        raise AssertionError(f"{what}: infinities differ: got {r[inf_ref].tolist()}, want {ref[inf_ref].tolist()}")
    finite = ~(nan_ref | inf_ref)
    tol = factor * (3 * k + 4) * U * mag.to(torch.float64) + rel_extra * ref.abs() + (k + 1) * TINY
    err = (r - ref).abs()
    bad = finite & ~(err <= tol)
    if bad.any():
        idx = tuple(bad.nonzero()[0].tolist())
        ratio = (err[finite] / tol[finite]).max().item()
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {res.numel()} outputs outside SGEMM's bound (K = {k}); first at "
            f"{list(idx)}: got {r[idx].item()!r}, float64 reference {ref[idx].item()!r}, |error| "
            f"{err[idx].item():.3e} > bound {tol[idx].item():.3e}; worst error/bound {ratio:.2f}")


def expect(fn, *args, k, what="", **kwargs):
    """Call ``fn`` (switch on), check it against float64; returns the result."""
    res = fn(*args, **kwargs)
    ref, mag = ref_mag(fn, *args, **kwargs)
    check_close(res, ref, mag, k, what or getattr(fn, "__name__", str(fn)))
    return res


def _prod_ref(kind, inp, m1, m2, alpha=1, beta=1):
    """float64 reference and magnitude of the BLAS-like call ``kind`` (beta=0 ignores input, as torch does)."""
    fn = {"addmm": torch.addmm, "addmv": torch.addmv, "baddbmm": torch.baddbmm, "addbmm": torch.addbmm}[kind]
    return ref_mag(fn, inp, m1, m2, alpha=alpha, beta=beta)


def _k_of(kind, m1):
    if kind == "addbmm":
        return m1.shape[0] * m1.shape[-1]
    return m1.shape[-1]


def make_arg(shape, *, noncontiguous=False, low=None, high=None):
    return make_tensor(shape, dtype=torch.float32, device="cpu", noncontiguous=noncontiguous, low=low, high=high)


def _kept(i, thin):
    """The inputs of test_bmm/test_addbmm/test_baddbmm's generators (36 transposed, 64 broadcast, 16 zero-sized)
    that run: all of them, or (``thin``: the K >= 16 variants, where each product is emulated) the 6 transposed
    pairs with perm1 == perm2, every 5th broadcast pair and every zero-sized one."""
    if not thin:
        return True
    return (i < 36 and i % 7 == 0) or (36 <= i < 100 and (i - 36) % 5 == 0) or i >= 100


def invert_perm(p):
    d = {x: i for i, x in enumerate(p)}
    return (d[0], d[1], d[2])


# --------------------------------------------------------------------------- routing

def _fingerprint_operands(m=4, k=32, n=3, seed=1234):
    """float32 ``a`` whose entries need 24 significant bits (``(1 + j 2**-10 + 2**-11 + 2**-23) 2**e``:
    the FP16 split keeps 22 of them, ``1 + j 2**-10 + 2**-11``) and a 0/1 ``b`` picking one row of ``b``
    per column: native FP32 gives entries of ``a`` exactly, sgemm_cube their 22-bit split."""
    g = torch.Generator().manual_seed(seed)
    j = torch.randint(0, 1023, (m, k), generator=g).double()
    e = torch.randint(-2, 3, (m, k), generator=g).double()
    a = ((1 + j * 2.0 ** -10 + 2.0 ** -11 + 2.0 ** -23) * 2.0 ** e).float()
    assert torch.equal(a.double(), (1 + j * 2.0 ** -10 + 2.0 ** -11 + 2.0 ** -23) * 2.0 ** e)  # exact in float32
    b = torch.zeros(k, n)
    sel = torch.randperm(k, generator=g)[:n]
    b[sel, torch.arange(n)] = 1
    return a, b


def _sgemm_cube(a, b):
    """sgemm_cube's own product of two float32 tensors (through its NumPy entry point)."""
    return torch.from_numpy(np.asarray(sgemm_cube.matmul(a.numpy(), b.numpy()), dtype=np.float32))


_FP_A, _FP_B = _fingerprint_operands(seed=1234 ^ SESSION_SEED)  # 1234 under the default seed 0
_FP_VEC = _FP_A[0]                            # (32,)
_FP_E = _FP_B[:, 0].contiguous()              # picks one entry


@functools.lru_cache(maxsize=None)
def _fp_want():
    """sgemm_cube's own (4, 3) product of the fingerprint operands, and its dot product (computed on first use)."""
    return _sgemm_cube(_FP_A, _FP_B), _sgemm_cube(_FP_VEC[None], _FP_E[:, None])[0, 0]


class _Want:
    """The expected result, from sgemm_cube's own product, as ``index(want)``."""

    def __init__(self, index=lambda w: w, dot=False):
        self.index, self.dot = index, dot

    def __call__(self):
        want, want_dot = _fp_want()
        return want_dot if self.dot else self.index(want)


def _linear_module():
    lin = torch.nn.Linear(32, 3, bias=True)
    with torch.no_grad():
        lin.weight.copy_(_FP_B.t())
        lin.bias.zero_()
    return lin


#: name -> (call, expected result): each product below is sgemm_cube's (K = 32) when the switch routes it.
ROUTES = {
    "mm": (lambda: torch.mm(_FP_A, _FP_B), _Want()),
    "mm.out": (lambda: torch.mm(_FP_A, _FP_B, out=torch.empty(4, 3)), _Want()),
    "Tensor.mm": (lambda: _FP_A.mm(_FP_B), _Want()),
    "matmul 2d": (lambda: torch.matmul(_FP_A, _FP_B), _Want()),
    "@": (lambda: _FP_A @ _FP_B, _Want()),
    "matmul.out": (lambda: torch.matmul(_FP_A, _FP_B, out=torch.empty(0)), _Want()),
    "matmul 3d@2d": (lambda: torch.matmul(_FP_A[None].expand(2, 4, 32), _FP_B), _Want(lambda w: w.expand(2, 4, 3))),
    "matmul 1d@2d": (lambda: torch.matmul(_FP_A[1], _FP_B), _Want(lambda w: w[1])),
    "addmm": (lambda: torch.addmm(torch.zeros(4, 3), _FP_A, _FP_B), _Want()),
    "addmm.out": (lambda: torch.addmm(torch.zeros(3), _FP_A, _FP_B, out=torch.empty(4, 3)), _Want()),
    "addmm_": (lambda: torch.zeros(4, 3).addmm_(_FP_A, _FP_B), _Want()),
    "addmm beta=0": (lambda: torch.addmm(torch.full((4, 3), math.nan), _FP_A, _FP_B, beta=0), _Want()),
    "_addmm_activation": (lambda: torch._addmm_activation(torch.zeros(3), _FP_A, _FP_B), _Want()),
    "_addmm_activation.out": (lambda: torch._addmm_activation(torch.zeros(3), _FP_A, _FP_B, out=torch.empty(4, 3)),
                              _Want()),
    "bmm": (lambda: torch.bmm(_FP_A[None], _FP_B[None]), _Want(lambda w: w[None])),
    "bmm.out": (lambda: torch.bmm(_FP_A[None], _FP_B[None], out=torch.empty(1, 4, 3)), _Want(lambda w: w[None])),
    "matmul 3d@3d": (lambda: torch.matmul(torch.stack([_FP_A, _FP_A]), torch.stack([_FP_B, _FP_B])),
                     _Want(lambda w: torch.stack([w, w]))),
    "baddbmm": (lambda: torch.baddbmm(torch.zeros(1, 4, 3), _FP_A[None], _FP_B[None]), _Want(lambda w: w[None])),
    "baddbmm.out": (lambda: torch.baddbmm(torch.zeros(1, 4, 3), _FP_A[None], _FP_B[None], out=torch.empty(1, 4, 3)),
                    _Want(lambda w: w[None])),
    "baddbmm_": (lambda: torch.zeros(1, 4, 3).baddbmm_(_FP_A[None], _FP_B[None]), _Want(lambda w: w[None])),
    "addbmm": (lambda: torch.addbmm(torch.zeros(4, 3), _FP_A[None], _FP_B[None]), _Want()),
    "addbmm.out": (lambda: torch.addbmm(torch.zeros(4, 3), _FP_A[None], _FP_B[None], out=torch.empty(4, 3)),
                   _Want()),
    "addbmm_": (lambda: torch.zeros(4, 3).addbmm_(_FP_A[None], _FP_B[None]), _Want()),
    "addmv": (lambda: torch.addmv(torch.zeros(4), _FP_A, _FP_B[:, 1].contiguous()), _Want(lambda w: w[:, 1])),
    "addmv.out": (lambda: torch.addmv(torch.zeros(4), _FP_A, _FP_B[:, 1].contiguous(), out=torch.empty(4)),
                  _Want(lambda w: w[:, 1])),
    "addmv_": (lambda: torch.zeros(4).addmv_(_FP_A, _FP_B[:, 1].contiguous()), _Want(lambda w: w[:, 1])),
    "mv": (lambda: torch.mv(_FP_A, _FP_B[:, 1].contiguous()), _Want(lambda w: w[:, 1])),
    "matmul 2d@1d": (lambda: torch.matmul(_FP_A, _FP_B[:, 1].contiguous()), _Want(lambda w: w[:, 1])),
    "dot": (lambda: torch.dot(_FP_VEC, _FP_E), _Want(dot=True)),
    "dot.out": (lambda: torch.dot(_FP_VEC, _FP_E, out=torch.empty(())), _Want(dot=True)),
    "vdot": (lambda: torch.vdot(_FP_VEC, _FP_E), _Want(dot=True)),
    "vdot.out": (lambda: torch.vdot(_FP_VEC, _FP_E, out=torch.empty(())), _Want(dot=True)),
    "matmul 1d@1d": (lambda: torch.matmul(_FP_VEC, _FP_E), _Want(dot=True)),
    "F.linear": (lambda: F.linear(_FP_A, _FP_B.t()), _Want()),
    "F.linear bias": (lambda: F.linear(_FP_A, _FP_B.t(), torch.zeros(3)), _Want()),
    "F.linear 3d bias": (lambda: F.linear(_FP_A[None], _FP_B.t(), torch.zeros(3)), _Want(lambda w: w[None])),
    "nn.Linear": (lambda: _linear_module()(_FP_A).detach(), _Want()),
    "einsum": (lambda: torch.einsum("ik,kn->in", _FP_A, _FP_B), _Want()),
    "einsum batched": (lambda: torch.einsum("bik,bkn->bin", _FP_A[None], _FP_B[None]), _Want(lambda w: w[None])),
    "tensordot": (lambda: torch.tensordot(_FP_A, _FP_B, dims=1), _Want()),
    "inner": (lambda: torch.inner(_FP_A, _FP_B.t()), _Want()),
    "linalg.multi_dot": (lambda: torch.linalg.multi_dot([_FP_A, _FP_B, torch.eye(3)]), _Want()),
    "chain_matmul": (lambda: torch.chain_matmul(_FP_A, _FP_B, torch.eye(3)), _Want()),
}


def test_fingerprint_data_tells_sgemm_cube_from_native():
    """The routing check's precondition: on these operands sgemm_cube's product is not native FP32's."""
    want, want_dot = _fp_want()
    native = off(torch.mm, _FP_A, _FP_B)
    assert torch.equal(native, _FP_A[:, _FP_B.argmax(0)])  # native: exact entries of a
    assert not torch.equal(want, native)
    assert (want != native).all()
    check_close(want, native.double(), native.double(), 32)  # and sgemm_cube's is within the bound
    assert want_dot != off(torch.dot, _FP_VEC, _FP_E)


@pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")
@pytest.mark.parametrize("name", list(ROUTES))
def test_switch_routes(name):
    """With the switch on, each float32 CPU product is sgemm_cube's (bit for bit); with it off, native."""
    call, want = ROUTES[name]
    want = want()
    res = call()
    native = off(call)
    assert not torch.equal(native, want), "precondition: native differs from sgemm_cube here"
    assert res.shape == want.shape and res.dtype == torch.float32
    if not torch.equal(res, want):
        raise AssertionError(f"{name}: not computed by sgemm_cube with the switch on: "
                             f"{'equals native FP32' if torch.equal(res, native) else 'neither sgemm_cube nor native'}"
                             f"\n got    {res.flatten()[:6].tolist()}\n sgemm_cube {want.flatten()[:6].tolist()}"
                             f"\n native {native.flatten()[:6].tolist()}")


def test_switch_context_manager_and_disable():
    """``enabled(devices=("cpu",))`` routes inside the block only; ``disable`` restores native FP32."""
    want = _fp_want()[0]
    native = off(torch.mm, _FP_A, _FP_B)
    with switch_off():
        assert torch.equal(torch.mm(_FP_A, _FP_B), native)
        with sgemm_cube.enabled(devices=DEVICES):
            assert sgemm_cube.is_enabled()
            assert torch.equal(torch.mm(_FP_A, _FP_B), want)
        assert not sgemm_cube.is_enabled()
        assert torch.equal(torch.mm(_FP_A, _FP_B), native)
    assert torch.equal(torch.mm(_FP_A, _FP_B), want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.complex64])
def test_other_dtypes_untouched(dtype):
    """Other dtypes run PyTorch's own kernels, bit for bit, with the switch on."""
    a = make_tensor((5, 24), dtype=dtype, device="cpu", low=-4, high=4)
    b = make_tensor((24, 6), dtype=dtype, device="cpu", low=-4, high=4)
    t = make_tensor((5, 6), dtype=dtype, device="cpu", low=-4, high=4)
    for fn in (lambda: torch.mm(a, b), lambda: torch.matmul(a[None], b[None]), lambda: torch.addmm(t, a, b),
               lambda: torch.mv(a, b[:, 0].contiguous()), lambda: torch.dot(a[0], b[:, 0].contiguous())):
        res_on, res_off = fn(), off(fn)
        assert res_on.dtype == dtype
        assert torch.equal(res_on, res_off)


# --------------------------------------------------------------------------- test_matmul_small_brute_force_*

def matmul_ref(x, y):
    """float64 reference and magnitude of ``torch.matmul(x, y)`` (NumPy's matmul: same rules, no dispatch)."""
    x64, y64 = x.detach().double().numpy(), y.detach().double().numpy()
    return (torch.from_numpy(np.asarray(np.matmul(x64, y64))),
            torch.from_numpy(np.asarray(np.matmul(np.abs(x64), np.abs(y64)))))


def check_single_matmul(x, y):
    """PyTorch's check_single_matmul: ``x @ y`` contiguous and right, and the same into ``out``."""
    k = x.shape[-1]
    what = f"{tuple(x.shape)} x {tuple(y.shape)}"
    ref, mag = matmul_ref(x, y)
    ans = torch.matmul(x, y)
    assert ans.is_contiguous(), what
    check_close(ans, ref, mag, k, what)
    out = torch.empty_like(ans)
    # A 1-D x makes torch resize an out of the result's shape, with a warning: the same warnings, switch on or
    # off (compared where an operand is 1-D or the switch warned; elsewhere there must be none).
    ans, w_on = _record(lambda: torch.matmul(x, y, out=out))
    if w_on or x.dim() == 1 or y.dim() == 1:
        out_off = torch.empty_like(out)
        w_off = off(_record, lambda: torch.matmul(x, y, out=out_off))[1]
        assert w_on == w_off, f"{what}: switch on warned {w_on}\nswitch off warned {w_off}"
    assert ans is out, what
    assert ans.is_contiguous(), what
    check_close(ans, ref, mag, k, what + " (out=)")


def gen_sizes_matmul(x_dim, y_dim=4, matrix_size=4, batch_size=3):
    """PyTorch's gen_sizes_matmul: (size(x), size(y)) with len(size(x)) = x_dim, len(size(y)) <= y_dim."""
    assert x_dim >= 1
    assert y_dim >= 2
    x = x_dim
    for y in range(1, y_dim + 1):
        for batch, mn in itertools.product(itertools.product(range(batch_size), repeat=max(x - 2, y - 2, 0)),
                                           itertools.product(range(matrix_size), repeat=min(y, 2))):
            if x == 1:
                size_x = mn[:1]
                size_y = batch + mn
                yield size_x, size_y
            else:
                for k in range(matrix_size):
                    size_x = (k,) + mn[:1]
                    if x > 2:
                        size_x = batch[-(x - 2):] + size_x
                    size_y = mn
                    if y > 2:
                        size_y = batch[-(y - 2):] + size_y
                    yield size_x, size_y


def gen_sizes_matmul_large_k(x_dim, every):
    """The same shapes with the contracted size 0..3 mapped to 16, 17, 24, 33 (every ``every``-th shape)."""
    k_map = {0: 16, 1: 17, 2: 24, 3: 33}
    for i, (sx, sy) in enumerate(gen_sizes_matmul(x_dim, batch_size=2)):
        if i % every:
            continue
        k = k_map[sx[-1]]
        sx = sx[:-1] + (k,)
        sy = (k,) if len(sy) == 1 else sy[:-2] + (k, sy[-1])
        yield sx, sy


@pytest.mark.parametrize("x_dim", [1, 2, 3], ids=["1d_Nd", "2d_Nd", "3d_Nd"])
def test_matmul_small_brute_force(x_dim):
    """test_matmul_small_brute_force_{1d,2d,3d}_Nd: every shape, contiguous or not (K = 0..3: native by design)."""
    n = 0
    for (size_x, size_y), nctg_x, nctg_y in itertools.product(gen_sizes_matmul(x_dim), (True, False), (True, False)):
        x = make_arg(size_x, noncontiguous=nctg_x)
        y = make_arg(size_y, noncontiguous=nctg_y)
        check_single_matmul(x, y)
        n += 1
    assert n > 800


@pytest.mark.parametrize("x_dim", [1, 2, 3], ids=["1d_Nd", "2d_Nd", "3d_Nd"])
def test_matmul_small_brute_force_large_k(x_dim):
    """The brute-force shapes with K in {16, 17, 24, 33}: sgemm_cube's emulation runs."""
    every = {1: 1, 2: 3, 3: 4}[x_dim]
    n = 0
    for i, (size_x, size_y) in enumerate(gen_sizes_matmul_large_k(x_dim, every)):
        nctg_x, nctg_y = [(True, False), (False, True), (False, False), (True, True)][i % 4]
        x = make_arg(size_x, noncontiguous=nctg_x)
        y = make_arg(size_y, noncontiguous=nctg_y)
        check_single_matmul(x, y)
        n += 1
    assert n > 40


def test_matmul_out_kernel_errors_with_autograd():
    """test_matmul_out_kernel_errors_with_autograd: out= refuses inputs that require grad, same message."""
    a = torch.randn((64, 512), requires_grad=True).unsqueeze(0)      # PyTorch's: 256 rows, 128 columns
    b = torch.randn((4, 32, 512), requires_grad=True).transpose(-1, -2)
    c = torch.empty((64, 4, 32)).movedim(1, 0)
    strides = c.stride()
    res = torch.matmul(a.detach(), b.detach(), out=c)
    assert res is c and c.stride() == strides
    ref, mag = ref_mag(torch.matmul, a, b)
    check_close(c, ref, mag, 512, "matmul into a permuted out")
    raises_same(lambda: torch.matmul(a, b, out=c), RuntimeError,
                "functions with out=... arguments don't support automatic differentiation")
    with torch.no_grad():
        torch.matmul(a, b, out=c)
    check_close(c, ref, mag, 512, "matmul into a permuted out under no_grad")


@pytest.mark.parametrize("k", [4, 20])
def test_matmul_out(k):
    """test_matmul_out (PyTorch's test/test_torch.py; K = 4 as there, and 20): a non-contiguous out of the
    right shape is written in place (torch 2.13 refuses it for a batch times a matrix: so must the switch)."""
    def check_matmul(size1, size2):
        a = torch.randn(size1)
        b = torch.randn(size2)
        expected = torch.matmul(a, b)
        out = torch.zeros(expected.size())
        out = out.transpose(-1, -2).contiguous().transpose(-1, -2)  # make output non-contiguous
        assert not out.is_contiguous()
        strides = out.stride()
        try:
            off(torch.matmul, a, b, out=out.clone().transpose(-1, -2).contiguous().transpose(-1, -2))
        except RuntimeError:
            raises_same(lambda: torch.matmul(a, b, out=out))
            return
        assert torch.matmul(a, b, out=out) is out
        assert out.stride() == strides
        ref, mag = matmul_ref(a, b)
        check_close(expected, ref, mag, k, f"matmul {size1} x {size2}")
        check_close(out, ref, mag, k, f"matmul {size1} x {size2} into a transposed out")

    check_matmul((2, 3, k), (2, k, 5))
    check_matmul((2, 3, k), (k, 5))


# --------------------------------------------------------------------------- addmm / addmv / _addmm_activation

def _test_addmm_addmv(f, t, m, v, *, alpha=None, beta=None, transpose_out=False, activation=None):
    """PyTorch's _test_addmm_addmv: the call, the same into a NaN-filled (maybe transposed) out, vs float64."""
    alpha = 1.2 if alpha is None else alpha
    beta = 0.8 if beta is None else beta
    kw = dict(alpha=alpha, beta=beta)
    if activation == "gelu":
        kw["use_gelu"] = True
    res1 = f(t, m, v, **kw)
    res2 = torch.full_like(res1, math.nan)
    if transpose_out:
        res2 = res2.t().clone(memory_format=torch.contiguous_format).t()
    strides = res2.stride()
    ret = f(t, m, v, **kw, out=res2)
    assert ret is res2 and res2.stride() == strides
    assert_same_layout(res1, off(f, t, m, v, **kw), f.__name__)
    kind = "addmv" if f is torch.addmv else "addmm"
    ref, mag = _prod_ref(kind, t, m, v, alpha=alpha, beta=beta)
    k = m.shape[-1]
    what = f"{f.__name__}{tuple(t.shape)}, {tuple(m.shape)}, {tuple(v.shape)}, alpha={alpha}, beta={beta}"
    factor, rel = 1.0, 0.0
    if activation == "relu":
        ref = ref.clamp_min(0)
    elif activation == "gelu":
        ref = F.gelu(ref)
        factor, rel = 1.13, 4 * U  # gelu' <= 1.13, and gelu's own float32 rounding
    for res, name in ((res1, ""), (res2, " (out=)")):
        check_close(res, ref, mag, k, what + name, factor=factor, rel_extra=rel)


def _test_addmm_impl(func, activation, k=50):
    M = torch.randn(10, 25)
    m1 = torch.randn(10, k)
    m2 = torch.randn(k, 25)
    _test_addmm_addmv(func, M, m1, m2, activation=activation)

    # vector-shaped bias and beta=1
    V = torch.randn(25)
    _test_addmm_addmv(func, V, m1, m2, beta=1, activation=activation)

    # Test 0-strided
    M = torch.randn(10, 1).expand(10, 25)
    m1 = torch.randn(10, 1).expand(10, k)
    m2 = torch.randn(k, 25)
    _test_addmm_addmv(func, M, m1, m2, activation=activation)

    # Test beta=0, M=nan
    M = torch.full((10, 25), math.nan)
    m1 = torch.randn(10, k)
    m2 = torch.randn(k, 25)
    _test_addmm_addmv(func, M, m1, m2, beta=0, activation=activation)

    # Test transpose
    for t1, t2, t3, t4 in itertools.product([True, False], repeat=4):
        def maybe_transpose(cond, m):
            if not cond:
                return m
            return m.t().clone(memory_format=torch.contiguous_format).t()

        M = maybe_transpose(t1, torch.randn(10, 25))
        m1 = maybe_transpose(t2, torch.randn(10, k))
        m2 = maybe_transpose(t3, torch.randn(k, 25))
        _test_addmm_addmv(func, M, m1, m2, transpose_out=t4, activation=activation)
        if t1:
            _test_addmm_addmv(func, V, m1, m2, beta=1, transpose_out=t4, activation=activation)


@pytest.mark.parametrize("k", [50, 7])
def test_addmm(k):
    """test_addmm (_test_addmm_impl): matrix and vector bias, 0-strided, beta=0 with NaN, 16 layouts."""
    _test_addmm_impl(torch.addmm, None, k)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_addmm_activation(activation):
    """test_addmm_relu / test_addmm_gelu: torch._addmm_activation."""
    _test_addmm_impl(torch._addmm_activation, activation)


def test_addmm_sizes():
    """test_addmm_sizes, with K in {16, 33} added: every size 0/1/n, and the shape error with torch's message."""
    for m in [0, 1, 25]:
        for n in [0, 1, 10]:
            for k in [0, 1, 8, 16, 33]:
                M = torch.randn(n, m)
                m1 = torch.randn(n, k)
                m2 = torch.randn(k, m)
                _test_addmm_addmv(torch.addmm, M, m1, m2)

                m1 = torch.randn(n, k + 1)
                m2 = torch.randn(k, m)
                raises_same(lambda: torch.addmm(M, m1, m2), RuntimeError, f"{n}x{k + 1}.*{k}x{m}")
                raises_same(lambda: torch.mm(m1, m2), RuntimeError, f"{n}x{k + 1}.*{k}x{m}")


def test_addmm_badmm_scalar_tensor_input():
    """test_addmm_badmm_scalar_tnesor_input: a 0-d input broadcasts."""
    inp = torch.tensor(1.0)
    mat1 = torch.randn(10, 25)
    mat2 = torch.randn(25, 10)
    expect(torch.addmm, inp, mat1, mat2, k=25)
    mat1 = torch.randn(3, 10, 25)
    mat2 = torch.randn(3, 25, 10)
    expect(torch.baddbmm, inp, mat1, mat2, k=25)


@pytest.mark.parametrize("k", [100, 12])
def test_addmv(k):
    """test_addmv: 0-d/1-d/2-d/transposed matrices, expanded vectors and inputs, and beta=0 with NaN input."""
    ts = [0.2 * torch.randn(50), 0.2 * torch.randn(1).expand(50)]
    vs = [0.2 * torch.randn(k), 0.2 * torch.ones(1).expand(k)]
    ms = [
        0.2 * torch.ones(()).expand(50, k),                                   # 0d
        0.2 * torch.randn((1, k)).expand(50, k),                              # 1d
        0.2 * torch.randint(3, (50, 1), dtype=torch.float).expand(50, k),
        0.2 * torch.randn((50, k)),                                           # 2d
        0.2 * torch.randn((k, 50)).t(),
    ]
    for m, v, t in itertools.product(ms, vs, ts):
        _test_addmm_addmv(torch.addmv, t, m, v)
    # Test beta=0, t=nan
    t = torch.full((50,), math.nan)
    for m, v in itertools.product(ms, vs):
        _test_addmm_addmv(torch.addmv, t, m, v, beta=0)


@pytest.mark.parametrize("s", [3, 17])
def test_addmv_rowmajor_colmajor_incx_incy_lda(s):
    """test_addmv_rowmajor_colmajor_incx_incy_lda (s = 3 as PyTorch's, and 17): strided matrix and vectors
    inside NaN-filled storage."""
    o = 5
    a_data = torch.arange(1, o * s + 1, dtype=torch.float32).view(o, s)
    x_data = torch.arange(1, s + 1, 1, dtype=torch.float32)
    y_data = torch.ones(o)

    def _test(row_major, incx, incy, lda_tail):
        if row_major:
            a_storage = torch.full((o, s + lda_tail), float("nan"))
        else:
            a_storage = torch.full((s, o + lda_tail), float("nan")).permute(1, 0)
        a = a_storage[:o, :s].copy_(a_data)
        x_storage = torch.full((s, incx), float("nan"))
        x = x_storage[:, 0].copy_(x_data)
        y_storage = torch.full((o, incy), float("nan"))
        y = y_storage[:, 0].copy_(y_data)
        _test_addmm_addmv(torch.addmv, y, a, x)
        # integer-valued: exact
        res = torch.addmv(y, a, x, alpha=1, beta=1)
        assert torch.equal(res, (a_data.double() @ x_data.double() + 1).float())

    for row_major, incx, incy, lda_tail in itertools.product((False, True), (1, 2), (1, 2), (0, 1)):
        _test(row_major, incx, incy, lda_tail)


def test_linear_algebra_scalar_raises():
    """test_linear_algebra_scalar_raises: mv/addmv with a 0-d vector."""
    m = torch.randn(5, 5)
    v = torch.randn(5)
    s = torch.tensor(7.0)
    raises_same(lambda: torch.mv(m, s))
    raises_same(lambda: torch.addmv(v, m, s))


# --------------------------------------------------------------------------- mm / bmm

def test_mm():
    """test_mm: contiguous, transposed, 0-stride operands and out= (float64 reference instead of a Python loop)."""
    def genf(x, y):
        return torch.randn(x, y)

    for n, m, p in [(20, 10, 15), (15, 20, 10), (25, 18, 10)]:
        cases = [
            (genf(n, m), genf(m, p)),
            (genf(n, m), genf(p, m).t()),
            (genf(m, n).t(), genf(m, p)),
            (genf(m, n).t(), genf(p, m).t()),
            (genf(n, m), genf(m, 1).expand(m, p)),
        ]
        for mat1, mat2 in cases:
            res = expect(torch.mm, mat1, mat2, k=m)
            assert res.is_contiguous()
        for mat1, mat2 in (cases[0], cases[3]):
            res = genf(n, p)
            ret = torch.mm(mat1, mat2, out=res)
            assert ret is res
            ref, mag = ref_mag(torch.mm, mat1, mat2)
            check_close(res, ref, mag, m, "mm out=")


def test_strided_mm_bmm():
    """test_strided_mm_bmm: a view whose stride is smaller than the size of its dimension."""
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    sx = torch.as_strided(x, size=[2, 2, 2], stride=[3, 1, 1])
    res = expect(torch.bmm, sx, sx, k=2)
    assert torch.equal(res, torch.from_numpy(np.matmul(sx.numpy(), sx.numpy())))
    res = expect(torch.mm, sx[0], sx[0], k=2)
    assert torch.equal(res, torch.from_numpy(np.matmul(sx[0].numpy(), sx[0].numpy())))
    # the same with K = 17
    y = torch.arange(40, dtype=torch.float32)
    sy = torch.as_strided(y, size=[2, 17, 17], stride=[3, 1, 1])
    res = expect(torch.bmm, sy, sy, k=17)
    assert torch.equal(res, torch.from_numpy(np.matmul(sy.numpy().astype(np.float64), sy.numpy())).float())


def test_1_sized_with_0_strided():
    """test_1_sized_with_0_strided: a size-1 dimension with stride 0, and b with a batch stride of 64."""
    a = make_arg((8, 1, 64))
    a_strided = torch.as_strided(a, size=[8, 1, 64], stride=[64, 0, 1])
    b = make_arg((8, 64, 512))
    b_strided = torch.as_strided(b, size=[8, 64, 512], stride=[64, 1, 512])
    expect(torch.bmm, a_strided, b_strided, k=64)


def test_mm_empty_inputs_mixed_dtype_errors():
    """test_mm_empty_inputs_mixed_dtype_errors."""
    a = torch.randint(0, 10, [1, 10], dtype=torch.int16)
    b = torch.randn(10, 20)
    raises_same(lambda: torch.mm(a, b), RuntimeError, "expected .* and .* to have the same dtype, but got:")
    raises_same(lambda: torch.mm(b.t(), a.t()), RuntimeError, "expected .* and .* to have the same dtype, but got:")


@pytest.mark.parametrize("n_dim", [15, 17])
def test_bmm(n_dim):
    """test_bmm (K = 15 as PyTorch's, and 17): transposed, broadcast (expanded) and zero-sized batches,
    out= in every layout (the out layouts cycle over the inputs); 1 and 10 batches as PyTorch's (1 and 4 for
    K = 17, where each product is emulated)."""
    M, N, O = 23, n_dim, 12
    batch_sizes = [1, 10] if N < 16 else [1, 4]

    def generate_inputs(num_batches):
        for perm1, perm2 in itertools.product(itertools.permutations((0, 1, 2)), repeat=2):
            b1 = make_arg((num_batches, M, N), low=-0.1, high=0.1)
            b2 = make_arg((num_batches, N, O), low=-0.1, high=0.1)
            b1 = b1.permute(perm1).contiguous().permute(invert_perm(perm1))
            b2 = b2.permute(perm2).contiguous().permute(invert_perm(perm2))
            yield b1, b2
        for b1, b2, b3, b4, b5, b6 in itertools.product((True, False), repeat=6):
            shape1 = (num_batches if b1 else 1, M if b2 else 1, N if b3 else 1)
            shape2 = (num_batches if b4 else 1, N if b5 else 1, O if b6 else 1)
            b1 = make_arg(shape1, low=-0.1, high=0.1).expand(num_batches, M, N)
            b2 = make_arg(shape2, low=-0.1, high=0.1).expand(num_batches, N, O)
            yield b1, b2
        for z1, z2, z3, z4 in itertools.product((True, False), repeat=4):
            shape1 = (num_batches if z1 else 0, M if z2 else 0, N if z3 else 0)
            shape2 = (num_batches if z1 else 0, N if z3 else 0, O if z4 else 0)
            yield torch.randn(shape1), torch.randn(shape2)

    perms = list(itertools.permutations((0, 1, 2)))
    for num_batches in batch_sizes:
        for i, (b1, b2) in enumerate(generate_inputs(num_batches)):
            if not _kept(i, N >= 16):
                continue
            perm3 = perms[i % len(perms)]
            res1 = torch.bmm(b1, b2)
            full = (num_batches if b1.shape[0] else 0, M if b1.shape[1] else 0, O if b2.shape[2] else 0)
            res2 = torch.full(full, math.nan).permute(perm3).contiguous().permute(invert_perm(perm3))
            strides = res2.stride()
            ret = torch.bmm(b1, b2, out=res2)
            assert ret is res2 and res2.stride() == strides
            assert res1.is_contiguous()
            ref, mag = ref_mag(torch.bmm, b1, b2)
            what = f"bmm {tuple(b1.shape)} {b1.stride()} x {tuple(b2.shape)} {b2.stride()}"
            check_close(res1, ref, mag, N, what)
            check_close(res2, ref, mag, N, what + f" out= {perm3}")


def _test_addbmm_baddbmm(func, b1, b2, out_tensor):
    """PyTorch's _test_addbmm_baddbmm: in place, the deprecated overloads (warnings), alpha/beta,
    beta=0 with NaN input, out=; every step against float64 from the values it started from."""
    k = _k_of(func, b1)

    def chk(res, before, alpha, beta, what):
        ref, mag = _prod_ref(func, before, b1, b2, alpha=alpha, beta=beta)
        check_close(res, ref, mag, k, f"{func} {what} {tuple(b1.shape)}x{tuple(b2.shape)}")

    def deprecated(name, fn):
        res, w = _record(fn)
        assert any(issubclass(c, UserWarning) and f"This overload of {name} is deprecated" in m for c, m in w), w
        return res

    before = out_tensor.clone()
    strides = out_tensor.stride()
    ret = getattr(out_tensor, func + "_")(b1, b2)
    assert ret is out_tensor and out_tensor.stride() == strides
    chk(out_tensor, before, 1, 1, "in place")
    res3 = out_tensor.clone()

    before = out_tensor.clone()
    deprecated(func + "_", lambda: getattr(out_tensor, func + "_")(1, b1, b2))
    chk(out_tensor, before, 1, 1, "deprecated (beta, b1, b2)")
    before3 = res3.clone()
    getattr(res3, func + "_")(b1, b2, beta=1)
    chk(res3, before3, 1, 1, "beta=1")

    before = out_tensor.clone()
    deprecated(func + "_", lambda: getattr(out_tensor, func + "_")(1.0, 0.5, b1, b2))
    chk(out_tensor, before, 0.5, 1.0, "deprecated (beta, alpha, b1, b2)")
    before3 = res3.clone()
    getattr(res3, func + "_")(b1, b2, beta=1.0, alpha=0.5)
    chk(res3, before3, 0.5, 1.0, "beta=1, alpha=0.5")

    res = deprecated(func, lambda: getattr(torch, func)(1, out_tensor, 0, b1, b2))
    chk(res, out_tensor, 0, 1, "deprecated (beta, input, alpha, b1, b2)")

    res4 = getattr(torch, func)(out_tensor, b1, b2, beta=1, alpha=0.5)
    chk(res4, out_tensor, 0.5, 1, "beta=1, alpha=0.5")

    nan = torch.full_like(out_tensor, math.nan)
    res5 = getattr(torch, func)(nan, b1, b2, beta=0, alpha=1)
    chk(res5, nan, 1, 0, "beta=0, NaN input")

    res6 = getattr(torch, func)(out_tensor, b1, b2, beta=0.1, alpha=0.5)
    chk(res6, out_tensor, 0.5, 0.1, "beta=0.1, alpha=0.5")

    res7 = torch.full_like(out_tensor, math.nan)
    ret = getattr(torch, func)(nan, b1, b2, beta=0, out=res7)
    assert ret is res7
    chk(res7, nan, 1, 0, "beta=0, NaN input, out=")


@pytest.mark.parametrize("n_dim", [17, 7])
def test_addbmm(n_dim):
    """test_addbmm (M, N, O = 16, 17, 18 as PyTorch's; and N = 7): transposed, broadcast and zero-sized."""
    num_batches = 2
    M, N, O = 16, n_dim, 18
    perms2 = list(itertools.permutations((0, 1)))

    def generate_tensor():
        for i, (perm1, perm2) in enumerate(itertools.product(itertools.permutations((0, 1, 2)), repeat=2)):
            perm3 = perms2[i % 2]
            b1 = make_arg((num_batches, M, N), low=-1, high=1) * 0.1
            b2 = make_arg((num_batches, N, O), low=-1, high=1) * 0.1
            b1 = b1.permute(perm1).contiguous().permute(invert_perm(perm1))
            b2 = b2.permute(perm2).contiguous().permute(invert_perm(perm2))
            out_tensor = torch.zeros(M, O).permute(perm3).contiguous().permute(perm3)
            yield b1, b2, out_tensor
        for s1, s2, s3, s4, s5, s6 in itertools.product((True, False), repeat=6):
            shape1 = (num_batches if s1 else 1, M if s2 else 1, N if s3 else 1)
            shape2 = (num_batches if s4 else 1, N if s5 else 1, O if s6 else 1)
            b1 = make_arg(shape1, low=-1, high=1).expand(num_batches, M, N) * 0.1
            b2 = make_arg(shape2, low=-1, high=1).expand(num_batches, N, O) * 0.1
            yield b1, b2, torch.zeros(M, O)
        for z1, z2, z3, z4 in itertools.product((True, False), repeat=4):
            shape1 = (num_batches if z1 else 0, M if z2 else 0, N if z3 else 0)
            shape2 = (num_batches if z1 else 0, N if z3 else 0, O if z4 else 0)
            b1 = make_arg(shape1, low=-1, high=1) * 0.1
            b2 = make_arg(shape2, low=-1, high=1) * 0.1
            yield b1, b2, torch.zeros(shape1[1], shape2[2])

    for i, (b1, b2, out_tensor) in enumerate(generate_tensor()):
        if _kept(i, N >= 16):
            _test_addbmm_baddbmm("addbmm", b1, b2, out_tensor)


@pytest.mark.parametrize("n_dim", [8, 20])
def test_baddbmm(n_dim):
    """test_baddbmm (M, N, O = 12, 8, 50 and 10 batches as PyTorch's; and N = 20 with 3 batches)."""
    num_batches = 10 if n_dim < 16 else 3
    M, N, O = 12, n_dim, 50
    perms = list(itertools.permutations((0, 1, 2)))

    def generate_tensor():
        for i, (perm1, perm2) in enumerate(itertools.product(perms, repeat=2)):
            perm3 = perms[i % 6]
            b1 = make_arg((num_batches, M, N), low=-1, high=1)
            b2 = make_arg((num_batches, N, O), low=-1, high=1)
            b1 = b1.permute(perm1).contiguous().permute(invert_perm(perm1))
            b2 = b2.permute(perm2).contiguous().permute(invert_perm(perm2))
            out_tensor = torch.zeros(num_batches, M, O).permute(perm3).contiguous().permute(invert_perm(perm3))
            yield b1, b2, out_tensor
        for s1, s2, s3, s4, s5, s6 in itertools.product((True, False), repeat=6):
            shape1 = (num_batches if s1 else 1, M if s2 else 1, N if s3 else 1)
            shape2 = (num_batches if s4 else 1, N if s5 else 1, O if s6 else 1)
            b1 = make_arg(shape1, low=-1, high=1).expand(num_batches, M, N)
            b2 = make_arg(shape2, low=-1, high=1).expand(num_batches, N, O)
            yield b1, b2, torch.zeros(num_batches, M, O)
        for z1, z2, z3, z4 in itertools.product((True, False), repeat=4):
            shape1 = (num_batches if z1 else 0, M if z2 else 0, N if z3 else 0)
            shape2 = (num_batches if z1 else 0, N if z3 else 0, O if z4 else 0)
            b1 = make_arg(shape1, low=-2, high=2)
            b2 = make_arg(shape2, low=-2, high=2)
            yield b1, b2, torch.zeros(shape1[0], shape1[1], shape2[2])

    for i, (b1, b2, out_tensor) in enumerate(generate_tensor()):
        if _kept(i, N >= 16):
            _test_addbmm_baddbmm("baddbmm", b1, b2, out_tensor)


def test_baddbmm_nan_input_with_zero_beta():
    """test_baddbmm_nan_input_with_zero_beta: beta=0 ignores NaN input, into no/finite/NaN out."""
    for shape in [[3, 2, 2], [2, 20, 20]]:
        mat1, mat2 = (torch.randn(shape) for _ in range(2))
        inputs = [torch.randn(shape), torch.randn(shape).fill_(torch.nan)]
        outs = [None, torch.randn(shape), torch.randn(shape).fill_(torch.nan)]
        ref, mag = ref_mag(torch.bmm, mat1, mat2)
        y_ref = torch.bmm(mat1, mat2)
        check_close(y_ref, ref, mag, shape[-1], "bmm")
        for inp, out in itertools.product(inputs, outs):
            y = torch.baddbmm(inp, mat1, mat2, beta=0.0, out=out)
            if out is not None:
                assert y is out
            check_close(y, ref, mag, shape[-1], "baddbmm beta=0")


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.int64, torch.float16, torch.float32,
                                   torch.float64])
def test_baddbmm_input_dtypes_compatibility(dtype):
    """test_baddbmm_input_dtypes_compatibility: a float32 product with an input of another dtype."""
    batch1 = torch.rand((1, 2, 2), dtype=torch.float32)
    batch2 = torch.rand((1, 2, 2), dtype=torch.float32)
    input_tensor = torch.rand((1, 2, 2)).to(dtype)
    if dtype != torch.float32:
        raises_same(lambda: torch.baddbmm(input_tensor, batch1, batch2, beta=0.0), RuntimeError,
                    "Input dtypes must be the same")
    else:
        out = torch.randn((1, 2, 2), dtype=dtype).fill_(torch.nan)
        torch.baddbmm(input_tensor, batch1, batch2, beta=0.0, out=out)
        ref, mag = ref_mag(torch.bmm, batch1, batch2)
        check_close(out, ref, mag, 2)


# --------------------------------------------------------------------------- empty and NaN cases

def test_blas_empty():
    """test_blas_empty: zero-sized operands of mm/addmm/mv/addmv/bmm/baddbmm/addbmm/matmul/dot, with and
    without (NaN-filled) out=; an empty sum is exactly 0, so these are exact."""
    def fn(torchfn, *args, test_out=False, **kwargs):
        def call_torch_fn(*args, **kwargs):
            return torchfn(*tuple(torch.randn(shape) if isinstance(shape, tuple) else shape for shape in args),
                           **kwargs)
        result = call_torch_fn(*args, **kwargs)
        if not test_out:
            return result
        out = torch.full_like(result, math.nan)
        out1 = call_torch_fn(*args, **kwargs, out=out)
        assert out1 is out
        return out

    eq = torch.equal
    # mm, addmm
    assert (0, 0) == fn(torch.mm, (0, 0), (0, 0)).shape
    assert (0, 5) == fn(torch.mm, (0, 0), (0, 5)).shape
    assert (5, 0) == fn(torch.mm, (5, 0), (0, 0)).shape
    assert (3, 0) == fn(torch.mm, (3, 2), (2, 0)).shape
    assert (3, 0) == fn(torch.mm, (3, 20), (20, 0)).shape
    assert eq(torch.zeros((5, 6)), fn(torch.mm, (5, 0), (0, 6)))
    assert eq(torch.zeros((5, 6)), fn(torch.mm, (5, 0), (0, 6), test_out=True))

    assert (0, 0) == fn(torch.addmm, (0, 0), (0, 0), (0, 0)).shape
    assert (0, 1) == fn(torch.addmm, (1,), (0, 17), (17, 1)).shape
    t = torch.randn((5, 6))
    assert eq(t, fn(torch.addmm, t, (5, 0), (0, 6)))
    assert eq(t, fn(torch.addmm, t, (5, 0), (0, 6), test_out=True))

    # mv, addmv
    assert (0,) == fn(torch.mv, (0, 0), (0,)).shape
    assert (0,) == fn(torch.mv, (0, 2), (2,)).shape
    assert (0,) == fn(torch.mv, (0, 20), (20,)).shape
    assert eq(torch.zeros((3,)), fn(torch.mv, (3, 0), (0,)))
    assert eq(torch.zeros((3,)), fn(torch.mv, (3, 0), (0,), test_out=True))

    assert (0,) == fn(torch.addmv, (0,), (0, 0), (0,)).shape
    t = torch.randn((3,))
    assert eq(t, fn(torch.addmv, t, (3, 0), (0,)))
    assert eq(t, fn(torch.addmv, t, (3, 0), (0,), test_out=True))

    # bmm, baddbmm
    assert (0, 0, 0) == fn(torch.bmm, (0, 0, 0), (0, 0, 0)).shape
    assert (3, 0, 5) == fn(torch.bmm, (3, 0, 0), (3, 0, 5)).shape
    assert (0, 5, 6) == fn(torch.bmm, (0, 5, 0), (0, 0, 6)).shape
    assert (0, 5, 6) == fn(torch.bmm, (0, 5, 20), (0, 20, 6)).shape
    assert eq(torch.zeros((3, 5, 6)), fn(torch.bmm, (3, 5, 0), (3, 0, 6)))
    assert eq(torch.zeros((3, 5, 6)), fn(torch.bmm, (3, 5, 0), (3, 0, 6), test_out=True))

    assert (0, 0, 0) == fn(torch.baddbmm, (0, 0, 0), (0, 0, 0), (0, 0, 0)).shape
    assert (3, 0, 5) == fn(torch.baddbmm, (3, 0, 5), (3, 0, 0), (3, 0, 5)).shape
    assert (0, 5, 6) == fn(torch.baddbmm, (0, 5, 6), (0, 5, 0), (0, 0, 6)).shape
    assert (3, 5, 6) == fn(torch.baddbmm, (3, 5, 6), (3, 5, 0), (3, 0, 6)).shape
    c = torch.arange(30, dtype=torch.float32).reshape(3, 2, 5)
    assert eq(-2 * c, fn(torch.baddbmm, c, (3, 2, 0), (3, 0, 5), beta=-2))  # Issue #33467
    assert eq(-2 * c, fn(torch.baddbmm, c, (3, 2, 0), (3, 0, 5), beta=-2, test_out=True))  # Issue #33467

    # addbmm
    assert (0, 0) == fn(torch.addbmm, (0, 0), (0, 0, 0), (0, 0, 0)).shape
    assert (0, 5) == fn(torch.addbmm, (0, 5), (3, 0, 0), (3, 0, 5)).shape
    t = torch.randn((5, 6))
    assert eq(t, fn(torch.addbmm, t, (0, 5, 0), (0, 0, 6)))
    assert eq(t, fn(torch.addbmm, t, (0, 5, 0), (0, 0, 6), test_out=True))

    # matmul
    assert eq(torch.tensor(0.0), fn(torch.matmul, (0,), (0,)))
    assert eq(torch.tensor(0.0), fn(torch.matmul, (0,), (0,), test_out=True))
    assert (0, 0) == fn(torch.matmul, (0, 0), (0, 0)).shape
    assert (0, 0, 0) == fn(torch.matmul, (0, 0, 0), (0, 0, 0)).shape
    assert (5, 0, 0) == fn(torch.matmul, (5, 0, 0), (5, 0, 0)).shape
    assert eq(torch.zeros((5, 3, 4)), fn(torch.matmul, (5, 3, 0), (5, 0, 4)))
    assert eq(torch.zeros((5, 3, 4)), fn(torch.matmul, (5, 3, 0), (5, 0, 4), test_out=True))

    # dot
    assert eq(torch.tensor(0.0), fn(torch.dot, (0,), (0,)))
    assert eq(torch.tensor(0.0), fn(torch.dot, (0,), (0,), test_out=True))


def test_blas_alpha_beta_empty():
    """test_blas_alpha_beta_empty: with K = 0 the result is beta * input (alpha does not matter)."""
    value = 11
    inp = torch.full((2,), value, dtype=torch.float32)
    mat = torch.ones((2, 0))
    vec = torch.ones((0,))
    out = torch.empty((2,))
    alpha, beta = 6, 3
    want = torch.full((2,), beta * value, dtype=torch.float32)
    assert torch.equal(want, torch.addmv(input=inp, mat=mat, vec=vec, alpha=alpha, beta=beta))
    assert torch.equal(want, torch.addmv(input=inp, mat=mat, vec=vec, alpha=alpha, beta=beta, out=out))
    # torch.addmm
    inp = torch.full((2, 3), value, dtype=torch.float32)
    mat2 = torch.ones((0, 3))
    out = torch.empty((2, 3))
    want = torch.full((2, 3), beta * value, dtype=torch.float32)
    assert torch.equal(want, torch.addmm(input=inp, mat1=mat, mat2=mat2, alpha=alpha, beta=beta))
    assert torch.equal(want, torch.addmm(input=inp, mat1=mat, mat2=mat2, alpha=alpha, beta=beta, out=out))


@pytest.mark.parametrize("m", [7, 20])
def test_blas_nan_out(m):
    """test_blas_nan_out (m = 7 as PyTorch's, and 20): NaN-filled out tensors are overwritten."""
    b, n, p = 3, 5, 11
    nm = torch.randn((m, n)).t()
    _m = torch.randn(()).expand(m)
    _m_out = torch.full((n,), float("nan"))
    r = torch.mv(nm, _m)
    assert torch.equal(r, torch.mv(nm, _m, out=_m_out))
    assert not torch.isnan(r).any()
    ref, mag = ref_mag(torch.mv, nm, _m)
    check_close(r, ref, mag, m, "mv")

    mp = torch.randn((p, m)).t()
    np_out = torch.full((n, p), float("nan"))
    r = torch.mm(nm, mp)
    assert torch.equal(r, torch.mm(nm, mp, out=np_out))
    ref, mag = ref_mag(torch.mm, nm, mp)
    check_close(np_out, ref, mag, m, "mm")

    bnm = torch.randn((b, m, n)).transpose(1, 2)
    bmp = torch.randn((b, p, m)).transpose(1, 2)
    bnp_out = torch.full((b, n, p), float("nan"))
    r = torch.bmm(bnm, bmp)
    assert torch.equal(r, torch.bmm(bnm, bmp, out=bnp_out))
    ref, mag = ref_mag(torch.bmm, bnm, bmp)
    check_close(bnp_out, ref, mag, m, "bmm")


# --------------------------------------------------------------------------- dot / vdot

@pytest.mark.parametrize("fn", [torch.dot, torch.vdot], ids=["dot", "vdot"])
def test_dot_vdot_vs_numpy(fn):
    """test_dot_vs_numpy / test_vdot_vs_numpy (_test_dot_vdot_vs_numpy): empty, contiguous, 0-strided,
    2-strided, with out=."""
    np_fn = {torch.dot: np.dot, torch.vdot: np.vdot}[fn]

    def check(x, y):
        res = fn(x, y)
        assert res.shape == () and res.dtype == torch.float32
        ref = torch.tensor(float(np_fn(x.double().numpy(), y.double().numpy())), dtype=torch.float64)
        mag = torch.tensor(float(np_fn(np.abs(x.double().numpy()), np.abs(y.double().numpy()))), dtype=torch.float64)
        check_close(res, ref, mag, x.numel(), f"{fn.__name__} of {x.numel()} ({x.stride()}, {y.stride()})")
        out = torch.empty_like(res)
        ret = fn(x, y, out=out)
        assert ret is out
        assert torch.equal(out, res)

    x = torch.tensor([], dtype=torch.float32)
    y = torch.tensor([], dtype=torch.float32)
    check(x, y)
    x = 0.1 * torch.randn(5000)
    y = 0.1 * torch.randn(5000)
    check(x, y)
    y = 0.1 * torch.randn(1).expand(5000)  # 0 strided
    check(x, y)
    check(x[::2], y[::2])  # 2 strided
    check(x[:15], y[:15])  # K < 16


@pytest.mark.parametrize("fn", [torch.dot, torch.vdot], ids=["dot", "vdot"])
def test_dot_vdot_invalid_args(fn):
    """test_dot_invalid_args / test_vdot_invalid_args (_test_dot_vdot_invalid_args), real dtypes."""
    x = torch.randn(1, dtype=torch.float)
    y = torch.randn(3, dtype=torch.double)
    raises_same(lambda: fn(x, y), RuntimeError, "dot : expected both vectors to have same dtype")
    raises_same(lambda: fn(x.reshape(1, 1), y), RuntimeError, "1D tensors expected")
    raises_same(lambda: fn(x.expand(9), y.to(x.dtype)), RuntimeError, "inconsistent tensor size")
    raises_same(lambda: fn(torch.randn(20), torch.randn(21)), RuntimeError, "inconsistent tensor size")
    raises_same(lambda: fn(torch.randn(20), torch.randn(20), out=torch.empty((), dtype=torch.float64)))


# --------------------------------------------------------------------------- broadcasting

def _select_broadcastable_dims(dims_full=None):
    """PyTorch's _select_broadcastable_dims (random module, seeded per test)."""
    if dims_full is None:
        dims_full = []
        ndims = random.randint(1, 4)
        dims_full = [random.randint(1, 8) for _ in range(ndims)]
    else:
        ndims = len(dims_full)
    smaller_ndims = random.randint(1, ndims)
    dims_small = []
    dims_large = []
    for i in range(ndims - 1, -1, -1):
        j = random.randint(1, 3)
        if j == 1:
            ds = dims_full[i]
            dl = dims_full[i]
        elif j == 2:
            ds = dims_full[i]
            dl = 1 if len(dims_small) < smaller_ndims else dims_full[i]
        elif j == 3:
            ds = 1
            dl = dims_full[i]
        dims_large = [dl] + dims_large
        if len(dims_small) < smaller_ndims:
            dims_small = [ds] + dims_small
    return (dims_small, dims_large, dims_full)


@pytest.mark.parametrize("m_range", [(1, 8), (16, 24)], ids=["small_k", "large_k"])
def test_broadcast_fused_matmul(m_range):
    """test_broadcast_fused_matmul (10 random draws, 4 with K >= 16): a broadcast input gives what its
    expanded copy gives."""
    fns = ["baddbmm", "addbmm", "addmm", "addmv", "addr"]
    for _ in range(10 if m_range[0] < 16 else 4):
        for fn in fns:
            batch_dim = random.randint(1, 8)
            n_dim = random.randint(1, 8)
            m_dim = random.randint(*m_range)
            p_dim = random.randint(1, 8)
            full = {"baddbmm": ([batch_dim, n_dim, p_dim], [batch_dim, n_dim, m_dim], [batch_dim, m_dim, p_dim]),
                    "addbmm": ([n_dim, p_dim], [batch_dim, n_dim, m_dim], [batch_dim, m_dim, p_dim]),
                    "addmm": ([n_dim, p_dim], [n_dim, m_dim], [m_dim, p_dim]),
                    "addmv": ([n_dim], [n_dim, m_dim], [m_dim]),
                    "addr": ([n_dim, m_dim], [n_dim], [m_dim])}[fn]
            t0_dims_full, t1_dims, t2_dims = full
            t0_dims_small, _, _ = _select_broadcastable_dims(t0_dims_full)
            t0_small = torch.randn(*t0_dims_small).float()
            t1 = torch.randn(*t1_dims).float()
            t2 = torch.randn(*t2_dims).float()
            t0_full = t0_small.expand(*t0_dims_full)
            fntorch = getattr(torch, fn)
            k = 1 if fn == "addr" else (batch_dim * m_dim if fn == "addbmm" else m_dim)
            r0 = expect(fntorch, t0_small, t1, t2, k=k, what=f"{fn} broadcast input")
            r1 = expect(fntorch, t0_full, t1, t2, k=k, what=f"{fn} expanded input")
            assert r0.shape == r1.shape


@pytest.mark.parametrize("m_range", [(1, 8), (16, 20)], ids=["small_k", "large_k"])
def test_broadcast_batched_matmul(m_range):
    """test_broadcast_batched_matmul (3 random draws, 2 with K >= 16): matmul/Tensor.matmul/out= on broadcast
    batches, and bmm."""
    for _ in range(3 if m_range[0] < 16 else 2):
        n_dim = random.randint(1, 8)
        m_dim = random.randint(*m_range)
        p_dim = random.randint(1, 8)
        full_batch_dims = [random.randint(1, 3) for _ in range(random.randint(1, 3))]
        batch_dims_small, _, _ = _select_broadcastable_dims(full_batch_dims)

        def verify_batched_matmul(full_lhs, one_dimensional):
            if not one_dimensional:
                lhs_dims = [n_dim, m_dim]
                rhs_dims = [m_dim, p_dim]
                result_dims = [n_dim, p_dim]
            else:
                lhs_dims = [n_dim, m_dim] if full_lhs else [m_dim]
                rhs_dims = [m_dim, p_dim] if not full_lhs else [m_dim]
                result_dims = [n_dim] if full_lhs else [p_dim]

            lhs_mat_dims = lhs_dims if len(lhs_dims) != 1 else [1, m_dim]
            rhs_mat_dims = rhs_dims if len(rhs_dims) != 1 else [m_dim, 1]
            full_mat_dims = lhs_mat_dims if full_lhs else rhs_mat_dims
            dim0_dims = rhs_dims if full_lhs else lhs_dims
            small_dims = batch_dims_small + (rhs_mat_dims if full_lhs else lhs_mat_dims)

            small = torch.randn(*(small_dims)).float()
            dim0 = torch.randn(*(dim0_dims)).float()
            full = torch.randn(*(full_batch_dims + full_mat_dims)).float()
            if not one_dimensional:
                (lhsTensors, rhsTensors) = ((full,), (small, dim0)) if full_lhs else ((small, dim0), (full,))
            else:
                (lhsTensors, rhsTensors) = ((full,), (dim0,)) if full_lhs else ((dim0,), (full,))

            def maybe_squeeze_result(l, r, result):
                if len(lhs_dims) == 1 and l.dim() != 1:
                    return result.squeeze(-2)
                elif len(rhs_dims) == 1 and r.dim() != 1:
                    return result.squeeze(-1)
                else:
                    return result

            for lhs in lhsTensors:
                lhs_expanded = lhs.expand(*(torch.Size(full_batch_dims) + torch.Size(lhs_mat_dims)))
                for rhs in rhsTensors:
                    rhs_expanded = ((rhs if len(rhs_dims) != 1 else rhs.unsqueeze(-1)).
                                    expand(*(torch.Size(full_batch_dims) + torch.Size(rhs_mat_dims))))
                    ref, mag = ref_mag(torch.matmul, lhs_expanded, rhs_expanded)
                    truth = maybe_squeeze_result(lhs_expanded, rhs_expanded, lhs_expanded.matmul(rhs_expanded))
                    check_close(truth, maybe_squeeze_result(lhs_expanded, rhs_expanded, ref),
                                maybe_squeeze_result(lhs_expanded, rhs_expanded, mag), m_dim, "truth")
                    for l in (lhs, lhs_expanded):
                        for r in (rhs, rhs_expanded):
                            ref_lr, mag_lr = ref_mag(torch.matmul, l, r)
                            result = maybe_squeeze_result(l, r, l.matmul(r))
                            check_close(result, maybe_squeeze_result(l, r, ref_lr),
                                        maybe_squeeze_result(l, r, mag_lr), m_dim, "Tensor.matmul")
                            torch_result = maybe_squeeze_result(l, r, torch.matmul(l, r))
                            check_close(torch_result, maybe_squeeze_result(l, r, ref_lr),
                                        maybe_squeeze_result(l, r, mag_lr), m_dim, "torch.matmul")
                            out, out_off = torch.zeros_like(torch_result), torch.zeros_like(torch_result)
                            warns_same(lambda: torch.matmul(l, r, out=out_off), lambda: torch.matmul(l, r, out=out))
                            check_close(maybe_squeeze_result(l, r, out), maybe_squeeze_result(l, r, ref_lr),
                                        maybe_squeeze_result(l, r, mag_lr), m_dim, "torch.matmul out=")

                # compare to bmm
                bl = lhs_expanded.contiguous().view(-1, *lhs_mat_dims)
                br = rhs_expanded.contiguous().view(-1, *rhs_mat_dims)
                bmm_result = expect(torch.bmm, bl, br, k=m_dim)
                check_close(bmm_result.view(-1, *result_dims), ref.reshape(-1, *result_dims),
                            mag.reshape(-1, *result_dims), m_dim, "bmm")

        for indices in itertools.product((True, False), repeat=2):
            verify_batched_matmul(*indices)


# --------------------------------------------------------------------------- tensordot, inner, multi_dot, einsum

def test_tensordot():
    """test_tensordot (exact on PyTorch's integer data), plus a K = 20 contraction and the error."""
    a = torch.arange(60.0).reshape(3, 4, 5)
    b = torch.arange(24.0).reshape(4, 3, 2)
    c = torch.tensordot(a, b, dims=([1, 0], [0, 1]))
    cn = torch.from_numpy(np.tensordot(a.double().numpy(), b.double().numpy(), axes=([1, 0], [0, 1]))).float()
    assert torch.equal(c, cn)
    cout = torch.zeros((5, 2))
    ret = torch.tensordot(a, b, dims=([1, 0], [0, 1]), out=cout)
    assert ret is cout and torch.equal(c, cout)

    a = torch.randn(2, 3, 4, 5)
    b = torch.randn(4, 5, 6, 7)
    expect(torch.tensordot, a, b, dims=2, k=20)
    raises_same(lambda: torch.tensordot(a, b, dims=-1), RuntimeError, "expects dims >= 0")
    expect(torch.tensordot, a, b, k=20)  # dims=2 by default
    a0 = torch.tensordot(torch.tensor(0.0), torch.tensor(0.0), 0)
    assert torch.equal(a0, torch.tensor(0.0))
    # integer-valued with K = 20: exact
    a = torch.arange(120.0).reshape(4, 5, 6) - 60
    b = torch.arange(60.0).reshape(5, 4, 3) - 30
    c = torch.tensordot(a, b, dims=([1, 0], [0, 1]))
    cn = torch.from_numpy(np.tensordot(a.double().numpy(), b.double().numpy(), axes=([1, 0], [0, 1]))).float()
    assert torch.equal(c, cn)


def test_inner():
    """test_inner (float): scalar, empty, 1-D, N-D operands, out=, and the shape error with torch's message."""
    def check(a_sizes_, b_sizes_):
        for a_sizes, b_sizes in ((a_sizes_, b_sizes_), (b_sizes_, a_sizes_)):
            a = torch.randn(a_sizes)
            b = torch.randn(b_sizes)
            k = a.shape[-1] if a.dim() and b.dim() else 1
            res = expect(torch.inner, a, b, k=k)
            out = torch.zeros_like(res)
            torch.inner(a, b, out=out)
            assert torch.equal(res, out)
            assert_same_layout(res, off(torch.inner, a, b), "inner")

    check([], [])
    check([], [0])
    check([], [3])
    check([], [2, 3, 4])
    check([0], [0])
    check([0], [2, 0])
    check([2], [2])
    check([2], [3, 1, 2])
    check([2], [3, 0, 2])
    check([1, 2], [3, 2])
    check([1, 2], [3, 4, 2])
    check([2, 1, 3, 2], [1, 3, 2, 2])
    check([20], [20])
    check([3, 20], [4, 5, 20])
    raises_same(lambda: torch.randn(2, 3).inner(torch.randn(2, 2)), RuntimeError,
                r"inner\(\) the last dimension must match on both input tensors but got shapes \[2, 3\] and \[2, 2\]")


def test_multi_dot():
    """test_multi_dot (float32): empty dimensions, 1-D ends, several operands, larger ones."""
    def check(*shapes):
        tensors = [make_arg(shape) for shape in shapes]
        res = torch.linalg.multi_dot(tensors)
        ref = torch.from_numpy(np.array(np.linalg.multi_dot([t.double().numpy() for t in tensors])))
        mag = torch.from_numpy(np.array(np.linalg.multi_dot([np.abs(t.double().numpy()) for t in tensors])))
        k = sum(s[-1] for s in shapes[:-1])  # a chain's error adds up over its products
        check_close(res, ref, mag, k, f"multi_dot {shapes}")

    check([0], [0])
    check([2], [2, 0])
    check([1, 0], [0])
    check([0, 2], [2, 1])
    check([2, 2], [2, 0])
    check([2, 0], [0, 3])
    check([0, 0], [0, 1])
    check([4, 2], [2, 0], [0, 3], [3, 2])
    check([2], [2])
    check([1, 2], [2])
    check([2], [2, 1])
    check([1, 2], [2, 1])
    check([3, 2], [2, 4])
    check([3], [3, 4], [4, 2], [2, 5], [5])
    check([1, 2], [2, 2], [2, 3], [3, 1])
    check([10, 100], [100, 5], [5, 50])
    check([10, 20], [20, 30], [30, 5])


def test_multi_dot_errors():
    """test_multi_dot_errors: every message as with the switch off (and PyTorch's regex)."""
    def check(tensors, out, msg):
        raises_same(lambda: torch.linalg.multi_dot(tensors, out=out), RuntimeError, msg)

    a = make_arg(2)
    check([], None, "expected at least 2 tensors")
    check([a], None, "expected at least 2 tensors")
    check([torch.tensor(1.0), a], None, "the first tensor must be 1D or 2D")
    check([a, torch.tensor(1.0)], None, "the last tensor must be 1D or 2D")
    check([a, a, a], None, "tensor 1 must be 2D")
    check([a, make_arg((2, 2, 2)), a], None, "tensor 1 must be 2D")
    check([a, make_tensor(2, dtype=torch.double, device="cpu")], None, "all tensors must have be the same dtype")
    check([a, a], torch.empty(0, dtype=torch.double), "expected out tensor to have dtype")
    check([a, make_arg(3)], None, "cannot be multiplied")
    check([a, make_arg((3, 2)), a], None, "cannot be multiplied")


@pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")
def test_chain_matmul():
    """test_chain_matmul (float32): one matrix, the errors, and a chain."""
    t = make_arg((2, 2))
    assert torch.equal(t, torch.chain_matmul(t))
    raises_same(lambda: torch.chain_matmul(), RuntimeError, r"chain_matmul\(\): Expected one or more matrices")
    raises_same(lambda: torch.chain_matmul(make_arg(1), make_arg(1)), RuntimeError,
                r"Tensor dimension is 1, expected 2 instead")
    mats = [make_arg((5, 20)), make_arg((20, 17)), make_arg((17, 3))]
    res = torch.chain_matmul(*mats)
    ref = torch.chain_matmul(*[m.double() for m in mats])
    mag = torch.chain_matmul(*[m.double().abs() for m in mats])
    check_close(res, ref, mag, 37, "chain_matmul")


def test_einsum_corner_cases():
    """test_einsum_corner_cases: equation variants, zero-size dimensions, broadcasting, ellipses (exact)."""
    def check(equation, *operands, expected_output):
        tensors = [torch.tensor(operand, dtype=torch.float32) if not isinstance(operand, tuple)
                   else make_arg(operand) for operand in operands]
        output = torch.einsum(equation, tensors)
        assert torch.equal(output, torch.tensor(expected_output, dtype=torch.float32)), (equation, output)

    check(' ', 1, expected_output=1)
    check(' -> ', 1, expected_output=1)
    check(' , ', 2, 2, expected_output=4)
    check(' , , ', 2, 2, 2, expected_output=8)
    check(' , -> ', 2, 2, expected_output=4)
    check(' i ', [1], expected_output=[1])
    check(' i -> ', [1], expected_output=1)
    check(' i -> i ', [1], expected_output=[1])
    check(' i , i ', [2], [2], expected_output=4)
    check(' i , i -> i ', [2], [2], expected_output=[4])
    check('i', [], expected_output=[])
    check(' i j -> j', [[], []], expected_output=[])
    check('ij->i', [[], []], expected_output=[0., 0.])
    check(' i j k  ,  k  -> i j ', (3, 0, 6), (6,), expected_output=[[], [], []])
    check('i,j', [2], [1, 2], expected_output=[[2, 4]])
    check('i,ij->ij', [1, 2], [[1, 2, 3], [2, 3, 4]], expected_output=[[1, 2, 3], [4, 6, 8]])
    check('...', 1, expected_output=1)
    check('...->', 1, expected_output=1)
    check('...->...', 1, expected_output=1)
    check('...', [1], expected_output=[1])
    check('...->', [1], expected_output=1)
    check('z...->z', [1], expected_output=[1])
    check('Z...->...Z', [1], expected_output=[1])
    check('...a->', [[2], [4]], expected_output=6)
    check('a...b->ab', [[[1], [2]], [[3], [4]]], expected_output=[[3], [7]])


@pytest.mark.parametrize("equation,shapes,k", [
    ("ij,jk->ik", [(5, 20), (20, 6)], 20),
    ("ij,kj->ik", [(5, 20), (6, 20)], 20),
    ("bij,bjk->bik", [(3, 5, 17), (3, 17, 4)], 17),
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 16), (2, 3, 7, 16)], 16),
    ("i,i->", [(40,)], 40),
    ("i,i", [(40,), (40,)], 40),
    ("ij,j->i", [(6, 33), (33,)], 33),
    ("ijk,jkl->il", [(3, 4, 5), (4, 5, 6)], 20),
    ("bij,jk->bik", [(2, 3, 4), (4, 5)], 4),
    ("...ij,...jk->...ik", [(2, 1, 3, 18), (4, 18, 2)], 18),
])
def test_einsum_contractions(equation, shapes, k):
    """Contractions as test_einsum draws them (matrix, batched, attention-like, vector, multi-index)."""
    if equation == "i,i->":
        shapes = shapes * 2
    ops = [make_arg(s) for s in shapes]
    res = torch.einsum(equation, *ops)
    ref = torch.einsum(equation, *[o.double() for o in ops])
    mag = torch.einsum(equation, *[o.double().abs() for o in ops])
    check_close(res, ref, mag, k, equation)
    assert_same_layout(res, off(torch.einsum, equation, *ops), equation)


def test_einsum_error_cases():
    """test_einsum_error_cases (the shape ones): same messages with the switch on."""
    x = make_arg((2,))
    y = make_arg((2, 3))
    raises_same(lambda: torch.einsum('aa', [y]), RuntimeError,
                r"einsum\(\):.*subscript a is repeated for operand 0 but the sizes don't match, 3 != 2")
    raises_same(lambda: torch.einsum('a, ba', [x, y]), RuntimeError, r"einsum\(\):.*does not broadcast")
    raises_same(lambda: torch.einsum('ij,jk->ik', make_arg((2, 3)), make_arg((4, 5))), RuntimeError,
                r"einsum\(\):")


# --------------------------------------------------------------------------- F.linear / nn.Linear

@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("in_shape", [(24,), (7, 24), (2, 5, 24), (2, 3, 4, 24), (7, 9), (0, 24), (3, 0, 24)])
def test_linear(in_shape, bias):
    """F.linear with and without bias for 1-D..4-D inputs (contiguous and transposed weights), and nn.Linear
    forward and backward, against float64."""
    k = in_shape[-1]
    x = make_arg(in_shape)
    for w in (make_arg((6, k)), make_arg((k, 6)).t()):
        b = make_arg((6,)) if bias else None
        res = expect(F.linear, x, w, b, k=k, what=f"linear {in_shape}")
        assert_same_layout(res, off(F.linear, x, w, b), "linear")
    # noncontiguous input
    xn = make_arg(in_shape, noncontiguous=True)
    expect(F.linear, xn, make_arg((6, k)), make_arg((6,)) if bias else None, k=k)
    # nn.Linear, forward and backward
    lin = torch.nn.Linear(k, 6, bias=bias)
    lin64 = torch.nn.Linear(k, 6, bias=bias, dtype=torch.float64)
    with torch.no_grad():
        lin64.weight.copy_(lin.weight)
        if bias:
            lin64.bias.copy_(lin.bias)
    xg = x.clone().requires_grad_(True)
    xg64 = x.double().requires_grad_(True)
    y = lin(xg)
    y64 = lin64(xg64)
    mag = F.linear(x.double().abs(), lin.weight.double().abs(), lin.bias.double().abs() if bias else None)
    check_close(y.detach(), y64.detach(), mag, k, "nn.Linear")
    g = make_arg(y.shape)
    y.backward(g)
    y64.backward(g.double())
    rows = max(1, math.prod(in_shape[:-1]))
    gmag_x = g.double().abs() @ lin.weight.double().abs()
    check_close(xg.grad, xg64.grad, gmag_x, 6, "nn.Linear dx")
    gmag_w = (g.double().abs().reshape(-1, 6).t() @ x.double().abs().reshape(-1, k))
    check_close(lin.weight.grad, lin64.weight.grad, gmag_w, rows, "nn.Linear dW")


# --------------------------------------------------------------------------- zero sizes, shape errors

@pytest.mark.parametrize("sa,sb", [
    ((2, 3, 0), (0, 4)), ((0, 3), (3, 4)), ((3, 0), (0, 0)), ((0,), (0,)), ((2, 0, 20), (20, 4)),
    ((5, 0), (0,)), ((0,), (0, 5)), ((0, 2, 20), (20, 3)), ((2, 20), (0, 20, 3)), ((4, 0, 3), (4, 3, 0)),
    ((1, 0, 17), (3, 17, 2)), ((3, 20), (20, 0)),
])
def test_matmul_zero_sizes(sa, sb):
    """Empty operands: torch's shapes and strides, zeros where K = 0, with and without out=."""
    a, b = torch.randn(sa), torch.randn(sb)
    res = torch.matmul(a, b)
    res_off = off(torch.matmul, a, b)
    assert_same_layout(res, res_off, f"{sa} @ {sb}")
    assert torch.equal(res, res_off)  # empty or exact zeros
    assert torch.equal(torch.zeros(2, 3, 0) @ torch.zeros(0, 4), torch.zeros(2, 3, 4))
    out, out_off = torch.full(res.shape, math.nan), torch.full(res.shape, math.nan)
    _, ret, _ = warns_same(lambda: torch.matmul(a, b, out=out_off), lambda: torch.matmul(a, b, out=out))
    assert ret is out
    assert_same_layout(out, out_off, "out=")
    assert torch.equal(out, out_off)


_SHAPE_ERRORS = {
    "mm": (lambda: torch.mm(torch.randn(2, 3), torch.randn(4, 5)),
           r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    "mm K>=16": (lambda: torch.mm(torch.randn(2, 20), torch.randn(21, 5)),
                 r"mat1 and mat2 shapes cannot be multiplied \(2x20 and 21x5\)"),
    "mm 1d": (lambda: torch.mm(torch.randn(3), torch.randn(3, 2)), r"self must be a matrix"),
    "matmul": (lambda: torch.randn(2, 20) @ torch.randn(21, 5), r"shapes cannot be multiplied"),
    "matmul 1d": (lambda: torch.matmul(torch.randn(3), torch.randn(4)), r"inconsistent tensor size"),
    "matmul 0d": (lambda: torch.matmul(torch.tensor(1.0), torch.randn(3)),
                  r"both arguments to matmul need to be at least 1D"),
    "matmul batch": (lambda: torch.matmul(torch.randn(2, 3, 4), torch.randn(3, 4, 5)), r"must match the size"),
    "bmm batch": (lambda: torch.bmm(torch.randn(2, 3, 3), torch.randn(3, 3, 3)),
                  r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[3, 3\]"),
    "bmm 2d": (lambda: torch.bmm(torch.randn(2, 3), torch.randn(2, 3, 3)), r"batch1 must be a 3D tensor"),
    "addmm input": (lambda: torch.addmm(torch.randn(3, 3), torch.randn(2, 3), torch.randn(3, 4)), r"expanded size"),
    "addmm K": (lambda: torch.addmm(torch.randn(2, 4), torch.randn(2, 17), torch.randn(16, 4)), r"2x17.*16x4"),
    "baddbmm": (lambda: torch.baddbmm(torch.randn(2, 3, 4), torch.randn(2, 3, 17), torch.randn(2, 16, 4)), None),
    "addbmm": (lambda: torch.addbmm(torch.randn(3, 4), torch.randn(2, 3, 17), torch.randn(3, 17, 4)), None),
    "addmv": (lambda: torch.addmv(torch.randn(2), torch.randn(2, 20), torch.randn(21)), r"size mismatch"),
    "mv": (lambda: torch.mv(torch.randn(2, 3), torch.randn(4)),
           r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    "dot": (lambda: torch.dot(torch.randn(20), torch.randn(21)), r"inconsistent tensor size"),
    "dot dtype": (lambda: torch.dot(torch.randn(3), torch.randn(3, dtype=torch.float64)),
                  r"dot : expected both vectors to have same dtype"),
    "mm dtype": (lambda: torch.mm(torch.randn(2, 3), torch.randn(3, 4, dtype=torch.float64)),
                 r"expected m1 and m2 to have the same dtype, but got: float != double"),
    "addmm dtype": (lambda: torch.addmm(torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 3), torch.randn(3, 4)),
                    None),
    "linear": (lambda: F.linear(torch.randn(2, 3), torch.randn(4, 5)), r"shapes cannot be multiplied"),
    "linear bias": (lambda: F.linear(torch.randn(2, 20), torch.randn(4, 20), torch.randn(5)), None),
    "_addmm_activation": (lambda: torch._addmm_activation(torch.randn(4), torch.randn(2, 17), torch.randn(16, 4)),
                          r"2x17.*16x4"),
    "addmm_ self shape": (lambda: torch.randn(2, 1).addmm_(torch.randn(2, 20), torch.randn(20, 4)), None),
    "addmm_ self expanded": (lambda: torch.randn(1, 4).expand(2, 4).addmm_(torch.randn(2, 20), torch.randn(20, 4)),
                             None),
    "baddbmm_ self shape": (lambda: torch.randn(2, 3, 1).baddbmm_(torch.randn(2, 3, 20), torch.randn(2, 20, 4)), None),
    "addmv_ self shape": (lambda: torch.randn(1).addmv_(torch.randn(2, 20), torch.randn(20)), None),
}


@pytest.mark.parametrize("name", list(_SHAPE_ERRORS))
def test_shape_errors(name):
    """Mismatched shapes and dtypes: RuntimeError with torch's own message, identical with the switch on."""
    fn, match = _SHAPE_ERRORS[name]
    raises_same(fn, RuntimeError, match)


# --------------------------------------------------------------------------- out= semantics

#: name -> (fn(a, b, c, out, **alpha_beta) making the call, kind of result); c is the additive input
_OUT_CALLS = {
    "mm": (lambda a, b, c, out: torch.mm(a, b, out=out), "mm"),
    "matmul": (lambda a, b, c, out: torch.matmul(a, b, out=out), "mm"),
    "addmm": (lambda a, b, c, out, **kw: torch.addmm(c, a, b, out=out, **kw), "mm"),
    "_addmm_activation": (lambda a, b, c, out, **kw: torch._addmm_activation(c[0], a, b, out=out, **kw), "mm"),
    "bmm": (lambda a, b, c, out: torch.bmm(a[None].expand(2, *a.shape), b[None].expand(2, *b.shape), out=out), "bmm"),
    "baddbmm": (lambda a, b, c, out, **kw: torch.baddbmm(c[None].expand(2, *c.shape), a[None].expand(2, *a.shape),
                                                         b[None].expand(2, *b.shape), out=out, **kw), "bmm"),
    "addbmm": (lambda a, b, c, out, **kw: torch.addbmm(c, a[None].expand(2, *a.shape), b[None].expand(2, *b.shape),
                                                       out=out, **kw), "mm"),
    "addmv": (lambda a, b, c, out, **kw: torch.addmv(c[:, 0], a, b[:, 0], out=out, **kw), "mv"),
    "mv": (lambda a, b, c, out: torch.mv(a, b[:, 0], out=out), "mv"),
    "dot": (lambda a, b, c, out: torch.dot(a[0], b[:, 0], out=out), "dot"),
    "vdot": (lambda a, b, c, out: torch.vdot(a[0], b[:, 0], out=out), "dot"),
}


def _out_shape(kind, m, n):
    return {"mm": (m, n), "bmm": (2, m, n), "mv": (m,), "dot": ()}[kind]


@pytest.mark.parametrize("k", [20, 5, 0])
@pytest.mark.parametrize("name", list(_OUT_CALLS))
def test_out_semantics(name, k):
    """out=: returned as is; an empty out is resized silently, a wrong-shaped one with torch's warning;
    a strided out keeps its strides; a float64 out raises torch's error; out needing no grad. All as with
    the switch off, values against float64."""
    fn, kind = _OUT_CALLS[name]
    m, n = 6, 5
    a, b, c = torch.randn(m, k), torch.randn(k, n), torch.randn(m, n)
    kw = {} if name in ("mm", "matmul", "bmm", "mv", "dot", "vdot") else {"alpha": 0.5, "beta": -2}
    shape = _out_shape(kind, m, n)
    ref, mag = ref_mag(lambda x, y, z, **ab: fn(x, y, z, None, **ab), a, b, c, **kw)
    if name == "_addmm_activation":
        ref = ref.clamp_min(0)
    kk = 2 * k if name == "addbmm" else k

    def run(make_out):
        out_off, out_on = make_out(), make_out()
        r_off, r_on, w = warns_same(lambda: fn(a, b, c, out_off, **kw), lambda: fn(a, b, c, out_on, **kw))
        assert r_on is out_on and r_off is out_off
        assert_same_layout(out_on, out_off, name)
        check_close(out_on, ref, mag, kk, f"{name} out=")
        return w

    # the right shape, contiguous: no warning
    assert run(lambda: torch.full(shape, math.nan)) == []
    # empty: resized without a warning
    assert run(lambda: torch.empty(0)) == []
    # wrong shape, not empty: resized (with torch's deprecation warning, but addbmm resizes silently)
    w = run(lambda: torch.full((7, 3), math.nan))
    assert any("was resized" in msg for _, msg in w) == (name != "addbmm"), w
    # transposed / strided out of the right shape: written in place
    if len(shape) >= 2:
        w = run(lambda: torch.full(shape[::-1], math.nan).transpose(-1, -2) if len(shape) == 2 else
                torch.full((shape[0], shape[2], shape[1]), math.nan).transpose(-1, -2))
        assert w == []
    if len(shape) == 1:
        assert run(lambda: torch.full((2 * shape[0],), math.nan)[::2]) == []
    # dtype mismatch
    raises_same(lambda: fn(a, b, c, torch.empty(shape, dtype=torch.float64), **kw), RuntimeError)
    # inputs requiring grad (torch has no such check for _addmm_activation's out=: it computes)
    if k and name != "_addmm_activation":
        ag = a.clone().requires_grad_(True)
        raises_same(lambda: fn(ag, b, c, torch.empty(shape), **kw), RuntimeError,
                    "don't support automatic differentiation")
    elif k:
        ag = a.clone().requires_grad_(True)
        out_off, out_on = torch.empty(shape), torch.empty(shape)
        warns_same(lambda: fn(ag, b, c, out_off, **kw), lambda: fn(ag, b, c, out_on, **kw))
        check_close(out_on, ref, mag, kk, f"{name} out= with an input requiring grad")


# --------------------------------------------------------------------------- in place, alpha/beta

_INPLACE = {
    "addmm_": (lambda s, a, b, **kw: s.addmm_(a, b, **kw), lambda s, a, b, **kw: torch.addmm(s, a, b, **kw), "mm"),
    "baddbmm_": (lambda s, a, b, **kw: s.baddbmm_(a[None].expand(3, *a.shape), b[None].expand(3, *b.shape), **kw),
                 lambda s, a, b, **kw: torch.baddbmm(s, a[None].expand(3, *a.shape), b[None].expand(3, *b.shape), **kw),
                 "bmm"),
    "addbmm_": (lambda s, a, b, **kw: s.addbmm_(torch.stack([a, -a]), torch.stack([b, b * 0.5]), **kw),
                lambda s, a, b, **kw: torch.addbmm(s, torch.stack([a, -a]), torch.stack([b, b * 0.5]), **kw), "mm"),
    "addmv_": (lambda s, a, b, **kw: s.addmv_(a, b[:, 0], **kw), lambda s, a, b, **kw: torch.addmv(s, a, b[:, 0], **kw),
               "mv"),
}

_ALPHA_BETA = [(1, 1), (1.2, 0.8), (-2, 3), (0.5, 0), (0, 1), (0, 0), (3, -1.5)]


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("k", [24, 3, 0])
@pytest.mark.parametrize("name", list(_INPLACE))
def test_inplace_alpha_beta(name, k, layout):
    """addmm_ / baddbmm_ / addbmm_ / addmv_: self returned and updated in place (strides kept), every
    (alpha, beta), beta=0 ignoring NaN in self; the functional form gives the same values."""
    inplace, functional, kind = _INPLACE[name]
    m, n = 7, 5
    kk = 2 * k if name == "addbmm_" else k
    for alpha, beta in _ALPHA_BETA:
        a, b = torch.randn(m, k), torch.randn(k, n)
        shape = _out_shape(kind, m, n) if kind != "bmm" else (3, m, n)
        for nan_self in ([False, True] if beta == 0 else [False]):
            base = torch.full(shape, math.nan) if nan_self else torch.randn(shape)
            if layout == "transposed" and len(shape) >= 2:
                s = base.transpose(-1, -2).contiguous().transpose(-1, -2)
            elif layout == "transposed":
                s = torch.full((2 * shape[0],), 0.0)[::2].copy_(base)
            else:
                s = base.clone()
            before = s.clone()
            strides = s.stride()
            ref, mag = ref_mag(functional, before, a, b, alpha=alpha, beta=beta)
            ret = inplace(s, a, b, alpha=alpha, beta=beta)
            assert ret is s and s.stride() == strides
            what = f"{name} alpha={alpha} beta={beta} K={k} {layout}{' NaN self' if nan_self else ''}"
            check_close(s, ref, mag, kk, what)
            check_close(functional(before, a, b, alpha=alpha, beta=beta), ref, mag, kk, what + " (functional)")
            # the same in-place call with the switch off leaves self with the same layout
            s_off = before.clone() if layout == "contiguous" or len(shape) < 2 else \
                before.transpose(-1, -2).contiguous().transpose(-1, -2)
            if layout == "transposed" and len(shape) == 1:
                s_off = torch.full((2 * shape[0],), 0.0)[::2].copy_(before)
            off(inplace, s_off, a, b, alpha=alpha, beta=beta)
            assert s_off.stride() == s.stride()


@pytest.mark.parametrize("k", [20, 33])
def test_inplace_self_is_operand(k):
    """``x.addmm_(x, b)`` / ``x.baddbmm_(b, x)``: self is also an operand; the product reads the operand's old
    values, as PyTorch's own kernels do for these sizes.  (PyTorch promises nothing about such aliasing: its
    K = 4 ``baddbmm_`` and its ``v.addmv_(m, v)`` give other values, so those are not tested.)"""
    x = torch.randn(k, k)
    b = torch.randn(k, k)
    ref, mag = ref_mag(torch.addmm, x, x, b)
    r = x.addmm_(x, b)
    assert r is x
    check_close(x, ref, mag, k, "x.addmm_(x, b)")
    x = torch.randn(2, k, k)
    ref, mag = ref_mag(torch.baddbmm, x, b[None].expand(2, k, k), x, alpha=0.5)
    x.baddbmm_(b[None].expand(2, k, k), x, alpha=0.5)
    check_close(x, ref, mag, k, "x.baddbmm_(b, x)")


@pytest.mark.parametrize("fn", ["addmm", "addmv", "baddbmm", "addbmm", "_addmm_activation"])
def test_beta_zero_ignores_nan_and_inf(fn):
    """beta=0: NaN and inf in input are not propagated (torch's documented rule), K = 0, 5 and 40."""
    for k in (0, 5, 40):
        a, b = torch.randn(4, k), torch.randn(k, 3)
        inp = {"addmm": torch.full((4, 3), math.nan), "_addmm_activation": torch.full((3,), math.inf),
               "addmv": torch.tensor([math.nan, math.inf, -math.inf, 1.0]),
               "baddbmm": torch.full((2, 4, 3), -math.inf), "addbmm": torch.full((4, 3), math.nan)}[fn]
        if fn == "addmv":
            args = (inp, a, b[:, 0])
        elif fn in ("baddbmm", "addbmm"):
            args = (inp, torch.stack([a, a * 2]), torch.stack([b, b]))
        else:
            args = (inp, a, b)
        f = getattr(torch, fn)
        res = f(*args, beta=0, alpha=1.5)
        assert not res.isnan().any() and not res.isinf().any(), (fn, k, res)
        if fn == "_addmm_activation":
            ref, mag = ref_mag(lambda *x: torch.addmm(*x, beta=0, alpha=1.5), *args)
            ref = ref.clamp_min(0)
        else:
            ref, mag = ref_mag(lambda *x: f(*x, beta=0, alpha=1.5), *args)
        check_close(res, ref, mag, 2 * k if fn == "addbmm" else k, f"{fn} beta=0 K={k}")


# --------------------------------------------------------------------------- autograd

def test_autograd_through_switch():
    """Backward products (mm of the gradient) under the switch: gradients within the bound of float64's."""
    a = torch.randn(9, 40, requires_grad=True)
    b = torch.randn(40, 7, requires_grad=True)
    t = torch.randn(7, requires_grad=True)
    a64, b64, t64 = (x.detach().double().requires_grad_(True) for x in (a, b, t))
    g = torch.randn(9, 7)
    (torch.addmm(t, a, b, beta=0.5) * g).sum().backward()
    (torch.addmm(t64, a64, b64, beta=0.5) * g.double()).sum().backward()
    check_close(a.grad, a64.grad, g.double().abs() @ b.detach().double().abs().t(), 7, "d a")
    check_close(b.grad, b64.grad, a.detach().double().abs().t() @ g.double().abs(), 9, "d b")
    check_close(t.grad, t64.grad, 0.5 * g.double().abs().sum(0), 9, "d t")
    # bmm
    x = torch.randn(3, 5, 20, requires_grad=True)
    y = torch.randn(3, 20, 4, requires_grad=True)
    x64, y64 = (v.detach().double().requires_grad_(True) for v in (x, y))
    gb = torch.randn(3, 5, 4)
    torch.bmm(x, y).backward(gb)
    torch.bmm(x64, y64).backward(gb.double())
    check_close(x.grad, x64.grad, gb.double().abs() @ y.detach().double().abs().transpose(1, 2), 4, "d x (bmm)")
    check_close(y.grad, y64.grad, x.detach().double().abs().transpose(1, 2) @ gb.double().abs(), 5, "d y (bmm)")
