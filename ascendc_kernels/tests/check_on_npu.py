"""Validate the built AscendC backend on an Ascend host, or its CPU model anywhere (``--dry-run``).

    python ascendc_kernels/tests/check_on_npu.py                 # on the NPU: every case
    python ascendc_kernels/tests/check_on_npu.py --bench         # plus timings
    python ascendc_kernels/tests/check_on_npu.py --dry-run       # no NPU: the kernels' CPU model
    python ascendc_kernels/tests/check_on_npu.py --dry-run --quick --soc 910a

``ascendc_kernels/bringup.py`` runs this after the build.  Every case runs
``sgemm_cube.matmul(a, b, backend="npu")`` (the guarantee's bookkeeping
around the three kernels: line scaling, FP32 fix-up of the lines the
split cannot hold) or, for the case with an explicit tiling, the kernels
alone (``npu.matmul(..., tiling=...)``), and prints one table row:

* ``groups``: K groups of the tiling (``ceil(K blocks / n_fused)``), summed by
  FP32 atomic adds: the two-level accumulation.  The backend's own tilings make
  groups of ``cpu_fallback.K_GROUP`` elements, which ``cpu_fallback``'s default
  mirrors; an explicit tiling with other groups differs from it by design (it
  equals ``npu_schedule.grouped_reference`` with its group length);
* ``FP32 lines``: rows of A + columns of B computed in plain FP32
  (``cpu_fallback.guard``'s class SPECIAL: NaN/Inf; the lines with too wide a range of magnitudes go
  through exponent bands on the cube, ``cpu_fallback/bands.py``);
* ``max|d| cpu`` / ``exact``: largest difference from the CPU backend
  (``backend="cpu"``, the NumPy arithmetic model ``cpu_fallback``) over the
  entries finite in both, and whether all entries are equal bit for bit
  (NaN = NaN); ``expect`` says whether they should be: one K group or groups of
  ``K_GROUP``, no listed lines (FP32 lines are summed by the device's matmul,
  in its own order; banded ones by band passes, which ``cpu_fallback`` computes
  exactly instead), and the kernels' CPU model equal to the CPU backend (the
  NPU path classifies lines by the split range that holds whether or not the
  chip flushes FP16 subnormals, ``npu.arithmetic``, the CPU backend by the
  default range: a line that fits one and not the other is scaled on one
  side only, and may round differently);
* ``=model``: on the NPU, whether the kernel-computed entries (outside FP32
  lines) equal the kernels' CPU model bit for bit (``npu_schedule.simulate``
  with ``accumulate="cube16"``, i.e. exactly what ``--dry-run`` computes); a
  difference measures how the cube rounds inside L0C (undocumented), and the
  largest one in ulp is printed below the table.  ``-`` in a dry run;
* ``err`` / ``native``: relative Frobenius error against float64 over the
  entries whose row of A and column of B are finite and whose exact value
  is in FP32 range, for sgemm_cube and
  for native FP32 (``torch.matmul`` on the NPU; NumPy in a dry run);
* ``bound``: SGEMM's componentwise error bound and NaN/Inf as native FP32
  gives them (``tests/guarantee_data.check_guarantee``).

Then the first-contact checks (:func:`first_contact`): CANN's precision mode,
HF32 and cube math type as the backend reads them and the route each kind
of call takes; that no call waits for the device (event timing, with work
queued ahead; in a dry run, host read-backs made to raise; the band design's one read-back of the
lines' integers, ``sgemm_cube/backends/npu_bands.py``, is allowed and named); the guarantee on
every adversarial generator of ``tests/guarantee_data.py`` with native FP32
under the mode in force measured beside.

Exit status 1 if any case breaks the bound, or a call synchronises, or, in a dry run, if a case
expected to be bit-exact is not (the NPU's own mismatches are measurements).
``--dry-run`` replaces the compiled extension by the schedule model running
on CPU tensors, so the whole path (planning, tiling, bookkeeping, the
table) runs without CANN or an NPU; CI runs it (``tests/ascendc_kernels/test_ascend_build.py``).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
import types
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
# Installed packages first (the built extension lives in the installed sgemm_cube; the clone's
# source tree has none unless installed with -e), the clone as the fallback.
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

__all__ = ["main", "cases", "run_cases", "first_contact", "model_device", "ModelExtension", "multi_group_k"]


# ------------------------------------------------------------- the CPU model
def _captured():
    """Tensor methods as they are at import: the model plays the device, whose own reads a test of npu.run's
    host traffic must not count."""
    import torch

    cpu, numpy = torch.Tensor.cpu, torch.Tensor.numpy
    return (lambda t: numpy(cpu(t.detach())).copy()), torch.Tensor.copy_


try:
    _HOST, _COPY = _captured()
except ImportError:  # pragma: no cover - the bring-up needs torch anyway
    _HOST = _COPY = None


def _split_range(subnormals):
    """The split range the extension was asked for (its `subnormals`: 1, the range safe whether or not the chip
    flushes FP16 subnormals; 0, the wider one of a chip that keeps them), as cpu_fallback's ``arithmetic``."""
    return "subnormals=flush" if subnormals else None


