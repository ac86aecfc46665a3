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
    for name in ("termwise sb=12", "termwise sb=0", "elementwise sb=12", "native FP32", "plain FP16"):
        assert name in text
    rows = {line.split("  ")[0]: float(line.split()[-1]) for line in text.splitlines()
            if line.split() and line.split()[-1][-4:-2] == "e-"}
    assert rows["sgemm_cube termwise sb=12"] < rows["plain FP16 (FP32 accumulation)"] / 100
    # The demo's "native FP32" is this host's BLAS (what the user's SGEMM gives); the verdict takes FP32
    # recursive summation of the demo's data (seed 0), the same on every CPU.
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 96), dtype=np.float32), rng.standard_normal((96, 96), dtype=np.float32)
    fp32 = relative_error(fp32_matmul(a, b), a.astype(np.float64) @ b.astype(np.float64))
    assert rows["sgemm_cube termwise sb=12"] <= fp32, (rows, fp32)


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
