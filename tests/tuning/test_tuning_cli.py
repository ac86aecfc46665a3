"""``sgemm-cube tune`` end to end (through tuning.cli.run and python -m sgemm_cube.tuning.cli)."""
import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm_cube.tuning import cli
from sgemm_cube.tuning import table as T

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SGEMM_CUBE_TUNING_DIR", str(tmp_path / "tables"))
    monkeypatch.delenv("SGEMM_CUBE_PROFILES", raising=False)


def _run(argv):
    out = io.StringIO()
    rc = cli.run(cli.parse_args(argv), out=out)
    return rc, out.getvalue()


def test_ranked_table_for_910a():
    rc, text = _run(["--device", "910a", "--m", "2048", "--n", "2048", "--k", "2048", "--top", "5"])
    assert rc == 0
    assert "bm*bk <= 16384, bk*bn <= 16384, bm*bn*6 <= 253952 (248 KiB)" in text
    assert "-> bm = 96" in text
    header = next(line for line in text.splitlines() if "N_fused" in line)
    for col in ("bm", "bk", "bn", "N_fused", "TFLOP/s", "MTE2", "MTE1", "M", "OUT", "roofline", "traffic GB"):
        assert col in header
    assert "MODEL PREDICTIONS" in text and "ranked by the pipeline model" in text
    rows = [line.split() for line in text.splitlines() if line[:4].strip().isdigit() and line[3] == " "]
    assert len(rows) == 5 and [int(r[0]) for r in rows] == [1, 2, 3, 4, 5]


def test_json_output_matches_the_model():
    from sgemm_cube.tuning import pipeline

    rc, text = _run(["--device", "910b", "--m", "1000", "--n", "300", "--k", "77", "--top", "3", "--json",
                     "--buffering", "single", "--terms", "4"])
    assert rc == 0
    doc = json.loads(text)
    expect = pipeline.rank("910b", 1000, 300, 77, design=pipeline.Design("paper", "single", 4), top=3)
    assert [(r["bm"], r["bk"], r["bn"], r["n_fused"]) for r in doc["rows"]] == [tuple(r.tiling)[:4] for r in expect]
    assert [r["model_tflops"] for r in doc["rows"]] == [r.tflops for r in expect]


def test_sort_by_traffic_orders_the_model_rows_by_roofline_traffic():
    rc, text = _run(["--device", "910a", "--m", "2048", "--n", "2048", "--k", "2048", "--top", "6", "--json",
                     "--sort", "traffic"])
    assert rc == 0
    traffic = [r["traffic_bytes"] for r in json.loads(text)["rows"]]
    assert len(traffic) == 6 and traffic == sorted(traffic, key=lambda t: round(t / min(traffic), 2))


def test_kernel_design_ranks_blocks_for_the_ascendc_kernel():
    from sgemm_cube.backends import npu_schedule as ns

    rc, text = _run(["--device", "910a", "--design", "kernel", "--m", "1024", "--n", "1024", "--k", "1024",
                     "--top", "1", "--json"])
    assert rc == 0
    row = json.loads(text)["rows"][0]
    # The kernel accepts the model's best tiling.
    ns.make_geometry(1, 1024, 1024, 1024, ns.Tiling(row["bm"], row["bk"], row["bn"], row["n_fused"]), 32, 3,
                     ns.capacity_from_profile("910a"))
    rc, text = _run(["--device", "910a", "--design", "kernel", "--m", "1024", "--n", "1024", "--k", "1024",
                     "--top", "1"])
    assert "bm*bn*12 <= 253952" in text


def test_kernel_design_ranks_one_and_two_l0c_stages():
    """--design kernel-per-term ranks each tiling with one and two L0C stages (Tiling.l0c_stages): --json
    rows say which, the text has an L0C column, and at 8192^3 on 910A two stages rank first (model)."""
    from sgemm_cube.backends import npu_schedule as ns

    shape = ["--m", "8192", "--n", "8192", "--k", "8192"]
    rc, text = _run(["--device", "910a", "--design", "kernel-per-term", "--top", "40", "--json"] + shape)
    assert rc == 0
    rows = json.loads(text)["rows"]
    assert rows[0]["l0c_stages"] == 2 and {r["l0c_stages"] for r in rows} == {1, 2}
    tflops = [round(r["model_tflops"], 1) for r in rows]  # rank's order: to 0.1, ties to the larger block
    assert tflops == sorted(tflops, reverse=True)
    for r in rows[:3]:  # the kernel's plan accepts each, both accumulator sets in L0C
        t = ns.Tiling(r["bm"], r["bk"], r["bn"], r["n_fused"], r["per_term"], r["l0c_stages"])
        ns.make_geometry(1, 8192, 8192, 8192, t, 32, 3, ns.capacity_from_profile("910a"))
    rc, text = _run(["--device", "910a", "--design", "kernel", "--top", "3"] + shape)
    assert rc == 0 and " L0C " in text and "L0C the accumulator sets" in text