def _ordinary_split_input(x, t, axis, sb):
    """What the ordinary split reads (``npu_model.ordinary_split_input``: the lines scaled by 2**t, NaN/Inf and
    |x| >= max_abs as 0)."""
    from sgemm_cube.backends.npu_model import ordinary_split_input

    return ordinary_split_input(x, t, axis, sb)


def _line_rows(a, b, ma, mb):
    """The extension's ``lines`` (int32 (4, B * (M + N))): the packed integers, then the line statistics big,
    small_w, finite as the line-statistics kernel encodes them, each over A's rows then B's columns."""
    from sgemm_cube.cpu_fallback.guard import line_stats, pack_meta

    rows = [np.concatenate([pack_meta(ma).ravel(), pack_meta(mb).ravel()])]
    per_side = []
    for x, axis in ((a, -1), (b, -2)):
        st = line_stats(x, axis)
        big = st.big.astype(np.float32).view(np.int32)
        with np.errstate(invalid="ignore"):
            small = np.where(np.isinf(st.small), np.int32(0x7FFFFFFF),
                             st.small.astype(np.float32).view(np.int32) - 1).astype(np.int32)
        per_side.append((big, small, np.where(st.bad, 0, -1).astype(np.int32)))
    rows += [np.concatenate([sa.ravel(), sb.ravel()]) for sa, sb in zip(*per_side)]
    return np.stack(rows).astype(np.int32)


def _guarded_model(a, b, scale_code, fixup, alpha, kw, subnormals=1, bands=False):
    """The device bookkeeping's rules (cpu_fallback.guard, bit for bit as the kernels are tested to be): lines
    scaled, NaN/Inf and |x| >= max_abs as 0, the kernels' model, unscaled with alpha, the fix-up lines by
    recursive FP32 summation of the unscaled lines, times alpha (``bands``: only the SPECIAL lines, the
    banded ones left as the ordinary pass gives them).  Returns (C, A's line meta, B's)."""
    from sgemm_cube.backends import npu_schedule
    from sgemm_cube.cpu_fallback.guard import LineClass, fixup_min_class, line_meta, unscale

    sequential_fp32 = _guarantee_module().sequential_fp32
    scale = {0: None, 1: "auto", 2: "rows", 3: "matrix"}[scale_code]
    sb = kw["sb"]
    scheme = "fp16x4" if kw["keep_lo_lo"] else "fp16x3"
    ranged = _split_range(subnormals)
    ma = line_meta(a, -1, scheme=scheme, sb=sb, scale=scale, fixup=fixup, arithmetic=ranged)
    mb = line_meta(b, -2, scheme=scheme, sb=sb, scale=scale, fixup=fixup, arithmetic=ranged)
    xa, xb = _ordinary_split_input(a, ma.t, -1, sb), _ordinary_split_input(b, mb.t, -2, sb)
    c = unscale(npu_schedule.simulate(xa, xb, **kw), ma.t, mb.t, alpha)
    lowest = LineClass.SPECIAL if bands and fixup else fixup_min_class(fixup)
    rows, cols = ma.cls >= lowest, mb.cls >= lowest
    if rows.any() or cols.any():
        with np.errstate(all="ignore"):
            fp32 = unscale(sequential_fp32(a, b), np.zeros_like(ma.t), np.zeros_like(mb.t), alpha)
        c = np.where(rows[:, :, None] | cols[:, None, :], fp32, c)
    return c, ma, mb


def _band_pass_model(a, b, meta_a, meta_b, o, kw):
    """The extension's ``band_pass``: the lines scaled by their packed integers' t, a band side cut to the band
    window (cpu_fallback.bands.band_values), the other NaN/Inf and |x| >= max_abs as 0; the kernels' model,
    unscaled with alpha."""
    from sgemm_cube.backends import npu_schedule
    from sgemm_cube.cpu_fallback.bands import band_values, band_window
    from sgemm_cube.cpu_fallback.guard import unpack_meta, unscale

    window = band_window(o.sb, _split_range(o.subnormals), scheme="fp16x4" if o.keep_lo_lo else "fp16x3")
    ta, tb = unpack_meta(meta_a).t, unpack_meta(meta_b).t
    xa = band_values(a, ta, -1, window) if o.band_a else _ordinary_split_input(a, ta, -1, o.sb)
    xb = band_values(b, tb, -2, window) if o.band_b else _ordinary_split_input(b, tb, -2, o.sb)
    return unscale(npu_schedule.simulate(xa, xb, **kw), ta, tb, o.alpha)


