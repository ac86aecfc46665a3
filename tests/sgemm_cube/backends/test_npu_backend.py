"""The Ascend NPU backend loader (sgemm_cube.backends.npu) and its build hook.

No NPU, torch_npu or CANN exists here, so this checks what such a machine
sees: the backend says exactly what is missing, and asking for it raises
that.  The loader's own plumbing and ``npu.run``'s bookkeeping (contiguous
copies, non-contiguous ``out``, the tiling it passes to the extension, what
the cube is fed) are exercised against a stand-in extension that runs the
real kernels in the executable AscendC stand-in
(``ascendc_kernels/tests/exec_ascendc``, through the entry points
``host/binding.cpp`` calls, the flag checker clean), or the schedule model
(:mod:`npu_schedule`) where no g++ is found.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import sgemm_cube.cpu_fallback as cpu_fallback
from sgemm_cube.backends import npu, npu_schedule

ROOT = Path(__file__).resolve().parents[3]


def test_unavailable_here_and_says_what_is_missing(monkeypatch):
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    reason = npu.unavailable_reason()
    assert not npu.is_available()
    assert "ASCEND_HOME_PATH is not set" in reason
    assert "sgemm_cube.backends._npu_ext is not built" in reason
    assert "torch_npu is not importable" in reason  # CI has no torch_npu installed


def test_cann_location_is_checked(monkeypatch, tmp_path):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path))
    assert f"CANN toolkit not found at ASCEND_HOME_PATH={tmp_path}" in npu.unavailable_reason()
    (tmp_path / "include" / "acl").mkdir(parents=True)
    (tmp_path / "include" / "acl" / "acl.h").write_text("")
    assert "CANN" not in npu.unavailable_reason()


def test_asking_for_the_backend_raises_the_reason(monkeypatch):
    from sgemm_cube.backends import BackendUnavailableError, get_backend

    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    with pytest.raises(BackendUnavailableError, match="ASCEND_HOME_PATH is not set"):
        get_backend("npu")
    with pytest.raises(BackendUnavailableError, match="_npu_ext is not built"):
        npu.matmul(None, None, sb=12, order="termwise", keep_lo_lo=False, out=None)


def test_public_api_refuses_npu_backend_with_the_reason(monkeypatch):
    import sgemm_cube
    from sgemm_cube.backends import BackendUnavailableError

    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    a = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    with pytest.raises(BackendUnavailableError, match="torch_npu is not importable"):
        sgemm_cube.matmul(a, a.T.copy(), backend="npu")


def test_build_hook_without_cann_installs_pure_python(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT))
    from ascendc_kernels.build_ext import npu_extension

    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    assert npu_extension() == ([], {})
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ASCEND_HOME_PATH is not set" in err[0]
    monkeypatch.setenv("ASCEND_HOME_PATH", "/nonexistent/cann")
    assert npu_extension() == ([], {})
    assert "no CANN toolkit at ASCEND_HOME_PATH=/nonexistent/cann" in capsys.readouterr().err


# ------------------------------------------------------ stand-in extension
@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _load_check_on_npu():
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_on_npu", ROOT / "ascendc_kernels/tests/check_on_npu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The stand-in for the compiled _npu_ext that the bring-up script's --dry-run uses: the schedule model
# (npu_schedule.simulate) on CPU tensors, recording the tilings it is called with.
_ModelExtension = _load_check_on_npu().ModelExtension


@pytest.fixture(scope="module")
def executed_kernels(tmp_path_factory):
    """The real kernels built with g++ against the executable AscendC stand-in, per chip (None without g++)."""
    if shutil.which("g++") is None:
        return None
    from tests.ascendc_kernels.executed import build
    from tests.ascendc_kernels.test_ascend_kernel_sources import CHIPS

    out = tmp_path_factory.mktemp("exec_ascendc")
    return {soc.lower(): build(out / f"run_{soc}", soc) for soc in CHIPS}


@pytest.fixture
def npu_options(monkeypatch):
    """torch_npu's runtime options as npu.native_fp32 reads them (``_npu_getOption``): empty, the chips'
    defaults; a test sets ``ACL_PRECISION_MODE``, ``ALLOW_MATMUL_HF32``, ``CUBE_MATH_TYPE``."""
    options = {}
    monkeypatch.setattr(npu, "_npu_option", options.get)
    return options


@pytest.fixture
def model_ext(monkeypatch, torch, executed_kernels, tmp_path, npu_options):
    """Install a stand-in for the compiled extension: the real kernels executed in the AscendC stand-in
    (through the entry points host/binding.cpp calls; the flag checker must stay clean), or, without g++,
    the schedule model."""
    def install(soc: str, cores: int):
        if executed_kernels is None:
            ext = _ModelExtension(soc, cores)
        else:
            from tests.ascendc_kernels.executed import ExecutedExtension

            ext = ExecutedExtension(soc, cores, executed_kernels[soc], tmp_path)
        monkeypatch.setattr(npu, "unavailable_reason", lambda: "")
        monkeypatch.setattr(npu, "_extension", lambda: ext)
        return ext

    return install


def _stand_in_arithmetic(soc: str, executed_kernels):
    """The arithmetic the stand-in extension computes in, as the chip applies it: the executed kernels follow
    ``SGEMM_CUBE_EXEC_ARITHMETIC`` when the caller's environment sets it (the defaults otherwise), the
    schedule model the defaults.  The bit-exact references below take the same."""
    import os

    from tests.ascendc_kernels.executed import ARITHMETIC_ENV

    spec = os.environ.get(ARITHMETIC_ENV) if executed_kernels is not None else None
    return npu_schedule.chip_arithmetic(soc, spec or None)


@pytest.mark.parametrize("soc,cores", [("910a", 32), ("910b", 20)])
@pytest.mark.parametrize("keep_lo_lo", [False, True])
def test_loader_plumbing_matches_cpu_fallback(model_ext, executed_kernels, torch, soc, cores, keep_lo_lo):
    ext = model_ext(soc, cores)
    rng = np.random.default_rng(3)
    a = torch.from_numpy(rng.standard_normal((2, 50, 70)).astype(np.float32)).transpose(1, 2)  # (2, 70, 50) strided
    b = torch.from_numpy(rng.standard_normal((2, 50, 30)).astype(np.float32))
    out = torch.empty(2, 30, 70).transpose(1, 2)  # non-contiguous (2, 70, 30)
    assert npu.matmul(a, b, sb=12, order="termwise", keep_lo_lo=keep_lo_lo, out=out) is None
    (bm, bk, bn, n_fused, per_term), = ext.calls
    npu_schedule.make_buffer_plan(npu_schedule.capacity_from_profile(soc), bm, bk, bn, n_fused, 4 if keep_lo_lo else 3,
                                  per_term)
    arithmetic = _stand_in_arithmetic(soc, executed_kernels)
    for i in range(2):
        want = cpu_fallback.emulated_matmul(a[i].contiguous().numpy(), b[i].numpy(), keep_lo_lo=keep_lo_lo,
                                            arithmetic=arithmetic)
        assert np.array_equal(out[i].numpy(), want)


def test_loader_refuses_what_the_cube_cannot_do(model_ext, torch):
    model_ext("910b", 20)
    x = torch.ones(1, 16, 16)
    out = torch.empty(1, 16, 16)
    with pytest.raises(NotImplementedError, match="termwise"):
        npu.matmul(x, x, sb=12, order="elementwise", keep_lo_lo=False, out=out)
    with pytest.raises(NotImplementedError, match="FP16"):
        npu.matmul(x, x, sb=12, order="termwise", keep_lo_lo=False, out=out, scheme="bf16x9")
    with pytest.raises(ValueError, match="accumulate"):
        npu.matmul(x, x, sb=12, order="termwise", keep_lo_lo=False, out=out, accumulate="cube16")
    with pytest.raises(npu_schedule.TilingError, match="L0C"):
        npu.matmul(x, x, sb=12, order="termwise", keep_lo_lo=False, out=out, tiling=(128, 64, 128, 1))


def test_tiling_override_is_passed_through(model_ext, executed_kernels, torch):
    ext = model_ext("910b", 20)
    rng = np.random.default_rng(5)
    a = torch.from_numpy(rng.random((1, 40, 300), dtype=np.float32))
    b = torch.from_numpy(rng.random((1, 300, 24), dtype=np.float32))
    out = torch.empty(1, 40, 24)
    npu.matmul(a, b, sb=12, order="termwise", keep_lo_lo=False, out=out, tiling=(16, 32, 16, 3))
    npu.matmul(a, b, sb=12, order="termwise", keep_lo_lo=False, out=out, tiling=(16, 32, 16, 3, True))
    assert ext.calls == [(16, 32, 16, 3, False), (16, 32, 16, 3, True)]
    want = npu_schedule.grouped_reference(a[0].numpy(), b[0].numpy(), group_k=96,
                                          arithmetic=_stand_in_arithmetic("910b", executed_kernels))
    assert np.array_equal(out[0].numpy(), want)  # one pass per term: the same arithmetic


@pytest.mark.parametrize("soc", ["910a", "910b"])
def test_chosen_tiling_fits_the_plan(soc):
    for m, n, k in [(1, 1, 1), (100, 3000, 17), (4096, 4096, 4096), (8192, 512, 100000)]:
        for terms in (3, 4):
            t = npu.choose_tiling(soc, m, n, k, terms=terms)
            npu_schedule.make_buffer_plan(npu_schedule.capacity_from_profile(soc), t.bm, t.bk, t.bn, t.n_fused, terms,
                                          t.per_term)
            assert t.n_fused <= max(1, -(-(-(-k // 16) * 16) // t.bk))
    assert "sgemm_cube.backends._npu_ext" not in sys.modules


def test_run_keeps_the_guarantee_around_the_kernels(model_ext, torch):
    """npu.run (the backend protocol) scales lines, runs the (modelled) kernels, unscales, and computes the
    fix-up lines in FP32: mixed magnitudes, 1e30 rows and NaN/Inf give what the CPU backend gives."""
    from tests.guarantee_data import check_guarantee

    from sgemm_cube.plan import make_request

    model_ext("910b", 20)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((2, 24, 40)).astype(np.float32)
    b = rng.standard_normal((2, 40, 20)).astype(np.float32)
    a[0, :, ::2] *= np.float32(1e-10)      # rows spanning 33 binades: computed in FP32
    a[1, 3] *= np.float32(1e30)            # scaled
    b[1, :, 4] *= np.float32(1e-30)        # scaled
    a[0, 5, 7], b[1, 2, 9] = np.inf, np.nan
    req = make_request(backend="npu")
    out = torch.empty(2, 24, 20)
    npu.run(npu.plan(req, 2, 24, 20, 40), torch.from_numpy(a), torch.from_numpy(b), out)
    for i in range(2):
        msg = check_guarantee(out[i].numpy(), a[i], b[i])
        assert not msg, msg


@pytest.mark.parametrize("scale", ["auto", None])
def test_the_guarantee_runs_on_the_device(model_ext, torch, scale):
    """npu.run hands the raw operands to the extension with the bookkeeping on (guard=True, the scale
    option, fixup, alpha): NaN, Inf and values the split cannot hold are the device's business (the split
    zeroes them, their lines are recomputed in FP32: tests/ascendc_kernels/test_executed_guard.py)."""
    from tests.guarantee_data import check_guarantee

    from sgemm_cube.plan import make_request

    ext = model_ext("910a", 32)
    seen = []
    kernel = ext.matmul
    ext.matmul = lambda a, b, out, options, **kw: (seen.append((a.clone(), b.clone(), options)),
                                                   kernel(a, b, out, options, **kw))
    rng = np.random.default_rng(12)
    a = rng.standard_normal((1, 16, 32)).astype(np.float32)
    b = rng.standard_normal((1, 32, 8)).astype(np.float32)
    a[0, 1, 3], a[0, 2, 5], b[0, 4, 6] = np.inf, np.nan, -np.inf
    a[0, 7, :] *= np.float32(1e6)           # |x| >= 65520: the split would overflow
    b[0, :, 2] *= np.float32(1e30)          # far above the split's range
    req = make_request(scale=scale, backend="npu")
    out = torch.empty(1, 16, 8)
    npu.run(npu.plan(req, 1, 16, 8, 32), torch.from_numpy(a), torch.from_numpy(b), out, alpha=2.0)
    (xa, xb, options), = seen
    assert torch.equal(torch.nan_to_num(xa), torch.nan_to_num(torch.from_numpy(a)))  # raw: NaN/Inf included
    assert torch.equal(torch.nan_to_num(xb), torch.nan_to_num(torch.from_numpy(b)))
    assert (options.guard, options.scale, options.fixup, options.alpha) == (True, npu.SCALE_CODE[scale], True, 2.0)
    # The guarantee, elementwise (see test_run_keeps_the_guarantee_around_the_kernels; alpha = 2 is exact).
    msg = check_guarantee(out[0].numpy() / 2, a[0], b[0], frobenius=False)
    assert not msg, msg


def test_run_reads_back_only_the_lines_and_uses_no_float64(model_ext, torch, monkeypatch):
    """One host read-back per product, of the lines' integers (``npu_bands``: which lines are banded and their
    band counts decide the band passes), and nothing else (.item, .numpy, .tolist, no other .cpu); no float64
    and no torch.matmul / mm / bmm in npu.run (the extension, standing in for the device, reads through
    functions it captured at import)."""
    from tests.guarantee_data import check_guarantee

    from sgemm_cube.backends import npu_bands
    from sgemm_cube.plan import make_request

    model_ext("910b", 20)
    rng = np.random.default_rng(13)
    a = rng.standard_normal((2, 24, 40)).astype(np.float32)
    b = rng.standard_normal((2, 40, 20)).astype(np.float32)
    a[0, :, ::2] *= np.float32(1e-10)  # banded rows
    a[1, 3, 5] = np.inf                # a fix-up row
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    out = torch.empty(2, 24, 20)

    def forbidden(what):
        def fail(*args, **kwargs):
            raise AssertionError(f"npu.run called {what}")
        return fail

    real_cpu, read = torch.Tensor.cpu, []

    def cpu(self, *args, **kwargs):
        if self.dtype != torch.int32 or self.shape != (npu_bands.LINE_ROWS, 2 * (24 + 20)):
            raise AssertionError(f"npu.run read back a {self.dtype} tensor of shape {tuple(self.shape)}")
        read.append(self.shape)
        return real_cpu(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "cpu", cpu)
    for name in ("item", "tolist", "double"):
        monkeypatch.setattr(torch.Tensor, name, forbidden(f"Tensor.{name}"))
    for name in ("matmul", "mm", "bmm"):
        monkeypatch.setattr(torch, name, forbidden(f"torch.{name}"))
    real_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        if torch.float64 in args or kwargs.get("dtype") == torch.float64:
            raise AssertionError("npu.run converted to float64")
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", to)
    req = make_request(backend="npu")
    npu.run(npu.plan(req, 2, 24, 20, 40), ta, tb, out)
    monkeypatch.undo()
    assert len(read) == 1, read
    for i in range(2):
        msg = check_guarantee(out[i].numpy(), a[i], b[i])
        assert not msg, msg


# ------------------------------------------------------------------ routes per chip
def test_native_fp32_reads_torch_npus_options(monkeypatch):
    """npu._npu_option reads torch_npu._C._npu_getOption, bytes or None, as torch_npu's own allow_hf32 does."""
    import types

    seen = []
    fake = types.ModuleType("torch_npu")
    fake._C = types.SimpleNamespace(_npu_getOption=lambda name: (seen.append(name),
                                                                 {"ALLOW_MATMUL_HF32": b"enable"}.get(name))[1])
    monkeypatch.setitem(sys.modules, "torch_npu", fake)
    assert npu._npu_option("ALLOW_MATMUL_HF32") == "enable"
    assert npu._npu_option("ACL_PRECISION_MODE") is None
    got = npu.native_fp32("910b")
    assert (got.allow_hf32, got.fp32, got.precision_mode, got.mode_set) == (True, False, "must_keep_origin_dtype",
                                                                              False)
    assert {"ACL_PRECISION_MODE", "ALLOW_MATMUL_HF32", "CUBE_MATH_TYPE"} <= set(seen)


