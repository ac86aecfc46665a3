"""Ascend NPU backend: the AscendC kernels of ``ascendc_kernels/`` through torch_npu.

Importing this module needs neither torch_npu nor a CANN toolkit; they are
looked up when the backend is asked for.  What runs on the device, per
product (``ascendc_kernels/README.md`` has the details):

0. (:func:`run`) ``sgemm_cube_line_stats`` and ``sgemm_cube_line_meta``: the
   accuracy guarantee's integers of every row of A and column of B
   (:mod:`sgemm_cube.cpu_fallback.guard`), and a word per batch saying whether
   any of its lines is scaled or listed: the later kernels read it on the device
   and skip what a batch does not need;
1. ``sgemm_cube_split`` (vector unit): A and B to FP16 hi/lo, the rule of
   :func:`sgemm_cube.cpu_fallback.split`, each line first scaled by its power
   of two (:func:`run`), values the split cannot hold (NaN, Inf) as 0;
2. ``sgemm_cube_gemm`` (cube unit): ``A_hi B_hi``, ``A_lo B_hi``, ``A_hi B_lo``
   (and ``A_lo B_lo`` with ``keep_lo_lo``), each accumulated in its own FP32
   accumulator in L0C over one K group of 1,024 elements, then added into an FP32
   buffer in GM (a two-level accumulation: the error stays flat in K), resident A
   groups and ping-pong B in L1 (SGEMM-cube Algorithm 1);
3. ``sgemm_cube_combine`` (vector unit): termwise combination, small terms
   first (on 910A with one K group, in the GEMM's epilogue); with :func:`run`
   the unscale folded in: one FP32 rounding back from the scaled lines, times alpha;
4. (:func:`run`) ``sgemm_cube_unscale`` (only where the 910A's epilogue combined),
   ``sgemm_cube_fixup_rows``, ``sgemm_cube_fixup_cols``: the unscale as its own
   pass, and the lines holding NaN or an infinity in plain FP32 from the unscaled operands (native FP32);
5. (:func:`run`, :mod:`.npu_bands`) the listed finite lines on the cube: one read-back of the lines'
   integers, then per batch with such lines their exponent bands
   (:mod:`sgemm_cube.cpu_fallback.bands`) through the split, GEMM and combine again (``band_pass``),
   added in FP32 and written into their outputs.

The result equals :func:`sgemm_cube.cpu_fallback.emulated_matmul` (``order="termwise"``, its
default two-level ``k_group``, ``accumulate="cube16"`` if the cube rounds as that model says)
with the tilings :func:`choose_tiling` gives, and :func:`.npu_schedule.grouped_reference` with an
explicit ``tiling=`` of another K group; :mod:`.npu_schedule` is the tested model of the schedule.

Where the AscendC documentation leaves the hardware's arithmetic open
(:mod:`sgemm_cube.cpu_fallback.arithmetic`: the Cast's rounding, overflow and
FP16 subnormals, Mmad's accumulation, the atomic add), the guarantee holds
under every alternative by default: the lines are classified with the split
range that holds whether or not the chip flushes FP16 subnormals.  A recorded
answer of the hardware (:func:`arithmetic`: ``SGEMM_CUBE_NPU_ARITHMETIC`` or
``npu_arithmetic.json`` beside this file, written by the bring-up) that it
keeps them widens the range.  ``ascendc_kernels/README.md`` says which
design covers which alternative.

The device code has never been compiled by bisheng nor run on an NPU (no CANN toolkit or NPU
here); in CI the kernels execute on the host in a functional model of the AscendC API
(``tests/ascendc_kernels/executed.py``), untested on hardware.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import os
from pathlib import Path
from typing import NamedTuple

from sgemm_cube.cpu_fallback.arithmetic import WORST, Arithmetic
from sgemm_cube.cpu_fallback.bands import band_window

from ..plan import Plan
from . import npu_bands, npu_schedule, npu_tilings
from .base import native_plan

__all__ = ["SCHEMES", "ORDERS", "is_available", "unavailable_reason", "plan", "run", "matmul", "fp32_matmul",
           "choose_tiling", "native_fp32", "NativeFp32", "DEFAULT_PRECISION_MODE", "arithmetic", "NpuArithmetic",
           "ARITHMETIC_ENV", "ARITHMETIC_FILE", "UNPROBED", "SCALE_CODE", "SUBNORMALS_CODE", "MatmulOptions"]

_EXTENSION = "sgemm_cube.backends._npu_ext"
# Where a CANN toolkit keeps the ACL headers, relative to ASCEND_HOME_PATH.
_CANN_MARKERS = ("include/acl/acl.h", "aarch64-linux/include/acl/acl.h", "x86_64-linux/include/acl/acl.h")
#: What the AscendC kernels implement (the protocol of :mod:`sgemm_cube.backends.base`).
SCHEMES = ("fp16x3", "fp16x4")
ORDERS = ("termwise",)
#: guard::Scale of ascendc_kernels/include/sgemm_cube/guard/line_meta.hpp, per ``scale`` option (the one
#: copy: the executed-kernel tests import it).
SCALE_CODE = {None: 0, "auto": 1, "rows": 2, "matrix": 3}
#: guard::Subnormals of the same header, per ``Arithmetic.subnormals``: the split range the lines are classified by.
SUBNORMALS_CODE = {"gradual": 0, "flush": 1}

#: Environment variable holding this NPU's recorded arithmetic (``Arithmetic.spec()`` text, ``"default"``
#: for the defaults); it wins over :data:`ARITHMETIC_FILE`.
ARITHMETIC_ENV = "SGEMM_CUBE_NPU_ARITHMETIC"
#: The bring-up's record of the arithmetic it measured: ``{"arithmetic": "<spec>", "soc": "910a"|"910b"}``
#: (``soc`` optional: a record of the other chip family is not used).
ARITHMETIC_FILE = Path(__file__).with_name("npu_arithmetic.json")
#: :attr:`NpuArithmetic.source` when nothing was recorded.
UNPROBED = "unprobed: the design safe under every alternative"


class NpuArithmetic(NamedTuple):
    """The hardware arithmetic the NPU path is designed for (:func:`arithmetic`)."""

    arithmetic: Arithmetic  #: the choice of every open behaviour the design must hold under
    source: str             #: where it came from: the environment, the file, or :data:`UNPROBED`


def _parse_recorded(text: str, where: str) -> Arithmetic:
    text = str(text).strip()
    try:
        return Arithmetic() if text == "default" else Arithmetic.parse(text)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def arithmetic(soc: str | None = None) -> NpuArithmetic:
    """The arithmetic the NPU path designs for, and where that came from (read at every call).

    1. ``$SGEMM_CUBE_NPU_ARITHMETIC`` (:data:`ARITHMETIC_ENV`), when set and not empty: an
       :meth:`~sgemm_cube.cpu_fallback.arithmetic.Arithmetic.parse` spec, or ``"default"``;
    2. else :data:`ARITHMETIC_FILE`, the bring-up's record (``{"arithmetic": spec, "soc": ...}``),
       unless it names another chip family than ``soc``;
    3. else nothing was measured: :data:`~sgemm_cube.cpu_fallback.arithmetic.WORST`, whose design
       holds under each alternative (source :data:`UNPROBED`).

    Only ``subnormals`` changes what is launched today (the split range:
    :func:`sgemm_cube.cpu_fallback.guard.line_range`); the other alternatives are covered by the design
    as it is (``ascendc_kernels/README.md``).  A malformed value raises ValueError naming where it is.
    """
    env = os.environ.get(ARITHMETIC_ENV, "").strip()
    if env:
        return NpuArithmetic(_parse_recorded(env, f"${ARITHMETIC_ENV}"), f"env {ARITHMETIC_ENV}={env}")
    if ARITHMETIC_FILE.is_file():
        import json

        try:
            record = json.loads(ARITHMETIC_FILE.read_text())
            spec, recorded_soc = record["arithmetic"], record.get("soc")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{ARITHMETIC_FILE}: expected {{\"arithmetic\": \"<spec>\", \"soc\": ...}}, "
                             f"could not read it ({exc!r})") from None
        if soc is None or recorded_soc is None or str(recorded_soc).lower() == soc.lower():
            return NpuArithmetic(_parse_recorded(spec, str(ARITHMETIC_FILE)), f"file {ARITHMETIC_FILE}")
        return NpuArithmetic(WORST, f"{UNPROBED} ({ARITHMETIC_FILE.name} records the {recorded_soc}, "
                                    f"this is a {soc})")
    return NpuArithmetic(WORST, UNPROBED)


def _arithmetic_note(soc: str, sb: int) -> str:
    """The plan's clause on the arithmetic designed for (:func:`arithmetic`) and the split range it gives."""
    from sgemm_cube.cpu_fallback.guard import line_range

    def text(x: float) -> str:
        m, e = math.frexp(x)
        return f"2**{e - 1}" if m == 0.5 else f"{x:g}"

    rec = arithmetic(soc)
    rng = line_range("fp16x3", sb, rec.arithmetic)
    kept = "kept" if rec.arithmetic.subnormals == "gradual" else "flushed or kept"
    return (f"hardware arithmetic {rec.arithmetic} ({rec.source}): lines are split within "
            f"[{text(rng.lower)}, {text(rng.upper)}) after scaling (FP16 subnormals {kept}), the rest fixed up "
            f"in FP32")


