"""The pipeline model of the unscale (``tuning/pipeline.py``'s ``_unscale_cycles``) counts what
``unscale_kernel.hpp`` issues: the fast path's few vector instructions per unit (the model's assumption for
the predictions), the careful path's ``ApplyPow2``, the scalar unit's per-unit decision and its column
scans once per (batch, column chunk).  Model predictions only: nothing here ran on an NPU."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from sgemm_cube.backends import npu_schedule as ns
from sgemm_cube.tuning import pipeline as pl
from sgemm_cube.tuning.hardware import get_profile

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_cache():
    pl._unscale_cycles.cache_clear()
    yield
    pl._unscale_cycles.cache_clear()


def _one_stage(monkeypatch):
    """The unscale replayed with one UB stage: a unit's vector work then lies on the critical path, so
    what a unit costs more shows in the total unit by unit."""
    replay = pl._replay_vector
    monkeypatch.setattr(pl, "_replay_vector", lambda tiles, *, stages, ops, flag_latency:
                        replay(tiles, stages=1, ops=ops, flag_latency=flag_latency))
    pl._unscale_cycles.cache_clear()


def _core0_units(batch: int, mp: int, np_: int, cores: int) -> tuple[int, int]:
    """(core 0's units, elements per unit as the model counts them)."""
    rows_per_unit = ns.UNSCALE_UNIT // np_ if np_ <= ns.UNSCALE_UNIT else 1
    chunks = -(-np_ // ns.UNSCALE_UNIT)
    chunk_cols = -(-(-(-np_ // chunks)) // 16) * 16
    units = -(-(batch * mp) // rows_per_unit) * chunks
    return len(range(0, units, min(cores, units))), rows_per_unit * chunk_cols


@pytest.mark.parametrize("soc", ["910a", "910b"])
@pytest.mark.parametrize("combine", [False, True])
def test_the_careful_path_costs_its_extra_vector_instructions_per_unit(soc, combine, monkeypatch):
    """Replayed with one stage (a unit's load, vector work and store after each other), the careful path costs
    exactly (UNSCALE_VECTOR_OPS - UNSCALE_FAST_VECTOR_OPS) more vector instructions and one S -> V hand-off
    per unit; with the kernel's two stages it costs more still."""
    p = get_profile(soc)
    d = pl.package()
    two = (pl._unscale_cycles(p, d, 1, 2048, 2048, combine), pl._unscale_cycles(p, d, 1, 2048, 2048, combine, fast=False))
    assert two[0] < two[1]
    _one_stage(monkeypatch)
    d = pl.package()
    tm = pl._Timing(p, d)
    mine, n = _core0_units(1, 2048, 2048, p.ai_cores)
    fast = pl._unscale_cycles(p, d, 1, 2048, 2048, combine)
    careful = pl._unscale_cycles(p, d, 1, 2048, 2048, combine, fast=False)
    extra = (pl.UNSCALE_VECTOR_OPS - pl.UNSCALE_FAST_VECTOR_OPS) * tm.vector(n * 4) + tm.pp.flag_latency_cycles
    assert careful - fast == pytest.approx(mine * extra, rel=1e-9)
    assert pl.UNSCALE_FAST_VECTOR_OPS == 5 and pl.UNSCALE_VECTOR_OPS == 40
    assert two[1] - two[0] > 0.5 * (careful - fast)  # two stages hide some of the careful path, not most


def test_column_bounds_are_scanned_once_per_batch_and_chunk(monkeypatch):
    """(One stage.) 7680 columns in two chunks on the 910A's 32 cores: core 0 keeps chunk 0, one scan of its
    3840 columns for the whole pass; 64 batches of 96 x 128 outputs, 30 rows per unit: a scan per batch
    change; 8192 and 18432 columns (three and five chunks) on 32 cores: core 0 meets every chunk, one scan
    each (its own slot), not one per unit."""
    p = get_profile("910a")
    d = pl.package()
    _one_stage(monkeypatch)
    per_column = pl.UNSCALE_SCALAR_OPS_PER_COLUMN * pl.SCALAR_CYCLES_PER_ACCESS

    ops = pl.UNSCALE_SCALAR_OPS_PER_COLUMN

    def scan_cycles(batch, mp, np_):
        times = []
        for per in (ops, 0):
            monkeypatch.setattr(pl, "UNSCALE_SCALAR_OPS_PER_COLUMN", per)
            pl._unscale_cycles.cache_clear()
            times.append(pl._unscale_cycles(p, d, batch, mp, np_))
        monkeypatch.setattr(pl, "UNSCALE_SCALAR_OPS_PER_COLUMN", ops)
        return times[0] - times[1]

    assert ns.UNSCALE_UNIT == 3840
    assert scan_cycles(1, 4096, 7680) == pytest.approx(per_column * 3840, rel=1e-12)
    mine, _ = _core0_units(64, 96, 128, p.ai_cores)  # core 0's units (0, 32, 64, ...) each start a new batch
    assert scan_cycles(64, 96, 128) == pytest.approx(per_column * 128 * mine, rel=1e-12)
    assert scan_cycles(1, 4096, 8192) == pytest.approx(per_column * 8192, rel=1e-12)
    assert scan_cycles(1, 4096, 18432) == pytest.approx(per_column * 18432, rel=1e-12)


def test_fast_path_constants_are_the_kernel():
    """The model's instruction count is the fast path's: FastPow2's And, Sub, Muls and Mul, each behind a
    barrier, after the rows' Duplicates and one barrier (unscale_tile.hpp)."""
    text = (REPO / "ascendc_kernels/include/sgemm_cube/tile/unscale_tile.hpp").read_text()
    body = text[text.index("__aicore__ inline void FastPow2"):]
    body = body[:body.index("\n}\n")]
    assert body.count("AscendC::PipeBarrier<PIPE_V>();") == pl.UNSCALE_FAST_VECTOR_OPS - 1
    assert re.findall(r"AscendC::(And|Sub|Muls|Mul)\(", body) == ["And", "And", "Sub", "Muls", "Mul"]


@pytest.mark.parametrize("soc, shape, at_most_ms", [
    ("910a", (8192, 8192, 8192), 1.0), ("910a", (8192, 8192, 1024), 1.5),
    ("910b", (8192, 8192, 8192), 1.0), ("910b", (8192, 8192, 1024), 1.0)])
def test_package_unscale_on_the_fast_path(soc, shape, at_most_ms):
    """The package's unscale (every line scaled, the fast path) is predicted at a fraction of the careful
    path's time (3.5-3.9 ms at these shapes before the fast path), and the package against the paper's design
    at 8192^3 on the 910A within 1.2x (1.29x before)."""
    p = get_profile(soc)
    pr = pl.predict_package(p, *shape, use_table=False)
    assert 0 < pr.phases["unscale"] * 1e3 < at_most_ms
    if soc == "910a" and shape == (8192, 8192, 8192):
        paper = pl.rank(p, *shape, design=pl.PAPER_DOUBLE, top=1)[0]
        assert pr.seconds / paper.seconds < 1.2


def test_unscale_constants_are_the_header():
    text = (REPO / "ascendc_kernels/include/sgemm_cube/schedule/schedule.hpp").read_text()
    assert int(re.search(r"kUnscaleBoundSlots = (\d+);", text).group(1)) == pl.UNSCALE_BOUND_SLOTS
    assert int(re.search(r"kUnscaleStages = (\d+);", text).group(1)) == pl.UNSCALE_STAGES
    assert int(re.search(r"kUnscaleUnit = (\d+);", text).group(1)) == ns.UNSCALE_UNIT
