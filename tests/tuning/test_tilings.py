"""The tuner's side of tilings as data (``tuning/tilings.py``): the model's table and a user's measured rows.

``--measure`` cannot run here (no NPU): its rows are faked as :func:`sgemm_cube.tuning.npu.tune` returns
them, and go through the same writer the model's rows do.
"""
from __future__ import annotations

import io

import pytest

from sgemm_cube.backends import npu, npu_schedule as ns, npu_tilings as nt
from sgemm_cube.tuning import cli, get_profile, npu as npu_tuning, tilings
from sgemm_cube.tuning.table import TuningTable


# A user's own tables (``$SGEMM_CUBE_TUNING_DIR/npu``) must not leak into these tests (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("shipped_npu_tilings_only")


def test_model_table_of_a_small_grid(tmp_path):
    """What --write-tilings writes: the model's best tiling per bucket, the whole product's prediction,
    the profile's capacities, and the command that regenerates it."""
    from sgemm_cube.tuning.pipeline import Design, package_pick, predict

    path = tilings.write_model_table("910a", directory=tmp_path, grid=(64, 1024), terms=(3,))
    doc = nt.load(path)
    assert path == tmp_path / "910a.json" and len(doc["entries"]) == 8
    assert "write_model_table" in doc["source"] and "grid=(64, 1024)" in doc["source"]
    assert ns.Capacity(**doc["capacity"]) == ns.capacity_from_profile(get_profile("910a"))
    e = next(e for e in doc["entries"] if e["bucket"] == [1024, 64, 1024])
    t = package_pick("910a", 1024, 64, 1024, use_table=False)
    assert ns.Tiling(**e["tiling"]) == t
    # the whole product as npu.run launches it on data listing no line: the fix-up kernels and the read-back
    want = predict("910a", 1024, 64, 1024, t, design=Design("kernel", per_term=t.per_term, bookkeeping=True,
                                                            listed=0.0, l0c_stages=t.l0c_stages))
    assert e["predicted_tflops"] == pytest.approx(want.tflops, abs=1e-3)


def _measured_table(shape, tiling) -> TuningTable:
    """What :func:`sgemm_cube.tuning.npu.tune` returns for one measured shape (no NPU here)."""
    table = TuningTable("Ascend 910B", "ascend")
    table.set((1024, 1024, 2048), tiling._asdict(), {"shape": list(shape), "ms": 0.5, "tflops": 7.6,
                                                     "rel_error": 1e-7, "predicted_tflops": 30.0})
    return table


def test_measured_rows_update_the_users_table_and_the_runtime_reads_them():
    shape, measured = (1000, 1000, 2000), ns.Tiling(64, 64, 64, 16, True)  # K groups of 1024
    before = npu.choose_tiling("910b", *shape)
    assert before != measured
    path = tilings.write_measured("910b", _measured_table(shape, measured))
    assert path == nt.table_path("910b", nt.user_dir())
    npu.choose_tiling.cache_clear()
    assert npu.choose_tiling("910b", *shape) == measured
    doc = nt.read("910b")
    row = next(e for e in doc["entries"] if e["bucket"] == list(shape))
    assert row["source"] == "measured" and row["measured"]["ms"] == 0.5 and "--measure" in doc["source"]
    # The shipped rows stay: another shape still gets the model's tiling.
    shipped = nt.load(nt.table_path("910b"))
    assert len(doc["entries"]) == len(shipped["entries"]) + 1
    assert nt.lookup("910b", 16, 16, 16).source == "model"
    # A second measurement of the same shape replaces the row, not adds one.
    tilings.write_measured("910b", _measured_table(shape, ns.Tiling(32, 64, 32, 2, False)))
    assert len(nt.read("910b")["entries"]) == len(doc["entries"])


def test_tune_measure_writes_the_tiling_table(monkeypatch, tmp_path):
    """``sgemm-cube tune --measure`` on an Ascend profile: the measured table goes to the tiling table."""
    shape, measured = (512, 768, 1024), ns.Tiling(64, 32, 64, 32, False)  # one K group of 1024
    monkeypatch.setattr(npu_tuning, "tune", lambda profile, shapes: _measured_table(shape, measured))
    out = io.StringIO()
    args = cli.parse_args(["--device", "910b", "--measure", "--m", "512", "--n", "768", "--k", "1024",
                           "--out", str(tmp_path / "mine")])
    assert cli.run(args, out=out) == 0
    written = tmp_path / "mine" / "910b.json"
    assert f"wrote {written}" in out.getvalue()
    row = next(e for e in nt.load(written)["entries"] if e["bucket"] == list(shape))
    assert ns.Tiling(**row["tiling"]) == measured and row["source"] == "measured"


def test_a_bad_row_leaves_the_file_untouched(tmp_path):
    path = tilings.write_measured("910b", _measured_table((64, 64, 64), ns.Tiling(64, 64, 64, 1, False)),
                                  directory=tmp_path)
    text = path.read_text()
    doc = nt.update(nt.load(path), [{"bucket": [8, 8, 8], "terms": 3, "tiling": ns.Tiling(64, 64, 64, 1),
                                     "source": "guessed", "predicted_tflops": 1.0}])
    with pytest.raises(nt.TilingsError, match="source"):
        nt.save(doc, path)
    assert path.read_text() == text
