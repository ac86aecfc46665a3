"""Exponent bands of the listed lines (``cpu_fallback/bands.py``, issue 32 item 4), on the CPU model.

Checked here:

* the window: 30 binades for sb = 12 where FP16 subnormals are kept, 19 where they flush, and a power of
  two at each end for every sb;
* the bands partition a line: each finite nonzero entry lies in exactly one band, the bands scaled back
  sum to the line exactly (lines spanning FP32's whole range, subnormals to the largest finite value),
  bands past a line's last are all zero, and :func:`band_counts` is the number of the last nonempty one
  plus one;
* every band value keeps 22 bits in the split under the arithmetic its window is for (a band that would
  lose bits under the gradual window on a flushing chip is shown to, so the check can fail);
* the device's exponent rule: ``t_a`` from the packed integers of a listed line (``t = -floor(log2 big)``)
  is ``top - floor(log2 big) + a W``, capped where the band is empty;
* :func:`banded_outputs` through the NPU path's CPU model (``guarded_model(bands=True)``) keeps SGEMM's
  componentwise bound on every adversarial generator, for both designs and the worst arithmetic, with
  the worst ratio to the bound printed; its accuracy is measured beside the vector unit's FP32 fix-up and
  native FP32 on wide-range rows (better where many terms matter, within the bound where few do).
"""
from __future__ import annotations

import numpy as np
import pytest

from sgemm_cube.cpu_fallback import split
from sgemm_cube.cpu_fallback.arithmetic import DEFAULT, WORST, Arithmetic
from sgemm_cube.cpu_fallback.bands import (band_counts, band_exponents, band_values, band_window, banded_lines,
                                           banded_outputs)
from sgemm_cube.cpu_fallback.guard import LineClass, line_meta
from tests.guarantee_data import GENERATORS, check_guarantee, references, rng_for, sequential_fp32

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FLUSH = Arithmetic(subnormals="flush")


def _whole_range_lines(rng, lines: int, k: int) -> np.ndarray:
    """Rows whose entries spread over FP32's whole range: subnormals up to the largest finite value, both
    signs, some zeros."""
    e = rng.integers(-149, 128, (lines, k))
    x = np.ldexp(rng.uniform(1, 2, (lines, k)), e)
    x = np.where(e == 127, np.minimum(x, np.finfo(np.float32).max), x)
    x *= rng.choice([-1.0, 1.0], (lines, k))
    x[rng.random((lines, k)) < 0.1] = 0
    return x.astype(np.float32)


@pytest.mark.parametrize("sb,arithmetic,width", [(12, DEFAULT, 30), (12, FLUSH, 19), (10, DEFAULT, 28),
                                                 (16, DEFAULT, 26), (16, FLUSH, 19)])
def test_window(sb, arithmetic, width):
    w = band_window(sb, arithmetic)
    assert w.width == width
    assert w.lower == 2.0 ** (w.top + 1 - w.width)
    assert w.zero_exponent == w.top + 150


@pytest.mark.parametrize("arithmetic", [DEFAULT, FLUSH])
def test_bands_partition_each_line(arithmetic):
    rng = np.random.default_rng(3)
    x = _whole_range_lines(rng, 12, 300)
    x[0] = 0  # a line of zeros: no band
    x[1, :] = np.float32(1.5)  # one binade: one band
    w = band_window(12, arithmetic)
    meta = line_meta(x, -1, arithmetic=arithmetic)
    counts = band_counts(x, -1, w)
    assert counts[0] == 0 and counts[1] == 1 and counts[2:].min() >= 277 // w.width
    total = np.zeros(x.shape)
    owner = np.zeros(x.shape, np.int64)
    big_e = np.frexp(np.abs(x).max(axis=1))[1] - 1
    to_one = -big_e  # the t of a listed line (the device derives t_a from it)
    for a in range(counts.max() + 1):
        t_a = band_exponents(to_one, a, w)
        v = band_values(x, t_a, -1, w)
        nonzero = v != 0
        owner += nonzero
        total += np.ldexp(v.astype(np.float64), -t_a[:, None])
        if a >= 1:
            assert not nonzero[counts <= a].any(), f"band {a} past a line's last is not empty"
        last = counts == a + 1
        assert nonzero[last & (counts > 0)].any(axis=1).all(), f"band {a}: a line's last band is empty"
    assert np.array_equal(owner, (x != 0).astype(np.int64)), "an entry in no band or in two"
    assert np.array_equal(total, x.astype(np.float64)), "the bands do not add up to the line"
    assert (meta.cls[2:] == LineClass.LOSES_BITS).all()  # such lines are listed (banded)


def test_band_exponent_rule():
    w = band_window(12, FLUSH)
    t = np.array([-127, 0, 20, 149], np.int32)  # lines with big in binades 127, 0, -20, -149
    for a in range(4):
        want = np.minimum(t + w.top + a * w.width, w.top + 150)
        assert np.array_equal(band_exponents(t, a, w), want)
    assert band_exponents(t, 0, w, banded=np.array([True, False, True, False]))[1] == w.zero_exponent
    # the cap empties a band: the smallest FP32 magnitude scales to 2**(top + 1)
    assert band_values(np.array([[2.0 ** -149]], np.float32), np.array([w.zero_exponent]), -1, w)[0, 0] == 0


