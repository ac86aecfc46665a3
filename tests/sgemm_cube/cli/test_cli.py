"""The sgemm-cube command line, end to end at small sizes."""
import json
import subprocess
import sys

import numpy as np
import pytest

from sgemm_cube.cli import main
from sgemm_cube.metrics import relative_error
from tests.guarantee_data import fp32_matmul


def test_demo_prints_the_table(capsys):
    assert main(["demo", "--size", "96", "--device", "cpu", "--repeats", "1"]) == 0
    text = capsys.readouterr().out
    defaults = "sgemm_cube sb=12 termwise (defaults: scaling + fix-up)"
    for name in (defaults, "sgemm_cube sb=12 elementwise (scaling + fix-up)",
                 "paper's split sb=0 termwise (scale=None, fixup=False)",
                 "paper's split sb=0 elementwise (scale=None, fixup=False)", "native FP32", "plain FP16"):
        assert name in text
    rows = {line.split("  ")[0]: float(line.split()[-1]) for line in text.splitlines()
            if line.split() and line.split()[-1][-4:-2] == "e-"}
    assert rows[defaults] < rows["plain FP16 (FP32 accumulation)"] / 100
    # The demo's "native FP32" is this host's BLAS (what the user's SGEMM gives); the verdict takes FP32
    # recursive summation of the demo's data (seed 0), the same on every CPU.
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 96), dtype=np.float32), rng.standard_normal((96, 96), dtype=np.float32)
    fp32 = relative_error(fp32_matmul(a, b), a.astype(np.float64) @ b.astype(np.float64))
    assert rows[defaults] <= fp32, (rows, fp32)


def test_bench_cpu_writes_json(tmp_path, capsys):
    assert main(["bench-cpu", "--size", "128", "--repeats", "1", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "cpu_model_128.json").read_text())
    assert record["ratio"] > 0 and record["rel_error_sgemm_cube"] < 1e-5
    assert "ratio" in capsys.readouterr().out


def test_console_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "sgemm_cube", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "demo" in proc.stdout


def test_unknown_command_fails():
    with pytest.raises(SystemExit):
        main(["nope"])


def test_demo_rows_run_the_options_their_labels_name(monkeypatch, capsys):
    """A row labelled "scale=None, fixup=False" runs exactly that; one labelled "scaling + fix-up" the defaults."""
    from sgemm_cube.cli import demo

    calls = []

    def recording_matmul(a, b, sb=12, **options):
        calls.append((sb, options))
        return a @ b

    monkeypatch.setattr(demo, "matmul", recording_matmul)
    rows = demo.run_demo(size=8, device="cpu", repeats=1, print_fn=lambda text: None)
    emulated = [row["method"] for row in rows if row["backend"] == "cpu"]
    runs = [call for call in calls if call[1].get("backend") == "cpu"][::2]  # a warm-up and one timed call each
    assert len(emulated) == len(runs) == 4
    for label, (sb, options) in zip(emulated, runs):
        assert f"sb={sb} " in label
        if "scale=None, fixup=False" in label:
            assert label.startswith("paper's split") and options["scale"] is None and options["fixup"] is False
        else:
            assert label.startswith("sgemm_cube") and "scaling + fix-up" in label
            assert "scale" not in options and "fixup" not in options  # the library's defaults


def test_version_is_the_package_version(capsys):
    import sgemm_cube

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"sgemm-cube {sgemm_cube.__version__}"


def test_demo_prints_each_row_as_it_finishes(monkeypatch):
    """On a loaded machine the CPU model takes a while: each row is printed as soon as it is measured, after
    a line saying the CPU backend is an exact arithmetic model, slow by design."""
    from sgemm_cube.cli import demo

    events = []
    measure = demo.best_time
    monkeypatch.setattr(demo, "best_time", lambda fn, repeats, sync=None: (events.append("measured"),
                                                                            measure(fn, repeats, sync))[1])
    rows = demo.run_demo(size=16, device="cpu", repeats=1, print_fn=lambda line: events.append(line))
    lines = [e for e in events if e != "measured"]
    assert any("exact arithmetic model" in line and "slow by design" in line for line in lines[:2])
    measured = [i for i, e in enumerate(events) if e == "measured"]
    assert len(measured) == len(rows) == 6
    for i, row in zip(measured, rows):  # the row's line comes right after its measurement
        assert events[i + 1].startswith(row["method"])
