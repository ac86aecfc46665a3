"""The NPU backend's choice of design for the hardware arithmetic (issue 31) and what it launches.

* :func:`npu.arithmetic`: the arithmetic in force and where it came from: ``$SGEMM_CUBE_NPU_ARITHMETIC``,
  the bring-up's ``npu_arithmetic.json``, or nothing ("unprobed": the design safe under every
  alternative, i.e. the split range that holds when FP16 subnormals flush);
* ``sgemm_cube.explain`` on an NPU plan says which, and the split range it gives;
* every option that reaches the NPU path (sb, scheme, scale, fixup, alpha, the arithmetic's range)
  changes the extension call (a fake extension records them): an option the path dropped on the way
  (as ``npu.matmul`` once dropped ``scheme="fp16x4"``) fails here;
* the schedule model under the alternatives: K groups summed by the atomic add in its rounding, one
  group equal to ``cpu_fallback`` under the same arithmetic.
"""
from __future__ import annotations

import json
import types

import numpy as np
import pytest

import sgemm_cube.cpu_fallback as cpu_fallback
from sgemm_cube.backends import npu, npu_schedule
from sgemm_cube.cpu_fallback.arithmetic import DEFAULT, WORST, Arithmetic


@pytest.fixture
def no_record(monkeypatch, tmp_path):
    """Neither the variable nor the file: the arithmetic is unprobed.  Returns the file's path (absent)."""
    monkeypatch.delenv(npu.ARITHMETIC_ENV, raising=False)
    path = tmp_path / "npu_arithmetic.json"
    monkeypatch.setattr(npu, "ARITHMETIC_FILE", path)
    return path


def test_unprobed_is_the_design_safe_under_every_alternative(no_record):
    got = npu.arithmetic("910a")
    assert got == (WORST, npu.UNPROBED)
    assert got.source == "unprobed: the design safe under every alternative"


def test_the_bring_ups_file_is_read(no_record):
    no_record.write_text(json.dumps({"arithmetic": "cast=trunc", "soc": "910a"}))
    assert npu.arithmetic("910a") == (Arithmetic(cast="trunc"), f"file {no_record}")
    assert npu.arithmetic() == (Arithmetic(cast="trunc"), f"file {no_record}")  # chip unknown: used
    other = npu.arithmetic("910b")  # a record of the other chip family is not this chip's
    assert other.arithmetic == WORST and other.source.startswith(npu.UNPROBED) and "910a" in other.source
    no_record.write_text(json.dumps({"arithmetic": "default"}))
    assert npu.arithmetic("910b").arithmetic == DEFAULT


def test_the_variable_wins_over_the_file(no_record, monkeypatch):
    no_record.write_text(json.dumps({"arithmetic": "subnormals=flush"}))
    monkeypatch.setenv(npu.ARITHMETIC_ENV, "default")
    assert npu.arithmetic("910b") == (DEFAULT, f"env {npu.ARITHMETIC_ENV}=default")
    monkeypatch.setenv(npu.ARITHMETIC_ENV, "accumulate=truncate, atomic=trunc")
    assert npu.arithmetic("910b").arithmetic == Arithmetic(accumulate="truncate", atomic="trunc")
    monkeypatch.setenv(npu.ARITHMETIC_ENV, "  ")  # blank: unset
    assert npu.arithmetic("910b").arithmetic == Arithmetic(subnormals="flush")


def test_malformed_records_raise_naming_where(no_record, monkeypatch):
    monkeypatch.setenv(npu.ARITHMETIC_ENV, "subnormals=denormal")
    with pytest.raises(ValueError, match=r"SGEMM_CUBE_NPU_ARITHMETIC.*subnormals"):
        npu.arithmetic("910a")
    monkeypatch.delenv(npu.ARITHMETIC_ENV)
    for text in ("{not json", json.dumps({"cast": "trunc"}), json.dumps(["cast=trunc"])):
        no_record.write_text(text)
        with pytest.raises(ValueError, match="npu_arithmetic.json"):
            npu.arithmetic("910a")
    no_record.write_text(json.dumps({"arithmetic": "cast=floor"}))
    with pytest.raises(ValueError, match=r"npu_arithmetic.json.*cast"):
        npu.arithmetic("910a")


