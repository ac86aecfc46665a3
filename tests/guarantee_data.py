"""Attack data and the checker for the accuracy guarantee of ``sgemm_cube.matmul``.

Shared by ``tests/sgemm_cube/test_guarantee.py`` (CPU, CI) and
``tests/gpu/test_guarantee_gpu.py`` (CUDA GPU).

The guarantee (default options; backends ``cpu``/``cuda`` with K >= 16,
``auto`` for any K), for float32 inputs A (M x K) and B (K x N)::

    |C - C64| <= 3 * K * 2**-24 * (|A| @ |B|) + K * 2**-149      elementwise

where ``C64`` is the float64 product of the same float32 inputs and ``|A| @ |B|``
is computed in float64.  Where the float64 sum's error could decide whether a
result overflows FP32 (huge terms that cancel), C64 is the exact sum rounded
once to float64 (:func:`references`), so that overflow and its sign below are
the exact product's.  Outputs reached by NaN/Inf inputs equal native FP32's
(NaN where it gives NaN, the same infinity where it gives one); outputs whose
exact value overflows FP32 are the infinity of C64's sign; where native FP32
is finite so is C.

"Native FP32" here is :func:`sequential_fp32`: SGEMM as the textbook defines
it (each product rounded to FP32, added in the order of k, each sum rounded),
computed by the test with NumPy's elementwise float32 arithmetic, so it is the
same on every host.  The host's own BLAS (``np.matmul`` on float32) is not:
its summation order and FMA use differ between kernels (AVX2 and AVX-512
OpenBLAS differ by 2.5x on the same data), so it is only *measured* beside
(``References.native``), never a pass/fail line.  The relative Frobenius error
is also compared with the sequential sum's, ``||C - C64||_F / ||C64||_F <= 2 *
max(fp32_err, 2**-24)``: a measured property (sgemm_cube's split and FP32
accumulation against plain recursive summation), not part of the guarantee.

:data:`GENERATORS` maps a name to ``generator(rng, m, k, n) -> (a, b)``
(C-contiguous float32 arrays of shapes (m, k), (k, n)); every generator
works for any m, k, n >= 1.  :func:`check_guarantee` returns "" when a
result satisfies the guarantee and a readable message (the worst element:
index, values, error, bound, ratio) when it does not.

Seeds: fixed by default (a per-test key from the test's id), so a CI failure
replays as is.  ``SGEMM_CUBE_TEST_SEED=random`` draws a fresh base seed for
the run (conftest.py's, which the header prints); ``SGEMM_CUBE_TEST_SEED=<int>``
replays one (every failure message prints the base seed to use).
"""
from __future__ import annotations

import math
import os
import secrets
import sys
import zlib
from typing import NamedTuple

import numpy as np

__all__ = ["GENERATORS", "FINITE", "SPECIAL", "OVERFLOWING", "U", "OVERFLOW", "UNDERFLOW_UNIT",
           "seed_for", "rng_for", "References", "references", "sequential_fp32", "fp32_matmul", "fp32_autograd_matmul", "check_guarantee", "frobenius_errors",
           "ieee_special_values", "issue_64x64", "half_scaled", "padded_issue_case", "nextafter_2_64",
           "special_case", "overflow_case", "same_bits_any_zero", "OPTIONS", "option_id", "native_overflow_ok",
           "FEW_PRODUCTS", "normwise_claimed",
           "cancelling_huge_terms", "silent_answer_cases", "exact_fp32", "bf16_pair_cases", "fp16_pair_cases"]

U = 2.0 ** -24                            #: FP32 unit roundoff
OVERFLOW = 2.0 ** 128 * (1 - 2.0 ** -25)  #: smallest magnitude that rounds to infinity in FP32
UNDERFLOW_UNIT = 2.0 ** -149              #: smallest FP32 subnormal: the underflow allowance per term


# ---------------------------------------------------------------- seeds


_RANDOM_BASE = []


def _random_base() -> int:
    """One fresh base seed per run: conftest.py's session seed (the one its header prints) when loaded."""
    conftest = sys.modules.get(f"{__package__}.conftest") if __package__ else None
    if conftest is not None and isinstance(getattr(conftest, "SESSION_SEED", None), int):
        return conftest.SESSION_SEED
    if not _RANDOM_BASE:
        _RANDOM_BASE.append(secrets.randbits(32))
    return _RANDOM_BASE[0]


def seed_for(test_id: str) -> tuple[int, int]:
    """``(base, key)``: the base seed (0; ``$SGEMM_CUBE_TEST_SEED``; a fresh one per run when that is
    ``random``) and a key from the test's id (file name and test name with its parameters)."""
    env = os.environ.get("SGEMM_CUBE_TEST_SEED", "").strip()
    if env.lower() == "random":
        base = _random_base()
    elif env:
        base = int(env)
    else:
        base = 0
    file_part, _, name = test_id.partition("::")
    key = zlib.crc32(f"{os.path.basename(file_part)}::{name}".encode())
    return base, key


def rng_for(test_id: str):
    """``(rng, text)``: a generator for this test and a line saying how to replay it."""
    base, key = seed_for(test_id)
    text = f"data seed [{base}, {key}]: replay with SGEMM_CUBE_TEST_SEED={base} pytest '{test_id}'"
    return np.random.default_rng([base, key]), text


# ---------------------------------------------------------------- generators


def _f32(*xs):
    out = tuple(np.ascontiguousarray(np.asarray(x, dtype=np.float64).astype(np.float32)) for x in xs)
    return out if len(out) > 1 else out[0]


def _signs(rng, shape):
    return rng.choice([-1.0, 1.0], shape)


def _normal(rng, m, k, n):
    return rng.standard_normal((m, k)), rng.standard_normal((k, n))


def gen_normal(rng, m, k, n):
    return _f32(*_normal(rng, m, k, n))


def gen_uniform01(rng, m, k, n):
    return _f32(rng.uniform(0, 1, (m, k)), rng.uniform(0, 1, (k, n)))


def _cond(phi):
    """The BF16x9 paper's generator: (rand - 0.5) * exp(phi * randn), for A and for B."""
    def gen(rng, m, k, n):
        return _f32((rng.random((m, k)) - 0.5) * np.exp(phi * rng.standard_normal((m, k))),
                    (rng.random((k, n)) - 0.5) * np.exp(phi * rng.standard_normal((k, n))))
    return gen


