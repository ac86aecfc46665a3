"""The bring-up's first question to an Ascend chip: which of the behaviours the docs leave open does it have?

Each open behaviour (:mod:`sgemm_cube.cpu_fallback.arithmetic`: the 910A cast's rounding, FP16
subnormals, the cube's accumulation, the atomic add's rounding, FP16 overflow, the 910A L0C -> UB copy)
gets a probe: a few hand-made inputs run through the package's own kernels (the built extension's
``matmul`` without the guarantee's bookkeeping, and its ``split`` where it has one), whose outputs
differ between the alternatives.  The expected output under each alternative is worked out by hand
below (exact binary arithmetic, written as powers of two), not by the model under test.  A probe
answers the alternative whose prediction matches bit for bit, or nothing ("unmodelled") -- then no
code path covers the chip and the bring-up says so.

Every probe is built to be blind to the other open points (its sums are exact in every accumulation
mode, its values are FP16-exact or normal where another probe asks about rounding or subnormals), so
each answer stands alone; :func:`dry_run` checks that on the executable stand-in under every
alternative and under all of them at once.

    python ascendc_kernels/bringup.py            # on an NPU: the probe table comes first
    python ascendc_kernels/bringup.py --dry-run  # the table against the stand-in, under each alternative

Untested on hardware: nobody here has run these probes on an NPU.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # the checkout's tests/ (the stand-in of the dry run); installed packages first

from sgemm_cube.cpu_fallback.arithmetic import CHOICES, DEFAULT, WORST, Arithmetic, alternatives

__all__ = ["Probe", "ProbeResult", "PROBES", "run_probes", "identified", "format_table", "dry_run"]

_CUBE = 16
_BIG = 2048.0            # FP16-exact; its FP32 ulp is 2**-12
_SMALL = 2.0 ** -13      # FP16-normal, a half ulp of _BIG in FP32


class Probe(NamedTuple):
    field: str                                        #: the :class:`Arithmetic` field it answers
    what: str                                         #: the inputs, in words
    chips: tuple                                      #: chips where the behaviour is open
    run: Callable                                     #: (ext, device) -> observed float32 values
    predict: dict                                     #: field value -> the expected float32 values


class ProbeResult(NamedTuple):
    field: str
    what: str
    observed: str          #: the values seen, or the error that stopped the kernels
    answer: str | None     #: the alternative whose prediction matched bit for bit; None: none did
    note: str = ""


def _product(ext, device, a, b, *, sb, tiling):
    """``ext.matmul`` on (16, K) x (K, 16) float32 data without the bookkeeping: C as float32."""
    import torch

    ta = torch.from_numpy(np.ascontiguousarray(a, np.float32)[None]).to(device)
    tb = torch.from_numpy(np.ascontiguousarray(b, np.float32)[None]).to(device)
    out = torch.zeros(1, a.shape[0], b.shape[1], dtype=torch.float32, device=device)
    bm, bk, bn, n_fused = tiling
    ext.matmul(ta, tb, out, ext.MatmulOptions(sb=sb, keep_lo_lo=False, bm=bm, bk=bk, bn=bn, n_fused=n_fused))
    return out[0].cpu().numpy()


def _eye(k=_CUBE):
    return np.eye(k, _CUBE, dtype=np.float32)


def _f32(*values):
    return np.array(values, np.float32)


# ---- cast: x = 1 + 2^-11 + 2^-22 against the identity, sb = 12.  Round to nearest: hi = 1 + 2^-10 (x is
# above the tie 1 + 2^-11), lo = (x - hi) 2^12 = -2 + 2^-10 exactly, C = hi + lo 2^-12 = x.  Toward zero:
# hi = 1, (x - hi) 2^12 = 2 + 2^-10 truncates to 2 (FP16 quantum 2^-9 there), C = 1 + 2^-11.
_CAST_X = 1 + 2.0 ** -11 + 2.0 ** -22


def _run_cast(ext, device):
    a = np.zeros((_CUBE, _CUBE), np.float32)
    a[0, 0] = _CAST_X
    return _product(ext, device, a, _eye(), sb=12, tiling=(16, 16, 16, 1))[0, :1]


# ---- subnormals: x = 1 + 2^-23 against the identity with sb = 0: hi = 1 under every rounding, lo = 2^-23,
# an FP16 subnormal; kept, C = 1 + 2^-23 (exact in FP32), flushed, C = 1.
def _run_subnormals(ext, device):
    a = np.zeros((_CUBE, _CUBE), np.float32)
    a[0, 0] = 1 + 2.0 ** -23
    return _product(ext, device, a, _eye(), sb=0, tiling=(16, 16, 16, 1))[0, :1]


# ---- accumulate: FP16-exact data (lo = 0, so C is the A_hi B_hi accumulator) against a column of ones,
# K = 32 in one K group (two Mmads into one L0C):
#   row 0: 2048, 2^-13, 2^-13, 2^-13 in chunk 0     exact 2048 + 1.5 ulp
#   row 1: 2^-13, 2^-13, 2^-13, 2048 in chunk 0     the same sum, big term last
#   row 2: 2048 in chunk 0, three 2^-13 in chunk 1   the tie made by the add between chunks
# cube16 (exact chunk, one rounding, nearest even): 2048 + 2^-11 in all three; sequential (one rounding
# per product, K order): 2048, 2048 + 2^-11, 2048; truncate (toward zero): 2048 + 2^-12 in all three.
def _accumulate_rows():
    a = np.zeros((_CUBE, 2 * _CUBE), np.float32)
    a[0, :4] = (_BIG, _SMALL, _SMALL, _SMALL)
    a[1, :4] = (_SMALL, _SMALL, _SMALL, _BIG)
    a[2, 0] = _BIG
    a[2, 16:19] = _SMALL
    return a


def _run_accumulate(ext, device):
    b = np.zeros((2 * _CUBE, _CUBE), np.float32)
    b[:, 0] = 1
    return _product(ext, device, _accumulate_rows(), b, sb=12, tiling=(16, 16, 16, 2))[:3, 0]


# ---- atomic: the same row 2 with one K block per group (two groups, added into GM by the atomic add):
# each group's sum is exact (2048; 3 * 2^-13), so only the atomic add rounds: nearest even 2048 + 2^-11,
# toward zero 2048 + 2^-12.
def _run_atomic(ext, device):
    b = np.zeros((2 * _CUBE, _CUBE), np.float32)
    b[:, 0] = 1
    return _product(ext, device, _accumulate_rows(), b, sb=12, tiling=(16, 16, 16, 1))[2:3, 0]


# ---- overflow: the split of x = 2049 with sb = 24 (through the extension's split, where it has one):
# hi = 2048 (the tie to even), lo = (x - hi) 2^24 = 2^24, beyond FP16: inf, or 65504 saturated.  No
# product sees it (the guarantee's bookkeeping keeps such values off the split: class 2).
def _run_overflow(ext, device):
    import torch

    split = getattr(ext, "split", None)
    if split is None:
        raise NotImplementedError("the extension has no split entry point to probe the conversion alone")
    x = torch.zeros(1, _CUBE, _CUBE, dtype=torch.float32, device=device)
    x[0, 0, 0] = 2049.0
    hi = torch.empty(1, _CUBE, _CUBE, dtype=torch.float16, device=device)
    lo = torch.empty_like(hi)
    split(x, hi, lo, 24)
    return lo[0, 0, :1].float().cpu().numpy()


# ---- the 910A's L0C -> UB copy: one fractal of small integers (exact in any arithmetic) must come back.
def _l0c_data():
    rng = np.random.default_rng(0)
    return (rng.integers(-4, 5, (_CUBE, _CUBE)).astype(np.float32),
            rng.integers(-4, 5, (_CUBE, _CUBE)).astype(np.float32))


def _run_l0c(ext, device):
    a, b = _l0c_data()
    return _product(ext, device, a, b, sb=12, tiling=(16, 16, 16, 1)).ravel()


_EXACT = (lambda a, b: (a.astype(np.float64) @ b).astype(np.float32).ravel())(*_l0c_data())
_TIE_UP, _TIE_DOWN = _BIG + 2.0 ** -11, _BIG + 2.0 ** -12

PROBES = [
    Probe("cast", "FP32 -> FP16 Cast (CAST_NONE) of 1 + 2^-11 + 2^-22, sb = 12", ("910a",), _run_cast,
          {"rint": _f32(_CAST_X), "trunc": _f32(1 + 2.0 ** -11)}),
    Probe("overflow", "FP32 -> FP16 of the residual 2^24 (x = 2049, sb = 24) in the split", ("910a", "910b"),
          _run_overflow, {"inf": _f32(np.inf), "saturate": _f32(65504)}),
    Probe("subnormals", "lo = 2^-23 (an FP16 subnormal) of 1 + 2^-23, sb = 0, through Cast and Mmad", ("910a", "910b"),
          _run_subnormals, {"gradual": _f32(1 + 2.0 ** -23), "flush": _f32(1)}),
    Probe("accumulate", "2048 + 3 x 2^-13 in one chunk, reversed, and across two chunks", ("910a", "910b"),
          _run_accumulate, {"cube16": _f32(_TIE_UP, _TIE_UP, _TIE_UP), "sequential": _f32(_BIG, _TIE_UP, _BIG),
                            "truncate": _f32(_TIE_DOWN, _TIE_DOWN, _TIE_DOWN)}),
    Probe("atomic", "2048 + 3 x 2^-13 added by the atomic add between two K groups", ("910a", "910b"), _run_atomic,
          {"rne": _f32(_TIE_UP), "trunc": _f32(_TIE_DOWN)}),
    Probe("l0c_to_ub", "one fractal of small integers out of L0C through UB (exact)", ("910a",), _run_l0c,
          {"block": _EXACT}),
]
assert [p.field for p in PROBES] == list(Arithmetic._fields)
assert all(set(p.predict) <= set(CHOICES[p.field]) for p in PROBES)


def _same(x: np.ndarray, y: np.ndarray) -> bool:
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return x.shape == y.shape and bool(np.all(x.view(np.int32) == y.view(np.int32)))


def _show(x: np.ndarray) -> str:
    return ", ".join(float(v).hex() if np.isfinite(v) else str(float(v)) for v in np.asarray(x, np.float64)[:3])


def run_probes(ext, soc: str, device: str = "npu") -> list[ProbeResult]:
    """Every probe on the chip behind ``ext`` (the built extension, or a stand-in), in :data:`PROBES` order.

    Behaviours the chip's docs settle (the 910B's split asks for CAST_RINT by name) are answered by the
    default without a run; a probe the kernels cannot run answers None with the error."""
    soc = soc.lower()
    results = []
    for p in PROBES:
        if soc not in p.chips:
            results.append(ProbeResult(p.field, p.what, "-", CHOICES[p.field][0],
                                       "documented on this chip" if p.field == "cast" else "not used on this chip"))
            continue
        try:
            got = p.run(ext, device)
        except NotImplementedError as exc:
            results.append(ProbeResult(p.field, p.what, "not run", None, str(exc)))
            continue
        except Exception as exc:  # the kernels failed: report it, the other probes still run
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
            answer = "unsupported" if p.field == "l0c_to_ub" else None
            results.append(ProbeResult(p.field, p.what, f"failed: {first}", answer))
            continue
        answer = next((value for value, want in p.predict.items() if _same(got, want)), None)
        if p.field == "l0c_to_ub" and answer is None:
            answer = "unsupported"  # wrong data out of L0C is as good as no copy
        results.append(ProbeResult(p.field, p.what, _show(got), answer,
                                   "" if answer is not None else "matches no modelled alternative"))
    return results


def identified(results: list[ProbeResult]) -> tuple[Arithmetic, list[str]]:
    """The :class:`Arithmetic` the answers describe, and one line per behaviour no code path covers.

    A field without an answer takes :data:`WORST`'s value (the design that holds under every modelled
    alternative; for ``subnormals`` the narrower split range) and gets a line: that design covers the
    chip only if its behaviour is one of the modelled ones."""
    values, uncovered = {}, []
    for r in results:
        if r.answer is None:
            uncovered.append(f"{r.field}: {r.observed} ({r.note or 'no answer'}); not covered by any modelled "
                             f"alternative -- report it with this table")
        else:
            values[r.field] = r.answer
    arithmetic = WORST._replace(**values)
    if arithmetic.l0c_to_ub == "unsupported":
        uncovered.append("l0c_to_ub: the 910A kernels' only way out of L0C is the BLOCK_MODE_MATRIX copy to UB; "
                         "no code path covers its absence (backend='npu' cannot run on this chip)")
    return arithmetic, uncovered


def format_table(results: list[ProbeResult], *, expected: Arithmetic | None = None) -> str:
    """One row per probe: the behaviour, the model's default, the chip's answer (and what a stand-in set to a
    known behaviour should make it answer, :func:`observable`)."""
    head = ["behaviour", "default", "answer", "observed"] + (["expect"] if expected is not None else []) + ["probe"]
    rows = []
    for r in results:
        row = [r.field, CHOICES[r.field][0], r.answer or "?", r.observed]
        if expected is not None:
            row.append(getattr(expected, r.field))
        rows.append(row + [r.what + (f" ({r.note})" if r.note else "")])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    return "\n".join([fmt.format(*head), fmt.format(*("-" * w for w in widths))] + [fmt.format(*r) for r in rows])


def observable(arithmetic: Arithmetic, soc: str) -> Arithmetic:
    """What the probes should answer on a stand-in set to ``arithmetic``: the chip's documented behaviours
    where the setting does not apply (the 910B converts with CAST_RINT by name and has no L0C -> UB copy),
    and ``overflow=saturate`` under a truncating 910A cast (toward zero never reaches infinity)."""
    soc = soc.lower()
    if soc != "910a":
        return arithmetic._replace(cast="rint", l0c_to_ub="block")
    if arithmetic.cast == "trunc":
        return arithmetic._replace(overflow="saturate")
    return arithmetic


def _consistent(results: list[ProbeResult], arithmetic: Arithmetic, soc: str) -> list[str]:
    """Where the answers contradict the stand-in's setting (a probe may say nothing only when the kernels
    could not run at all, under ``l0c_to_ub=unsupported`` on the 910A)."""
    want = observable(arithmetic, soc)
    kernels_down = soc == "910a" and arithmetic.l0c_to_ub == "unsupported"
    return [f"{r.field}: answered {r.answer}, the stand-in runs {getattr(want, r.field)}" for r in results
            if r.answer != getattr(want, r.field) and not (r.answer is None and kernels_down)]


def dry_run(soc: str, *, out=print, workdir=None) -> int:
    """The probe table against the executable AscendC stand-in, under the default, each alternative alone
    and all of them at once; 1 if any answer contradicts the setting it ran under."""
    import shutil
    import tempfile

    if shutil.which("g++") is None:
        out("probes: g++ not found; the dry run executes the kernels in the C++ stand-in and needs it")
        return 1
    from tests.ascendc_kernels.executed import HARNESS, ExecutedExtension, build

    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(workdir or tmp)
        binary = build(work / f"probe_{soc}", soc.upper(), harness=HARNESS)
        for arithmetic in [DEFAULT, *alternatives(), WORST]:
            ext = ExecutedExtension(soc, 2, binary, work, arithmetic=arithmetic)
            results = run_probes(ext, soc, device="cpu")
            bad = _consistent(results, arithmetic, soc)
            status |= bool(bad)
            out(f"\n-- {soc} stand-in, {arithmetic}: {'identified' if not bad else 'WRONG: ' + '; '.join(bad)}")
            out(format_table(results, expected=observable(arithmetic, soc)))
    return status


def record(arithmetic: Arithmetic, soc: str, path=None) -> Path:
    """Write the chip's answers where the NPU backend reads them (``sgemm_cube.backends.npu.ARITHMETIC_FILE``;
    ``$SGEMM_CUBE_NPU_ARITHMETIC`` still wins over it): the package then designs for this chip's arithmetic."""
    import datetime
    import json

    from sgemm_cube.backends import npu

    path = Path(path) if path is not None else npu.ARITHMETIC_FILE
    path.write_text(json.dumps({"arithmetic": arithmetic.spec() or "default", "soc": soc.lower(),
                                "source": f"ascendc_kernels/probes.py, {datetime.date.today().isoformat()}"},
                               indent=1) + "\n")
    return path