# ------------------------------------------------------------------ what reaches the extension
class RecordingExtension(types.ModuleType):
    """Stands in for ``_npu_ext``: records every call's options, writes zeros."""

    MatmulOptions = npu.MatmulOptions

    def __init__(self, soc: str):
        super().__init__("sgemm_cube.backends._npu_ext")
        self._soc, self.calls = soc, []

    def soc(self) -> str:
        return self._soc

    def matmul(self, a, b, out, options, lines=None):
        assert isinstance(options, npu.MatmulOptions)
        self.calls.append(options)
        out.zero_()
        if lines is not None:
            lines.zero_()  # every line of class 0 (SPLIT): no band pass

    def matmul_fp32(self, a, b, out, alpha=1.0):
        self.calls.append(("fp32", alpha))
        out.zero_()


@pytest.fixture
def recording(monkeypatch, no_record):
    pytest.importorskip("torch")
    from sgemm_cube import backends

    monkeypatch.setattr(backends, "_ready", {})  # the backends found ready here are forgotten after the test

    def install(soc: str) -> RecordingExtension:
        ext = RecordingExtension(soc)
        monkeypatch.setattr(npu, "unavailable_reason", lambda: "")
        monkeypatch.setattr(npu, "_extension", lambda: ext)
        monkeypatch.setattr(npu, "_npu_option", lambda name: None)
        return ext

    return install


def _launch(ext, monkeypatch, *, alpha=1.0, env=None, **options):
    """One npu.run with these options; the extension call's options as {field: value}."""
    import torch

    from sgemm_cube.plan import make_request

    if env is None:
        monkeypatch.delenv(npu.ARITHMETIC_ENV, raising=False)
    else:
        monkeypatch.setenv(npu.ARITHMETIC_ENV, env)
    req = make_request(backend="npu", **options)
    a, b = torch.ones(1, 24, 40), torch.ones(1, 40, 32)
    ext.calls.clear()
    npu.run(npu.plan(req, 1, 24, 32, 40), a, b, torch.empty(1, 24, 32), alpha=alpha)
    options, = ext.calls
    return options._asdict()


@pytest.mark.parametrize("soc", ["910a", "910b"])
def test_every_option_changes_what_is_launched(recording, monkeypatch, soc):
    ext = recording(soc)
    base = _launch(ext, monkeypatch)
    assert (base["sb"], base["keep_lo_lo"], base["guard"], base["scale"], base["fixup"], base["alpha"],
            base["subnormals"], base["bands"]) == (12, False, True, npu.SCALE_CODE["auto"], True, 1.0, 1, True)
    variants = {
        "sb": (dict(sb=6), {"sb": 6}),
        "scheme": (dict(scheme="fp16x4"), {"keep_lo_lo": True}),
        "scale": (dict(scale="rows"), {"scale": npu.SCALE_CODE["rows"]}),
        "scale=None": (dict(scale=None), {"scale": npu.SCALE_CODE[None]}),
        "fixup": (dict(fixup=False), {"fixup": False, "bands": False}),  # no listed line to band
        "alpha": (dict(alpha=-2.5), {"alpha": -2.5}),
        # a recorded answer that the chip keeps FP16 subnormals widens the range; one that it flushes
        # keeps the default's
        "arithmetic": (dict(env="default"), {"subnormals": 0}),
        "arithmetic=trunc": (dict(env="cast=trunc"), {"subnormals": 0}),
    }
    tiling = ("bm", "bk", "bn", "n_fused", "per_term", "l0c_stages")
    for name, (options, changed) in variants.items():
        got = _launch(ext, monkeypatch, **options)
        assert {f: got[f] for f in changed} == changed, name
        rest = [f for f in got if f not in changed and f not in tiling]
        assert [got[f] for f in rest] == [base[f] for f in rest], name  # that option alone changed
    assert _launch(ext, monkeypatch, env="subnormals=flush,cast=trunc")["subnormals"] == 1
    # fp16x4 is tiled for four accumulators
    four = _launch(ext, monkeypatch, scheme="fp16x4")
    assert tuple(four[f] for f in tiling) == tuple(npu.choose_tiling(soc, 24, 32, 40, terms=4))


