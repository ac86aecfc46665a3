"""Input checks of the ``sgemm-cube`` commands: a value a command cannot use stops it with one clear line.

argparse refuses bad option values (usage and the option's name on stderr,
status 2) before anything runs; a backend that cannot run here and files
that are not study data are one line on stderr and status 2 or 1.  None of
them is a traceback (an exception escaping ``main``) or a run with other
values than those given.
"""
import pytest

from sgemm_cube.cli import main


def _usage_error(argv, capsys) -> str:
    """Run ``sgemm-cube ARGV``: it must stop in argparse with status 2; returns stderr."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument" in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv, message", [
    (["demo", "--size", "0"], "--size: must be a positive integer, got 0"),
    (["demo", "--size", "-5"], "--size: must be a positive integer, got -5"),
    (["demo", "--repeats", "0"], "--repeats: must be a positive integer, got 0"),
    (["demo", "--size", "1.5"], "--size: '1.5' is not an integer"),
    (["demo", "--seed", "-1"], "--seed: must be an integer >= 0"),
    (["bench", "--seed", "-1"], "--seed: must be an integer >= 0"),
    (["bench-cpu", "--size", "0"], "--size: must be a positive integer"),
    (["bench-cpu", "--repeats", "-1"], "--repeats: must be a positive integer"),
    (["bench", "--sizes", "1024", "0"], "--sizes: must be a positive integer, got 0"),
    (["bench", "--reps-ms", "0"], "--reps-ms: must be a finite number > 0"),
    (["bench", "--sweep-size", "-8"], "--sweep-size: must be a positive integer"),
    (["bench", "--matrix", "--rounds", "0"], "--rounds: must be a positive integer"),
    (["bench", "--matrix", "--budget-s", "nan"], "--budget-s: must be a finite number > 0"),
    (["bench", "--model", "--layers", "0"], "--layers: must be a positive integer"),
    (["bench", "--model", "--runs", "0"], "--runs: must be a positive integer"),
    (["bench", "--model", "--warmup", "-1"], "--warmup: must be an integer >= 0"),
])
def test_demo_and_bench_refuse_counts_and_sizes_below_one(capsys, argv, message):
    assert message in _usage_error(argv, capsys)


@pytest.mark.parametrize("argv, message", [
    (["exponent-sweep", "--exp-range", "5", "-5"], "--exp-range: the first value (5) must not exceed the second (-5)"),
    (["heatmap", "--exp-range", "16", "-32"], "--exp-range: the first value (16) must not exceed the second"),
    (["heatmap", "--exp-range", "0", "5000"], "--exp-range: must be an integer in [-1000, 1000]"),
    (["heatmap", "--m", "0"], "--m: must be a positive integer, got 0"),
    (["heatmap", "--seed", "-1"], "--seed: must be an integer >= 0"),
    (["heatmap", "--k", "-3"], "--k: must be a positive integer"),
    (["heatmap", "--exp-step", "0"], "--exp-step: must be a positive integer"),
    (["heatmap", "--sb", "25"], "--sb: must be an integer in [0, 24]"),
    (["exponent-sweep", "--sb", "0", "-1"], "--sb: must be an integer in [0, 24]"),
    (["exponent-sweep", "--trials", "0"], "--trials: must be a positive integer"),
    (["size-sweep", "--mn-sizes", "8", "0"], "--mn-sizes: must be a positive integer"),
    (["size-sweep", "--k-fixed", "0"], "--k-fixed: must be a positive integer"),
    (["condition", "--delta-range", "1e6", "10"], "--delta-range: the first value (1e+06) must not exceed"),
    (["condition", "--delta-range", "0.5", "10"], "--delta-range: must be a finite number >= 1"),
    (["condition", "--delta-range", "10", "inf"], "--delta-range: must be a finite number >= 1"),
    (["condition", "--delta-count", "0"], "--delta-count: must be a positive integer"),
    (["condition", "--size", "0"], "--size: must be a positive integer"),
])
def test_accuracy_studies_refuse_empty_and_inverted_ranges(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert message in _usage_error(["accuracy", *argv, "--out", str(out), "--no-progress"], capsys)
    assert not out.exists()  # refused before anything ran


def test_accuracy_accepts_a_single_exponent(tmp_path, capsys):
    """LO == HI is one exponent (a one-cell heatmap), not an error."""
    assert main(["accuracy", "heatmap", "--exp-range", "0", "0", "--m", "4", "--k", "8", "--n", "4", "--no-plot",
                 "--no-progress", "--out", str(tmp_path)]) == 0
    assert "wrote" in capsys.readouterr().out


def test_accuracy_plot_of_a_missing_path_is_a_usage_error(tmp_path, capsys):
    err = _usage_error(["accuracy", "plot", str(tmp_path / "nonexistent_dir")], capsys)
    assert "no such file or folder" in err and "nonexistent_dir" in err


@pytest.mark.parametrize("name, content, message", [
    ("notes.txt", "hello", "expected a .json or .csv file"),
    ("broken.json", "not json", "invalid JSON"),
    ("other.json", '{"a": 1}', "not a file written by a study"),
    ("table.csv", "x,y\n1,2\n", "no '# study:' line"),
    ("empty_folder", None, "holds none of"),
])
def test_accuracy_plot_of_a_file_that_is_not_study_data(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    if content is None:
        path.mkdir()
    else:
        path.write_text(content)
    assert main(["accuracy", "plot", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and str(path) in err, err


@pytest.mark.parametrize("reason, gpu", [("no GPU here (test)", False), ("available", False)])
def test_demo_on_cuda_without_a_gpu_says_why(monkeypatch, capsys, reason, gpu):
    """Backend unavailable, or available only in Triton's interpreter: the reason, status 2, nothing run."""
    from sgemm_cube.cli import demo

    monkeypatch.setattr(demo, "available_backends", lambda: {"cpu": "available", "cuda": reason})
    monkeypatch.setattr(demo, "_has_cuda_gpu", lambda: gpu)
    monkeypatch.setattr(demo, "matmul", lambda *a, **k: pytest.fail("the demo ran without its device"))
    assert main(["demo", "--device", "cuda"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("sgemm-cube demo: ") and captured.err.count("\n") == 1
    assert (reason if reason != "available" else "needs a CUDA GPU") in captured.err


def test_run_functions_refuse_sizes_below_one():
    from sgemm_cube.cli.bench_cpu import run_cpu_benchmark
    from sgemm_cube.cli.demo import run_demo

    for fn in (run_demo, run_cpu_benchmark):
        with pytest.raises(ValueError, match="size must be a positive integer"):
            fn(size=0)
        with pytest.raises(ValueError, match="repeats must be a positive integer"):
            fn(size=8, repeats=0)


def test_accuracy_help_is_for_users(capsys):
    with pytest.raises(SystemExit) as info:
        main(["accuracy", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "Wiring" not in text and "add_parser" not in text and ":func:" not in text
    assert "scale=None, fixup=False" in text and "pip install 'sgemm_cube[plot]'" in text
    for study in ("exponent-sweep", "size-sweep", "condition", "heatmap", "all", "plot"):
        with pytest.raises(SystemExit):
            main(["accuracy", study, "--help"])
        text = capsys.readouterr().out
        assert not any(markup in text for markup in ("``", ":func:", ":class:", ":mod:")), (study, text)


@pytest.mark.parametrize("argv, message", [
    (["bench-cpu", "--size", "8", "--out", "{file}"], "--out: {file} is a file, not a folder"),
    (["bench-cpu", "--size", "8", "--out", "{file}/sub"], "--out: cannot create the folder {file}/sub: {file} is a file"),
    (["accuracy", "exponent-sweep", "--out", "{file}"], "--out: {file} is a file, not a folder"),
    (["accuracy", "all", "--preset", "tiny", "--out", "{file}"], "--out: {file} is a file, not a folder"),
    (["accuracy", "plot", "{file}", "--out", "{file}"], "--out: {file} is a file, not a folder"),
    (["demo", "--size", "99999999999"], "--size: must be at most 1048576, got 99999999999"),
    (["tune", "--device", "910a", "--plot", "{missing}/x.png"], "--plot: no such folder: {missing} (create it first)"),
    (["tune", "--device", "910a", "--plot-fig5", "{missing}/x.png"], "--plot-fig5: no such folder: {missing}"),
    (["tune", "--device", "910a", "--plot", "{folder}"], "--plot: {folder} is a folder; name a file in it"),
])
def test_output_paths_that_cannot_be_written_are_usage_errors(tmp_path, capsys, argv, message):
    """An --out that is a file, a --plot in a folder that does not exist, a demo size beyond any memory:
    one line naming the option, status 2, nothing run (no traceback)."""
    names = dict(file=tmp_path / "a_file", missing=tmp_path / "missing", folder=tmp_path)
    names["file"].write_text("keep me")
    err = _usage_error([arg.format(**names) for arg in argv], capsys)
    assert message.format(**names) in err.splitlines()[-1]  # the usage, then one line naming the option
    assert names["file"].read_text() == "keep me" and not names["missing"].exists()


def test_demo_out_of_memory_is_one_line(monkeypatch, capsys):
    from sgemm_cube.cli import demo

    def no_memory(**kwargs):
        raise MemoryError
    monkeypatch.setattr(demo, "run_demo", no_memory)
    assert main(["demo", "--size", "200000"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "--size 200000" in captured.err and "149 GiB" in captured.err


def test_accuracy_plot_of_a_report_honours_out(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    report, elsewhere = tmp_path / "report", tmp_path / "figures"
    assert main(["accuracy", "all", "--preset", "tiny", "--no-plot", "--no-progress", "--out", str(report)]) == 0
    before = sorted(p.name for p in report.iterdir())
    assert main(["accuracy", "plot", str(report), "--out", str(elsewhere)]) == 0
    assert sorted(p.name for p in report.iterdir()) == before  # the report folder is left as it was
    written = sorted(p.name for p in elsewhere.iterdir())
    assert "summary.md" in written and len([n for n in written if n.endswith(".png")]) == 5
    assert "heatmap.png" in (elsewhere / "summary.md").read_text()


def test_tune_plot_refuses_a_design_it_does_not_draw(tmp_path, capsys):
    """Fig. 10 is the paper's design (single against double buffering): --design kernel is refused, not
    silently drawn as the paper's."""
    png = tmp_path / "fig10.png"
    for design in ("kernel", "kernel-per-term"):
        assert main(["tune", "--device", "910a", "--m", "512", "--n", "512", "--k", "512", "--design", design,
                     "--plot", str(png)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--design {design}" in err and "--design paper" in err
    assert not png.exists()