def main(argv=None) -> int:
    """``python ascendc_kernels/probes.py [--dry-run] [--soc 910a|910b]``: the probe table (bring-up step 3)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="no NPU: the table against the executable stand-in under every alternative")
    parser.add_argument("--soc", choices=("910a", "910b"), default="910b", help="chip family of the dry run")
    parser.add_argument("--no-record", action="store_true",
                        help="on an NPU: print the answers without recording them for the package")
    args = parser.parse_args(argv)
    if args.dry_run:
        return dry_run(args.soc)

    import torch_npu  # noqa: F401  (registers the NPU device)

    from sgemm_cube.backends import npu

    reason = npu.unavailable_reason()
    if reason:
        print(f"the npu backend is unavailable: {reason}")
        return 1
    ext = npu._extension()
    soc = ext.soc()
    results = run_probes(ext, soc)
    print(format_table(results))
    arithmetic, uncovered = identified(results)
    print(f"\nthe chip behaves as: {arithmetic} (the model's default: {DEFAULT})")
    for line in uncovered:
        print(f"NOT COVERED  {line}")
    if not args.no_record:
        where = record(arithmetic, soc)
        print(f"recorded in {where}: the npu backend designs for it from now on "
              f"(sgemm_cube.explain names it; ${npu.ARITHMETIC_ENV} overrides it)")
    return 1 if uncovered else 0


if __name__ == "__main__":
    sys.exit(main())