@pytest.mark.parametrize("soc,options,fp32,mode", [
    ("910a", {}, False, "allow_fp32_to_fp16"),
    ("910a", {"ACL_PRECISION_MODE": "must_keep_origin_dtype"}, False, "must_keep_origin_dtype"),  # no FP32 cube
    ("910b", {}, True, "must_keep_origin_dtype"),
    ("910b", {"ACL_PRECISION_MODE": "allow_fp32_to_fp16"}, False, "allow_fp32_to_fp16"),
    ("910b", {"ACL_PRECISION_MODE": "something else"}, True, "must_keep_origin_dtype"),  # torch_npu ignores it
    ("910b", {"ALLOW_MATMUL_HF32": "enable"}, False, "must_keep_origin_dtype"),
    ("910b", {"ALLOW_MATMUL_HF32": "disable"}, True, "must_keep_origin_dtype"),
    ("910b", {"CUBE_MATH_TYPE": "3"}, False, "must_keep_origin_dtype"),
    ("910b", {"CUBE_MATH_TYPE": "0"}, True, "must_keep_origin_dtype"),
])
def test_native_fp32_trusted_only_where_it_is_fp32(npu_options, soc, options, fp32, mode):
    npu_options.update(options)
    got = npu.native_fp32(soc)
    assert (got.fp32, got.precision_mode) == (fp32, mode)
    assert got.mode_set == (options.get("ACL_PRECISION_MODE") in npu.DEFAULT_PRECISION_MODE.values())
    assert got.why  # a reason either way


