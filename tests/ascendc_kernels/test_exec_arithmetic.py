"""The executable AscendC stand-in's runtime choices and documented rules, one operation at a time.

``SGEMM_CUBE_EXEC_ARITHMETIC`` (``ascendc_kernels/tests/exec_ascendc/exec_state.h``) selects, per run,
what the stand-in assumes where the AscendC docs are silent (fields and values of
:mod:`sgemm_cube.cpu_fallback.arithmetic`).  A test-only driver, ``exec_ascendc/run_probe_ops.cpp``, applies
one stand-in operation (Cast FP32 -> FP16 / FP16 -> FP32, Mmad, the FP32 atomic add into GM, the 910A's
L0C -> UB copy) to hand-made inputs; each result is checked against a value computed here independently
(numpy's float16 conversion with explicit rounding, exact rational sums), under each value of each field,
and every input is chosen so that the values of its field give different results.  The same driver
breaks each documented rule the stand-in checks (start-address alignment, GEMV, PipeBarrier<PIPE_M>
between small Mmads, NaN/Inf on the cube) and a legal neighbour of each must stay clean.  Two runs of
the real kernels show the variable reaching them (910A: the split under ``cast=trunc``, the GEMM under
``l0c_to_ub=unsupported``).
"""
from __future__ import annotations

import math
import os
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from sgemm_cube.cpu_fallback.arithmetic import CHOICES, DEFAULT, WORST, Arithmetic, alternatives

from .executed import (ARITHMETIC_ENV, EXEC, HARNESS, ExecutedExtension, build, build_chips, run,
                       subprocess_env)
from .test_ascend_kernel_sources import CHIPS

PROBE = EXEC / "run_probe_ops.cpp"
CAST_NONE, CAST_RINT, CAST_TRUNC = 0, 1, 5  # AscendC::RoundMode (ascendc_types.h)


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    return build_chips(tmp_path_factory.mktemp("probe_ops"), "probe", harness=PROBE)


class Out(NamedTuple):
    rc: int
    stdout: str
    stderr: str
    data: bytes | None

    @property
    def clean(self) -> bool:
        return self.rc == 0 and "CHECK-SUMMARY errors=0 " in self.stdout


def _probe(binary: Path, op: str, params, data: bytes, workdir: Path, arithmetic=None, raw_env=None) -> Out:
    """One operation through the driver; ``raw_env``: the variable's text as given (no Python parsing)."""
    inp, outp = workdir / f"{op}.in", workdir / f"{op}.out"
    inp.write_bytes(np.asarray(params, np.int64).tobytes() + data)
    if outp.exists():
        outp.unlink()
    env = subprocess_env(arithmetic)
    if raw_env is not None:
        env = {**os.environ, ARITHMETIC_ENV: raw_env}
    proc = subprocess.run([str(binary), op, str(inp), str(outp)], capture_output=True, text=True, timeout=60,
                          env=env)
    data = outp.read_bytes() if proc.returncode in (0, 1) and outp.exists() else None
    return Out(proc.returncode, proc.stdout, proc.stderr, data)


# ------------------------------------------------------------------ independent references
def ref_f32_to_f16(x, *, trunc=False, saturate=False, flush=False) -> np.ndarray:
    """FP16 bit patterns of float32 ``x``: numpy's conversion (nearest even, overflow to inf, gradual
    subnormals), then one step toward zero where it rounded away (``trunc``), +-65504 for finite values
    that went to inf (``saturate``), zero of the sign for subnormal results (``flush``)."""
    x = np.asarray(x, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = x.astype(np.float16)
        if trunc:
            away = np.isfinite(x) & (np.abs(h.astype(np.float64)) > np.abs(x.astype(np.float64)))
            h = np.where(away, np.nextafter(h, np.float16(0)), h)
        if saturate:
            h = np.where(np.isinf(h) & np.isfinite(x), np.copysign(np.float16(65504), x).astype(np.float16), h)
        if flush:
            sub = (h != 0) & (np.abs(h) < np.float16(2.0**-14))
            h = np.where(sub, np.copysign(np.float16(0), h).astype(np.float16), h)
    return h.astype(np.float16).view(np.uint16)


def round_f32(v: Fraction, trunc: bool) -> np.float32:
    """An exact rational rounded to FP32 (nearest even, or toward zero); normal results only."""
    if v == 0:
        return np.float32(0)
    mag = abs(v)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    e += 1 if mag >= Fraction(2) ** (e + 1) else (-1 if mag < Fraction(2) ** e else 0)
    scaled = mag * Fraction(2) ** (23 - e)  # in [2^23, 2^24)
    q = math.floor(scaled)
    rem = scaled - q
    if not trunc and (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and q % 2)):
        q += 1
    assert -126 <= e <= 127, "reference covers normal FP32 results only"
    return np.float32(math.copysign(float(Fraction(q) * Fraction(2) ** (e - 23)), v))