def _cann_problem() -> str:
    home = os.environ.get("ASCEND_HOME_PATH", "")
    if not home:
        return ("CANN toolkit not found: ASCEND_HOME_PATH is not set "
                "(source <CANN install>/set_env.sh, e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh)")
    if not any((Path(home) / marker).is_file() for marker in _CANN_MARKERS):
        return f"CANN toolkit not found at ASCEND_HOME_PATH={home} (no include/acl/acl.h there)"
    return ""


def _torch_npu_problem(cann_ok: bool) -> str:
    if importlib.util.find_spec("torch") is None:
        return "torch is not importable (pip install torch)"
    if importlib.util.find_spec("torch_npu") is None:
        return "torch_npu is not importable (pip install torch-npu==<the installed torch's version>)"
    if not cann_ok:
        return ""  # installed, but importing it without CANN would fail: the CANN problem says why
    try:
        importlib.import_module("torch_npu")
    except Exception as exc:  # a broken torch_npu/CANN pairing raises many kinds of errors
        return f"torch_npu failed to import: {exc}"
    return ""


def _extension_problem() -> str:
    try:
        found = importlib.util.find_spec(_EXTENSION) is not None
    except ImportError:
        found = False
    if not found:
        return ("the AscendC extension sgemm_cube.backends._npu_ext is not built (run `pip install .` with "
                "ASCEND_HOME_PATH set on an Ascend host; see ascendc_kernels/README.md)")
    return ""


