"""The command line where an optional package is missing (a NumPy-only ``pip install .``).

matplotlib is the extra ``plot``: the studies then write their data files
and say the figures were skipped; ``accuracy plot`` stops with one line
naming the extra.  torch and triton (extras ``torch``, ``cuda``) are what
``sgemm-cube bench`` needs: it says so.  Each test makes the package
unimportable by setting ``sys.modules[name] = None``.
"""
import sys

import pytest

from sgemm_cube.cli import main

EXTRA = "pip install 'sgemm_cube[plot]'"
TINY_HEATMAP = ["heatmap", "--exp-range", "-8", "8", "--exp-step", "8", "--m", "4", "--k", "8", "--n", "4",
                "--no-progress"]


@pytest.fixture
def no_matplotlib(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib (and its submodules) now fails


def test_study_without_matplotlib_writes_the_data_and_skips_the_figure(tmp_path, capsys, no_matplotlib):
    assert main(["accuracy", *TINY_HEATMAP, "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heatmap.csv", "heatmap.json"]
    captured = capsys.readouterr()
    assert "SNR in dB" in captured.out  # the summary is printed as usual
    assert captured.err.count("\n") == 1 and "figures skipped" in captured.err and EXTRA in captured.err
    assert f"sgemm-cube accuracy plot {tmp_path / 'heatmap.json'}" in captured.err


def test_no_plot_says_nothing_about_matplotlib(tmp_path, capsys, no_matplotlib):
    assert main(["accuracy", *TINY_HEATMAP, "--no-plot", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""


def test_all_without_matplotlib_writes_data_and_summary(tmp_path, capsys, no_matplotlib):
    assert main(["accuracy", "all", "--preset", "tiny", "--out", str(tmp_path), "--no-progress"]) == 0
    assert not list(tmp_path.glob("*.png")) and len(list(tmp_path.glob("*.json"))) == 5
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("# sgemm_cube accuracy report") and ".png)" not in summary
    err = capsys.readouterr().err
    assert "figures skipped" in err and EXTRA in err and f"sgemm-cube accuracy plot {tmp_path}" in err


@pytest.mark.parametrize("target", ["file", "folder"])
def test_plot_without_matplotlib_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch, target):
    assert main(["accuracy", *TINY_HEATMAP, "--no-plot", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["accuracy", "plot", str(tmp_path / "heatmap.json" if target == "file" else tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and EXTRA in captured.err
    assert not list(tmp_path.glob("*.png"))


def test_library_calls_without_matplotlib_raise_before_working(tmp_path, no_matplotlib):
    from sgemm_cube.cli.accuracy import heatmap_study, run_all
    from sgemm_cube.cli.accuracy.plotting import PlotsUnavailable, plot

    data = heatmap_study(exp_range=(0, 0), m=2, k=4, n=2, progress=False)
    with pytest.raises(PlotsUnavailable, match=r"sgemm_cube\[plot\]"):
        plot(data, tmp_path / "h.png")
    with pytest.raises(ImportError, match=r"sgemm_cube\[plot\]"):  # PlotsUnavailable is an ImportError
        run_all(out_dir=tmp_path / "report", preset="tiny", progress=False)
    assert not (tmp_path / "report").exists()  # refused before any study ran


@pytest.mark.parametrize("argv, extra", [(["bench"], "sgemm_cube[cuda]"),
                                         (["bench", "--model", "--device", "cpu"], "sgemm_cube[torch]")])
def test_bench_without_torch_names_the_extra(monkeypatch, capsys, argv, extra):
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "triton", None)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and extra in captured.err
