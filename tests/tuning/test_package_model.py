"""The whole product ``sgemm_cube.matmul`` launches on the NPU (``--design package``): the fix-up kernels'
model (the special lines), the package's ranking, ``sgemm-cube tune --design package`` and the report's tables and target checks
(issue 32).  MODEL PREDICTIONS throughout; the tests check that the model computes what it says, not that
the targets are met."""
import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from sgemm_cube.backends import npu_schedule as ns
from sgemm_cube.tuning import cli
from sgemm_cube.tuning import pipeline as pl
from sgemm_cube.tuning import pipeline_report as report
from sgemm_cube.tuning.hardware import get_profile

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SGEMM_CUBE_TUNING_DIR", str(tmp_path / "tables"))  # no user's measured table
    monkeypatch.delenv("SGEMM_CUBE_PROFILES", raising=False)


def _unrolled(loops):
    for item, count in loops:
        for _ in range(max(count, 0)):
            if isinstance(item, list):
                yield from _unrolled(item)
            else:
                yield item


def _serial_program(loops, ops):
    """The fix-up kernels' steps as a program: every part of every tile (MTE2 loads, V compute, MTE3
    stores) followed by a PIPE_ALL barrier, as a set from its pipe that the next part's pipe waits for."""
    parts = [(pipe, part) for tile in _unrolled(loops)
             for part, pipe in zip(ops(tile), ("MTE2", "V", "MTE3")) if part]
    op = pl._Op
    for i, (pipe, part) in enumerate(parts):
        if i:
            yield op("wait", (parts[i - 1][0], pipe), 0)
        yield from part
        yield op("set", (pipe, parts[i + 1][0] if i + 1 < len(parts) else pipe), 0)
    if parts:
        yield op("wait", (parts[-1][0], parts[-1][0]), 0)  # the last barrier


def test_serial_replay_is_the_program_replay(monkeypatch):
    """The fix-up kernels' nests summed without unrolling (_replay_serial) are replay() of the unrolled
    program with a barrier after every part, to rounding: chunk and K tails, several batches, listed and
    unlisted lines, both chips (the kernels take the special lines: ``Design.special``)."""
    def program_replay(loops, *, ops, flag_latency):
        return pl.replay(_serial_program(loops, ops), lambda o: o.step, pl._SYNCS, flag_latency)[0]

    calls = []
    for soc in ("910a", "910b"):
        p = get_profile(soc)
        for special in (0.0, 0.3):  # 2 batches on core 0, one listed row: chunk and K tails
            calls.append((pl._fixup_rows_cycles, (p, pl.package(0.0, special=special), 3, 10, 16, 2100, 2050)))
        for special in (0.0, 0.3, 1.0):  # 512- and 16-row units of 2 batches on core 0, K % 8 != 0
            calls.append((pl._fixup_cols_cycles, (p, pl.package(0.0, special=special), 12, 12, 1040, 16, 21)))

    def times():
        for f in (pl._fixup_rows_cycles, pl._fixup_cols_cycles):
            f.cache_clear()
        return [f(*args) for f, args in calls]

    try:
        summed = times()
        monkeypatch.setattr(pl, "_replay_serial", program_replay)
        assert times() == pytest.approx(summed, rel=1e-12)
    finally:
        for f in (pl._fixup_rows_cycles, pl._fixup_cols_cycles):
            f.cache_clear()