def unavailable_reason() -> str:
    """What is missing for this backend, in one line, or ``""`` if nothing is.

    Checks, and reports every one that fails: torch_npu importable, a CANN
    toolkit at ``ASCEND_HOME_PATH``, the compiled extension
    ``sgemm_cube.backends._npu_ext`` present (and importable).
    """
    cann = _cann_problem()
    problems = [p for p in (_torch_npu_problem(cann == ""), cann, _extension_problem()) if p]
    if not problems:
        try:
            _extension()
        except Exception as exc:
            problems.append(f"the AscendC extension failed to import: {exc}")
    return "; ".join(problems)


def is_available() -> bool:
    """Whether torch_npu, a CANN toolkit and the built extension are all present."""
    return unavailable_reason() == ""


@functools.lru_cache(maxsize=1)
def _extension():
    return importlib.import_module(_EXTENSION)


@functools.lru_cache(maxsize=256)
def choose_tiling(soc: str, m: int, n: int, k: int, *, terms: int = 3) -> npu_schedule.Tiling:
    """The tiling the kernel runs for an m x k x n product on ``soc`` ("910a"/"910b").

    A lookup, not a model run: the chip's tiling table (:mod:`.npu_tilings`: the
    pipeline model's best tiling and mode per shape bucket, or the user's own
    ``sgemm-cube tune --measure`` rows) gives the nearest bucket's tiling, which
    :func:`.npu_schedule.fit_tiling` fits to the kernel's buffer plan and K (``n_fused``
    making K groups of ``cpu_fallback.K_GROUP`` elements); when the stored blocks do not fit (a table for
    other buffers), or the geometry refuses them, the plan's own default (the
    largest square-ish blocks that fit).  Never imports :mod:`sgemm_cube.tuning`,
    so a new shape costs well under a millisecond of host time.
    """
    cap = npu_schedule.capacity_from_profile(soc)
    choice = npu_tilings.lookup(soc, m, n, k, terms=terms)
    # fit_tiling sets n_fused for this K: K groups of cpu_fallback.K_GROUP elements (the two-level
    # accumulation cpu_fallback mirrors), one group for shorter K.
    t = npu_schedule.fit_tiling(cap, npu_schedule.Tiling(*choice.tiling), k=k, terms=terms)
    try:  # the kernel's own check of the whole product (sizes, 32-bit offsets)
        npu_schedule.make_geometry(1, max(m, 1), max(n, 1), max(k, 1), t, 1, terms, cap)
    except npu_schedule.TilingError:
        t = npu_schedule.fit_tiling(cap, None, k=k, terms=terms)
    return t