def _route(req_kw, soc, m, n, k, npu_options, model_ext, **options):
    from sgemm_cube.plan import make_request

    model_ext(soc, 32 if soc == "910a" else 20)
    npu_options.clear()
    npu_options.update(options)
    return npu.plan(make_request(**req_kw), 1, m, n, k)


def test_routes_on_the_910a_never_send_fp32_to_torch(model_ext, npu_options):
    """910A: K < 16 (auto) and backend="native" run plain FP32 on the vector units, native with longer K the
    emulation with the guarantee; nothing is planned as "native" (torch.matmul), whatever the mode."""
    for options in ({}, {"ACL_PRECISION_MODE": "must_keep_origin_dtype"}):
        small = _route({}, "910a", 64, 64, 8, npu_options, model_ext, **options)
        assert (small.scheme, small.backend) == ("fp32", "npu")
        assert "K = 8 < 16" in small.reason and "910A has no FP32 cube" in small.reason
        native_small = _route({"backend": "native"}, "910a", 64, 64, 8, npu_options, model_ext, **options)
        assert (native_small.scheme, native_small.backend) == ("fp32", "npu")
        native_long = _route({"backend": "native", "fixup": False, "order": "elementwise"}, "910a", 64, 64, 64,
                             npu_options, model_ext, **options)
        assert (native_long.scheme, native_long.scale, native_long.backend) == ("fp16x3", "auto", "npu")
        assert "emulated with the guarantee" in native_long.reason
        auto = _route({}, "910a", 4096, 4096, 4096, npu_options, model_ext, **options)
        assert (auto.scheme, auto.backend) == ("fp16x3", "npu")
    asked = _route({"backend": "npu"}, "910a", 64, 64, 8, npu_options, model_ext)
    assert (asked.scheme, asked.backend) == ("fp16x3", "npu")  # the emulation when asked for by name