def test_fixup_cost_for_any_fraction_of_special_lines():
    """Design.special: both fix-up kernels become phases after the unscale, then the read-back and the band
    passes (none run: no line listed); with no special line the kernels read the batch words and stop; any
    fraction above 0 costs at least one line per core; the cost grows with the fraction; nothing else
    changes."""
    shape, t = (512, 384, 1000), (128, 64, 128, 8)
    base = pl.predict("910a", *shape, t, design=dataclasses.replace(pl.KERNEL, bookkeeping=True))
    assert not {"fixup_rows", "readback", "band_pairs"} & set(base.phases)  # listed=None: not counted
    seconds = {}
    for special in (0.0, 1e-9, 0.01, 0.5, 1.0):
        pr = pl.predict("910a", *shape, t, design=pl.package(0.0, special=special))
        assert list(pr.phases)[-6:] == ["fixup_rows", "fixup_cols", "readback", "band_rows", "band_cols",
                                        "band_pairs"]
        assert pr.phases["band_rows"] == pr.phases["band_cols"] == pr.phases["band_pairs"] == 0.0
        assert {k: v for k, v in pr.phases.items() if k in base.phases} == base.phases
        seconds[special] = pr.phases["fixup_rows"], pr.phases["fixup_cols"]
    assert 0 < sum(seconds[0.0]) < 1e-5  # the batch words alone
    rows, cols = ([seconds[f][i] for f in (0.0, 1e-9, 0.01, 0.5, 1.0)] for i in (0, 1))
    assert cols == sorted(set(cols))  # every unit computes every listed column: 0, 1, 4, 192, 384 columns
    # 1e-9 lists one row of 512, 1% six: one on the busiest of 32 cores either way; then 8 and 16.
    assert rows[0] < rows[1] == rows[2] < rows[3] < rows[4]
    # Listed (banded) lines do not reach the fix-up kernels: the same time as with none listed.
    banded = pl.predict("910a", *shape, t, design=pl.package(0.5, special=0.01))
    assert (banded.phases["fixup_rows"], banded.phases["fixup_cols"]) == seconds[0.01]
    for bad in (dict(listed=0.5), dict(bookkeeping=True, listed=1.5), dict(bookkeeping=True, listed=-0.1),
                dict(bookkeeping=True, special=0.1), dict(bookkeeping=True, listed=0.0, special=1.5),
                dict(bookkeeping=True, listed=0.6, special=0.5), dict(bookkeeping=True, listed=0.1, bands=1),
                dict(bookkeeping=True, listed=0.1, bands=2.0)):
        with pytest.raises(ValueError):
            pl.Design("kernel", **bad)
    assert pl.package(0.25, per_term=True, terms=4) == dataclasses.replace(pl.PACKAGE, listed=0.25, per_term=True,
                                                                            terms=4)
    assert pl.package(0.25, bands=3, special=0.5) == dataclasses.replace(pl.PACKAGE, listed=0.25, bands=3,
                                                                          special=0.5)


def test_fixup_constants_are_the_headers():
    text = (REPO / "ascendc_kernels/include/sgemm_cube/schedule/schedule.hpp").read_text()
    assert int(re.search(r"kFixupColRows = (\d+);", text).group(1)) == pl.FIXUP_COL_ROWS
    assert int(re.search(r"kUnscaleTile = (\d+);", text).group(1)) == ns.UNSCALE_TILE