def _check_available() -> None:
    reason = unavailable_reason()
    if reason:
        from . import BackendUnavailableError

        raise BackendUnavailableError(f"sgemm_cube backend 'npu' is unavailable: {reason}")


def _contiguous_target(out):
    """``out`` itself when the kernels can write it, else a contiguous buffer to copy from."""
    import torch

    return out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)


def matmul(a, b, *, sb: int, order: str, keep_lo_lo: bool, out, accumulate: str | None = None,
           scheme: str | None = None, tiling=None, guard: dict | None = None):
    """Emulated FP32 batched product on the Ascend cube units.

    Parameters
    ----------
    a : torch.Tensor, shape (B, M, K), float32, on an NPU
    b : torch.Tensor, shape (B, K, N), float32, same device
        Any strides (non-contiguous operands are copied).  Non-finite values
        are treated as 0 (the API layer patches the outputs they touch).
    sb : int
        Scaling exponent of the residuals, 0 <= sb <= 24.
    order : {"termwise"}
        Only the termwise order (each product in its own FP32 accumulator)
        exists on the cube: it cannot scale a residual product before adding
        it to another, which "elementwise" needs.
    keep_lo_lo : bool
        Also compute ``A_lo B_lo`` (a fourth accumulator): the same as ``scheme="fp16x4"``.
    out : torch.Tensor, shape (B, M, N), float32, same device
        Written in full.
    accumulate : None
        The cube's accumulation is the hardware's; a model name is refused.
    scheme : {"fp16x3", "fp16x4"} or None
        Only FP16 splits exist on this backend; ``"fp16x4"`` (or ``keep_lo_lo``) computes the fourth
        product, None and ``"fp16x3"`` three.
    tiling : tuning.Tiling or (bm, bk, bn, n_fused[, per_term[, l0c_stages]]), optional
        Override the tuned tiling (the measured tuner uses this); it must fit
        the kernel's buffer plan (:func:`.npu_schedule.make_buffer_plan`).
        ``per_term`` (default False) runs one GEMM pass per product term;
        ``l0c_stages`` (default 1) 2 keeps two accumulator sets in L0C.
    guard : dict, optional
        The accuracy guarantee's bookkeeping on the device (:func:`run` passes it):
        ``{"scale": ..., "fixup": bool, "alpha": float}``.  Each row of A and
        column of B is scaled by its power of two before the split (NaN, Inf
        and entries the split cannot hold as 0), the product unscaled with one
        FP32 rounding (times ``alpha``), the lines with NaN/Inf computed in FP32
        (:mod:`sgemm_cube.cpu_fallback.guard` bit for bit) and, with ``fixup``, the other listed lines by
        exponent bands (:mod:`.npu_bands`, :mod:`sgemm_cube.cpu_fallback.bands`).  ``"arithmetic"``
        (optional, an :class:`~sgemm_cube.cpu_fallback.arithmetic.Arithmetic`; default
        :func:`arithmetic`'s): the hardware the lines' split range is chosen for
        (:func:`sgemm_cube.cpu_fallback.guard.line_range`).  None: the kernels
        alone (non-finite values as 0).

    Returns
    -------
    None
        ``out`` is written.

    Raises
    ------
    sgemm_cube.backends.BackendUnavailableError
        torch_npu, CANN or the built extension is missing (the message says which).
    NotImplementedError
        ``order="elementwise"`` or a non-FP16 scheme.
    ValueError
        ``accumulate`` given, or a ``tiling`` the kernel cannot run.
    """
    _check_available()
    if order != "termwise":
        raise NotImplementedError(f"the npu backend implements order='termwise' only, got {order!r}")
    if scheme is not None and scheme not in SCHEMES:
        raise NotImplementedError(f"the npu backend implements the FP16 schemes {list(SCHEMES)}, got {scheme!r}")
    if accumulate is not None:
        raise ValueError("the npu backend accumulates on the cube itself; accumulate= names a model of "
                         "the cpu backend (leave it None)")
    lo_lo = bool(keep_lo_lo) or scheme == "fp16x4"
    if guard is not None and guard.get("arithmetic") is None:
        guard = {**guard, "arithmetic": arithmetic(_extension().soc()).arithmetic}
    _launch(a, b, out, sb=int(sb), lo_lo=lo_lo, tiling=tiling, guard=guard, check=True)
    return None