def test_routes_on_the_910b_follow_the_precision_mode(model_ext, npu_options):
    """910B: native FP32 trusted by default (auto runs it where the model predicts it faster: everywhere
    today, with the predicted figures in the reason); HF32 or allow_fp32_to_fp16 turn it off."""
    for k in (8, 4096):
        plan = _route({}, "910b", 4096, 4096, k, npu_options, model_ext)
        assert (plan.scheme, plan.backend) == ("native", "native"), plan
    plan = _route({}, "910b", 4096, 4096, 4096, npu_options, model_ext)
    assert "pipeline model predicts the emulation at" in plan.reason and "HF32 off" in plan.reason
    assert _route({"backend": "native"}, "910b", 64, 64, 64, npu_options, model_ext).backend == "native"
    for options in ({"ALLOW_MATMUL_HF32": "enable"}, {"ACL_PRECISION_MODE": "allow_fp32_to_fp16"}):
        small = _route({}, "910b", 64, 64, 8, npu_options, model_ext, **options)
        assert (small.scheme, small.backend) == ("fp32", "npu"), small
        auto = _route({}, "910b", 4096, 4096, 4096, npu_options, model_ext, **options)
        assert (auto.scheme, auto.backend) == ("fp16x3", "npu"), auto
        native = _route({"backend": "native"}, "910b", 64, 64, 64, npu_options, model_ext, **options)
        assert (native.scheme, native.backend) == ("fp16x3", "npu") and "emulated" in native.reason
    hf32 = _route({}, "910b", 64, 64, 8, npu_options, model_ext, ALLOW_MATMUL_HF32="enable")
    assert "HF32" in hf32.reason


