"""The listed lines on the cube (issue 32, item 4): the model of the read-back and the band passes
(``pipeline.band_parts``, ``Design.listed``, ``Design.bands``).  MODEL PREDICTIONS throughout: the tests check
that the model computes the passes ``npu_bands.run_band_passes`` launches, not what they cost on an NPU."""
import dataclasses
import json

import pytest

from sgemm_cube.backends import npu_bands
from sgemm_cube.backends import npu_schedule as ns
from sgemm_cube.tuning import pipeline as pl
from sgemm_cube.tuning import hardware as H

SHAPE = (1024, 768, 2048)
TILINGS = {"910a": (128, 64, 128, 16), "910b": (112, 64, 96, 16)}  # each chip's one-pass pick at 8192^3
TILING = TILINGS["910a"]
BAND = ("band_rows", "band_cols", "band_pairs")


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SGEMM_CUBE_TUNING_DIR", str(tmp_path / "tables"))
    monkeypatch.delenv("SGEMM_CUBE_PROFILES", raising=False)


def _predict(chip, listed, shape=SHAPE, **kw):
    return pl.predict(chip, *shape, TILINGS[chip], design=pl.package(listed, **kw))


@pytest.mark.parametrize("chip", ["910a", "910b"])
def test_no_listed_line_costs_the_read_back_alone(chip):
    """listed = 0: no band pass runs; the read-back (one D2H copy of 16 bytes per line and its
    synchronisation, from the profile's host fields) is paid on every guarded product."""
    p = H.get_profile(chip)
    pr = _predict(chip, 0.0)
    assert [pr.phases[name] for name in BAND] == [0.0, 0.0, 0.0]
    m, n, _ = SHAPE
    expect = p.pipes.host_readback_us * 1e-6 + 16 * (m + n) / (p.pipes.d2h_gbps * 1e9)
    assert pr.phases["readback"] == pytest.approx(expect, rel=1e-12) and pr.phases["readback"] > 0
    assert pl.READBACK_BYTES_PER_LINE == npu_bands.LINE_ROWS * 4  # the int32 rows of the lines buffer
    batched = pl.predict(chip, *SHAPE, TILINGS[chip], design=pl.package(0.0), batch=3)
    assert batched.phases["readback"] == pytest.approx(expect + 16 * 2 * (m + n) / (p.pipes.d2h_gbps * 1e9),
                                                       rel=1e-12)  # one copy for every batch
    kernels = pl.predict(chip, *SHAPE, TILINGS[chip], design=dataclasses.replace(pl.KERNEL, bookkeeping=True))
    assert pr.seconds == pytest.approx(kernels.seconds + pr.phases["readback"] + pr.phases["fixup_rows"]
                                       + pr.phases["fixup_cols"], rel=1e-12)


@pytest.mark.parametrize("chip", ["910a", "910b"])
def test_band_cost_grows_with_the_listed_fraction_and_the_bands(chip):
    """More listed lines, more bands: more band work.  At every line listed only the pairs pass runs (no
    line is ordinary), which is cheaper than 90% listed: the row and column passes run against all of the
    other operand (``run_band_passes`` keeps only the ordinary outputs).  In bands, at 4096 x 4096 x 1024:
    each pass from 10% listed, the product from 1% (at a handful of lines a pass need not grow: the
    GEMM's waves and the combine's unscale units, ``UNSCALE_UNIT // width`` rows with a DMA per row, are
    quantised; at 1024 x 768 x 2048, 50% listed, 4 bands' row pass is 3% below 3 bands')."""
    fractions = (0.0, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9)
    totals = [_predict(chip, f).seconds for f in fractions]
    assert totals == sorted(totals) and len(set(totals)) == len(totals)
    pairs = [_predict(chip, f).phases["band_pairs"] for f in fractions + (1.0,)]
    assert pairs == sorted(pairs) and pairs[0] == 0 < pairs[1]
    every, most = _predict(chip, 1.0), _predict(chip, 0.9)
    assert every.phases["band_rows"] == every.phases["band_cols"] == 0.0
    assert min(most.phases[name] for name in BAND) > 0 and every.seconds < most.seconds
    for f in (0.01, 0.1, 0.5, 1.0):
        by_bands = [_predict(chip, f, shape=(4096, 4096, 1024), bands=b) for b in (2, 3, 4)]
        for name in BAND:
            v = [pr.phases[name] for pr in by_bands]
            assert f == 0.01 or (v == sorted(v) and (v[0] == 0 or len(set(v)) == 3)), (f, name, v)
        assert by_bands[0].seconds < by_bands[1].seconds < by_bands[2].seconds
        assert len({pr.phases["readback"] for pr in by_bands}) == 1