def test_package_ranks_both_modes_by_the_whole_product():
    """rank_package: both GEMM modes in one ranking by the whole product's time (ties to 0.1% of the best
    without the phases every tiling pays alike: the fix-up kernels and the read-back); predict_package times
    its first row (package_pick, what the tiling tables store) with every pass."""
    rows = pl.rank_package("910b", 1024, 1024, 2048, top=None)
    assert {r.tiling.per_term for r in rows} == {False, True}

    def fixed(r, **kw):
        pr = pl.predict("910b", 1024, 1024, 2048, r.tiling, design=pl.package(
            per_term=bool(r.tiling.per_term), l0c_stages=r.tiling.l0c_stages, **kw))
        return sum(pr.phases[name] for name in ("fixup_rows", "fixup_cols", "readback"))

    fix = [fixed(r) for r in rows]
    assert max(fix) == min(fix) > 0  # the fix-up kernels' and the read-back's time do not depend on the tiling
    fastest = min(r.seconds for r in rows) - fix[0]
    keys = [round((r.seconds - fix[0]) / fastest, 3) for r in rows]
    assert keys == sorted(keys) and keys[0] == 1.0
    # With special lines the fix-up, the same for every tiling, does not flatten the ranking.
    special = pl.rank_package("910b", 1024, 1024, 2048, listed=0.0, special=0.01, top=None)
    assert [r.tiling for r in special] == [r.tiling for r in rows]
    for r in special[:3]:
        pr = pl.predict("910b", 1024, 1024, 2048, r.tiling,
                        design=pl.package(0.0, special=0.01, per_term=bool(r.tiling.per_term),
                                          l0c_stages=r.tiling.l0c_stages))
        assert pr.seconds == r.seconds and pr.phases["fixup_cols"] > 0
    # Listed lines: the band passes run in each row's own tiling, so they are ranked with it.
    listed = pl.rank_package("910b", 1024, 1024, 2048, listed=0.01, top=None)
    fix = fixed(listed[0], listed=0.01)
    keys = [round((r.seconds - fix) / (min(q.seconds for q in listed) - fix), 3) for r in listed]
    assert keys == sorted(keys) and keys[0] == 1.0
    for r in listed[:3]:
        pr = pl.predict("910b", 1024, 1024, 2048, r.tiling,
                        design=pl.package(0.01, per_term=bool(r.tiling.per_term), l0c_stages=r.tiling.l0c_stages))
        assert pr.seconds == r.seconds and min(pr.phases[p] for p in ("band_rows", "band_cols", "band_pairs")) > 0
    pr = pl.predict_package("910b", 1024, 1024, 2048)  # package_pick's tiling: rank_package's first row
    assert pr.tiling == rows[0].tiling and pr.seconds == rows[0].seconds
    assert sum(pr.phases.values()) == pytest.approx(pr.seconds, rel=1e-12)
    assert set(pr.phases) >= {"split_a", "split_b", "gemm", "line_stats_a", "line_stats_b", "line_meta", "unscale",
                              "fixup_rows", "fixup_cols", "readback", "band_rows", "band_cols", "band_pairs"}


def _tune(argv):
    out = io.StringIO()
    return cli.run(cli.parse_args(argv), out=out), out.getvalue()