class ModelExtension(types.ModuleType):
    """Stands in for the compiled ``_npu_ext``: the schedule model on CPU tensors.

    Same interface as ``host/binding.cpp``'s module: ``soc()``, ``MatmulOptions`` (``npu.MatmulOptions``),
    ``matmul(a, b, out, options, lines=None)``, ``band_pass(a, b, out, meta_a, meta_b, options)``,
    ``matmul_fp32(a, b, out, alpha=1.0)``; ``calls`` records each matmul / matmul_fp32 launch, ``band_calls``
    each band_pass."""

    def __init__(self, soc: str, cores: int):
        from sgemm_cube.backends.npu import MatmulOptions

        super().__init__("sgemm_cube.backends._npu_ext")
        self._soc, self._cores, self.calls = soc, cores, []
        self.band_calls = []  # (bm, bk, bn, n_fused, per_term, band_a, band_b) of each band_pass
        self.MatmulOptions = MatmulOptions

    def soc(self) -> str:
        return self._soc

    def _kw(self, o) -> dict:
        """``npu_schedule.simulate``'s keywords for the options ``o``."""
        from sgemm_cube.backends import npu_schedule

        tiling = npu_schedule.Tiling(o.bm, o.bk, o.bn, o.n_fused, bool(o.per_term), int(getattr(o, "l0c_stages", 1)))
        return dict(sb=o.sb, keep_lo_lo=o.keep_lo_lo, tiling=tiling,
                    cap=npu_schedule.capacity_from_profile(self._soc), cores=self._cores)

    def matmul(self, a, b, out, options, lines=None):
        import torch

        from sgemm_cube.backends import npu_schedule

        assert a.is_contiguous() and b.is_contiguous() and out.is_contiguous()
        assert a.dtype == b.dtype == out.dtype == torch.float32
        o = options
        self.calls.append((o.bm, o.bk, o.bn, o.n_fused, bool(o.per_term)))
        x, y = _HOST(a), _HOST(b)
        kw = self._kw(o)
        if not o.guard:
            assert lines is None, "lines needs options.guard"
            c = npu_schedule.simulate(x, y, **kw)
        else:
            c, ma, mb = _guarded_model(x, y, o.scale, o.fixup, o.alpha, kw, o.subnormals,
                                       bool(getattr(o, "bands", False)))
            if lines is not None:
                _COPY(lines, torch.from_numpy(_line_rows(x, y, ma, mb)))
        _COPY(out, torch.from_numpy(c))

    def band_pass(self, a, b, out, meta_a, meta_b, options):
        """One band pass (``host/binding.cpp``'s ``band_pass``) on the kernels' model."""
        import torch

        assert a.is_contiguous() and b.is_contiguous() and out.is_contiguous()
        assert a.dtype == b.dtype == out.dtype == torch.float32
        o = options
        self.band_calls.append((o.bm, o.bk, o.bn, o.n_fused, bool(o.per_term), bool(o.band_a), bool(o.band_b)))
        c = _band_pass_model(_HOST(a), _HOST(b), _HOST(meta_a), _HOST(meta_b), o, self._kw(o))
        _COPY(out, torch.from_numpy(np.ascontiguousarray(c, np.float32)))

    def matmul_fp32(self, a, b, out, alpha=1.0):
        """The extension's plain-FP32 product: recursive summation in K order, then alpha (IEEE NaN/Inf)."""
        import torch

        assert a.is_contiguous() and b.is_contiguous() and out.is_contiguous()
        self.calls.append("fp32")
        with np.errstate(all="ignore"):
            c = np.float32(alpha) * _guarantee_module().sequential_fp32(_HOST(a), _HOST(b))
        _COPY(out, torch.from_numpy(np.ascontiguousarray(c, np.float32)))


@contextlib.contextmanager
def model_device(soc: str, cores: int | None = None):
    """Within the block the ``npu`` backend runs :class:`ModelExtension` on CPU tensors; restored after."""
    from sgemm_cube import backends
    from sgemm_cube.backends import npu

    if cores is None:
        from sgemm_cube.tuning import get_profile

        cores = get_profile(soc).ai_cores
    ext = ModelExtension(soc, cores)
    saved = npu.unavailable_reason, npu._extension, npu._npu_option, backends._ready.pop("npu", None)
    # torch_npu's options all unset: the chip's default precision mode, HF32 off
    npu.unavailable_reason, npu._extension, npu._npu_option = (lambda: ""), (lambda: ext), (lambda name: None)
    try:
        yield ext
    finally:
        npu.unavailable_reason, npu._extension, npu._npu_option = saved[:3]
        backends._ready.pop("npu", None)
        if saved[3] is not None:
            backends._ready["npu"] = saved[3]


# ------------------------------------------------------------------- cases
class Case(NamedTuple):
    name: str
    m: int
    n: int
    k: int
    make: Callable          # rng, m, n, k -> (a, b) float32
    tiling: tuple | None = None   # run the kernels alone with this (bm, bk, bn, n_fused[, per_term])
    quick: bool = True      # part of --quick
    model: bool = True      # small enough for the CPU model on the NPU host


def _normal(rng, m, n, k):
    return (rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32))