def test_plot_fig5_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "fig5.png"
    rc, text = _run(["--device", "910a", "--m", "1024", "--n", "1024", "--k", "1024", "--top", "1",
                     "--plot-fig5", str(png)])
    assert rc == 0 and f"wrote {png}" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fig5_data_series():
    from sgemm_cube.tuning.plots import fig5_data

    data = fig5_data("910a", (0.5, 1.0, 2.0))
    assert set(data) == {0.5, 1.0, 2.0}
    for r, d in data.items():
        assert d["bm_bk"].size > 50
        assert (d["bn"] == r * d["bm"]).all()
        assert (d["bm_bk"][1:] >= d["bm_bk"][:-1]).all()


def test_show_prints_stored_tables(tmp_path):
    t = T.TuningTable("CLI Test GPU", "cuda")
    t.set((2048, 2048, 2048), {"BLOCK_M": 128, "BLOCK_N": 64}, {"tflops": 99.5})
    T.save(t)
    rc, text = _run(["--show"])
    assert rc == 0 and "CLI Test GPU" in text and "2048x2048x2048" in text and "99.5 TFLOP/s" in text


def test_show_reports_unusable_files(tmp_path):
    d = Path(os.environ["SGEMM_CUBE_TUNING_DIR"])
    d.mkdir(parents=True)
    (d / "broken.json").write_text("{")
    rc, text = _run(["--show"])
    assert rc == 0 and "unusable" in text


def test_list_profiles_includes_user_file(tmp_path):
    from sgemm_cube.tuning import get_profile

    entry = get_profile("910b").to_json()
    entry["name"] = "Ascend 910B4"
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"schema": 1, "profiles": {"910b4": entry}}))
    rc, text = _run(["--profiles", str(path), "--list-profiles"])
    assert rc == 0 and "910b4  Ascend 910B4" in text and "910a" in text
    rc, text = _run(["--profiles", str(path), "--device", "910b4", "--top", "1", "--m", "1024", "--n", "1024",
                     "--k", "1024"])
    assert rc == 0 and "Ascend 910B4" in text


@pytest.mark.parametrize("argv, message", [
    (["--device", "nosuchchip"], "unknown hardware profile"),
    (["--min-l0-intensity", "2"], "min_l0_intensity"),
])
def test_errors_exit_with_status_2(capsys, argv, message):
    rc, _ = _run(argv)
    assert rc == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--m", "0"], ["--k", "-3"], ["--top", "0"]])
def test_sizes_below_one_are_refused_by_the_parser(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        cli.parse_args(argv)
    assert exit_info.value.code == 2
    assert f"{argv[0]}: must be a positive integer" in capsys.readouterr().err


def test_cuda_without_gpu_is_an_error_not_a_crash(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present; this checks the message on GPU-less machines")
    rc, _ = _run(["--device", "cuda"])
    assert rc == 2 and "no CUDA device" in capsys.readouterr().err


def test_add_parser_wires_into_a_host_program():
    parser = argparse.ArgumentParser(prog="sgemm-cube")
    sub = parser.add_subparsers(dest="command", required=True)
    cli.add_parser(sub)
    args = parser.parse_args(["tune", "--device", "910b", "--top", "2", "--json", "--m", "1024", "--n", "1024",
                              "--k", "1024"])
    out = io.StringIO()
    assert args.func(args, out=out) == 0
    assert len(json.loads(out.getvalue())["rows"]) == 2


def test_module_entry_point():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "sgemm_cube.tuning.cli", "--device", "910a", "--top", "3", "--m", "1024",
                           "--n", "1024", "--k", "1024"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Ascend 910A" in proc.stdout and "N_fused" in proc.stdout


def test_measure_without_an_npu_says_so_before_any_work(capsys, monkeypatch):
    from sgemm_cube.backends import npu as backend
    from sgemm_cube.tuning import npu

    if backend.is_available():
        pytest.skip("an NPU is present: this checks the message on NPU-less machines")

    def no_work(*args, **kwargs):
        raise AssertionError("the candidates were ranked before the NPU was looked for")

    monkeypatch.setattr(npu, "rank", no_work)
    rc, text = _run(["--device", "910a", "--measure"])
    err = capsys.readouterr().err
    assert rc == 2 and text == ""
    assert err.startswith("sgemm-cube tune: error: ") and "needs an Ascend NPU" in err
    assert backend.unavailable_reason() in err and "Traceback" not in err


def test_plots_without_matplotlib_name_the_extra(capsys, monkeypatch, tmp_path):
    from sgemm_cube.tuning import pipeline, plots

    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # import matplotlib... fails as if it were not installed

    def no_work(*args, **kwargs):
        raise AssertionError("the blocks were ranked before matplotlib was looked for")

    monkeypatch.setattr(pipeline, "rank", no_work)
    for flag in ("--plot", "--plot-fig5"):
        rc, text = _run(["--device", "910a", flag, str(tmp_path / "fig.png")])
        err = capsys.readouterr().err
        assert rc == 2 and text == "" and "pip install 'sgemm_cube[plot]'" in err
    with pytest.raises(plots.MissingExtraError, match=r"sgemm_cube\[plot\]"):
        plots.plot_fig5("910a", tmp_path / "fig5.png")
    assert not (tmp_path / "fig.png").exists() and not (tmp_path / "fig5.png").exists()