def test_band_passes_are_the_products_kernels_on_the_stacked_bands():
    """Each pass is ``band_pass``: the split of both sides, the GEMM and the combine with the unscale in the
    product's own tiling (TILING is not the tuner's: a forced tiling runs the passes too), on the bands stacked (``bands * R`` rows, ``bands * C`` columns), every line
    scaled; plus bandwidth-bound gathers, accumulator adds and the write into C at the chip's HBM rate."""
    m, n, k = SHAPE
    p = H.get_profile("910a")
    hbm = p.hbm_gbps * 1e9
    for mode in (dict(), dict(per_term=True, l0c_stages=2)):
        d = pl.package(0.25, bands=3, **mode)
        parts = pl.band_parts(p, m, n, k, TILING, design=d)
        r, c = 256, 192  # ceil(0.25 m), ceil(0.25 n)
        kernels = dataclasses.replace(d, listed=None, special=0.0)
        # the row and column passes against the other operand's ordinary lines only (gathered)
        for name, (rows, cols) in {"band_rows": (3 * r, n - c), "band_cols": (m - r, 3 * c),
                                   "band_pairs": (3 * r, 3 * c)}.items():
            ph = pl.predict(p, rows, cols, k, TILING, design=kernels).phases
            got = parts[name]
            assert set(got) == {"gather", "split_a", "split_b", "gemm", "combine_unscale", "accumulate", "scatter"}
            assert got["gemm"] == ph["gemm"] and got["split_a"] == ph["split_a"] and got["split_b"] == ph["split_b"]
            assert got["combine_unscale"] == pytest.approx(ph.get("combine", 0.0) + ph["unscale"], rel=1e-12)
        # the gathers: A's bands and B's ordinary columns in the row pass, B's bands and A's ordinary rows in
        # the column pass, none left for the pairs
        assert parts["band_rows"]["gather"] == pytest.approx(2 * (3 * r + n - c) * k * 4 / hbm, rel=1e-12)
        assert parts["band_cols"]["gather"] == pytest.approx(2 * (3 * c + m - r) * k * 4 / hbm, rel=1e-12)
        assert parts["band_pairs"]["gather"] == 0.0
        # the accumulators: zeroed, then 7 transfers per element per block (3 blocks, 9 pairs)
        assert parts["band_rows"]["accumulate"] == pytest.approx((1 + 3 * 7) * r * (n - c) * 4 / hbm, rel=1e-12)
        assert parts["band_pairs"]["accumulate"] == pytest.approx((1 + 9 * 7) * r * c * 4 / hbm, rel=1e-12)
        assert parts["band_rows"]["scatter"] == pytest.approx(2 * r * (n - c) * 4 / hbm, rel=1e-12)
        assert parts["band_pairs"]["scatter"] == pytest.approx(2 * r * c * 4 / hbm, rel=1e-12)
        pr = pl.predict(p, m, n, k, TILING, design=d)
        for name in BAND:
            assert pr.phases[name] == pytest.approx(sum(parts[name].values()), rel=1e-12)
    # every line listed: the pairs pass gathers both sides; batches run one after another
    d = pl.package(1.0)
    every = pl.band_parts(p, m, n, k, TILING, design=d)
    assert every["band_rows"] == every["band_cols"] == {}
    assert every["band_pairs"]["gather"] == pytest.approx(2 * (2 * m * k + 2 * n * k) * 4 / hbm, rel=1e-12)
    twice = pl.band_parts(p, m, n, k, TILING, design=d, batch=2)["band_pairs"]
    assert twice == pytest.approx({key: 2 * v for key, v in every["band_pairs"].items()}, rel=1e-12)
    assert pl.band_parts(p, m, n, k, TILING, design=dataclasses.replace(pl.KERNEL, bookkeeping=True)) == \
        {"band_rows": {}, "band_cols": {}, "band_pairs": {}}