def _tiling(tiling, batch: int, m: int, n: int, k: int, terms: int, check: bool) -> npu_schedule.Tiling:
    """The tiling that runs: :func:`choose_tiling`'s for this shape, or ``tiling``, checked by the kernel's own
    rule when ``check`` or when it is not the chosen one (a plan's forced tiling)."""
    soc = _extension().soc()
    if tiling is None:
        return choose_tiling(soc, m, n, k, terms=terms)
    t = npu_schedule.Tiling(*(int(x) for x in tiling))
    if check or t != choose_tiling(soc, m, n, k, terms=terms):
        # the kernel's own check (raises TilingError, a ValueError, with the limit it breaks)
        npu_schedule.make_geometry(max(batch, 1), max(m, 1), max(n, 1), max(k, 1), t, 1, terms,
                                   npu_schedule.capacity_from_profile(soc))
    return t


class MatmulOptions(NamedTuple):
    """The extension's ``MatmulOptions`` (``ascendc_kernels/host/binding.cpp``), field for field with its
    defaults: what one ``ext.matmul(a, b, out, options)`` computes.  The stand-in extensions take it as theirs."""

    sb: int                  #: scaling exponent of the residuals, 0 <= sb <= 24
    keep_lo_lo: bool         #: also the ``A_lo B_lo`` product (fp16x4)
    bm: int                  #: the tiling (:class:`.npu_schedule.Tiling`)
    bk: int
    bn: int
    n_fused: int
    per_term: bool = False
    guard: bool = False      #: the guarantee's bookkeeping on the device
    scale: int = 1           #: :data:`SCALE_CODE` of the plan's scale
    fixup: bool = True       #: FP32 fix-up of the lines the split cannot hold
    alpha: float = 1.0       #: out = alpha * (a @ b), with guard
    subnormals: int = 1      #: :data:`SUBNORMALS_CODE` of the arithmetic's FP16 subnormals: the split range
    l0c_stages: int = 1      #: accumulator sets in L0C, 1 or 2 (:class:`.npu_schedule.Tiling`)
    bands: bool = False      #: with guard: the fix-up takes only SPECIAL lines, the banded ones go to band passes
    band_a: bool = False     #: ``band_pass``: A's values are bands (the split's band cutoff)
    band_b: bool = False     #: ``band_pass``: B's values are bands


def _matmul_options(sb: int, lo_lo: bool, t: npu_schedule.Tiling, guard: dict | None) -> MatmulOptions:
    """The one place the extension's options are built: the scheme, the tiling and (``guard``) the guarantee's."""
    tiling = dict(bm=t.bm, bk=t.bk, bn=t.bn, n_fused=t.n_fused, per_term=bool(t.per_term),
                  l0c_stages=int(t.l0c_stages))
    if guard is None:
        return MatmulOptions(sb=sb, keep_lo_lo=lo_lo, **tiling)
    return MatmulOptions(sb=sb, keep_lo_lo=lo_lo, **tiling, guard=True, scale=SCALE_CODE[guard["scale"]],
                         fixup=bool(guard["fixup"]), alpha=float(guard["alpha"]),
                         subnormals=SUBNORMALS_CODE[guard["arithmetic"].subnormals], bands=bool(guard["fixup"]))