def _ill_conditioned(eps):
    """Rows of A nearly orthogonal to the columns of B: A = U V (rank k/2, V orthonormal rows),
    B = (I - V^T V) G + eps * G2, so C64 ~ eps * |A||B| (plus the rounding of B to FP32)."""
    def gen(rng, m, k, n):
        r = max(1, k // 2)
        v = np.linalg.qr(rng.standard_normal((k, r)))[0].T  # (r, k), orthonormal rows
        a = rng.standard_normal((m, r)) @ v
        b = (np.eye(k) - v.T @ v) @ rng.standard_normal((k, n)) + eps * rng.standard_normal((k, n))
        return _f32(a, b)
    return gen


def gen_row_span_120(rng, m, k, n):
    """Every row of A and column of B spans 2**-60 .. 2**61 (random binade per entry)."""
    def side(shape):
        return _signs(rng, shape) * rng.uniform(1, 2, shape) * 2.0 ** rng.integers(-60, 61, shape)
    return _f32(side((m, k)), side((k, n)))


def gen_alt_cols_1e10(rng, m, k, n):
    """A's columns alternate 1 and 1e-10, B's rows 1 and 1e10: every product is O(1) and every
    row of A / column of B spans 33 binades (over the FP16 split's 29)."""
    a, b = _normal(rng, m, k, n)
    a[:, 1::2] *= 1e-10
    b[1::2, :] *= 1e10
    return _f32(a, b)


def gen_one_tiny_per_row(rng, m, k, n):
    """Each row of A holds one entry ~1e-20 in a column that is zero in every other row, and B's
    row there is ~1e20: that term is as large as the others, and B's columns span 66 binades."""
    a, b = _normal(rng, m, k, n)
    cols = rng.integers(0, k, m)
    if k > 1:
        a[:, np.unique(cols)] = 0.0
    a[np.arange(m), cols] = rng.standard_normal(m) * 1e-20
    b[np.unique(cols), :] *= 1e20
    return _f32(a, b)


def gen_one_huge_per_row(rng, m, k, n):
    """Each row of A holds one entry ~1e20 and B's row there is ~1e-20: every term is O(1), but the
    row's other entries sit 66 binades below its largest (and B's columns span as much)."""
    a, b = _normal(rng, m, k, n)
    cols = rng.integers(0, k, m)
    a[np.arange(m), cols] = rng.standard_normal(m) * 1e20
    b[np.unique(cols), :] *= 1e-20
    return _f32(a, b)


def half_scaled(rng, m, k, n, s):
    """The issue's case: A's first k//2 columns and B's last k - k//2 rows times ``s``, so every
    term of C is ~s and every row of A / column of B mixes magnitudes 1 and s."""
    a, b = _normal(rng, m, k, n)
    a[:, : k // 2] *= s
    b[k // 2:, :] *= s
    return _f32(a, b)


def _half_scaled(s):
    return lambda rng, m, k, n: half_scaled(rng, m, k, n, s)


def _scaled(sa, sb):
    def gen(rng, m, k, n):
        a, b = _normal(rng, m, k, n)
        return _f32(a * sa, b * sb)
    return gen


def gen_near_overflow(rng, m, k, n):
    """Entries of A up to ~1.3e19 (2**63.5), of B up to 2**(65.9 - log2(K) / 2) (at most 2**63.9):
    every term is finite (below 2**127.4) but C's spread is ~2**127.8, so about a quarter of the exact
    results overflow FP32, and native FP32's running sums often overflow on the way to results that
    do not (or reach the infinity of the wrong sign)."""
    s = min(65.9 - 0.5 * np.log2(k), 63.9)
    return _f32(rng.uniform(-1, 1, (m, k)) * 2.0 ** 63.5, rng.uniform(-1, 1, (k, n)) * 2.0 ** s)


def gen_overflow_edge(rng, m, k, n):
    """Every entry of A ~2**63.99 and each column of B holds one entry ~2**63.99 (others ~2**40):
    one term per output is within 2% of FP32's largest value; the exact results are finite."""
    big = 2.0 ** 63.99
    a = _signs(rng, (m, k)) * rng.uniform(0.9, 1.0, (m, k)) * big
    b = _signs(rng, (k, n)) * rng.uniform(0.0, 1.0, (k, n)) * 2.0 ** 40
    rows = rng.integers(0, k, n)
    b[rows, np.arange(n)] = _signs(rng, n) * rng.uniform(0.9, 1.0, n) * big
    return _f32(a, b)


def gen_underflow(rng, m, k, n):
    """Entries ~1e-20: every term and C itself ~1e-40, FP32 subnormal."""
    a, b = _normal(rng, m, k, n)
    return _f32(a * 1e-20, b * 1e-20)


def gen_subnormal_rows(rng, m, k, n):
    """A is all FP32 subnormals (~2**-140), B ~2**100: C ~2**-40, normal, from subnormal inputs."""
    a, b = _normal(rng, m, k, n)
    return _f32(a * 2.0 ** -140, b * 2.0 ** 100)


def gen_subnormal_mixed(rng, m, k, n):
    """A quarter of the entries of A and of B replaced by subnormals (down to 2**-149)."""
    a, b = _normal(rng, m, k, n)
    for x in (a, b):
        mask = rng.random(x.shape) < 0.25
        x[mask] = _signs(rng, mask.sum()) * rng.uniform(0, 1, mask.sum()) * 2.0 ** rng.integers(-149, -126, mask.sum())
    return _f32(a, b)


def _put(rng, x, values):
    """Write ``values`` at distinct random positions of x (as many as fit)."""
    flat = x.reshape(-1)
    pos = rng.choice(flat.size, size=min(len(values), flat.size), replace=False)
    flat[pos] = values[: len(pos)]


def gen_nan_inf(rng, m, k, n):
    """Normal data with NaN, +inf and -inf at a few positions of A and of B."""
    a, b = _normal(rng, m, k, n)
    _put(rng, a, [np.nan, np.inf, -np.inf])
    _put(rng, b, [np.inf, np.nan, -np.inf])
    return _f32(a, b)


def gen_inf_zero(rng, m, k, n):
    """+inf in A meets zeros of B (NaN outputs) and nonzeros (+inf/-inf outputs); -inf in B meets a
    zero of A (NaN) and nonzeros."""
    a, b = _normal(rng, m, k, n)
    i, p = rng.integers(0, m), rng.integers(0, k)
    b[p, rng.choice(n, size=max(1, n // 3), replace=False)] = 0.0
    a[i, p] = np.inf
    q, j = rng.integers(0, k), rng.integers(0, n)
    rows = [r for r in range(m) if r != i] or [i]
    a[rng.choice(rows), q] = 0.0
    b[q, j] = -np.inf
    return _f32(a, b)


def gen_inf_opposite(rng, m, k, n):
    """+inf and -inf terms meeting in one output (NaN), and one-signed infinite outputs around them."""
    a, b = _normal(rng, m, k, n)
    if k >= 2:
        i, j = rng.integers(0, m), rng.integers(0, n)
        p, q = rng.choice(k, size=2, replace=False)
        r = rng.integers(0, k)
        b[p, :], b[q, :] = np.abs(b[p, :]) + 0.5, np.abs(b[q, :]) + 0.5
        b[r, j] = np.inf                      # column j: +inf meets a[:, r] of both signs
        a[:, r] = np.where(np.arange(m) % 2 == 0, 1.0, -1.0) * (np.abs(a[:, r]) + 0.5)
        a[i, p], a[i, q] = np.inf, -np.inf    # row i: +inf * b[p, :] + -inf * b[q, :] (both > 0)
    else:
        a[0, 0], b[0, 0] = np.inf, -np.inf
    return _f32(a, b)


def gen_specials_half_scaled(rng, m, k, n):
    """The issue's 1e-10 half-scaled data with NaN/+inf/-inf added: the fix-up and the special-value
    patch on the same rows."""
    a, b = half_scaled(rng, m, k, n, 1e-10)
    a, b = a.copy(), b.copy()
    _put(rng, a, [np.nan, np.inf])
    _put(rng, b, [-np.inf])
    return a, b


def _full_range(rng, lines, k):
    """(lines, k) entries whose exponents run across FP32's whole range (2**-149 .. 2**127) along k, and the
    partners' (k,) exponents that bring each product near 1 (clipped to FP32's range)."""
    e = np.round(np.linspace(-149, 127, k)).astype(np.int64) if k > 1 else np.array([-149])
    mant = np.where(rng.random((lines, k)) < 0.5, -1.0, 1.0) * (1 + rng.random((lines, k)))
    x = np.ldexp(mant, e[None, :]).astype(np.float32)  # the smallest are subnormal, 2**-149 itself among them
    return x, np.clip(-e, -149, 127)


def gen_full_range_rows(rng, m, k, n):
    """Rows of A spanning FP32's whole range, each entry met by a partner in B that brings its product near
    1: a line over ~126 binades used to lose its small entries (scaled below FP32's range in the FP32
    recomputation; 2.8 million times the bound in a fuzz run)."""
    a, eb = _full_range(rng, m, k)
    b = np.ldexp(1 + rng.random((k, n)), eb[:, None]) * np.where(rng.random((k, n)) < 0.5, -1.0, 1.0)
    return a, b.astype(np.float32)


def gen_full_range_cols(rng, m, k, n):
    """Columns of B spanning FP32's whole range, partners in A bringing each product near 1."""
    bt, ea = _full_range(rng, n, k)
    a = np.ldexp(1 + rng.random((m, k)), ea[None, :]) * np.where(rng.random((m, k)) < 0.5, -1.0, 1.0)
    return a.astype(np.float32), np.ascontiguousarray(bt.T)


def gen_special_vs_extremes(rng, m, k, n):
    """NaN, +inf and -inf in A meeting partners at both ends of FP32's range (1e-30, the smallest
    subnormal, 3e38, -2.5e-38) in lines that span ~200 binades: ``inf * 1e-30`` used to come out NaN
    (the partner scaled to 0 in the FP32 fix-up)."""
    a, b = _normal(rng, m, k, n)
    a[0::3, 0], a[1::3, 0] = np.inf, -np.inf
    a[2::3, 0] = 0.5 * np.where(rng.random(len(a[2::3, 0])) < 0.5, -1.0, 1.0)  # finite rows: 3e38 * 0.5 fits
    if m > 2 and k > 1:
        a[2, 1] = np.nan
    b[0, 0::4], b[0, 1::4], b[0, 2::4], b[0, 3::4] = 1e-30, 2.0 ** -149, 3e38, -2.5e-38
    if k > 1:
        b[1, :] = 1e30 * np.where(rng.random(n) < 0.5, -1.0, 1.0)  # the issue's [1e-30, 1e30] columns
    return _f32(a, b)


def gen_wide_cancel(rng, m, k, n):
    """Wide lines on both sides whose outputs cancel or rest on their smallest entries: what the certificate
    of ``scale="rows"`` must catch (``guard.uncertified``).  Entries of random sign scaled by 2**-e, e drawn
    from {0, 20, 40, 60} (most lines reach below the FP16 split's range); rows 0-3 repeat their first half
    against columns 0-3 whose second half negates the first (exact outputs near 0); rows 4-7 keep only the
    entries that meet small ones of B; row 8 is 1 then 2**-40 (1 + 31 * 2**-16) everywhere, against column 4,
    0 then 2**40: output (8, 4) rests on the tiny entries alone, whose split errors (2**-11 each once the row
    is scaled) add up to many times SGEMM's bound where they are not recomputed; rows 9-11 far from 1."""
    a = rng.standard_normal((m, k)) * np.exp2(-rng.choice([0, 20, 40, 60], (m, k)))
    b = rng.standard_normal((k, n)) * np.exp2(-rng.choice([0, 20, 40, 60], (k, n)))
    h = k // 2
    a[:4, h:2 * h] = a[:4, :h]
    b[h:2 * h, :4] = -b[:h, :4]
    a[4:8] = np.where(np.abs(a[4:8]) > 2.0 ** -10, 2.0 ** -50 * a[4:8], a[4:8])
    a[4:8, 0] = 1.0
    b[0, 4:8] *= 2.0 ** -30
    if m > 8 and n > 4:
        a[8] = 2.0 ** -40 * (1 + 31 * 2.0 ** -16)
        a[8, 0] = 1.0
        b[:, 4] = 2.0 ** 40
        b[0, 4] = 0.0
    a[9:12] *= np.exp2(rng.choice([-60, 60], (len(a[9:12]), 1)))
    return _f32(a, b)


#: name -> generator(rng, m, k, n) -> (a float32 (m, k), b float32 (k, n)).
GENERATORS = {
    "normal": gen_normal,
    "uniform01": gen_uniform01,
    "cond_phi0.5": _cond(0.5),
    "cond_phi2": _cond(2.0),
    "cond_phi5": _cond(5.0),
    "ill_conditioned": _ill_conditioned(1e-5),
    "orthogonal": _ill_conditioned(0.0),
    "row_span_120": gen_row_span_120,
    "alt_cols_1e-10": gen_alt_cols_1e10,
    "one_tiny_per_row": gen_one_tiny_per_row,
    "one_huge_per_row": gen_one_huge_per_row,
    "half_scaled_1e-6": _half_scaled(1e-6),
    "half_scaled_1e-10": _half_scaled(1e-10),
    "scale_1e6": _scaled(1e6, 1e6),
    "scale_1e-8": _scaled(1e-8, 1e-8),
    "scale_1e30": _scaled(1e30, 1.0),
    "scale_1e-30": _scaled(1e-30, 1.0),
    "scale_1e30_1e-30": _scaled(1e30, 1e-30),
    "near_overflow": gen_near_overflow,
    "overflow_edge": gen_overflow_edge,
    "underflow": gen_underflow,
    "subnormal_rows": gen_subnormal_rows,
    "subnormal_mixed": gen_subnormal_mixed,
    "nan_inf": gen_nan_inf,
    "inf_zero": gen_inf_zero,
    "inf_opposite": gen_inf_opposite,
    "specials_half_scaled": gen_specials_half_scaled,
    "full_range_rows": gen_full_range_rows,
    "full_range_cols": gen_full_range_cols,
    "special_vs_extremes": gen_special_vs_extremes,
    "wide_cancel": gen_wide_cancel,
}

#: Generators with NaN/Inf inputs.
SPECIAL = ("nan_inf", "inf_zero", "inf_opposite", "specials_half_scaled", "special_vs_extremes")
#: Finite generators some of whose exact results overflow FP32.
OVERFLOWING = ("near_overflow",)
#: Finite generators whose exact results (and native FP32's) are all finite.
FINITE = tuple(g for g in GENERATORS if g not in SPECIAL and g not in OVERFLOWING)


def issue_64x64(rng, s=1e-10, size=64):
    """The issue's case: 64x64 normal data, half of A's columns and half of B's rows times s
    (native FP32: ~1.3e-7 relative error; the old default: ~5e-2 with s=1e-10)."""
    return half_scaled(rng, size, size, size, s)


def padded_issue_case(k=16):
    """The issue's ``a=[[1, 1e-6]], b=[[1e-6], [1]]``, padded with zeros to K=k."""
    a = np.zeros((1, k), np.float32)
    b = np.zeros((k, 1), np.float32)
    a[0, :2] = [1.0, 1e-6]
    b[:2, 0] = [1e-6, 1.0]
    return a, b


def nextafter_2_64(k=1):
    """``a = b = [[nextafter(2**64, 0)]]`` (product 2**128 (1 - 2**-23 + 2**-48): finite in FP32),
    padded with zeros to K=k."""
    x = np.nextafter(np.float32(2.0 ** 64), np.float32(0))
    a = np.zeros((1, k), np.float32)
    b = np.zeros((k, 1), np.float32)
    a[0, 0] = b[0, 0] = x
    return a, b


def special_case():
    """Hand-made K=16 operands with every special-value pattern, and the expected masks
    ``{"isnan": ..., "isposinf": ..., "isneginf": ...}`` of the (5, 6) product, listed by hand."""
    a = np.full((5, 16), 0.5, np.float32) + np.arange(16, dtype=np.float32) / 64
    b = np.full((16, 6), 0.25, np.float32) + np.arange(6, dtype=np.float32)[None, :] / 32
    b[0, :] = [0.0, 2.0, -1.0, 3.0, 1.0, 1.0]
    a[0, 0] = np.inf                      # row 0: +inf meets b[0, :]: NaN, +inf, -inf, +inf, ...
    a[1, 1], a[1, 2] = np.inf, -np.inf    # row 1: +inf and -inf terms (b[1, :], b[2, :] > 0): NaN
    a[2, 3] = np.nan                      # row 2: NaN
    b[5, 4] = -np.inf                     # column 4: -inf meets a[:, 5] > 0 (-inf), and
    a[3, 5] = 0.0                         #   0 at row 3 (NaN), +inf of a[0, 0] at row 0 (NaN)
    b[6, 5] = np.nan                      # column 5: NaN
    a[4, 7] = 1e30                        # row 4: finite, beyond the FP16 split's range
    nan = np.zeros((5, 6), bool)
    nan[0, 0] = nan[0, 4] = nan[3, 4] = True
    nan[1, :] = nan[2, :] = nan[:, 5] = True
    posinf = np.zeros((5, 6), bool)
    posinf[0, 1] = posinf[0, 3] = True
    neginf = np.zeros((5, 6), bool)
    neginf[0, 2] = neginf[4, 4] = True
    return a, b, {"isnan": nan, "isposinf": posinf, "isneginf": neginf}


def overflow_case():
    """K=16, x = 2**63.75: C[0] = (2x^2, -2x^2, 2x^2) overflows (+inf, -inf, +inf); C[1] = x^2 - x^2 = 0;
    C[2] = +-x^2 (1 + 2**-40) ~ 2**127.5, finite."""
    x = np.float32(2.0 ** 63.75)
    a = np.zeros((3, 16), np.float32)
    b = np.zeros((16, 3), np.float32)
    a[0, :2] = [x, x]
    a[1, :2] = [x, -x]
    a[2, :2] = [x, x * np.float32(2.0 ** -40)]
    b[:2, 0] = [x, x]
    b[:2, 1] = [-x, -x]
    b[:2, 2] = [x, x]
    return a, b



# ---------------------------------------------------------------- huge terms that cancel (issue 33)
#
# Not in GENERATORS: every backend must meet the guarantee on those, and the NPU's fix-up is native FP32
# by design (cpu_fallback/guard.py), whose running sums overflow to NaN here (85 of 192 outputs of a
# 16 x 48 x 12 draw failed the overflow clause in the dry-run model of check_on_npu.py).  The CPU model
# and the CUDA kernels round every such output exactly (tests/cpu_fallback/test_fixup_exact.py,
# tests/sgemm_cube/backends/cuda/test_fixup_exact_cuda.py, tests/gpu/test_fixup_exact_gpu.py).


def cancelling_huge_terms(rng, m, k, n):
    """Finite (m, k) @ (k, n) float32 data whose outputs hold pairs of huge terms that cancel exactly
    (``+h b_p - h b_q`` with ``b_p = b_q``, ``|h|`` up to FP32's largest value and ``b ~ 1e25``: terms
    ~1e63) around a few terms ~1e38, so that the exact results lie near FP32's overflow threshold, finite
    or beyond it (about half each).  A float64 sum absorbs the ~1e38 terms into the ~1e63 ones (where
    they fall between a pair in its order) and can return anything from 0 to the wrong infinity; native
    FP32's products overflow (NaN).  Every column of B is a fix-up line (its ~1e25 and ~1 entries span
    about 83 binades); the rows of A are scaled and split, so every output is the fix-up's.  Every row of A
    holds a zero (from k = 2), so the columns are not emulated beside them (``guard.fp16_rule``: an FP16
    line spanning 83 binades is emulated beside partners holding no zero).  Works for any m, k, n >= 1
    (pairs from k = 4).

    Without the ~1 entries a column is scaled and split instead, and the emulated sum of the scaled
    products errs by up to about ``K 2**-24 |A||B|`` (~2**190 here) before unscaling: a 70 x 96 x 150 draw
    with three such columns had given 14 infinite outputs of exact zeros on the CPU model, 36 on the CUDA
    kernels under the interpreter, 34 on an H100.  Such outputs are now computed again where they overflow
    (:func:`emulated_overflow_cases` tests that); this generator keeps every output a fix-up output."""
    fmax = float(np.finfo(np.float32).max)
    pairs = min(k // 4, 4)
    pos = rng.permutation(k)
    a, b = np.zeros((m, k)), np.zeros((k, n))
    for p, q in pos[:2 * pairs].reshape(-1, 2):
        h = _signs(rng, m) * rng.uniform(0.3, 1.0, m) * fmax
        a[:, p], a[:, q] = h, -h
        b[p, :] = b[q, :] = rng.uniform(0.5, 2.0, n) * 1e25
    rest = pos[2 * pairs:]
    a[:, rest] = _signs(rng, (m, rest.size)) * rng.uniform(0.2, 1.0, (m, rest.size)) * fmax
    if pairs or rest.size > 1:
        a[:, pos[-1]] = 0  # a zero in every row
    # about four terms ~1e38 per output (exact results around FP32's largest value), at least one per column:
    # a column of only the ~1e25 entries would not be a fix-up line but scaled and split (see below)
    used = rng.random((rest.size, n)) < min(1.0, 4.0 / max(1, rest.size))
    if rest.size:
        used[rng.integers(0, max(1, rest.size - 1), n), np.arange(n)] = True  # not the zero's k (from 2)
    b[rest, :] = np.where(used, _signs(rng, (rest.size, n)) * rng.uniform(0.3, 2.0, (rest.size, n)), 0.0)
    return _f32(a, b)


def emulated_overflow_cases(rng):
    """``[(name, a, b)]``: emulated (scaled and split, not fixed up) lines whose products overflow FP32.

    "cancelling": :func:`cancelling_huge_terms`' rows against one column of only its ~1e25 entries
    (64 x 96 x 1): every exact output is 0 (the pairs cancel), native FP32 NaN, and the emulated sum
    errs by up to ~2**190 before unscaling, so it overflows in places (6 of these 64 outputs had come out
    infinite).  "certain": rows of 1e20..1.5e20 against columns of +-(1e19..1.5e19) (20 x 64 x 6, one
    binade each, so scaled and split): every exact output overflows, by far more than the emulation's
    error, to the infinity of its column's sign."""
    a, b = cancelling_huge_terms(rng, 64, 96, 4)
    b = np.where(np.abs(b[:, :1]) >= 1e20, b[:, :1], np.float32(0))
    big_a = (rng.uniform(1.0, 1.5, (20, 64)) * 1e20).astype(np.float32)
    big_b = (rng.uniform(1.0, 1.5, (64, 6)) * 1e19 * np.array([1, -1, 1, -1, 1, -1])).astype(np.float32)
    return [("cancelling", a, b), ("certain", big_a, big_b)]


def check_emulated_overflow(name, c, a, b) -> str:
    """"" if ``c`` (``a @ b`` of :func:`emulated_overflow_cases`) is right, else what is wrong: the
    guarantee holds, no output is infinite where the exact one is finite, and the cases keep their point
    (some "cancelling" output overflowed and was computed again: it is the exact 0; every "certain" one is
    the exact infinity)."""
    exact = exact_fp32(a, b)
    if msg := check_guarantee(c, a, b):
        return f"{name}: {msg}"
    wrong = np.isinf(c) & np.isfinite(exact)
    if wrong.any():
        return f"{name}: {int(wrong.sum())} finite exact results came out infinite"
    if name == "cancelling" and not (c == 0).any():
        return "cancelling: no output was computed again (the data no longer test the overflow check)"
    if name == "certain" and not (np.isinf(exact).all() and np.array_equal(c, exact)):
        return "certain: not every output is the exact infinity"
    return ""


def bf16_pair_cases(rng):
    """``[(name, a, b, rows_listed, cols_listed)]``: BF16 lines spanning more than 99 binades (issue 33), and
    which lines the BF16 schemes must list (boolean per row of ``a``, per column of ``b``).

    A line is emulated down to ``2**-103`` below its scaled top (``2**49``) only where every product with
    the other operand's emulated lines stays at or above ``2**-100`` (``guard.bf16_rule``):

    * "wide rows": rows of 2**100 .. 2**-40 (140 binades) against normal columns (24 x 64 x 10): nothing
      listed;
    * "wide columns": the same transposed: nothing listed;
    * "wide rows, a low column": column 0 spans 94 binades (2**10 .. 2**-84), and its lowest entry meets
      the rows' lowest ones: ``c[i, 0]`` is ``a[i, 1] * b[1, 0]`` alone, about 2**-124, and 2**-136 once
      both are scaled (a subnormal product); so the rows may reach only 55 binades below their top and
      are listed (computed exactly);
    * "both wide": rows spanning 140, half the columns 120 (the rows' fraction of wide lines is larger,
      so the rows keep theirs and those columns are listed);
    * "very wide rows": rows of 2**100 .. 2**-90 (190 binades, below what three BF16 slices hold once
      scaled) against normal columns, none holding a zero: every row is emulated (the entries lost are
      too small beside each output's largest term to matter);
    * "very wide rows, a zero": the same with a column holding zeros (one nonzero entry, which meets the
      rows' lowest: ``c[:, 3]`` is ``very[:, 1]``, 2**-141 once scaled, which BF16 slices lose): that
      column is listed (computed exactly), the rows are not;
    * "half very wide, zeros everywhere": every column holds a zero, and half the rows span 190 binades,
      the others 140: listing every column would cost more than listing the rows that reach below what
      the slices hold, so those are listed (the others stay, beside the columns' lowest binade).
    """
    m, k, n = 24, 64, 10
    a = (rng.uniform(1, 2, (m, k)) * 2.0 ** -rng.integers(0, 140, (m, k))).astype(np.float64)
    a[:, 0], a[:, 1] = 1.5, 1.5 * 2.0 ** -140
    a = (a * 2.0 ** 100 * _signs(rng, (m, k))).astype(np.float32)  # 2**100 .. 2**-40
    b = rng.standard_normal((k, n)).astype(np.float32)
    no_rows, no_cols = np.zeros(m, bool), np.zeros(n, bool)
    low = b.copy()
    low[:, 0] = 0
    low[1, 0], low[2, 0] = np.float32(2.0 ** -84), 2.0 ** 10  # a[:, 2] is 0: c[:, 0] is a[:, 1] * 2**-84
    a_low = a.copy()
    a_low[:, 2] = 0
    both = b.copy()
    both[:, ::2] *= (2.0 ** -rng.integers(0, 120, (k, 1))).astype(np.float32)
    both[0, ::2], both[1, ::2] = 1.0, np.float32(2.0 ** -120)
    half = np.arange(n) % 2 == 0
    very = (rng.uniform(1, 2, (m, k)) * 2.0 ** -rng.integers(0, 190, (m, k))).astype(np.float64)
    very[:, 0], very[:, 1] = 1.5, 1.5 * 2.0 ** -190
    very = (very * 2.0 ** 100 * _signs(rng, (m, k))).astype(np.float32)
    holed = b.copy()
    holed[:, 3] = 0
    holed[1, 3] = 1  # c[:, 3] is very[:, 1] alone, 2**-90
    half_very = np.where((np.arange(m) % 2 == 0)[:, None], very, a)
    zeros = b.copy()
    zeros[7, :] = 0
    return [("wide rows", a, b, no_rows, no_cols),
            ("wide columns", np.ascontiguousarray(b.T), np.ascontiguousarray(a.T), no_cols, no_rows),
            ("wide rows, a low column", a_low, low, ~no_rows, no_cols),
            ("both wide", a, both, no_rows, half),
            ("very wide rows", very, b, no_rows, no_cols),
            ("very wide rows, a zero", very, holed, no_rows, np.arange(n) == 3),
            ("half very wide, zeros everywhere", half_very, zeros, np.arange(m) % 2 == 0, no_cols)]


def fp16_pair_cases(rng):
    """``[(name, a, b, rows_listed, cols_listed)]``: FP16 lines reaching below the split's range beside
    partners that let them be emulated (``guard.fp16_rule``), and which lines fp16x3 must list (boolean per
    row of ``a``, per column of ``b``).  24 x 64 x 10; the rows are polynomial features ``x**p``,
    p = 0..63, x or 1/x uniform in [1.4, 2) (31-63 binades within a row: every row wide), the columns
    random normal:

    * "wide rows": nothing listed (every column is tight: no zero, its nonzero entries within 23 binades);
    * "wide columns": the same transposed: nothing listed;
    * "tight at the limit": column 7 spans exactly 23 binades (floor(log2) 0 and -22): its entries are
      +-1.5 * 2**-22 but for +-1 at p = 0..3, so the rows growing with p meet it with their largest entries
      at its smallest and their entries below the split's range (p <= 2) at its largest, the ratio the rule
      allows: nothing listed, and the guarantee holds there;
    * "a zero and a wide span": column 3 holds a zero, column 6 spans 24 binades: both listed (computed
      exactly), the rows are not;
    * "zeros everywhere": every column holds a zero and half the rows are wide: listing every column
      would cost more than listing those rows, so they are listed, as without the rule.
    """
    m, k, n = 24, 64, 10
    x = rng.uniform(1.4, 2.0, (m, 1)) ** np.where(rng.random((m, 1)) < 0.5, -1.0, 1.0)
    a = (x ** np.arange(k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    b = np.where(np.abs(b) < 2.0 ** -8, np.float32(0.5), b)  # random columns within 12 binades, no zero
    none_rows, none_cols = np.zeros(m, bool), np.zeros(n, bool)
    limit = b.copy()
    limit[:, 7] = (1.5 * 2.0 ** -22 * _signs(rng, k)).astype(np.float32)
    limit[:4, 7] = _signs(rng, 4)
    loose = b.copy()
    loose[5, 3] = 0
    loose[0, 6], loose[1, 6] = np.float32(1.5), np.float32(1.5 * 2.0 ** -23)
    zeros = b.copy()
    zeros[9, :] = 0
    half = a.copy()
    half[1::2] = rng.uniform(1, 2, (m // 2, k)).astype(np.float32)  # narrow rows
    return [("wide rows", a, b, none_rows, none_cols),
            ("wide columns", np.ascontiguousarray(b.T), np.ascontiguousarray(a.T), none_cols, none_rows),
            ("tight at the limit", a, limit, none_rows, none_cols),
            ("a zero and a wide span", a, loose, none_rows, np.isin(np.arange(n), (3, 6))),
            ("zeros everywhere", half, zeros, np.arange(m) % 2 == 0, none_cols)]


def unscale_cases(rng):
    """``[(name, a, b)]``: products whose scaled sums are exact, so that the one rounding of the unscaling is
    the output's only one and every backend must give ``exact_fp32(a, b)`` bit for bit.  8 x 16 x 8; each
    row of ``a`` is ``2**top`` at k = 0 and integers 1..7 times ``2**low`` elsewhere (scaled, the row's
    entries are FP16 integers), the columns of ``b`` odd multiples of 1/32 under a zero at k = 0, or
    integers 1..31.  The unscaling factor ``2**-(t_a + t_b)`` of each case:

    * "subnormal factor, subnormal outputs": 2**-149 (t_a = 149), every output subnormal and rounded: an
      FP32 multiply that flushed subnormals would give zeros;
    * "subnormal factor, outputs around 2**-126": 2**-142, outputs on both sides of FP32's smallest normal;
    * "factor below FP32's range": 2**-154, outputs subnormal;
    * "huge rows, normal outputs": 2**78;
    * "rows up, columns down": 2**-83 (t_a = 113, t_b = -30);
    * "near overflow, some beyond": 2**106, outputs up to 2**131 (the infinity of their sign).
    """
    m, k, n = 8, 16, 8

    def ints(shape, top):
        return rng.integers(1, top + 1, shape) * _signs(rng, shape)

    def rows(top, low):
        a = ints((m, k), 7) * 2.0 ** low
        a[:, 0] = 2.0 ** top
        return a.astype(np.float32)

    fractions = (2 * ints((k, n), 15) - _signs(rng, (k, n))) / 32.0  # odd multiples of 1/32
    fractions[0] = 0
    fractions = fractions.astype(np.float32)
    integers = ints((k, n), 31).astype(np.float32)
    beyond_a, beyond_b = rows(120, 118), integers.copy()
    beyond_a[0] = np.abs(beyond_a[0]) * 2
    beyond_b[:, 0] = 31  # 16 * 7 * 31 * 2**119 = 2**130.8 at (0, 0)
    return [("subnormal factor, subnormal outputs", rows(-135, -149), fractions),
            ("subnormal factor, outputs around 2**-126", rows(-128, -135), integers),
            ("factor below FP32's range", rows(-140, -149), fractions),
            ("huge rows, normal outputs", rows(92, 80), fractions),
            ("rows up, columns down", rows(-99, -110), integers * np.float32(2.0 ** 40)),
            ("near overflow, some beyond", beyond_a, beyond_b)]


def silent_answer_cases():
    """Issue 33's two silent answers, ``[(name, a, b, exact)]`` with ``exact`` the float32 rounding of the
    exact product (1 x 1).  "finite came out -inf" (K = 31): exact 2.0057e38, the float64 sum
    -4.5e38 (rounds to -inf), native FP32 NaN.  "overflow under cancellation" (K = 48): exact 4.04e38
    (+inf in FP32), the float64 sum 0.0, native FP32 NaN."""
    a1, b1 = np.zeros((1, 31), np.float32), np.zeros((31, 1), np.float32)
    at = [3, 4, 9, 25, 27]
    a1[0, at] = [3.4028234663852886e38, 3.4028234663852886e38, -3.4028234663852886e38, -3.0000000054977558e38,
                 3.0000000054977558e38]
    b1[at, 0] = [1.912714958190918, 9.999999562023526e24, 9.999999562023526e24, 0.3853287398815155,
                 -1.1156480312347412]
    a2, b2 = np.zeros((1, 48), np.float32), np.zeros((48, 1), np.float32)
    a2[0, [0, 16, 32]] = [-3.4028235e38, 1.7e38, -1.7e38]
    b2[[0, 16, 32], 0] = [-1.1858058, 1e25, 1e25]
    return [("finite came out -inf", a1, b1, exact_fp32(a1, b1)),
            ("overflow under cancellation", a2, b2, exact_fp32(a2, b2))]


def _fp32_as_int(x: float):
    """Finite float32 value ``x`` as ``(m, e)``: ``x == m * 2**e`` with an integer ``m`` (|m| < 2**24)."""
    if x == 0:
        return 0, 0
    f, e = math.frexp(x)
    return int(f * (1 << 24)), e - 24


def same_bits_any_nan(x, y) -> bool:
    """Equal bit for bit, except that every NaN equals every NaN, at the same places.  IEEE 754 leaves the sign
    and payload of an arithmetic NaN open: x86 gives inf - inf a negative NaN, ARM a positive one, and where an
    output meets two NaNs (inf - inf beside a NaN operand) the order of the adds decides which one it keeps,
    which two models of one computation need not share (nor a compiler that swaps a commutative add)."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    if x.shape != y.shape:
        return False
    nx, ny = np.isnan(x), np.isnan(y)
    return bool(np.array_equal(nx, ny) and np.array_equal(x[~nx].view(np.int32), y[~ny].view(np.int32)))


def same_bits_any_zero(x, y) -> bool:
    """Equal bit for bit, except that +0 equals -0 (the sign of an exact zero is not claimed)."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return x.shape == y.shape and bool(np.all((x.view(np.int32) == y.view(np.int32)) | ((x == 0) & (y == 0))))


def exact_fp32(a, b, alpha=1.0) -> np.ndarray:
    """``alpha * (a @ b)`` for finite float32 2-D ``a``, ``b`` (and float32 ``alpha``): each output's exact
    value (Python integers) rounded once to float32, to nearest, ties to even; beyond FP32's range the
    infinity of its sign.  Slow (pure Python): for a few hundred outputs."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert np.isfinite(a).all() and np.isfinite(b).all()
    ma, ea = _fp32_as_int(float(np.float32(alpha)))
    xs = [[_fp32_as_int(float(v)) for v in row] for row in a]
    ys = [[_fp32_as_int(float(v)) for v in col] for col in b.T]
    out = np.empty((a.shape[0], b.shape[1]), np.float32)
    base = 2 * 172  # products are multiples of 2**-344 (each factor of 2**-172 at least, as _fp32_as_int writes it)
    for i, x in enumerate(xs):
        for j, y in enumerate(ys):
            total = sum((mx * my) << (ex + ey + base) for (mx, ex), (my, ey) in zip(x, y) if mx and my)
            out[i, j] = _round_int_fp32(total * ma, ea - base)
    return out


def _round_int_fp32(w: int, e: int) -> np.float32:
    """``w * 2**e`` rounded once to float32 (nearest, ties to even; the infinity beyond FP32's range)."""
    sign, w = (-1.0 if w < 0 else 1.0), abs(w)
    if w == 0:
        return np.float32(0.0)
    q = max(w.bit_length() - 1 + e - 23, -149)  # the quantum: 24 bits, or the subnormals' 2**-149
    if q <= e:
        m = w << (e - q)
    else:
        m, rem = divmod(w, 1 << (q - e))
        half = 1 << (q - e - 1)
        m += rem > half or (rem == half and m % 2 == 1)
    if m.bit_length() - 1 + q >= 128:  # m * 2**q >= 2**128 (rounding may have carried m to 2**24)
        return np.float32(sign * np.inf)
    return np.float32(sign * math.ldexp(m, q))


#: Options under which the guarantee holds (one at a time, and a few combinations).
OPTIONS = [
    dict(scale="auto"), dict(scale="rows"), dict(scale="matrix"), dict(scale=None),
    dict(order="elementwise"), dict(scheme="fp16x4"), dict(scheme="bf16x9"),
    dict(scheme="bf16x6"), dict(scheme="auto"), dict(sb=0), dict(sb=6), dict(sb=11),
    dict(scheme="bf16x9", scale="rows", order="elementwise"), dict(scale=None, sb=0),
    dict(scheme="fp16x4", scale="matrix", sb=6),
]


def option_id(opts):
    return "-".join(f"{k}={v}" for k, v in opts.items())


#: Attacks whose outputs rest on a few products of lines wider than the FP16 split holds (row_span_120: every
#: entry in a random binade of 120; cond_phi5; wide_cancel's rows at 2**+-60).  Two products do not keep the
#: measured normwise property there (docs/guarantee.md, "Certified outputs"), while the componentwise guarantee
#: holds: the certified product (``scale="rows"``, FP16 schemes: ``guard.certifies``), which emulates those
#: lines, so that the split's 22 bits per operand, not the summation, set the error (as on Vandermonde features
#: under the default); and the BF16 schemes in ``order="elementwise"``, whose slice products share one FP32
#: accumulator, so that a dominant product carries their roundings (bf16x9 under ``scale="rows"``: cond_phi5
#: and wide_cancel failed it in 2 and 4 of 100 draws, up to 2.8x native's; termwise bf16x9 at most 1.6x).
FEW_PRODUCTS = ("row_span_120", "cond_phi5", "wide_cancel")


def normwise_claimed(opts, gen):
    """Whether :func:`check_guarantee`'s Frobenius comparison with native FP32 (a measured property) is claimed
    for generator ``gen`` under ``opts``: not for :data:`FEW_PRODUCTS` under the certified product or a BF16
    scheme's elementwise order."""
    from sgemm_cube.cpu_fallback.guard import certifies

    scheme = opts.get("scheme", "auto")
    certified = certifies("fp16x3" if scheme == "auto" else scheme, opts.get("scale", "auto"), opts.get("fixup", True))
    bf16_elementwise = opts.get("order") == "elementwise" and opts.get("scheme") in ("bf16x9", "bf16x6")
    return not ((certified or bf16_elementwise) and gen in FEW_PRODUCTS)


def native_overflow_ok(opts):
    """Whether, under these options, rows beyond the split's range may run in native FP32 (scale=None),
    whose running sums can reach the infinity of the wrong sign where the exact result overflows."""
    return "scale" in opts and opts["scale"] is None


# ---------------------------------------------------------------- the check


def _np(x):
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # a torch tensor, on any device
        return x.detach().cpu().numpy()
    return np.asarray(x)


def sequential_fp32(a, b) -> np.ndarray:
    """``a @ b`` in FP32 by recursive summation, the same bits on every host.

    For each output: ``acc = 0; for k: acc = fl(acc + fl(a[i, k] * b[k, j]))`` --
    NumPy's elementwise float32 multiply and add, each correctly rounded
    (IEEE), never fused; NaN and infinities as IEEE arithmetic gives them.
    Its error bound is SGEMM's textbook one, ``K * 2**-24 * |A||B|``.
    """
    a, b = _np(a), _np(b)
    acc = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.float32)
    with np.errstate(all="ignore"):
        for p in range(a.shape[-1]):
            acc += a[..., :, p, None] * b[..., None, p, :]
    return acc


def fp32_matmul(a, b):
    """:func:`sequential_fp32` with :func:`numpy.matmul`'s shapes (1-D operands, broadcast batches), for NumPy
    arrays or torch CPU tensors (the result of the same kind): native FP32 the same on every host, the
    baseline of the tests' accuracy comparisons (``np.matmul`` / ``torch.matmul`` on float32 are this host's
    BLAS, whose rounding differs between CPUs)."""
    is_torch = hasattr(a, "detach")
    x, y = _np(a).astype(np.float32), _np(b).astype(np.float32)
    x2 = x[None, :] if x.ndim == 1 else x
    y2 = y[:, None] if y.ndim == 1 else y
    c = sequential_fp32(x2, y2)
    if y.ndim == 1:
        c = c[..., 0]
    if x.ndim == 1:
        c = c[..., 0, :] if y.ndim > 1 else c[..., 0]
    if is_torch:
        import torch

        return torch.from_numpy(np.ascontiguousarray(c))
    return c


def fp32_autograd_matmul(a, b):
    """:func:`fp32_matmul` of torch tensors, differentiable (double backward too): gradients by the same
    sequential FP32 products, through sgemm_cube's own gradient formula (:mod:`sgemm_cube._autograd`).
    Native FP32 the same on every host, for composites (networks, gradients) that call ``torch.matmul``."""
    import torch

    from sgemm_cube._autograd import gradient_operands, gradients

    class _Product(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return fp32_matmul(x, y).to(x.dtype)

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            pair_x, pair_y = gradient_operands(x, y, grad, *ctx.needs_input_grad[:2])
            return gradients(x, y, None if pair_x is None else fp32_autograd_matmul(*pair_x),
                             None if pair_y is None else fp32_autograd_matmul(*pair_y))

    return _Product.apply(a, b)


class References(NamedTuple):
    c64: np.ndarray        #: float64 product of the inputs, NaN/Inf inputs read as 0 (exact near overflow)
    absab: np.ndarray      #: |A| @ |B| in float64, NaN/Inf inputs read as 0
    fp32: np.ndarray       #: sequential_fp32: native FP32 the same on every host (the checks' reference)
    native: np.ndarray     #: this host's np.matmul in float32: measured beside, never a pass/fail line
    finite_in: np.ndarray  #: outputs whose row of A and column of B are all finite
    k: int


def references(a, b) -> References:
    """The float64 product, |A| @ |B|, FP32 by sequential sums and by this host's BLAS, and the finite-input
    mask for a, b."""
    a, b = _np(a), _np(b)
    assert a.dtype == np.float32 and b.dtype == np.float32, (a.dtype, b.dtype)
    fa, fb = np.isfinite(a), np.isfinite(b)
    a0 = np.where(fa, a, 0).astype(np.float64)
    b0 = np.where(fb, b, 0).astype(np.float64)
    with np.errstate(all="ignore"):
        native = np.matmul(a, b)
    finite_in = fa.all(axis=-1)[..., :, None] & fb.all(axis=-2)[..., None, :]
    c64, absab = np.matmul(a0, b0), np.matmul(np.abs(a0), np.abs(b0))
    _exact_near_overflow(c64, absab, a0, b0)
    return References(c64, absab, sequential_fp32(a, b), native, np.broadcast_to(finite_in, native.shape),
                      a.shape[-1])


def _exact_near_overflow(c64, absab, a0, b0) -> None:
    """C64 made exact where it decides overflow: outputs whose float64 sum is within its error bound
    (``K 2**-53 |A| @ |B|`` in any summation order; four times that here) of FP32's overflow threshold -- huge terms
    that cancel, where the sum can even change sign -- get the exact sum rounded once to float64
    (``math.fsum`` of the exact products), in place.  So which exact results overflow, and their
    signs, are the exact product's, and a result rounded from the exact product passes the checks."""
    if c64.ndim < 2:
        return
    k = a0.shape[-1]
    with np.errstate(invalid="ignore"):
        unsure = np.abs(np.abs(c64) - OVERFLOW) <= absab * (k * 2.0 ** -51)
    if not unsure.any():
        return
    a_b = np.broadcast_to(a0, c64.shape[:-2] + a0.shape[-2:])
    b_b = np.broadcast_to(b0, c64.shape[:-2] + b0.shape[-2:])
    for idx in zip(*np.nonzero(unsure)):
        *batch, i, j = idx
        c64[idx] = math.fsum((a_b[(*batch, i)] * b_b[(*batch, slice(None), j)]).tolist())


def ieee_special_values(a, b) -> np.ndarray:
    """The product by explicit float64 terms and sums (IEEE: inf*0 = NaN, inf - inf = NaN), for small
    shapes: an independent reference for which outputs native FP32 makes NaN or infinite."""
    a, b = _np(a).astype(np.float64), _np(b).astype(np.float64)
    with np.errstate(all="ignore"):
        return (a[..., :, :, None] * b[..., None, :, :]).sum(axis=-2)


def _fmt_index(idx):
    return "(" + ", ".join(str(int(i)) for i in idx) + ")"


def _masks(c, r: References):
    err = np.abs(c.astype(np.float64) - r.c64)
    return err, np.abs(r.c64) >= OVERFLOW, np.isfinite(r.fp32)


def check_guarantee(c, a, b, *, c_factor=3.0, frobenius=True, frobenius_factor=2.0, refs=None,
                    native_overflow_ok=False) -> str:
    """"" if ``c`` satisfies the guarantee for ``a @ b``, else a message naming the worst element.

    "Native" is :func:`sequential_fp32` (the same on every host; the host's BLAS is
    only printed beside it).  Elementwise (``bound = c_factor * K * 2**-24 * (|A| @ |B|) + K * 2**-149``):

    * outputs reached by NaN/Inf inputs: exactly native FP32's NaN / +inf / -inf;
    * finite inputs, native finite, ``|C64| < OVERFLOW``: finite and ``|C - C64| <= bound``;
    * finite inputs, ``|C64| >= OVERFLOW``: the infinity of C64's sign, or a finite value within
      the bound (possible only where C64 lies within the bound of the overflow threshold: an
      answer as accurate as the bound allows may land on either side of it, native's too --
      measured on an H100, C64 = -3.4028240e38 gave -FLT_MAX with error 2e-7 relative);
    * finite inputs, ``|C64| < OVERFLOW`` but native overflowed (an intermediate sum did):
      within the bound, or native's own value.

    ``native_overflow_ok``: on outputs whose exact value overflows, also accept native FP32's own
    value or any infinity (a running sum can reach the infinity of the wrong sign, and which one
    depends on the summation order): for checking native FP32 itself, or computations the spec
    lets run natively.

    Frobenius (when ``frobenius``), over the outputs of the second kind:
    ``||C - C64|| / ||C64|| <= frobenius_factor * max(fp32_err, 2**-24)`` with ``fp32_err``
    :func:`sequential_fp32`'s (a measured property, not the guarantee), skipped when
    ``||C64|| == 0``.  ``refs``: :func:`references` of a, b if already computed.
    """
    r = refs if refs is not None else references(a, b)
    c = _np(c)
    if c.dtype != np.float32 or c.shape != r.fp32.shape:
        return f"result has dtype {c.dtype} and shape {c.shape}; expected float32 {r.fp32.shape}"
    k = r.k
    bound = c_factor * k * U * r.absab + k * UNDERFLOW_UNIT
    err, exact_ovf, nat_fin = _masks(c, r)
    c_nan, nat_nan = np.isnan(c), np.isnan(r.fp32)
    same_native = (c == r.fp32) | (c_nan & nat_nan)
    with np.errstate(invalid="ignore"):
        ok_fin = np.isfinite(c) & (err <= bound)
        ok_inf = c == np.copysign(np.inf, r.c64)
    fin = r.finite_in
    case_special = ~fin
    case_normal = fin & nat_fin & ~exact_ovf
    case_ovf = fin & ~nat_fin & exact_ovf
    case_ovf_nat_fin = fin & nat_fin & exact_ovf
    case_nat_ovf = fin & ~nat_fin & ~exact_ovf
    # native_overflow_ok: where the exact value overflows, any infinity (a native FP32 sum in another order
    # or shape than the reference's can reach either one)
    ok = np.select([case_special, case_normal, case_ovf, case_ovf_nat_fin, case_nat_ovf],
                   [same_native, ok_fin, ok_fin | ok_inf | (native_overflow_ok & (same_native | np.isinf(c))),
                    ok_fin | ok_inf, ok_fin | same_native], default=False)
    lines = []
    if not ok.all():
        with np.errstate(all="ignore"):
            ratio = np.where(np.isfinite(c), err / bound, np.inf)
        ratio = np.where(ok, -1.0, np.where(np.isnan(ratio), np.inf, ratio))
        worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        expect = ("native FP32's special value" if case_special[worst] else
                  "finite, within the bound" if case_normal[worst] else
                  "the infinity of C64's sign, or finite within the bound (exact result overflows)"
                  if case_ovf[worst] else
                  "within the bound or the infinity of C64's sign" if case_ovf_nat_fin[worst] else
                  "within the bound or native's value (native overflowed)")
        n_bad = int((~ok).sum())
        lines.append(
            f"{n_bad} of {ok.size} outputs break the guarantee (c_factor={c_factor:g}, K={k}); worst at "
            f"{_fmt_index(worst)}: C={float(c[worst])!r}, C64={float(r.c64[worst])!r}, "
            f"native (sequential FP32)={float(r.fp32[worst])!r}, host BLAS={float(r.native[worst])!r}, "
            f"|C-C64|={float(err[worst]):.4g}, "
            f"bound={float(bound[worst]):.4g}, ratio={float(ratio[worst]):.4g}; expected {expect}")
        by_kind = {name: int((~ok & m).sum()) for name, m in (
            ("special-value", case_special), ("in-range", case_normal), ("overflowing", case_ovf),
            ("overflowing (native finite)", case_ovf_nat_fin), ("native-overflowed", case_nat_ovf))}
        lines.append("failures by kind: " + ", ".join(f"{n}: {v}" for n, v in by_kind.items() if v))
    if frobenius:
        fro = _frobenius(c, r, case_normal)
        if fro is not None:
            ours, nat = fro
            limit = frobenius_factor * max(nat, U)
            if not ours <= limit:
                host = _frobenius(r.native, r, case_normal)
                lines.append(f"relative Frobenius error {ours:.4g} > {frobenius_factor:g} * max(sequential FP32 "
                             f"{nat:.4g}, 2**-24) = {limit:.4g} (ratio {ours / limit:.4g}; this host's BLAS: "
                             f"{host[0] if host else float('nan'):.4g})")
    return "\n".join(lines)


def _frobenius(c, r: References, mask):
    ref = r.c64[mask]
    norm = float(np.linalg.norm(ref))
    if norm == 0 or not np.isfinite(norm):
        return None
    with np.errstate(all="ignore"):
        ours = float(np.linalg.norm(c.astype(np.float64)[mask] - ref)) / norm
        nat = float(np.linalg.norm(r.fp32.astype(np.float64)[mask] - ref)) / norm
    return (ours if np.isfinite(ours) else np.inf), nat


def frobenius_errors(c, a, b, refs=None):
    """``(ours, native)`` relative Frobenius errors over the outputs with finite inputs, finite native
    result and in-range exact result (None when C64 is zero there).  ``native`` is
    :func:`sequential_fp32`'s, the same on every host (``frobenius_errors(np.matmul(a, b), a, b)[0]``
    measures this host's BLAS)."""
    r = refs if refs is not None else references(a, b)
    c = _np(c)
    _, exact_ovf, nat_fin = _masks(c, r)
    return _frobenius(c, r, r.finite_in & nat_fin & ~exact_ovf)