def ref_mmad(a16, b16, accumulate: str, *, reps=1, flush=False) -> np.ndarray:
    """C = reps * (A B) as Mmad accumulates it: cube16 (16-long K chunks summed exactly, rounded to nearest,
    one nearest add), sequential (one nearest add per product), truncate (cube16 toward zero)."""
    a, b = a16.astype(np.float64), b16.astype(np.float64)
    if flush:
        a = np.where(np.abs(a) < 2.0**-14, 0.0, a)
        b = np.where(np.abs(b) < 2.0**-14, 0.0, b)
    m, k = a.shape
    n = b.shape[1]
    c = np.empty((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            acc = np.float32(0)
            for _ in range(reps):
                for k0 in range(0, k, 16):
                    prods = [a[i, kk] * b[kk, j] for kk in range(k0, min(k0 + 16, k))]  # exact in float64
                    if accumulate == "sequential":
                        for p in prods:
                            acc = np.float32(acc + np.float32(p))
                        continue
                    chunk = round_f32(sum(map(Fraction, prods), Fraction(0)), trunc=accumulate == "truncate")
                    acc = (np.float32(acc + chunk) if accumulate == "cube16"
                           else round_f32(Fraction(float(acc)) + Fraction(float(chunk)), trunc=True))
            c[i, j] = acc
    return c


def ref_atomic(dst, src, trunc: bool) -> np.ndarray:
    if not trunc:
        return (np.asarray(dst, np.float32) + np.asarray(src, np.float32)).astype(np.float32)
    return np.array([round_f32(Fraction(float(d)) + Fraction(float(s)), trunc=True) for d, s in zip(dst, src)],
                    np.float32)


def _bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


# ------------------------------------------------------------------ the variable itself
def test_vocabulary_and_errors_match_cpu_fallback(probe, tmp_path):
    """Every field and value of cpu_fallback.arithmetic is accepted and echoed as ``str(Arithmetic)``; the
    errors name exactly CHOICES' fields and values; blanks and empty items are ignored as by parse()."""
    binary = probe["910B"]
    data = np.zeros(16, np.uint16).tobytes()
    for arith in [DEFAULT, *alternatives(), WORST]:
        r = _probe(binary, "cast_f16_f32", [16], data, tmp_path, arithmetic=arith)
        assert r.clean and f"ARITHMETIC {arith}\n" in r.stdout, (arith, r.stdout, r.stderr)
    r = _probe(binary, "cast_f16_f32", [16], data, tmp_path, raw_env=" cast = trunc ,, atomic=trunc,")
    assert r.clean and "ARITHMETIC cast=trunc,atomic=trunc\n" in r.stdout
    assert Arithmetic.parse(" cast = trunc ,, atomic=trunc,") == DEFAULT._replace(cast="trunc", atomic="trunc")
    r = _probe(binary, "cast_f16_f32", [16], data, tmp_path, raw_env="cast=trunc,precision=high")
    assert r.rc == 2 and f"with a field of {', '.join(CHOICES)}" in r.stderr, r.stderr
    r = _probe(binary, "cast_f16_f32", [16], data, tmp_path, raw_env="cast")
    assert r.rc == 2 and "bad item 'cast'" in r.stderr
    for field, values in CHOICES.items():
        r = _probe(binary, "cast_f16_f32", [16], data, tmp_path, raw_env=f"{field}=bogus")
        assert r.rc == 2 and f"unknown {field}='bogus'; choose one of {', '.join(values)}" in r.stderr, r.stderr


def test_runner_environment():
    """The runners pass the spec for the subprocess only; bad specs fail in Python first."""
    before = dict(os.environ)
    assert subprocess_env(None) is None
    assert subprocess_env(DEFAULT)[ARITHMETIC_ENV] == ""
    assert subprocess_env("subnormals=flush, cast=trunc")[ARITHMETIC_ENV] == "cast=trunc,subnormals=flush"
    assert subprocess_env(WORST)[ARITHMETIC_ENV] == WORST.spec()
    assert dict(os.environ) == before
    with pytest.raises(ValueError, match="choose one of"):
        subprocess_env("cast=nearest")
    with pytest.raises(ValueError, match="choose one of"):
        ExecutedExtension("910B", 1, Path("/nonexistent"), Path("/tmp"), arithmetic="atomic=up")


# ------------------------------------------------------------------ cast, overflow, subnormals
_CAST_INPUTS = np.array([
    1.0, -1.0, 0.0, -0.0, 65504.0, -65504.0,
    1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, -(1.0 + 2.0**-11) - 2.0**-20,  # ties (even), inexact negative
    1.0 / 3.0, -2.0 / 3.0, 3.14159265, 1000.7,
    65519.0, -65519.99, 65520.0, 70000.0, -1.0e10,  # beyond FP16's range for nearest; saturation
    2.0**-20 + 2.0**-27, -3.0e-6, 2.0**-24, 2.0**-25 + 2.0**-30,  # subnormal results
    2.0**-14 - 2.0**-26,  # rounds up to the smallest normal, but truncates to a subnormal
    2.0**-14, -(2.0**-14) - 2.0**-30, np.inf, -np.inf, np.nan,
], np.float32)


def _cast_inputs():
    rng = np.random.default_rng(2024)
    extra = (rng.standard_normal(64) * np.exp2(rng.integers(-26, 17, 64))).astype(np.float32)
    x = np.concatenate([_CAST_INPUTS, extra])
    return np.concatenate([x, np.zeros((-len(x)) % 16, np.float32)])


def _same_f16(got: np.ndarray, want: np.ndarray) -> bool:
    gn, wn = (got & 0x7FFF) > 0x7C00, (want & 0x7FFF) > 0x7C00  # NaN: any payload
    return bool(np.array_equal(gn, wn) and np.array_equal(got[~gn], want[~wn]))


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_cast_f32_to_f16(probe, soc, tmp_path):
    """CAST_NONE (the 910A split's mode) under each cast/overflow/subnormals value; on 910B CAST_RINT stays
    nearest even and CAST_TRUNC toward zero whatever ``cast`` says."""
    x = _cast_inputs()
    refs = {}
    for arith in [DEFAULT, DEFAULT._replace(cast="trunc"), DEFAULT._replace(overflow="saturate"),
                  DEFAULT._replace(subnormals="flush"), WORST]:
        want = ref_f32_to_f16(x, trunc=arith.cast == "trunc", saturate=arith.overflow == "saturate",
                              flush=arith.subnormals == "flush")
        r = _probe(probe[soc], "cast_f32_f16", [CAST_NONE, len(x), 0], x.tobytes(), tmp_path, arithmetic=arith)
        assert r.clean, r.stdout + r.stderr
        got = np.frombuffer(r.data, np.uint16)
        bad = np.flatnonzero(got != want)
        assert _same_f16(got, want), f"{arith}: {x[bad][:4]} -> {got[bad][:4]} want {want[bad][:4]}"
        refs[str(arith)] = want
    # each field changes some of these results (so each check above can fail)
    assert len({v.tobytes() for v in refs.values()}) == len(refs)
    if soc == "910B":
        for mode, trunc in ((CAST_RINT, False), (CAST_TRUNC, True)):
            for arith in (DEFAULT._replace(cast="trunc"), DEFAULT._replace(overflow="saturate")):
                r = _probe(probe[soc], "cast_f32_f16", [mode, len(x), 0], x.tobytes(), tmp_path, arithmetic=arith)
                want = ref_f32_to_f16(x, trunc=trunc, saturate=arith.overflow == "saturate")
                assert r.clean and _same_f16(np.frombuffer(r.data, np.uint16), want), (mode, arith)


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_cast_f16_to_f32(probe, soc, tmp_path):
    """FP16 -> FP32 is exact; with subnormals=flush a subnormal input reads as zero of its sign."""
    bits = np.array([0x0001, 0x8001, 0x03FF, 0x83FF, 0x0200, 0x0400, 0x8400, 0x3C00, 0x0000, 0x8000, 0x7BFF,
                     0x7C00, 0xFC00, 0x0155, 0x8123, 0x1234], np.uint16)
    h = bits.view(np.float16)
    sub = (h != 0) & (np.abs(h) < np.float16(2.0**-14))
    for arith, want in ((DEFAULT, h.astype(np.float32)),
                        (DEFAULT._replace(subnormals="flush"),
                         np.where(sub, np.copysign(np.float32(0), h.astype(np.float32)), h.astype(np.float32)))):
        r = _probe(probe[soc], "cast_f16_f32", [len(bits)], bits.tobytes(), tmp_path, arithmetic=arith)
        assert r.clean, r.stdout + r.stderr
        assert np.array_equal(_bits(np.frombuffer(r.data, np.float32)), _bits(want)), arith
    assert sub.sum() == 7  # the check above has subnormals to flush


# ------------------------------------------------------------------ Mmad, atomic, L0C -> UB
def _mmad_params(m, n, k, *, reps=1, barrier=True, l0a_off=0, l0b_off=0, l0c_off=0):
    return [m, n, k, reps, int(barrier), l0a_off, l0b_off, l0c_off]


def _mmad_data(a16, b16, c0=None) -> bytes:
    m, n = a16.shape[0], b16.shape[1]
    c0 = np.zeros((m, n), np.float32) if c0 is None else c0
    return a16.view(np.uint16).tobytes() + b16.view(np.uint16).tobytes() + np.asarray(c0, np.float32).tobytes()


def _fp16_operands(rng, m, n, k, spread=8):
    a = (rng.standard_normal((m, k)) * np.exp2(rng.integers(-spread, spread + 1, (m, k)))).astype(np.float16)
    b = (rng.standard_normal((k, n)) * np.exp2(rng.integers(-spread, spread + 1, (k, n)))).astype(np.float16)
    return a, b


def _mmad_out(r: Out, m, n) -> np.ndarray:
    assert r.data is not None, r.stdout + r.stderr
    return np.frombuffer(r.data, np.float32).reshape(m, n)


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_mmad_accumulate(probe, soc, tmp_path):
    """One Mmad over two K chunks, then a second accumulating one, under cube16, sequential and truncate."""
    rng = np.random.default_rng(31)
    m, n, k = 16, 16, 32
    a, b = _fp16_operands(rng, m, n, k)
    refs = {mode: ref_mmad(a, b, mode, reps=2) for mode in CHOICES["accumulate"]}
    for x, y in ((0, 1), (0, 2), (1, 2)):
        names = CHOICES["accumulate"]
        assert not np.array_equal(_bits(refs[names[x]]), _bits(refs[names[y]])), "operands do not separate models"
    for mode, want in refs.items():
        r = _probe(probe[soc], "mmad", _mmad_params(m, n, k, reps=2), _mmad_data(a, b), tmp_path,
                   arithmetic=f"accumulate={mode}")
        assert r.clean, r.stdout + r.stderr
        got = _mmad_out(r, m, n)
        assert np.array_equal(_bits(got), _bits(want)), f"{mode}: {np.sum(_bits(got) != _bits(want))} differ"


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_mmad_subnormal_operands(probe, soc, tmp_path):
    """Mmad reads FP16 subnormals exactly, or as zero with subnormals=flush (a tail K of 20: padded chunk)."""
    rng = np.random.default_rng(5)
    m, n, k = 16, 32, 20
    a, b = _fp16_operands(rng, m, n, k, spread=2)
    a[::3, ::2] = (rng.standard_normal(a[::3, ::2].shape) * 2.0**-17).astype(np.float16)  # subnormals
    b[1::4, :] = np.float16(2.0**-24) * rng.integers(1, 1024, b[1::4, :].shape).astype(np.float16)
    want = {f: ref_mmad(a, b, "cube16", flush=f == "flush") for f in CHOICES["subnormals"]}
    assert not np.array_equal(_bits(want["gradual"]), _bits(want["flush"]))
    for f, w in want.items():
        r = _probe(probe[soc], "mmad", _mmad_params(m, n, k), _mmad_data(a, b), tmp_path, arithmetic=f"subnormals={f}")
        assert r.clean and np.array_equal(_bits(_mmad_out(r, m, n)), _bits(w)), f


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_atomic_add(probe, soc, tmp_path):
    """The FP32 atomic add into GM, UB -> GM (both chips) and at the end of the Mmad path (910B: Fixpipe;
    910A: after the L0C -> UB copy), rounded to nearest even or toward zero."""
    rng = np.random.default_rng(17)
    count = 64
    dst = (rng.standard_normal(count) * np.exp2(rng.integers(-10, 11, count))).astype(np.float32)
    src = (rng.standard_normal(count) * np.exp2(rng.integers(-30, 1, count))).astype(np.float32)
    src[:4] = -dst[:4]  # exact zeros
    src[4:8] = np.float32(2.0**-40) * np.sign(dst[4:8])  # tiny same-sign addends: truncation keeps dst
    src[8:12] = -np.float32(2.0**-40) * np.sign(dst[8:12])  # tiny opposite-sign: one step toward zero
    src[12:16] = -np.float32(2.0**-80) * np.sign(dst[12:16])  # below double's precision too (TwoSum's error term)
    want = {t: ref_atomic(dst, src, t == "trunc") for t in CHOICES["atomic"]}
    assert not np.array_equal(_bits(want["rne"]), _bits(want["trunc"]))
    m, n, k = 16, 16, 16
    a, b = _fp16_operands(rng, m, n, k)
    c0 = (rng.standard_normal((m, n)) * 1.0e3).astype(np.float32)
    prod = ref_mmad(a, b, "cube16").ravel()
    for t, w in want.items():
        r = _probe(probe[soc], "atomic", [count, 0], dst.tobytes() + src.tobytes(), tmp_path, arithmetic=f"atomic={t}")
        assert r.clean, r.stdout + r.stderr
        assert np.array_equal(_bits(np.frombuffer(r.data, np.float32)), _bits(w)), t
        r = _probe(probe[soc], "mmad", _mmad_params(m, n, k), _mmad_data(a, b, c0), tmp_path, arithmetic=f"atomic={t}")
        wc = ref_atomic(c0.ravel(), prod, t == "trunc").reshape(m, n)
        assert r.clean and np.array_equal(_bits(_mmad_out(r, m, n)), _bits(wc)), t
    assert not np.array_equal(_bits(ref_atomic(c0.ravel(), prod, True)), _bits(ref_atomic(c0.ravel(), prod, False)))


L0C_TO_UB_FATAL = "L0C -> UB block copy unsupported on this chip (SGEMM_CUBE_EXEC_ARITHMETIC l0c_to_ub=unsupported)"


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_l0c_to_ub(probe, soc, tmp_path):
    """910A's only way out of L0C fails under l0c_to_ub=unsupported; the 910B (Fixpipe) does not use it."""
    rng = np.random.default_rng(2)
    a, b = _fp16_operands(rng, 16, 16, 16)
    r = _probe(probe[soc], "mmad", _mmad_params(16, 16, 16), _mmad_data(a, b), tmp_path,
               arithmetic="l0c_to_ub=unsupported")
    if soc == "910A":
        assert r.rc == 2 and L0C_TO_UB_FATAL in r.stderr, r.stderr
    else:
        assert r.clean and np.array_equal(_bits(_mmad_out(r, 16, 16)), _bits(ref_mmad(a, b, "cube16")))


# ------------------------------------------------------------------ documented rules
@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_alignment_rules(probe, soc, tmp_path):
    """Operand start addresses: UB 32 B, L0A/L0B 512 B, L0C 64 B in general and 1024 B for Mmad's C.  A
    misaligned operand is a checker error (the numbers stay right); the aligned neighbour is clean."""
    x = np.arange(64, dtype=np.float32)
    ok = _probe(probe[soc], "atomic", [64, 32], np.zeros(64, np.float32).tobytes() + x.tobytes(), tmp_path)
    assert ok.clean and np.array_equal(np.frombuffer(ok.data, np.float32), x)
    bad = _probe(probe[soc], "atomic", [64, 16], np.zeros(64, np.float32).tobytes() + x.tobytes(), tmp_path)
    assert bad.rc == 1 and "misaligned operand: UB start address not 32-byte aligned" in bad.stdout, bad.stdout
    assert np.array_equal(np.frombuffer(bad.data, np.float32), x)
    rng = np.random.default_rng(4)
    a, b = _fp16_operands(rng, 16, 16, 16)
    want = ref_mmad(a, b, "cube16")
    cases = [  # (offsets, messages expected; none: clean)
        (dict(l0a_off=512, l0b_off=1024, l0c_off=1024), []),
        (dict(l0a_off=32), ["L0A start address not 512-byte aligned"]),
        (dict(l0b_off=256), ["L0B start address not 512-byte aligned"]),
        (dict(l0c_off=512), ["L0C start address not 1024-byte aligned (Mmad.md"]),
        (dict(l0c_off=32), ["L0C start address not 1024-byte aligned (Mmad.md",
                            "L0C start address not 64-byte aligned"]),
    ]
    for offs, messages in cases:
        r = _probe(probe[soc], "mmad", _mmad_params(16, 16, 16, **offs), _mmad_data(a, b), tmp_path)
        assert np.array_equal(_bits(_mmad_out(r, 16, 16)), _bits(want)), offs
        if not messages:
            assert r.clean, r.stdout
        for msg in messages:
            assert r.rc == 1 and msg in r.stdout, (offs, r.stdout)
    # 512 is enough for the general L0C rule: only Mmad's own 1024 is broken there
    r = _probe(probe[soc], "mmad", _mmad_params(16, 16, 16, l0c_off=512), _mmad_data(a, b), tmp_path)
    assert "not 64-byte aligned" not in r.stdout


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_gemv_refused(probe, soc, tmp_path):
    rng = np.random.default_rng(6)
    for m in (1, 2):
        a, b = _fp16_operands(rng, m, 16, 16)
        r = _probe(probe[soc], "mmad", _mmad_params(m, 16, 16), _mmad_data(a, b), tmp_path)
        if m == 1:
            assert r.rc == 2 and "GEMV mode not modelled; the kernels never issue it" in r.stderr, r.stderr
        else:
            assert r.clean and np.array_equal(_bits(_mmad_out(r, m, 16)), _bits(ref_mmad(a, b, "cube16")))


PIPE_M_RULE = "without PipeBarrier<PIPE_M> in between (Mmad.md)"


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_pipe_barrier_m_rule(probe, soc, tmp_path):
    """Two Mmads into one L0C: below (m/16)*(n/16) = 10 (integer division, as Mmad.md writes it) a
    PipeBarrier<PIPE_M> must come between; at 10 fractals and more the cube orders them itself."""
    rng = np.random.default_rng(8)
    for (m, n), needed in (((16, 16), True), ((40, 64), True), ((32, 80), False), ((48, 64), False)):
        a, b = _fp16_operands(rng, m, n, 16, spread=2)
        want = ref_mmad(a[:16], b, "cube16", reps=2)  # the first 16 rows (the reference is slow)
        for barrier in (True, False):
            r = _probe(probe[soc], "mmad", _mmad_params(m, n, 16, reps=2, barrier=barrier), _mmad_data(a, b), tmp_path)
            assert np.array_equal(_bits(_mmad_out(r, m, n)[:16]), _bits(want))
            if needed and not barrier:
                assert r.rc == 1 and PIPE_M_RULE in r.stdout, ((m, n), r.stdout)
            else:
                assert r.clean, ((m, n, barrier), r.stdout)


SPECIAL_RULE = "Mmad reads a NaN or Inf operand"


@pytest.mark.parametrize("soc", sorted(CHIPS))
def test_special_values_off_the_cube(probe, soc, tmp_path):
    rng = np.random.default_rng(9)
    a, b = _fp16_operands(rng, 16, 16, 16)
    r = _probe(probe[soc], "mmad", _mmad_params(16, 16, 16), _mmad_data(a, b), tmp_path)
    assert r.clean
    for where, value in (("a", np.nan), ("b", np.inf), ("a", -np.inf)):
        x, y = a.copy(), b.copy()
        (x if where == "a" else y)[3, 5] = value
        r = _probe(probe[soc], "mmad", _mmad_params(16, 16, 16), _mmad_data(x, y), tmp_path)
        assert r.rc == 1 and SPECIAL_RULE in r.stdout, r.stdout


# ------------------------------------------------------------------ the real kernels
@pytest.fixture(scope="module")
def kernels_910a(tmp_path_factory):
    return build(tmp_path_factory.mktemp("exec_arith_kernels") / "run_910A", "910A", harness=HARNESS)


def test_real_kernels_follow_the_variable(kernels_910a, tmp_path):
    """The 910A's split casts with CAST_NONE: under cast=trunc its hi and lo are the truncated conversions;
    its GEMM leaves L0C through the block copy, fatal under l0c_to_ub=unsupported."""
    rng = np.random.default_rng(12)
    m, n, k, sb = 16, 32, 48, 12
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    b = rng.standard_normal((1, k, n)).astype(np.float32)
    r = run(kernels_910a, a, b, sb=sb, tiling=(16, 16, 32, 4), cube=2, vector=2, workdir=tmp_path,
            arithmetic="cast=trunc")
    assert r.clean and "ARITHMETIC cast=trunc" in r.stdout, r.stdout + r.stderr
    hi_rne = ref_f32_to_f16(a[0]).view(np.float16)
    for x, (hi, lo) in ((a[0], r.parts[0:2]), (b[0], r.parts[2:4])):
        want_hi = ref_f32_to_f16(x, trunc=True).view(np.float16)
        want_lo = ref_f32_to_f16((x - want_hi.astype(np.float32)) * np.float32(2.0**sb), trunc=True)
        rows, cols = x.shape
        assert np.array_equal(hi[0, :rows, :cols].view(np.uint16), want_hi.view(np.uint16))
        assert np.array_equal(lo[0, :rows, :cols].view(np.uint16), want_lo)
    assert not np.array_equal(hi_rne.view(np.uint16), ref_f32_to_f16(a[0], trunc=True))
    r = run(kernels_910a, a, b, sb=sb, tiling=(16, 16, 32, 4), cube=2, vector=2, workdir=tmp_path,
            arithmetic="l0c_to_ub=unsupported")
    assert r.rc == 2 and L0C_TO_UB_FATAL in r.stderr, r.stderr


def test_real_kernels_never_issue_gemv(kernels_910a, tmp_path):
    """M = 1 products (and a K, N of 1) run clean: the kernels pad M to 16, so no Mmad has m = 1 (fatal)."""
    rng = np.random.default_rng(13)
    for m, n, k in ((1, 1, 1), (1, 17, 5), (3, 1, 40)):
        a = rng.standard_normal((1, m, k)).astype(np.float32)
        b = rng.standard_normal((1, k, n)).astype(np.float32)
        for guard in (None, "device"):
            r = run(kernels_910a, a, b, tiling=(16, 16, 16, 1), cube=1, vector=1, workdir=tmp_path, guard=guard)
            assert r.clean, r.stdout + r.stderr
            np.testing.assert_allclose(r.c[0], a[0].astype(np.float64) @ b[0].astype(np.float64), rtol=1e-5,
                                       atol=1e-6)