def _launch(a, b, out, *, sb: int, lo_lo: bool, tiling, guard: dict | None, check: bool) -> None:
    """One call of the extension: the kernels (and, with ``guard``, the bookkeeping) into ``out``."""
    ext = _extension()
    a = a.contiguous()
    b = b.contiguous()
    batch, m, k = a.shape
    t = _tiling(tiling, batch, m, b.shape[2], k, 4 if lo_lo else 3, check)
    target = _contiguous_target(out)
    options = _matmul_options(sb, lo_lo, t, guard)
    if options.bands and batch and m and b.shape[2]:  # listed lines on the cube: the product, then their bands
        lines = npu_bands.line_buffer(batch, m, b.shape[2], a.device)
        ext.matmul(a, b, target, ext.MatmulOptions(**options._asdict()), lines=lines)
        terms = 4 if lo_lo else 3
        tuned = t == choose_tiling(ext.soc(), m, b.shape[2], k, terms=terms)

        def pass_options(rows: int, cols: int) -> MatmulOptions:
            """A band pass's options: the tuner's tiling for the pass's own shape where the product runs the
            tuner's (every tuned tiling of this K has the same K groups, so the same bits), else the product's."""
            return _matmul_options(sb, lo_lo, choose_tiling(ext.soc(), rows, cols, k, terms=terms) if tuned else t,
                                   guard)

        npu_bands.run_band_passes(ext, a, b, target, lines, pass_options,
                                  band_window(sb, guard["arithmetic"], scheme="fp16x4" if lo_lo else "fp16x3"))
    else:
        ext.matmul(a, b, target, ext.MatmulOptions(**options._asdict()))
    if target is not out:
        out.copy_(target)


# ------------------------------------------------------------------ routes
#: CANN's operator precision mode when nobody set one: torch_npu's rule (``IsAllowFP32ToFP16``: SoCs
#: before Ascend910B1 default to allow_fp32_to_fp16, "for matrix-type operators, use float16").
DEFAULT_PRECISION_MODE = {"910a": "allow_fp32_to_fp16", "910b": "must_keep_origin_dtype"}


class NativeFp32(NamedTuple):
    """What ``torch.matmul`` computes for FP32 tensors on this NPU, as read at run time (:func:`native_fp32`)."""

    soc: str                   #: "910a" or "910b"
    precision_mode: str        #: CANN's operator precision mode in force
    mode_set: bool             #: set through ``torch.npu.set_option`` (else the chip's default)
    allow_hf32: bool           #: ``torch.npu.matmul.allow_hf32``
    cube_math_type: int | None  #: ``torch.npu.matmul.cube_math_type`` when set (0: keep the dtype)
    fp32: bool                 #: whether the product is computed in FP32
    why: str                   #: the reason, in one clause


def _npu_option(name: str) -> str | None:
    """One of torch_npu's runtime options, or None when unset.

    Read as torch_npu itself reads ``torch.npu.matmul.allow_hf32`` (``torch_npu._C._npu_getOption``,
    ``torch_npu/npu/npu_config.py``); ``ACL_PRECISION_MODE`` is what ``torch.npu.set_option`` sets.
    """
    import torch_npu

    value = torch_npu._C._npu_getOption(name)
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def native_fp32(soc: str) -> NativeFp32:
    """Whether ``torch.matmul`` on FP32 NPU tensors computes in FP32 here, and why (read at every call).

    * 910A: never.  It has no FP32 cube; under its default precision mode
      ``allow_fp32_to_fp16`` CANN runs FP32 matrix products in FP16.
    * 910B: only under ``must_keep_origin_dtype`` (its default) with HF32 off
      (``torch.npu.matmul.allow_hf32``, off by default) and no cube math type
      other than "keep the dtype" (``torch.npu.matmul.cube_math_type``).
    """
    mode = _npu_option("ACL_PRECISION_MODE")
    mode_set = mode in ("allow_fp32_to_fp16", "must_keep_origin_dtype")  # torch_npu ignores other values
    if not mode_set:
        mode = DEFAULT_PRECISION_MODE[soc]
    hf32 = _npu_option("ALLOW_MATMUL_HF32") == "enable"
    cmt = _npu_option("CUBE_MATH_TYPE")
    cube_math_type = int(cmt) if cmt not in (None, "") else None
    origin = "set" if mode_set else "the default"
    if soc == "910a":
        fp32, why = False, (f"the 910A has no FP32 cube, and torch.matmul computes FP32 products in FP16 "
                            f"(precision mode {mode}, {origin})")
    elif mode != "must_keep_origin_dtype":
        fp32, why = False, f"precision mode {mode} ({origin}) lets CANN compute FP32 products in FP16"
    elif hf32:
        fp32, why = False, "torch.npu.matmul.allow_hf32 is on: FP32 products run in HF32 (about 11 mantissa bits)"
    elif cube_math_type not in (None, 0):
        fp32, why = False, f"torch.npu.matmul.cube_math_type is {cube_math_type}, not KEEP_DTYPE (0)"
    else:
        fp32, why = True, f"the FP32 cube computes it (precision mode {mode}, {origin}; HF32 off)"
    return NativeFp32(soc, mode, mode_set, hf32, cube_math_type, fp32, why)