def test_tune_design_package(capsys):
    """``sgemm-cube tune --design package``: the ranking with each row's mode, ms and phases (--json), the
    default product (package_pick's tiling); --listed, --bands, --special and --scaled only with it."""
    shape = ["--m", "1000", "--n", "700", "--k", "1500"]
    rc, text = _tune(["--device", "910a", "--design", "package", "--listed", "0.5", "--top", "4", "--json"] + shape)
    assert rc == 0
    doc = json.loads(text)
    assert doc["listed"] == 0.5 and doc["bands"] == 2 and doc["special"] == 0.0 and len(doc["rows"]) == 4
    expect = pl.rank_package("910a", 1000, 700, 1500, listed=0.5, top=4)
    for row, r in zip(doc["rows"], expect):
        assert (row["bm"], row["bk"], row["bn"], row["n_fused"], row["per_term"], row["l0c_stages"]) == tuple(r.tiling)
        assert row["mode"] == ("per_term" if r.tiling.per_term else "fused")
        assert row["ms"] == pytest.approx(r.seconds * 1e3, rel=1e-12)
        assert sum(row["phases"].values()) == pytest.approx(row["ms"], rel=1e-12)
        assert min(row["phases"][p] for p in ("readback", "band_rows", "band_cols", "band_pairs")) > 0
        assert row["phases"]["fixup_rows"] < 1e-2 * row["phases"]["band_pairs"]  # no special line: batch words
    default = pl.predict_package("910a", 1000, 700, 1500, listed=0.5)
    assert doc["default"]["ms"] == pytest.approx(default.seconds * 1e3, rel=1e-12)
    alone = pl.predict("910a", 1000, 700, 1500, default.tiling, design=pl.Design(
        "kernel", per_term=bool(default.tiling.per_term), l0c_stages=default.tiling.l0c_stages))
    assert doc["default"]["bookkeeping_share"] == pytest.approx(1 - alone.seconds / default.seconds, rel=1e-12)
    bands = sum(default.phases[p] for p in ("band_rows", "band_cols", "band_pairs"))
    assert bands > 2 * alone.seconds  # half the lines listed: three passes, each about the product's size
    rc, text = _tune(["--device", "910a", "--design", "package", "--listed", "0.5", "--bands", "3", "--special",
                      "0.25", "--top", "1", "--json"] + shape)
    doc3 = json.loads(text)
    assert rc == 0 and doc3["bands"] == 3 and doc3["special"] == 0.25
    three = pl.predict_package("910a", 1000, 700, 1500, listed=0.5, bands=3, special=0.25)
    assert doc3["default"]["ms"] == pytest.approx(three.seconds * 1e3, rel=1e-12)
    assert three.phases["band_pairs"] > default.phases["band_pairs"] and three.phases["fixup_cols"] > 0
    rc, text = _tune(["--device", "910a", "--design", "package", "--top", "2"] + shape)
    assert rc == 0 and " mode " in text and "sgemm_cube.matmul's tiling" in text and "fixup_cols" in text
    assert "readback" in text and "band_pairs" in text
    rc, text = _tune(["--device", "910a", "--design", "package", "--scaled", "none", "--top", "1", "--json"] + shape)
    doc = json.loads(text)
    assert rc == 0 and doc["scaled"] is False and doc["rows"][0]["phases"]["unscale"] == 0.0
    assert doc["default"]["ms"] == pytest.approx(
        pl.predict_package("910a", 1000, 700, 1500, scaled=False).seconds * 1e3, rel=1e-12)
    for option in (["--listed", "0.5"], ["--scaled", "none"], ["--bands", "3"], ["--special", "0.1"]):
        assert _tune(["--design", "kernel"] + option + shape)[0] == 2
        assert f"{option[0]} applies to --design package" in capsys.readouterr().err
    for bad in (["--bands", "1"], ["--bands", "two"], ["--special", "1.5"]):
        with pytest.raises(SystemExit):
            cli.parse_args(["--design", "package"] + bad)
    assert _tune(["--design", "package", "--listed", "0.6", "--special", "0.5"] + shape)[0] == 2  # over 1