@pytest.mark.parametrize("soc", ["910a", "910b"])
def test_the_fp32_route_is_plain_fp32_on_the_device(model_ext, npu_options, torch, soc):
    """The "fp32" plan runs the extension's matmul_fp32 (the fix-up kernel over every row, executed): bit for
    bit recursive summation times alpha, NaN/Inf as IEEE gives them, no torch.matmul and no host read-back;
    backend="native" with longer K on the 910A keeps the guarantee through the emulation."""
    from tests.guarantee_data import check_guarantee, sequential_fp32

    from sgemm_cube.plan import make_request

    npu_options["ACL_PRECISION_MODE"] = "allow_fp32_to_fp16"  # native not FP32 on either chip
    ext = model_ext(soc, 32 if soc == "910a" else 20)
    rng = np.random.default_rng(14)
    a = rng.standard_normal((2, 20, 7)).astype(np.float32)
    b = rng.standard_normal((2, 7, 18)).astype(np.float32)
    a[0, 2, 3], b[1, 4, 5], a[1, 6, :] = np.inf, np.nan, np.float32(3e38)  # NaN, Inf, an overflowing row
    a[0, 9, :] *= np.float32(1e-41)  # subnormal entries
    req = make_request()
    plan = npu.plan(req, 2, 20, 18, 7)
    assert plan.scheme == "fp32"
    out = torch.empty(2, 20, 18)
    with pytest.MonkeyPatch.context() as forbid:
        for name in ("cpu", "item", "numpy", "tolist", "double"):
            forbid.setattr(torch.Tensor, name, lambda *args, _n=name, **kw: pytest.fail(f"npu.run called .{_n}"))
        for name in ("matmul", "mm", "bmm"):
            forbid.setattr(torch, name, lambda *args, _n=name, **kw: pytest.fail(f"npu.run called torch.{_n}"))
        npu.run(plan, torch.from_numpy(a), torch.from_numpy(b), out, alpha=-3.0)
    assert ext.calls == ["fp32"]
    with np.errstate(all="ignore"):
        want = np.float32(-3) * sequential_fp32(a, b)
    got = out.numpy()
    # alpha = -1.5 * 2: a subnormal output is rounded twice (the unscale's documented 2^-149)
    normal = ~(np.abs(want) < np.float32(2.0 ** -126))
    assert np.array_equal(got[normal], want[normal], equal_nan=True)
    assert np.abs(got[~normal] - want[~normal]).max() <= 2.0 ** -149
    assert np.isinf(got[0, 2]).all() and np.isnan(got[1, :, 5]).all() and np.isinf(got[1, 6]).any()
    # backend="native", K = 40 on the 910A: the emulation with the guarantee, whatever fixup= said
    if soc == "910a":
        a = rng.standard_normal((1, 24, 40)).astype(np.float32)
        b = rng.standard_normal((1, 40, 20)).astype(np.float32)
        a[0, :, ::2] *= np.float32(1e-10)  # rows the split cannot hold: recomputed in FP32
        req = make_request(backend="native", fixup=False)
        plan = npu.plan(req, 1, 24, 20, 40)
        out = torch.empty(1, 24, 20)
        npu.run(plan, torch.from_numpy(a), torch.from_numpy(b), out)
        msg = check_guarantee(out[0].numpy(), a[0], b[0])
        assert not msg, msg