@functools.lru_cache(maxsize=256)
def _predicted_tflops(soc: str, batch: int, m: int, n: int, k: int, terms: int) -> tuple[float, float]:
    """(the emulation's, native FP32's) predicted TFLOP/s for this product (MODEL PREDICTION).

    Both read from the chip's tiling table (:mod:`.npu_tilings`), no model run: the emulation's is the
    pipeline model's prediction of every pass :func:`run` launches, the guarantee's bookkeeping included,
    stored for the nearest shape bucket, with the batch counted as rows (``batch * m``: the kernel spreads
    batch items over the cores as it does block rows).  Native FP32: the FP32 cube at its peak (the model
    has no replay of CANN's own matmul, so this favours native).
    """
    emulated = npu_tilings.lookup(soc, max(batch, 1) * m, n, k, terms=terms).predicted_tflops
    return emulated, npu_tilings.native_fp32_tflops(soc)


def plan(req, batch: int, m: int, n: int, k: int, like=None):
    """The plan for a (batch, m, k) @ (batch, k, n) product on this NPU (:func:`sgemm_cube.backends.base.make_plan`).

    An emulated plan's reason ends with the hardware arithmetic it is designed for and the split range
    that gives (:func:`arithmetic`), e.g. ``"unprobed: the design safe under every alternative"``; its
    ``config`` holds both decisions :func:`run` launches with: ``arithmetic`` (that arithmetic) and
    ``tiling`` (:func:`choose_tiling`'s; a plan's :meth:`~sgemm_cube.plan.Plan.with_config` may force another).

    Native FP32 here is whatever :func:`native_fp32` says ``torch.matmul`` computes.  Where that is not
    FP32 (always on the 910A), nothing goes to it: ``backend="native"`` and ``backend="auto"`` with
    ``K < 16`` run the plain-FP32 product on the vector units (scheme ``"fp32"``), and
    ``backend="native"`` with larger K the emulation with the guarantee (SGEMM's error bound on every
    finite input; the plan says sb 12, scale "auto", termwise, fixup on, whatever the options said).
    Where it is FP32 (910B by default), ``backend="auto"`` runs native FP32 wherever the
    pipeline model predicts it faster than the emulation (:func:`_predicted_tflops`).  The plan's reason
    says which route and why.
    """
    chosen = _route(req, batch, m, n, k)
    if chosen.backend == "npu" and chosen.scheme in SCHEMES:
        soc = _extension().soc()
        tiling = choose_tiling(soc, m, n, k, terms=4 if chosen.scheme == "fp16x4" else 3)
        chosen = chosen._replace(reason=f"{chosen.reason}; {_arithmetic_note(soc, chosen.sb)}",
                                 config=(("arithmetic", arithmetic(soc).arithmetic), ("tiling", tiling)))
    return chosen