def _small_integers(rng, m, n, k):
    """Integers in [-4, 4]: every product and sum exact in FP16 and FP32, so any correct data path
    gives the exact result, whatever the cube's rounding."""
    return (rng.integers(-4, 5, (m, k)).astype(np.float32), rng.integers(-4, 5, (k, n)).astype(np.float32))


def _special(rng, m, n, k):
    a, b = _normal(rng, m, n, k)
    a[1, :] = np.nan                   # a NaN row
    a[3, 5] = np.inf                   # Inf in a row: Inf (or NaN where it meets a zero / opposite Inf)
    b[:, 2] = -np.inf                  # an -Inf column
    b[7, 4] = 0.0
    a[5, 7], b[7, 6] = np.inf, 0.0     # Inf * 0 -> NaN in native FP32
    return a, b


def _scaled(ea: int, eb: int):
    def make(rng, m, n, k):
        a, b = _normal(rng, m, n, k)
        return (a * np.float32(2.0 ** ea)).astype(np.float32), (b * np.float32(2.0 ** eb)).astype(np.float32)
    return make


def _mixed_rows(rng, m, n, k):
    a, b = _normal(rng, m, n, k)
    a[::3] *= np.float32(1e-20)        # rows at 1e-20 and 1e20 next to rows near 1: scaled per line
    a[1::3] *= np.float32(1e20)
    b[:, ::4] *= np.float32(1e-25)
    return a, b


def _wide_rows(rng, m, n, k):
    a, b = _normal(rng, m, n, k)
    a[:, ::2] *= np.float32(1e-10)     # every row spans ~33 binades: computed in FP32
    return a, b


def multi_group_k(soc: str, m: int, n: int, min_groups: int = 2, k_max: int = 1 << 17) -> int:
    """A K (not a multiple of 16) for which the tiling chosen for ``m x K x n`` has several K groups."""
    from sgemm_cube.backends import npu

    k = 1024 + 17
    while k < k_max and _groups(soc, m, n, k, npu.choose_tiling(soc, m, n, k)) < min_groups:
        k = 2 * k - 17
    return k


def _groups(soc, m, n, k, tiling) -> int:
    from sgemm_cube.backends import npu_schedule

    t = npu_schedule.Tiling(*tiling)
    return npu_schedule.make_geometry(1, m, n, k, t, 1, 3, npu_schedule.capacity_from_profile(soc)).groups


def cases(soc: str, quick: bool = False, *, hardware: bool = False) -> list[Case]:
    """The bring-up cases for ``soc`` ("910a"/"910b"); ``quick``: the few CI runs in a dry run."""
    all_cases = [
        # First, the accumulator's way out alone, one fractal of exact data: on 910A the L0C -> UB block
        # copy (documented as unsupported on the training series, implemented by dav_c100's header; the
        # executed model follows the header), on 910B Fixpipe.
        Case("L0C store, 1 fractal", 16, 16, 16, _small_integers, tiling=(16, 16, 16, 1)),
        Case("1x1x1", 1, 1, 1, _normal),
        Case("tails", 17, 33, 65, _normal),
        Case("K groups, tiling", 40, 24, 300, _normal, tiling=(16, 32, 16, 3)),
        Case("per term, K groups", 40, 24, 300, _normal, tiling=(16, 32, 16, 3, True)),
        Case("per term, paper tiling", 200, 190, 300, _normal, tiling=(176, 64, 176, 44, True), quick=False),
        Case("K groups, auto", 48, 40, multi_group_k(soc, 48, 40), _normal, quick=False),
        Case("NaN/Inf", 24, 20, 40, _special),
        Case("near overflow", 20, 24, 64, _scaled(63, 62)),
        Case("near underflow", 20, 24, 64, _scaled(-66, -70)),
        Case("tiny data 1e-30", 20, 24, 48, _scaled(-100, 0), quick=False),
        Case("huge data 1e30", 20, 24, 48, _scaled(100, -10), quick=False),
        Case("mixed magnitudes", 30, 28, 72, _mixed_rows),
        Case("wide rows (bands)", 24, 20, 40, _wide_rows, quick=False),
        Case("128^3", 128, 128, 128, _normal, quick=False),
        Case("257x129x1000", 257, 129, 1000, _normal, quick=False),
    ]
    if hardware:
        all_cases.append(Case("1024x1024x4096", 1024, 1024, 4096, _normal, quick=False, model=False))
    return [c for c in all_cases if c.quick or not quick]


# -------------------------------------------------------------- measuring
class Row(NamedTuple):
    case: Case
    groups: int
    fp32_lines: int
    max_diff: float
    exact: bool
    expect: bool
    model_exact: bool | None
    model_ulp: int
    err: float
    native_err: float
    bound: str


def _same_bits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x.view(np.int32) == y.view(np.int32)) | (np.isnan(x) & np.isnan(y))


def _rel(c: np.ndarray, refs) -> float:
    keep = refs.finite_in & (np.abs(refs.c64) < 2.0 ** 128)
    ref = refs.c64[keep]
    with np.errstate(all="ignore"):
        num = np.linalg.norm(c[keep].astype(np.float64) - ref)
        den = np.linalg.norm(ref)
    if not np.isfinite(num):
        return float("inf")
    return float(num / den) if den else float(num)