def test_native_on_an_npu_tensor_is_planned_by_the_npu_backend(monkeypatch):
    """backend="native" on NPU tensors goes to the npu backend's plan (what native FP32 is depends on the
    chip); on other devices it stays the library's own product."""
    import types

    from sgemm_cube import product

    monkeypatch.setattr(product, "_is_torch", lambda x: True)
    on = lambda kind: types.SimpleNamespace(device=types.SimpleNamespace(type=kind))  # noqa: E731
    assert product.select_backend(on("npu"), backend="native") == "npu"
    assert product.select_backend(on("cuda"), backend="native") == "native"
    assert product.select_backend(on("cpu"), backend="native") == "native"
    assert product.select_backend(on("npu")) == "npu"


def test_explain_gives_the_routes_on_a_modelled_chip(torch):
    """sgemm_cube.explain on tensors of a modelled 910A / 910B (the bring-up's model device; tensors that
    report an NPU device) gives each route and its reason through the public API."""
    import types

    import sgemm_cube

    class OnNpu(torch.Tensor):
        @property
        def device(self):
            return types.SimpleNamespace(type="npu", index=0)

    def pair(k):
        return torch.randn(64, k).as_subclass(OnNpu), torch.randn(k, 32).as_subclass(OnNpu)

    model_device = _load_check_on_npu().model_device
    short, long = pair(8), pair(64)
    with model_device("910a"):
        plans = {(backend, k): sgemm_cube.explain(*ab, backend=backend)
                 for backend in ("auto", "native", "npu") for k, ab in ((8, short), (64, long))}
    assert {key: (p.backend, p.scheme) for key, p in plans.items()} == {
        ("auto", 8): ("npu", "fp32"), ("auto", 64): ("npu", "fp16x3"),
        ("native", 8): ("npu", "fp32"), ("native", 64): ("npu", "fp16x3"),
        ("npu", 8): ("npu", "fp16x3"), ("npu", 64): ("npu", "fp16x3")}
    assert all("910A has no FP32 cube" in p.reason for key, p in plans.items() if key[0] != "npu")
    with model_device("910b"):
        auto, native = sgemm_cube.explain(*long), sgemm_cube.explain(*long, backend="native")
        assert (auto.backend, native.backend) == ("native", "native")
        assert "pipeline model predicts the emulation at" in auto.reason
        npu._npu_option = {"ALLOW_MATMUL_HF32": "enable"}.get  # restored with the model device
        hf32 = {k: sgemm_cube.explain(*ab) for k, ab in ((8, short), (64, long))}
    assert {k: (p.backend, p.scheme) for k, p in hf32.items()} == {8: ("npu", "fp32"), 64: ("npu", "fp16x3")}
    assert all("allow_hf32 is on" in p.reason for p in hf32.values())