def test_special_lines_are_not_ordinary():
    """A special line is neither banded nor ordinary: the row pass keeps only the ordinary columns' outputs,
    and with every other line special no row or column pass runs."""
    p = H.get_profile("910b")
    m, n, k = SHAPE
    TILING = TILINGS["910b"]
    some = pl.band_parts(p, m, n, k, TILING, design=pl.package(0.25, special=0.25))
    none = pl.band_parts(p, m, n, k, TILING, design=pl.package(0.25))
    assert some["band_rows"]["scatter"] < none["band_rows"]["scatter"]
    assert some["band_rows"]["gemm"] == none["band_rows"]["gemm"]  # against all of B either way
    rest = pl.band_parts(p, m, n, k, TILING, design=pl.package(0.5, special=0.5))
    assert rest["band_rows"] == rest["band_cols"] == {} and rest["band_pairs"]


def test_profiles_hold_the_host_read_back_as_an_assumption(tmp_path):
    """The read-back's parameters live in the profile file with the other hardware numbers, each labelled an
    assumption; a profile may leave them out (then the package's prediction says what is missing)."""
    for key in ("910a", "910b"):
        pipes = H.get_profile(key).pipes
        assert pipes.host_readback_us > 0 and pipes.d2h_gbps > 0
        for field in H.OPTIONAL_PIPES:
            assert pipes.sources[field].startswith("assumption, no measured source")
    entry = H.get_profile("910a").to_json()
    for field in H.OPTIONAL_PIPES:
        entry["pipes"].pop(field)
    path = tmp_path / "nohost.json"
    path.write_text(json.dumps({"schema": 1, "profiles": {"nohost": entry}}))
    p = H.load_profiles(path)["nohost"]
    assert p.pipes.host_readback_us is None and p.pipes.d2h_gbps is None
    assert H.parse_profiles({"schema": 1, "profiles": {"nohost": p.to_json()}})["nohost"] == p
    assert pl.predict(p, *SHAPE, TILING, design=pl.KERNEL).seconds > 0  # the kernels need no host numbers
    with pytest.raises(ValueError, match="host_readback_us"):
        pl.predict(p, *SHAPE, TILING, design=pl.package(0.0))


def test_the_pass_geometry_takes_the_products_tiling():
    """``band_pass`` runs in the product's tiling: the pass's K groups are the product's."""
    m, n, k = SHAPE
    g = pl.geometry("910a", 2 * m, 2 * n, k, TILING, design=pl.package(1.0))
    assert (g.bm, g.bk, g.bn) == TILING[:3] and g.n_fused == ns.group_n_fused(k, TILING[1])


def test_report_prints_the_listed_fractions():
    """``pipeline_report.listed_fractions``: the package with a fraction listed over none listed, per chip."""
    import io

    from sgemm_cube.tuning import pipeline_report as report

    shape, fractions = (1024, 1024, 1024), (0.01, 0.5, 1.0)
    out = io.StringIO()
    report.listed_fractions(shape=shape, chips=("910b",), fractions=fractions, out=out)
    row = next(line for line in out.getvalue().splitlines() if line.startswith("| Ascend 910B |"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    base = pl.predict_package("910b", *shape, use_table=False)
    t = base.tiling
    for cell, f in zip(cells, fractions, strict=True):
        pr = pl.predict("910b", *shape, t, design=pl.package(f, per_term=bool(t.per_term), l0c_stages=t.l0c_stages))
        assert cell == f"{pr.seconds / base.seconds:.2f}x"


def test_band_passes_run_in_the_tuners_tiling_for_their_shape():
    """Where the product runs the tuner's tiling, each pass runs the tuner's tiling for its own shape (what
    npu._launch's pass_options gives; the K groups, and so the bits, are the product's): the GEMM of the row
    pass at 1% listed is the kernels' prediction in that tiling, and faster than in the product's."""
    from sgemm_cube.backends import npu

    m, n, k = 4096, 4096, 4096
    t = npu.choose_tiling("910a", m, n, k)
    d = pl.package(0.01, per_term=bool(t.per_term), l0c_stages=int(t.l0c_stages))
    r, c = 41, 41
    rows_pass = pl.band_parts("910a", m, n, k, t, design=d)["band_rows"]
    own = npu.choose_tiling("910a", 2 * r, n - c, k)
    assert own != t and own.bk * own.n_fused == t.bk * t.n_fused == 1024  # the same K groups
    kernels = dataclasses.replace(d, listed=None, per_term=bool(own.per_term), l0c_stages=int(own.l0c_stages))
    assert rows_pass["gemm"] == pl.predict("910a", 2 * r, n - c, k, own, design=kernels).phases["gemm"]
    in_product = pl.predict("910a", 2 * r, n - c, k, t, design=dataclasses.replace(d, listed=None)).phases["gemm"]
    assert rows_pass["gemm"] < in_product