def _run(case: Case, a, b, device: str):
    """The case's product on ``device`` ("npu", or "cpu" under :func:`model_device`), as NumPy."""
    import torch

    import sgemm_cube
    from sgemm_cube.backends import npu

    ta, tb = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)
    if case.tiling is None:
        c = sgemm_cube.matmul(ta, tb, backend="npu")
    else:
        c = torch.empty(1, case.m, case.n, dtype=torch.float32, device=device)
        npu.matmul(ta[None], tb[None], sb=12, order="termwise", keep_lo_lo=False, out=c, tiling=case.tiling)
        c = c[0]
    return c.cpu().numpy()


def _native(a, b, device: str):
    if device == "cpu":
        with np.errstate(all="ignore"):
            return np.matmul(a, b)
    import torch

    return torch.matmul(torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)).cpu().numpy()


def measure(case: Case, soc: str, *, dry_run: bool, seed: int = 0) -> Row:
    """Run one case on the NPU (or, with ``dry_run``, on the CPU model) and compare."""
    import sgemm_cube
    from sgemm_cube.cpu_fallback.guard import line_meta, fixup_lines
    from sgemm_cube.backends import npu, npu_schedule
    check_guarantee, references = _guarantee_check()

    a, b = case.make(np.random.default_rng(seed), case.m, case.n, case.k)
    device = "cpu" if dry_run else "npu"
    if dry_run:
        with model_device(soc):
            c = _run(case, a, b, "cpu")
    else:
        c = _run(case, a, b, "npu")
    with np.errstate(all="ignore"):  # NaN/Inf lines: NumPy's warnings say nothing new
        # The kernels alone (an explicit tiling) see the data unscaled, with no line computed in FP32.
        alone = {} if case.tiling is None else {"scale": None, "fixup": False}
        c_cpu = sgemm_cube.matmul(a, b, backend="cpu", **alone)
    model_exact, model_ulp = None, 0
    kernel = np.ones(c.shape, bool)
    fp32_lines = listed = 0
    if case.tiling is None:
        designed = npu.arithmetic(soc).arithmetic  # the split range the NPU path classifies lines by
        ma, mb = line_meta(a[None], -1, arithmetic=designed), line_meta(b[None], -2, arithmetic=designed)
        # Listed lines: the banded ones (LOSES_BITS) go through band passes on the cube, the SPECIAL ones
        # (fixup_lines with fixup=False: NaN/Inf) through the vector unit's FP32 fix-up (npu_bands).
        for _, rows, cols in fixup_lines(ma, mb, False):
            kernel[rows, :] = False
            kernel[:, cols] = False
            fp32_lines += rows.size + cols.size
        listed = sum(rows.size + cols.size for _, rows, cols in fixup_lines(ma, mb, True))
    c_model = c if dry_run else None
    if not dry_run and case.model:
        with model_device(soc):
            c_model = _run(case, a, b, "cpu")
        same = _same_bits(c, c_model) | ~kernel
        model_exact = bool(same.all())
        if not model_exact:
            d = c.view(np.int32).astype(np.int64) - c_model.view(np.int32).astype(np.int64)
            model_ulp = int(np.abs(np.where(same, 0, d)).max())
    both = np.isfinite(c) & np.isfinite(c_cpu)
    max_diff = float(np.abs(c[both].astype(np.float64) - c_cpu[both]).max()) if both.any() else 0.0
    tiling = case.tiling or npu.choose_tiling(soc, case.m, case.n, case.k)
    groups = _groups(soc, case.m, case.n, case.k, tiling)
    t = npu_schedule.Tiling(*tiling)
    mirrored = groups == 1 or t.bk * t.n_fused == npu_schedule.K_GROUP  # cpu_fallback's two levels
    # The NPU path classifies lines by the split range that holds whether or not the chip flushes FP16
    # subnormals (npu.arithmetic), the CPU backend by the default one: a line scaled on one side only may
    # round differently, so exactness is expected where the kernels' model equals the CPU backend.
    model_is_cpu = c_model is None or bool(_same_bits(c_model, c_cpu).all())
    refs = references(a, b)
    bound = check_guarantee(c, a, b, refs=refs) if case.tiling is None else (
        check_guarantee(c, a, b, refs=refs, frobenius=False))
    return Row(case, groups, fp32_lines, max_diff, bool(_same_bits(c, c_cpu).all()),
               mirrored and listed == 0 and model_is_cpu, model_exact, model_ulp, _rel(c, refs),
               _rel(_native(a, b, device), refs), "ok" if not bound else "FAIL: " + bound.splitlines()[0])