def test_the_plan_holds_what_npu_run_launches(model_ext, torch):
    """backend="native" emulated on the 910A: the plan (explain) says fixup on and termwise whatever the
    options said, and carries the split range's arithmetic and the tiling; a tiling forced through the
    plan's config is the one launched."""
    from sgemm_cube.plan import make_request

    ext = model_ext("910a", 32)
    plan = npu.plan(make_request(backend="native", fixup=False), 1, 24, 20, 40)
    assert (plan.backend, plan.scheme, plan.sb, plan.scale, plan.order, plan.fixup) == (
        "npu", "fp16x3", 12, "auto", "termwise", True)
    config = dict(plan.config)
    assert config["arithmetic"] == npu.arithmetic("910a").arithmetic
    assert config["tiling"] == npu.choose_tiling("910a", 24, 20, 40, terms=3)
    seen = []
    kernel = ext.matmul
    ext.matmul = lambda a, b, out, options, **kw: (seen.append(options), kernel(a, b, out, options, **kw))
    forced = npu_schedule.Tiling(16, 32, 16, 3)
    a, b = torch.ones(1, 24, 40), torch.ones(1, 40, 20)
    out = torch.empty(1, 24, 20)
    npu.run(plan.with_config(tiling=forced), a, b, out)
    (options,) = seen
    assert (options.bm, options.bk, options.bn, options.n_fused) == (16, 32, 16, 3)
    assert options.fixup is True  # from the plan
    assert torch.equal(out, torch.full((1, 24, 20), 40.0))