@pytest.mark.parametrize("sb", [12, 10])
@pytest.mark.parametrize("arithmetic", [DEFAULT, FLUSH, WORST])
def test_band_values_keep_22_bits_in_the_split(sb, arithmetic):
    """|hi + lo 2**-sb - v| <= 2**-22 |v| for every band value, under the arithmetic its window is for; the
    window of the gradual range on a flushing chip loses bits (the check can fail)."""
    rng = np.random.default_rng(sb)
    x = _whole_range_lines(rng, 8, 400)
    to_one = -(np.frexp(np.abs(x).max(axis=1))[1] - 1)

    def worst(window, ar):
        rel = 0.0
        for a in range(band_counts(x, -1, window).max()):
            v = band_values(x, band_exponents(to_one, a, window), -1, window)
            hi, lo = split(v, sb, arithmetic=ar)
            back = hi.astype(np.float64) + lo.astype(np.float64) * 2.0 ** -sb
            nz = v != 0
            rel = max(rel, float(np.max(np.abs(back - v)[nz] / np.abs(v[nz]).astype(np.float64))))
        return rel

    bits = 21 if arithmetic.cast == "trunc" else 22  # split.py: truncation keeps 21 bits (20 in the lowest binade)
    assert worst(band_window(sb, arithmetic), arithmetic) <= 2.0 ** -(bits - 1)
    if arithmetic.subnormals == "flush":
        assert worst(band_window(sb, DEFAULT), arithmetic) > 2.0 ** -12


def _model(a, b, *, design, bands, arithmetic=None):
    """The NPU path's CPU model on the 910A: the hardware ``arithmetic`` (default: ``design``), the split range
    designed for ``design``."""
    from tests.ascendc_kernels.test_guarantee_alternatives import guarded_model

    return guarded_model(a, b, soc="910a", arithmetic=design if arithmetic is None else arithmetic, design=design,
                         tiling=(32, 32, 32, 1), bands=bands)


@pytest.mark.parametrize("design", [DEFAULT, WORST], ids=["gradual", "worst"])
@pytest.mark.parametrize("gen", sorted(GENERATORS))
def test_banded_outputs_keep_the_bound(design, gen, request):
    rng, replay = rng_for(request.node.nodeid)
    a, b = GENERATORS[gen](rng, 20, 96, 24)
    c = _model(a, b, design=design, bands=True)
    msg = check_guarantee(c, a, b, frobenius=False)
    assert not msg, f"{msg}\n{replay}"


def test_banded_outputs_only_touch_banded_lines():
    """Outputs of lines that are not banded are the ordinary pass's, bit for bit; the banded ones differ from
    it (the ordinary pass lost their small entries)."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((24, 64)).astype(np.float32)
    b = rng.standard_normal((64, 20)).astype(np.float32)
    a[3, ::2] *= np.float32(2.0 ** -40)  # a banded row
    b[:, 5] *= np.float32(2.0 ** 50)
    b[::3, 5] *= np.float32(2.0 ** -60)  # a banded column
    w = band_window(12, WORST)
    ma, mb = line_meta(a, -1, arithmetic=WORST), line_meta(b, -2, arithmetic=WORST)
    assert np.flatnonzero(banded_lines(ma)).tolist() == [3] and np.flatnonzero(banded_lines(mb)).tolist() == [5]
    plain = np.full((24, 20), np.float32(7))
    calls = []

    def product(x, y):
        calls.append((x.shape, y.shape))
        return (x.astype(np.float64) @ y.astype(np.float64)).astype(np.float32)

    c = banded_outputs(a, b, plain, ma=ma, mb=mb, split_a=a, split_b=b, window=w, product=product)
    touched = c != 7
    assert touched[3].all() and touched[:, 5].all() and touched.sum() == 24 + 20 - 1
    na, nb = band_counts(a[3:4], -1, w)[0], band_counts(b[:, 5:6], -2, w)[0]
    assert len(calls) == na + nb + na * nb  # the row's bands, the column's, and every pair once
    unbanded = banded_outputs(a, b, plain, ma=ma, mb=mb, split_a=a, split_b=b, window=w, fixup=False,
                              product=product)
    assert (unbanded == 7).all()  # fixup=False: nothing is banded


def _wide_rows(rng, m, k, n):
    """Log-normal rows (sigma 3, spanning ~60 binades) against normal columns: every row banded."""
    a = np.exp(3.0 * rng.standard_normal((m, k))).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return a, b


def test_bands_are_more_accurate_than_the_fp32_fixup_on_wide_rows():
    """Measured, fixed seed: relative Frobenius error against float64 of the bands, of the FP32 fix-up (native
    FP32's own) and of native FP32 beside, on log-normal rows with K = 256, the model's default hardware
    arithmetic and the unprobed design: the bands keep the emulation's accuracy."""
    rng = np.random.default_rng(21)
    a, b = _wide_rows(rng, 48, 256, 40)
    r = references(a, b)

    def err(c):
        return float(np.linalg.norm(c - r.c64) / np.linalg.norm(r.c64))

    bands = _model(a, b, design=WORST, arithmetic=DEFAULT, bands=True)
    fixup = _model(a, b, design=WORST, arithmetic=DEFAULT, bands=False)
    native = err(sequential_fp32(a, b))
    print(f"\nbands {err(bands):.3g}, FP32 fix-up {err(fixup):.3g}, native FP32 {native:.3g}")
    assert err(fixup) == pytest.approx(native, rel=0.2)  # the fix-up is native FP32's sum
    assert err(bands) < 0.6 * native