def test_matmul_honours_scheme(recording, monkeypatch):
    """npu.matmul(scheme="fp16x4") computes four products (it used to run three unless keep_lo_lo was set)."""
    import torch

    ext = recording("910b")
    x, y, out = torch.ones(1, 16, 32), torch.ones(1, 32, 16), torch.empty(1, 16, 16)
    launched = {}
    for scheme, keep in (("fp16x4", False), ("fp16x3", False), (None, False), (None, True), ("fp16x3", True)):
        ext.calls.clear()
        npu.matmul(x, y, sb=12, order="termwise", keep_lo_lo=keep, out=out, scheme=scheme)
        options, = ext.calls
        launched[scheme, keep] = options.keep_lo_lo
    assert launched == {("fp16x4", False): True, ("fp16x3", False): False, (None, False): False,
                        (None, True): True, ("fp16x3", True): True}


def test_explain_names_the_arithmetic_and_the_range(recording, monkeypatch):
    """An emulated NPU plan's reason says which arithmetic it is designed for, where that came from, and the
    split range it gives; native and plain-FP32 routes do not."""
    import torch

    import sgemm_cube

    class OnNpu(torch.Tensor):
        @property
        def device(self):
            return types.SimpleNamespace(type="npu", index=0)

    recording("910a")
    a, b = torch.ones(64, 64).as_subclass(OnNpu), torch.ones(64, 32).as_subclass(OnNpu)
    plan = sgemm_cube.explain(a, b, backend="npu")
    assert (plan.backend, plan.scheme) == ("npu", "fp16x3")
    assert "unprobed: the design safe under every alternative" in plan.reason
    assert "[2**-4, 2**15)" in plan.reason and "flushed or kept" in plan.reason
    monkeypatch.setenv(npu.ARITHMETIC_ENV, "default")
    plan = sgemm_cube.explain(a, b, backend="npu", sb=6)
    assert f"env {npu.ARITHMETIC_ENV}=default" in plan.reason and "[2**-9, 65520)" in plan.reason
    short = sgemm_cube.explain(a[:, :8], b[:8], backend="auto")  # K = 8 on the 910A: plain FP32
    assert short.scheme == "fp32" and "hardware arithmetic" not in short.reason


# ------------------------------------------------------------------ the schedule model
CAP = {soc: npu_schedule.capacity_from_profile(soc) for soc in ("910a", "910b")}


@pytest.mark.parametrize("arithmetic", [DEFAULT, Arithmetic(atomic="trunc"), Arithmetic(accumulate="truncate"),
                                        Arithmetic(cast="trunc", subnormals="flush"), WORST], ids=str)
def test_simulate_under_the_alternatives(arithmetic):
    """K groups: simulate == grouped_reference under the same arithmetic; one group: == emulated_matmul."""
    rng = np.random.default_rng(7)
    a = (rng.uniform(0, 1, (40, 160)) * 2.0 ** rng.integers(-30, 0, (40, 160))).astype(np.float32)
    b = rng.uniform(0, 1, (160, 24)).astype(np.float32)
    groups = npu_schedule.Tiling(32, 32, 32, 1)
    got = npu_schedule.simulate(a, b, tiling=groups, cap=CAP["910a"], cores=3, arithmetic=arithmetic)
    assert np.array_equal(got, npu_schedule.grouped_reference(a, b, group_k=32, arithmetic=arithmetic))
    one = npu_schedule.Tiling(32, 32, 32, 5)
    got1 = npu_schedule.simulate(a, b, tiling=one, cap=CAP["910a"], cores=3, arithmetic=arithmetic)
    assert np.array_equal(got1, cpu_fallback.emulated_matmul(a, b, arithmetic=arithmetic))
    if arithmetic.atomic == "trunc":  # positive partial sums: the truncating atomic add shows
        assert not np.array_equal(got, npu_schedule.grouped_reference(a, b, group_k=32))


def test_chip_arithmetic():
    assert npu_schedule.chip_arithmetic("910a", WORST) == WORST
    b = npu_schedule.chip_arithmetic("910B", "cast=trunc,l0c_to_ub=unsupported,subnormals=flush")
    assert b == Arithmetic(subnormals="flush")  # the 910B's split asks CAST_RINT by name; Fixpipe drains L0C