def _guarantee_module():
    """The clone's ``tests/guarantee_data.py`` (loaded by path: a package named ``tests`` elsewhere on
    sys.path must not stand in for it)."""
    import importlib.util

    mod = sys.modules.get("sgemm_cube_guarantee_data")
    if mod is None:
        spec = importlib.util.spec_from_file_location("sgemm_cube_guarantee_data",
                                                      ROOT / "tests" / "guarantee_data.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return mod


def _guarantee_check():
    """``check_guarantee`` and ``references`` of the clone's ``tests/guarantee_data.py``."""
    mod = _guarantee_module()
    return mod.check_guarantee, mod.references


def _yes(x) -> str:
    return "-" if x is None else ("yes" if x else "no")


def format_table(rows: list[Row]) -> str:
    head = ("case", "MxNxK", "groups", "FP32 lines", "max|d| cpu", "exact", "expect", "=model", "err",
            "native", "bound")
    body = [(r.case.name, f"{r.case.m}x{r.case.n}x{r.case.k}", str(r.groups), str(r.fp32_lines),
             f"{r.max_diff:.3g}", _yes(r.exact), _yes(r.expect), _yes(r.model_exact), f"{r.err:.2e}",
             f"{r.native_err:.2e}", r.bound if r.bound == "ok" else "FAIL") for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in (head, *body)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_cases(soc: str, *, dry_run: bool, quick: bool = False, out=print) -> int:
    """Measure every case, print the table and notes; the exit status (0 = pass)."""
    rows = [measure(c, soc, dry_run=dry_run) for c in cases(soc, quick, hardware=not dry_run)]
    out(format_table(rows))
    status = 0
    for r in rows:
        if r.bound != "ok":
            out(f"{r.case.name}: {r.bound}")
            status = 1
        if r.expect and not r.exact:
            out(f"{r.case.name}: expected bit-exact with cpu_fallback (one K group, no FP32 lines), "
                f"largest difference {r.max_diff:.3g}")
            status = 1 if dry_run else status
        if r.model_exact is False:
            out(f"{r.case.name}: kernel entries differ from the cube16 model by up to {r.model_ulp} ulp "
                "(a measurement of how the cube rounds in L0C, not a failure)")
    return status


# ------------------------------------ first contact: the settings, no synchronisation, the guarantee
def precision_lines(soc: str) -> list[str]:
    """CANN's precision mode, HF32 and cube math type as the backend reads them (``npu.native_fp32``),
    and the route each kind of call takes under them (``npu.plan``'s reasons)."""
    from sgemm_cube.backends import npu
    from sgemm_cube.plan import make_request

    nf = npu.native_fp32(soc)
    origin = "set through torch.npu.set_option" if nf.mode_set else "the chip's default"
    lines = [f"precision mode  {nf.precision_mode} ({origin})",
             f"matmul HF32     {'on' if nf.allow_hf32 else 'off'} (torch.npu.matmul.allow_hf32)",
             f"cube math type  {'unset' if nf.cube_math_type is None else nf.cube_math_type}",
             f"torch.matmul on FP32 tensors: {'FP32' if nf.fp32 else 'NOT FP32'}: {nf.why}"]
    for backend, k in (("auto", 8), ("auto", 4096), ("native", 8), ("native", 4096)):
        p = npu.plan(make_request(backend=backend), 1, 4096, 4096, k)
        lines.append(f"backend={backend!r} 4096x4096x{k}: {p.backend}/{p.scheme}: {p.reason}")
    return lines


_HOST_READS = ("cpu", "item", "numpy", "tolist")


@contextlib.contextmanager
def _no_host_reads(allow_matmul: bool, lines_read: list | None = None):
    """Within the block, reading a tensor back to the host (and, unless allowed, torch.matmul/mm/bmm) raises;
    except, with ``lines_read`` (a list, appended to per read), ``Tensor.cpu`` of the band design's ``lines``
    (int32, ``npu_bands.LINE_ROWS`` rows): its one host read-back by design (``sgemm_cube/backends/npu_bands.py``)."""
    import torch

    def forbidden(what):
        def fail(*args, **kwargs):
            raise AssertionError(f"sgemm_cube called {what}")
        return fail

    with contextlib.ExitStack() as stack:
        saved = [(torch.Tensor, name, getattr(torch.Tensor, name)) for name in _HOST_READS]
        if not allow_matmul:
            saved += [(torch, name, getattr(torch, name)) for name in ("matmul", "mm", "bmm")]
        stack.callback(lambda: [setattr(owner, name, f) for owner, name, f in saved])
        for owner, name, _ in saved:
            setattr(owner, name, forbidden(f"{owner.__name__}.{name}"))
        if lines_read is not None:
            from sgemm_cube.backends.npu_bands import LINE_ROWS

            real = dict((name, f) for _, name, f in saved)
            host_copies = []  # the lines as read back: the host may look at them (.numpy)

            def cpu(self, *args, **kwargs):
                if self.dtype != torch.int32 or self.dim() != 2 or self.shape[0] != LINE_ROWS:
                    raise AssertionError("sgemm_cube called Tensor.cpu")
                lines_read.append(tuple(self.shape))
                host_copies.append(real["cpu"](self, *args, **kwargs))
                return host_copies[-1]

            def numpy(self, *args, **kwargs):
                if not any(self is t for t in host_copies):
                    raise AssertionError("sgemm_cube called Tensor.numpy")
                return real["numpy"](self, *args, **kwargs)

            torch.Tensor.cpu, torch.Tensor.numpy = cpu, numpy
        yield


def _sync_operands(k: int):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((512, k)).astype(np.float32)
    b = rng.standard_normal((k, 384)).astype(np.float32)
    if k >= 16:
        a[::7, ::2] *= np.float32(1e-10)  # fix-up rows: the FP32 fix-up runs too
        a[3, 5] = np.inf
    return a, b


def sync_lines(soc: str, *, dry_run: bool) -> tuple[int, list[str]]:
    """Whether ``sgemm_cube.matmul`` leaves the host free (no synchronisation, no read-back), per route.

    On the NPU: with about 100 ms of FP16 products queued first, the call must return while the device
    is still busy (an event recorded after it has not completed), timed by events.  In a dry run: the
    backend's calls run with every host read-back (``.cpu``, ``.item``, ``.numpy``, ``.tolist``) and,
    outside native routes, ``torch.matmul``/``mm``/``bmm`` made to raise.
    """
    import torch

    import sgemm_cube
    from sgemm_cube.backends import npu
    from sgemm_cube.plan import make_request

    status, lines, seen = 0, [], set()
    for backend, k in (("npu", 1024), ("auto", 1024), ("auto", 8)):
        a, b = _sync_operands(k)
        req = make_request(backend=backend)
        plan = npu.plan(req, 1, a.shape[0], b.shape[1], k)
        if (plan.backend, plan.scheme, k) in seen:
            continue
        seen.add((plan.backend, plan.scheme, k))
        label = f"backend={backend!r} 512x384x{k} ({plan.backend}/{plan.scheme})"
        if dry_run:
            out = torch.empty(1, a.shape[0], b.shape[1])
            read = []
            try:
                with _no_host_reads(allow_matmul=plan.backend == "native", lines_read=read):
                    if plan.backend == "native":
                        torch.matmul(torch.from_numpy(a)[None], torch.from_numpy(b)[None], out=out)
                    else:
                        npu.run(plan, torch.from_numpy(a)[None], torch.from_numpy(b)[None], out)
                if len(read) > 1:
                    raise AssertionError(f"sgemm_cube read the lines back {len(read)} times")
                but = (" but the lines' integers, once (npu_bands: which lines are banded decides the band passes)"
                       if read else "")
                lines.append(f"{label}: no host read-back{but} (dry run: reads made to raise)")
            except AssertionError as exc:
                status = 1
                lines.append(f"{label}: FAIL: {exc}")
            continue
        from sgemm_cube.backends import npu_bands

        ta, tb = torch.from_numpy(a).npu(), torch.from_numpy(b).npu()
        sgemm_cube.matmul(ta, tb, backend=backend)  # the shape's first call plans and tunes on the host
        h = torch.randn(8192, 8192, device="npu", dtype=torch.float16)
        torch.npu.synchronize()
        start, queued, done = (torch.npu.Event(enable_timing=True) for _ in range(3))
        start.record()
        for _ in range(24):  # ~25 TFLOP of FP16 products: about 100 ms of device work
            h = torch.matmul(h, h) * 1e-3
        queued.record()
        real_read, read = npu_bands._read_lines, []
        npu_bands._read_lines = lambda *args: (read.append(1), real_read(*args))[1]
        try:
            t0 = time.perf_counter()
            sgemm_cube.matmul(ta, tb, backend=backend)
            host_ms = (time.perf_counter() - t0) * 1e3
        finally:
            npu_bands._read_lines = real_read
        done.record()
        busy = not done.query()
        torch.npu.synchronize()
        queue_ms, call_ms = start.elapsed_time(queued), queued.elapsed_time(done)
        if read and not busy:  # the band design's one read-back waits for the queue ahead: by design
            lines.append(f"{label}: synchronised once, for the lines' read-back (npu_bands, by design), after "
                         f"{host_ms:.2f} ms of host time (queue ahead {queue_ms:.1f} ms)")
        elif busy:
            lines.append(f"{label}: returned after {host_ms:.2f} ms of host time with the device still busy "
                         f"(queue ahead {queue_ms:.1f} ms, the product {call_ms:.2f} ms on the device): no sync")
        elif queue_ms <= host_ms:
            lines.append(f"{label}: inconclusive: the call took {host_ms:.2f} ms on the host, longer than the "
                         f"{queue_ms:.1f} ms queued ahead of it")
        else:
            status = 1
            lines.append(f"{label}: FAIL: the device was idle when the call returned after {host_ms:.2f} ms "
                         f"(with {queue_ms:.1f} ms of work queued ahead): it waited for the device")
    return status, lines


def guarantee_lines(soc: str, *, dry_run: bool, m: int = 40, k: int = 72, n: int = 36,
                    seed: int = 0) -> tuple[int, list[str]]:
    """The guarantee on every adversarial generator of ``tests/guarantee_data.py``, through the emulation
    (``backend="npu"``), with native FP32 (``torch.matmul`` under the precision mode in force; NumPy in a
    dry run) measured beside it on the same data: relative Frobenius error against float64 (Eq. 12) and
    SGEMM's componentwise bound.  Native failing the bound is a finding about the chip's mode, not a
    failure of this check."""
    import torch

    import sgemm_cube

    gd = _guarantee_module()
    device = "cpu" if dry_run else "npu"
    rows, status = [], 0
    ctx = model_device(soc) if dry_run else contextlib.nullcontext()
    with ctx:
        for name, gen in gd.GENERATORS.items():
            a, b = gen(np.random.default_rng(seed), m, k, n)
            refs = gd.references(a, b)
            c = sgemm_cube.matmul(torch.from_numpy(a).to(device), torch.from_numpy(b).to(device), backend="npu")
            c = c.cpu().numpy()
            native = _native(a, b, device)
            # The guarantee (componentwise); the normwise errors are printed beside, not checked: where the
            # listed lines run as exponent bands they carry the split's 22 bits, and on data whose outputs a
            # few terms decide that measured up to 3.1x native's normwise error (docs/guarantee.md, "Listed
            # lines on the NPU"; the CPU and CUDA paths' "within 2x native" is a measured property of theirs).
            msg = gd.check_guarantee(c, a, b, refs=refs, frobenius=False)
            native_msg = gd.check_guarantee(native, a, b, refs=refs, frobenius=False, native_overflow_ok=True)
            status |= bool(msg)
            rows.append((name, f"{_rel(c, refs):.2e}", "ok" if not msg else "FAIL", f"{_rel(native, refs):.2e}",
                         "ok" if not native_msg else "FAIL"))
            if msg:
                rows.append(("", msg.splitlines()[0], "", "", ""))
    head = ("generator", "sgemm_cube err", "bound", "native err", "native bound")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    lines = ["  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in (head, *rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return int(status), lines


def first_contact(soc: str, *, dry_run: bool, out=print) -> int:
    """The checks a first contact with an NPU needs beyond the kernels' cases; the exit status (0 = pass)."""
    ctx = model_device(soc) if dry_run else contextlib.nullcontext()
    with ctx:
        out("\n-- precision mode and routes" + (" (dry run: torch_npu's options unset)" if dry_run else ""))
        for line in precision_lines(soc):
            out(line)
        out("\n-- no host synchronisation")
        sync_status, lines = sync_lines(soc, dry_run=dry_run)
    for line in lines:
        out(line)
    out(f"\n-- the guarantee on the adversarial generators (native: "
        f"{'NumPy on the host' if dry_run else 'torch.matmul under the mode above'})")
    guarantee_status, lines = guarantee_lines(soc, dry_run=dry_run)
    for line in lines:
        out(line)
    return sync_status | guarantee_status


def _bench(out=print) -> None:
    import torch

    import sgemm_cube

    for size in (2048, 4096, 8192):
        da = torch.randn(size, size, device="npu")
        db = torch.randn(size, size, device="npu")
        for name, fn in (("sgemm_cube", lambda: sgemm_cube.matmul(da, db, backend="npu")),
                         ("torch fp32", lambda: torch.matmul(da, db))):
            fn()
            torch.npu.synchronize()
            t0 = time.perf_counter()
            for _ in range(5):
                fn()
            torch.npu.synchronize()
            dt = (time.perf_counter() - t0) / 5
            out(f"{size}^3 {name}: {2 * size ** 3 / dt / 1e12:.1f} TFLOP/s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="no NPU: run the kernels' CPU model (npu_schedule.simulate) on CPU tensors")
    parser.add_argument("--soc", choices=("910a", "910b"), default="910b",
                        help="chip family the dry run models (default 910b; on the NPU: the built one)")
    parser.add_argument("--quick", action="store_true", help="only the small cases (what CI runs)")
    parser.add_argument("--bench", action="store_true", help="also time 2048^3 .. 8192^3 (NPU only)")
    args = parser.parse_args(argv)
    if args.dry_run:
        print(f"dry run: the {args.soc} kernels' CPU model in place of the NPU (no device code runs)")
        status = run_cases(args.soc, dry_run=True, quick=args.quick)
        return status | first_contact(args.soc, dry_run=True)

    import torch
    import torch_npu  # noqa: F401  (registers the NPU device)

    from sgemm_cube.backends import npu

    reason = npu.unavailable_reason()
    if reason:
        print(f"the npu backend is unavailable: {reason}")
        return 1
    soc = npu._extension().soc()
    print(f"device {torch.npu.get_device_name(0)}, kernels built for {soc}")
    status = run_cases(soc, dry_run=False, quick=args.quick)
    status |= first_contact(soc, dry_run=False)
    if args.bench:
        _bench()
    return status


if __name__ == "__main__":
    sys.exit(main())