@pytest.mark.parametrize("soc", ["910a", "910b"])
def test_band_passes_in_their_own_tilings_keep_the_models_bits(torch, monkeypatch, soc):
    """Where the product runs the tuner's tiling, npu_bands runs each band pass in the tuner's tiling for the
    pass's own shape: the same K groups (three here, K = 2,100), so the result is the CPU model's with the
    product's tiling bit for bit (the schedule model standing in for the device: ModelExtension).  At the
    writing, on the 910B two of the three passes ran bn = 64 against the product's 48."""
    from sgemm_cube.backends import npu_model
    from sgemm_cube.cpu_fallback.arithmetic import WORST
    from sgemm_cube.plan import make_request

    ext = _ModelExtension(soc, npu_model.CORES[soc])
    monkeypatch.setattr(npu, "unavailable_reason", lambda: "")
    monkeypatch.setattr(npu, "_extension", lambda: ext)
    monkeypatch.setattr(npu, "ARITHMETIC_FILE", Path("/nonexistent/npu_arithmetic.json"))
    monkeypatch.delenv(npu.ARITHMETIC_ENV, raising=False)
    rng = np.random.default_rng(23)
    m, k, n = 200, 2100, 72
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a[::3, ::2] *= np.float32(2.0 ** -40)  # banded rows
    b[:, ::5] *= np.float32(2.0 ** 30)
    b[::4, ::5] *= np.float32(2.0 ** -45)  # banded columns
    out = torch.empty(1, m, n)
    npu.run(npu.plan(make_request(backend="npu"), 1, m, n, k), torch.from_numpy(a[None]), torch.from_numpy(b[None]),
            out)
    t = npu.choose_tiling(soc, m, n, k)
    assert len(ext.band_calls) == 3  # rows, columns, pairs
    assert all(bk * nf == t.bk * t.n_fused == 1024 for _, bk, _, nf, *_ in ext.band_calls)  # the same K groups
    want = npu_model.guarded_product(a, b, soc=soc, arithmetic=None, design=WORST, tiling=t)
    assert np.array_equal(out[0].numpy().view(np.uint32), want.view(np.uint32))