def _route(req, batch: int, m: int, n: int, k: int):
    """:func:`plan` before the arithmetic clause."""
    from .base import MIN_K, make_plan

    if req.backend not in ("auto", "native"):
        return make_plan(req, "npu", SCHEMES, k, orders=ORDERS)
    native = native_fp32(_extension().soc())
    if req.backend == "native":
        if native.fp32:
            return native_plan(req.sb, f"as requested: {native.why}")
        if k < MIN_K:
            return native_plan(req.sb, f"native FP32 as requested, on the vector units in plain FP32: {native.why}",
                               scheme="fp32", backend="npu")
        # the guarantee whatever the options said: sb 12, scale "auto", order "termwise", fixup on
        return Plan("fp16x3", 12, "auto", "npu", f"native FP32 as requested, emulated with the guarantee "
                    f"(fp16x3, scaled lines, the lines the split cannot hold in FP32; SGEMM's error bound on every "
                    f"finite input): {native.why}, and K = {k} is too long for the vector units' FP32 product",
                    order="termwise", fixup=True)
    if k < MIN_K:
        small = f"K = {k} < {MIN_K}: the split's 22-bit rounding would cost accuracy"
        if native.fp32:
            return native_plan(req.sb, f"{small} and native FP32 is faster ({native.why})")
        return native_plan(req.sb, f"{small}, so the vector units compute it in plain FP32: {native.why}",
                           scheme="fp32", backend="npu")
    native_reason = None
    if native.fp32:
        emulated, peak = _predicted_tflops(native.soc, batch, m, n, k, 4 if req.scheme == "fp16x4" else 3)
        if peak > emulated:
            native_reason = (f"native FP32 is faster here: the pipeline model predicts the emulation at "
                             f"{emulated:.3g} TFLOP/s (the guarantee's bookkeeping included) against the FP32 "
                             f"cube's {peak:.1f} TFLOP/s peak; {native.why}")
    chosen = make_plan(req, "npu", SCHEMES, k, orders=ORDERS, native_reason=native_reason)
    if chosen.backend == "npu" and not native.fp32:
        chosen = chosen._replace(reason=f"{chosen.reason}; native FP32 would not be FP32 here: {native.why}")
    return chosen


def run(plan, a, b, out, alpha: float = 1.0) -> None:
    """The guarantee's bookkeeping and the AscendC kernels, all on the device (:mod:`sgemm_cube.cpu_fallback.guard`).

    One call of the extension enqueues, on the current stream: the statistics
    and integers of every row of A and column of B, the splits with each line
    scaled by its power of two (NaN, infinities and entries the split cannot
    hold reach the cube as 0, so 910A's saturation mode and 910B's IEEE mode
    give the same), the GEMM and combine, the unscaling with one FP32 rounding
    (``alpha``, as float32, multiplies every output before it), and the outputs of lines with NaN or an
    infinity in FP32 by recursive summation of the unscaled lines, with native NaN/Inf semantics.  Then
    (``fixup`` on) one host read-back of the lines' integers, and the listed finite lines' outputs from
    their exponent bands on the cube (:mod:`.npu_bands`; none launched when no line is listed).  The lines
    are classified with the split range of :func:`arithmetic`'s hardware (by default the range that holds
    under every alternative the docs leave open).  No float64 (``ascendc_kernels/README.md``).
    Untested on hardware, like the kernels; executed on the host in CI.

    Every decision comes from ``plan`` (:func:`plan`): the scheme (``"fp32"``: :func:`fp32_matmul`),
    sb, scale, fixup, and its config's ``arithmetic`` (the split range's hardware) and ``tiling``.
    """
    import numpy as np

    alpha32 = float(np.float32(alpha))
    if plan.scheme == "fp32":
        fp32_matmul(a, b, out=out, alpha=alpha32)
        return
    assert plan.backend == "npu" and plan.scheme in SCHEMES and plan.order in ORDERS, plan
    _check_available()
    config = dict(plan.config)
    guard = {"scale": plan.scale, "fixup": plan.fixup, "alpha": alpha32, "arithmetic": config["arithmetic"]}
    _launch(a, b, out, sb=plan.sb, lo_lo=plan.scheme == "fp16x4", tiling=config["tiling"], guard=guard, check=False)


def fp32_matmul(a, b, *, out, alpha: float = 1.0) -> None:
    """``out = alpha * (a @ b)`` in plain FP32 on the vector units (the extension's ``matmul_fp32``).

    Each product and each sum rounded to FP32 in K order (recursive summation), then ``alpha``; NaN and
    infinities as IEEE arithmetic gives them.  Native FP32 where no FP32 cube path is trusted
    (:func:`native_fp32`); slow for long K (the fix-up kernel's loop), so :func:`plan` sends only
    ``K < 16`` here.  Operands and ``out`` as :func:`matmul` takes them.
    """
    _check_available()
    a, b = a.contiguous(), b.contiguous()
    target = _contiguous_target(out)
    _extension().matmul_fp32(a, b, target, float(alpha))
    if target is not out:
        out.copy_(target)