def test_report_tables_and_targets_are_the_models():
    """pipeline_report's package table and target checks print what the model computes (a small shape: the
    figures' definitions, not the issue's shapes; whether the targets are met is the lead's to state)."""
    shape = (1024, 1024, 1024)
    targets = report.package_targets(chips=("910a", "910b"), shapes=(shape,), share_shape=shape)
    names = [(t.name, t.chip) for t in targets]
    assert names == [("package time / paper's design time", "910a"),
                     ("package time / paper's design time, no line scaled", "910a"),
                     ("bookkeeping share, no line scaled", "910a"),
                     ("bookkeeping share, every line scaled", "910a"), (report.LISTED_TARGET, "910a"),
                     ("bookkeeping share, no line scaled", "910b"), ("bookkeeping share, every line scaled", "910b"),
                     (report.LISTED_TARGET, "910b")]
    assert report.LISTED_TARGET == "every line listed (2 bands each) / none listed" and report.BANDS == 2
    for t in targets:
        p = get_profile(t.chip)
        pr = pl.predict_package(p, *shape, use_table=False)
        mode, stages = bool(pr.tiling.per_term), pr.tiling.l0c_stages
        if t.name.startswith("package"):
            paper = pl.rank(p, *shape, design=pl.PAPER_DOUBLE, top=1)[0]
            if "no line scaled" in t.name:
                pr = pl.predict(p, *shape, pr.tiling, design=pl.package(per_term=mode, scaled=False))
            assert t.figure == pytest.approx(pr.seconds / paper.seconds, rel=1e-12) and t.limit == 1.10
        elif t.name.startswith("bookkeeping"):
            alone = pl.predict(p, *shape, pr.tiling, design=pl.Design("kernel", per_term=mode))
            scaled = "no line" not in t.name
            full = pl.predict(p, *shape, pr.tiling, design=pl.package(per_term=mode, scaled=scaled))
            assert t.figure == pytest.approx(1 - alone.seconds / full.seconds, rel=1e-12)
            assert t.limit == (0.25 if scaled else 0.10)
        else:
            every = pl.predict(p, *shape, pr.tiling, design=pl.package(1.0, per_term=mode, l0c_stages=stages,
                                                                       bands=2))
            assert t.figure == pytest.approx(every.seconds / pr.seconds, rel=1e-12) and t.limit == 3.0
            # every line listed: only the band pairs run, (2M) x K x (2N) in the product's tiling
            assert every.phases["band_rows"] == every.phases["band_cols"] == 0 < every.phases["band_pairs"]
            assert every.phases["band_pairs"] > 2 * pr.phases["gemm"]  # four band products of the product's size
        assert t.met == (t.figure <= t.limit)

    out = io.StringIO()
    report.targets_table(targets, out)
    rows = [line for line in out.getvalue().splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(targets)
    for line, t in zip(rows, targets):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == t.name and cells[1] == get_profile(t.chip).name and cells[2] == "1024x1024x1024"
        figure = float(cells[3].rstrip("%x").replace(",", "")) / (100 if cells[3].endswith("%") else 1)
        assert figure == pytest.approx(t.figure, abs=0.006 if cells[3].endswith("x") else 0.006)
        assert cells[5] == ("met" if t.met else "missed")

    out = io.StringIO()
    report.package_tables("910b", shapes=(shape,), out=out)
    f = report.package_figures("910b", shape)
    row = next(line for line in out.getvalue().splitlines() if line.startswith("| 1024x1024x1024 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == f"{tuple(f.package.tiling)[:4]}, {'per term' if f.package.tiling.per_term else 'one pass'}"
    assert float(cells[2]) == round(f.package.tflops, 1) and float(cells[3]) == round(f.package.seconds * 1e3, 2)
    assert cells[4] == f"{f.share() * 100:.0f}%"
    unscaled = pl.predict("910b", *shape, f.package.tiling, design=pl.package(per_term=f.package.tiling.per_term,
                                                                             scaled=False))
    assert cells[5] == f"{unscaled.tflops:.1f}, {(1 - f.alone.seconds / unscaled.seconds) * 100:.0f}%"
    best = pl.rank_package("910b", *shape, top=1)[0]
    assert cells[6].startswith(f"{best.tflops:.1f} at {tuple(best.tiling)[:4]}")
    assert cells[7] == f"{f.listed.seconds * 1e3:,.1f}" and cells[8] == f"{f.listed_ratio:.2f}x"
    assert cells[9] == f"{f.listed3.seconds * 1e3:,.1f}" and cells[10] == f"{f.listed3_ratio:.2f}x"
    assert f.listed3_ratio > f.listed_ratio
    three = pl.predict("910b", *shape, f.package.tiling, design=pl.package(
        1.0, per_term=f.package.tiling.per_term, l0c_stages=f.package.tiling.l0c_stages, bands=3))
    assert f.listed3.seconds == three.seconds
    assert cells[13] == f"{f.vs_paper:.2f}x"
    native_ms = 2 * 1024 ** 3 / (get_profile("910b").cube_fp32_tflops * 1e12) * 1e3
    assert float(cells[14]) == round(native_ms, 2)
    # the band pairs' parts sum to the phase the package table shows
    lines = out.getvalue().splitlines()
    parts_row = [line for line in lines if line.startswith("| 1024x1024x1024 |")][-1]
    cells = [c.strip() for c in parts_row.strip("|").split("|")]
    assert float(cells[8]) == round(f.listed.phases["band_pairs"] * 1e3, 2)
    assert sum(map(float, cells[1:8])) == pytest.approx(float(cells[8]), abs=0.06)
