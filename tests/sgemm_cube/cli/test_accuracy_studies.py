"""The accuracy studies (``sgemm-cube accuracy``): end to end at tiny sizes, and the papers' findings.

What is claimed and checked here:

* every study runs from the command line, writes CSV, JSON and PNG, and the
  data load back equal; the command recorded in them parses back to the
  same parameters; ``all`` writes the report folder;
* the condition-number generator hits the requested average condition
  number within a factor of 2;
* the qualitative findings of SGEMM-cube Fig. 8 hold at small sizes, each
  against float64 with native FP32 (here recursive summation, the same on
  every host) measured on the same data: termwise
  sb=12 at least as accurate as native FP32 at small exponents, sb=12 far
  better than sb=0 there, FP16 only the worst; and BF16x9 Fig. 4: sgemm_cube
  on average more accurate than native FP32 at every condition number;
* points outside the split's range are reported missing, not crashed on.

Each test seeds the studies from the session seed that pytest's header
prints (fixed by default; ``SGEMM_CUBE_TEST_SEED=random`` draws a fresh one,
``SGEMM_CUBE_TEST_SEED=<int>`` replays a run).
"""
import csv
import json
import math
import os
import shlex
import subprocess
import sys

import numpy as np
import pytest

from sgemm_cube.cli.accuracy import (condition_matrices, condition_study, exponent_sweep_study, heatmap_study, load,
                                 size_sweep_study)
from sgemm_cube.cli.accuracy.cli import build_parser, main, study_kwargs
from sgemm_cube.cli.accuracy.io import StudyData, save
from sgemm_cube.cli.accuracy.methods import Engine, Method
from sgemm_cube.metrics import (componentwise_relative_error, dot_condition_numbers, reference_matmul64,
                                relative_error, snr_db)

from tests.conftest import draw
from tests.guarantee_data import fp32_matmul


@pytest.fixture(autouse=True)
def _native_fp32_is_recursive_summation(monkeypatch):
    """The studies' "native FP32" is this host's BLAS (the user's SGEMM: what a report should show); the
    tests compare against FP32 recursive summation instead, the same bits on every CPU (OpenBLAS's AVX2
    and AVX-512 kernels, or 8 and 16 partial sums, move the findings' ratios by 10-40%)."""
    native = Engine._product

    def product(self, method, a, b):
        return fp32_matmul(a, b) if method.kind == "fp32" else native(self, method, a, b)

    monkeypatch.setattr(Engine, "_product", product)


#: Study subcommand -> tiny options (a second or two each on the CPU model).
TINY = {
    "exponent-sweep": ["--exp-range", "-16", "16", "--exp-step", "8", "--m", "12", "--k", "40", "--n", "8"],
    "size-sweep": ["--mn-sizes", "8", "12", "--k-fixed", "48", "--k-sizes", "16", "80", "--mn-fixed", "8"],
    "condition": ["--delta-range", "10", "1e4", "--delta-count", "2", "--size", "16", "--trials", "2"],
    "heatmap": ["--exp-range", "-20", "16", "--exp-step", "12", "--m", "8", "--k", "24", "--n", "8"],
}


@pytest.fixture
def seed(rng):
    return int(rng.integers(2**31))


@pytest.fixture
def matplotlib():
    """The end-to-end tests draw the PNGs: only they skip without matplotlib (the studies need none)."""
    return pytest.importorskip("matplotlib")


def _same(x, y) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return x == y


def _assert_equal_data(a: StudyData, b: StudyData):
    assert (a.study, a.columns, len(a.rows)) == (b.study, b.columns, len(b.rows))
    for ra, rb in zip(a.rows, b.rows):
        assert all(_same(ra[c], rb[c]) for c in a.columns), (ra, rb)
    assert a.meta["command"] == b.meta["command"]


@pytest.mark.parametrize("study", list(TINY))
def test_study_command_writes_files_that_load_back(tmp_path, capsys, seed, study, matplotlib):
    argv = [study, *TINY[study], "--seed", str(seed), "--out", str(tmp_path), "--no-progress"]
    assert main(argv) == 0
    name = study.replace("-", "_")
    assert "wrote" in capsys.readouterr().out
    png = (tmp_path / f"{name}.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    from_json, from_csv = load(tmp_path / f"{name}.json"), load(tmp_path / f"{name}.csv")
    _assert_equal_data(from_json, from_csv)
    assert from_json.meta["seed"] == seed and from_json.meta["backend"] == "cpu"
    assert any(r["status"] == "ok" for r in from_json.rows)
    # The recorded command reproduces the parameters exactly.
    words = shlex.split(from_json.meta["command"])
    assert words[:3] == ["sgemm-cube", "accuracy", study]
    reparsed = study_kwargs(build_parser().parse_args(words[2:]))
    reparsed.pop("progress")
    assert json.loads(json.dumps(reparsed)) == from_json.meta["params"]
    # The CSV is plain: any reader that skips the '#' lines gets the table.
    lines = [line for line in (tmp_path / f"{name}.csv").read_text().splitlines() if not line.startswith("#")]
    table = list(csv.DictReader(lines))
    assert list(table[0]) == from_json.columns and len(table) == len(from_json.rows)


def test_plot_subcommand_redraws_from_csv(tmp_path, seed, matplotlib):
    data = heatmap_study(exp_range=(-8, 8), exp_step=8, m=8, k=16, n=8, seed=seed, progress=False)
    save(data, tmp_path, "h")
    assert main(["plot", str(tmp_path / "h.csv"), "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "h.png").stat().st_size > 10_000


def test_all_writes_the_report(tmp_path, seed, matplotlib):
    assert main(["all", "--preset", "tiny", "--seed", str(seed), "--out", str(tmp_path), "--no-progress"]) == 0
    names = ["exponent_sweep", "size_sweep", "condition", "heatmap", "heatmap_wide"]
    for name in names:
        for ext in ("csv", "json", "png"):
            assert (tmp_path / f"{name}.{ext}").stat().st_size > 0
        assert load(tmp_path / f"{name}.json").meta["invoked_as"] == "sgemm-cube accuracy all --preset tiny"
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("# sgemm_cube accuracy report")
    assert all(f"({name}.png)" in summary for name in names)
    assert summary.count("sgemm-cube accuracy ") >= len(names)


@pytest.mark.parametrize("delta", [1e1, 1e2, 1e4, 1e6])
@pytest.mark.parametrize("size", [24, 64])
def test_condition_generator_hits_the_requested_condition_number(rng, delta, size):
    a, b = condition_matrices(delta, size, rng=rng)
    assert a.dtype == b.dtype == np.float32 and a.shape == (size, size) and b.shape == (size, size)
    kappa = dot_condition_numbers(a, b)
    assert 0.5 * delta <= kappa.mean() <= 2 * delta, kappa.mean()
    # Most dot products sit near delta; the size - 1 small entries of a column lift its norm
    # by sqrt(1 + size / delta**2), which shows at small delta.
    assert delta * 0.95 <= np.median(kappa) <= 1.1 * delta * math.sqrt(1 + size / delta**2)
    # A is a row-scaled orthonormal matrix: its rows are orthogonal.
    gram = a.astype(np.float64) @ a.T.astype(np.float64)
    off = gram - np.diag(np.diag(gram))
    assert np.abs(off).max() < 1e-5 * np.abs(np.diag(gram)).max()


def test_condition_study_sgemm_cube_beats_native_fp32_on_average(seed):
    """BF16x9 Fig. 4 with SGEMM-cube at the paper's 160 x 160: lower average error than native FP32
    at every condition number, and more accurate on most outputs.  (At K below about 100 the split's
    22 bits per input, amplified by the condition number, make native FP32 the more accurate one.)"""
    data = condition_study(delta_range=(1e1, 1e6), delta_count=3, size=160, trials=2, seed=seed, progress=False)
    for delta in sorted({r["delta"] for r in data.rows}):
        native = data.column("mean_rel_error", delta=delta, method="fp32")[0]
        termwise = data.column("mean_rel_error", delta=delta, method="termwise_sb12")[0]
        share = data.column("share_better", delta=delta, method="termwise_sb12")[0]
        kappa = data.column("kappa_mean", delta=delta, method="fp32")[0]
        assert termwise < native, (delta, termwise, native)
        assert share > 0.5, (delta, share)
        assert native < 2 ** -20 * kappa  # the error grows with the condition number, as Eq. 3 bounds it


@pytest.mark.parametrize("dist", ["symmetric", "nonnegative"])
def test_exponent_sweep_reproduces_the_papers_findings(seed, dist):
    """SGEMM-cube Fig. 8 at small sizes, in the small-exponent region where the split is in range."""
    data = exponent_sweep_study(exp_range=(-12, -2), exp_step=2, m=48, k=256, n=32, distributions=(dist,),
                                seed=seed, progress=False)

    def err(method, e):
        return data.column("rel_error", exponent=e, method=method)[0]

    exps = sorted({r["exponent"] for r in data.rows})
    ratios = [err("termwise_sb12", e) / err("fp32", e) for e in exps]
    assert np.exp(np.mean(np.log(ratios))) <= 1.0, ratios  # at least as accurate as native FP32 ...
    assert max(ratios) <= 1.25, ratios                     # ... and never clearly worse
    for e in exps:
        others = [err(m, e) for m in data.column("method", exponent=e) if m != "fp16"]
        assert err("termwise_sb0", e) > (4 if e <= -8 else 0.99) * err("termwise_sb12", e)  # scaling the residual
        assert err("fp16", e) >= 0.99 * max(others)                 # FP16 only is the worst (sb=0 ties it)
        assert err("fp16", e) > 20 * err("fp32", e)


def test_size_sweep_rows_and_flat_error_in_m(seed):
    """SGEMM-cube Fig. 9(a): with K fixed the error hardly depends on M = N.

    (From M = N = 16: the relative error of fewer outputs scatters too much to compare; with the host's
    BLAS as native, OpenBLAS's small-matrix kernel at M = N = 8 gave a third of the error at 32 on 20 of
    30 seeds, which says nothing about the emulation.)"""
    data = size_sweep_study(mn_sizes=(16, 32), k_fixed=256, k_sizes=(64,), mn_fixed=16,
                            distributions=("symmetric",), seed=seed, progress=False)
    assert len(data.rows) == 3 * 5  # FP16 only, native FP32, the paper's split in two orders, the defaults
    for method in ("fp32", "termwise_sb12"):
        small, large = data.column("rel_error", sweep="mn", method=method)
        assert 0.33 < small / large < 3
    assert all(r["rel_error"] < 1e-3 for r in data.rows)


def test_out_of_range_points_are_missing_not_errors(seed):
    data = exponent_sweep_study(exp_range=(14, 17), m=8, k=16, n=8, sb=(0, 12), distributions=("symmetric",),
                                seed=seed, progress=False)
    row = {(r["exponent"], r["method"]): r for r in data.rows}
    assert row[(17, "termwise_sb12")]["status"] == "out_of_range"
    assert math.isnan(row[(17, "termwise_sb12")]["rel_error"])
    assert row[(17, "fp16")]["status"] == "out_of_range"
    assert row[(17, "fp32")]["status"] == "ok"
    assert row[(14, "termwise_sb12")]["status"] == "ok"
    assert data.column("status", exponent=16, method="termwise_sb12") == ["out_of_range"]  # 2**16 >= 2**(27-12)


def test_heatmap_marks_fp32_overflow_and_flushed_inputs(seed):
    data = heatmap_study(exp_range=(-160, 120), exp_step=140, m=4, k=8, n=4, seed=seed, progress=False)
    status = {(r["exp_a"], r["exp_b"], r["method"]): r["status"] for r in data.rows}
    assert status[(-160, -160, "fp32")] == "zero_reference"  # 2**-160 is below FP32's subnormals
    assert status[(120, 120, "fp32")] == "nonfinite"          # the product overflows FP32
    assert status[(120, -20, "termwise_sb12")] == "out_of_range"
    assert status[(-20, -20, "fp32")] == "ok"


def test_engine_runs_every_method_against_float64(rng):
    a, b = draw(rng, "normal", (20, 70)), draw(rng, "normal", (70, 12))
    engine = Engine("cpu", accumulate="sequential")
    ops = engine.operands(a, b)
    errors = {}
    for method in (Method("fp16"), Method("fp32"), Method("termwise", 12), Method("elementwise", 6)):
        outcome = engine.run(method, ops)
        assert outcome.status == "ok" and outcome.c.dtype == np.float32
        errors[method.key] = relative_error(outcome.c, ops.ref)
    assert errors["termwise_sb12"] < 4 * errors["fp32"] < errors["fp16"] / 10
    with pytest.raises(ValueError, match="needs sb"):
        Method("termwise")
    with pytest.raises(ValueError, match="accumulate"):
        Engine("cuda", accumulate="cube16")


def test_metrics_snr_componentwise_and_condition(rng):
    a, b = draw(rng, "uniform_pm1", (9, 30)), draw(rng, "uniform_pm1", (30, 7))
    ref = reference_matmul64(a, b)
    c = fp32_matmul(a, b)
    assert snr_db(c, ref) == pytest.approx(-20 * math.log10(relative_error(c, ref)))
    assert snr_db(ref, ref) == math.inf
    comp = componentwise_relative_error(c, ref)
    assert comp.shape == ref.shape and np.all(comp < 1e-3)
    assert componentwise_relative_error(np.array([0.0, 1.0]), np.array([0.0, 0.0])).tolist() == [0.0, math.inf]
    x = np.array([[1.0, 0.0], [1.0, 1.0]])
    y = np.array([[2.0, 0.0], [0.0, 3.0]])
    np.testing.assert_allclose(dot_condition_numbers(x, y), [[1.0, math.inf], [math.sqrt(2), math.sqrt(2)]])


def test_cuda_backend_path_under_the_triton_interpreter(tmp_path):
    """The --backend cuda code path (torch tensors, the Triton kernels), on CPU tensors in the interpreter."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: --backend cuda runs the kernels natively there")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "sgemm_cube.cli.accuracy.cli", "exponent-sweep", *TINY["exponent-sweep"],
                           "--sb", "12", "--distributions", "nonnegative", "--backend", "cuda", "--no-plot",
                           "--no-progress", "--out", str(tmp_path)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = load(tmp_path / "exponent_sweep.json")
    assert data.meta["backend"] == "cuda" and "interpreter" in data.meta["device"].lower()
    for e in (-8, 0, 8):
        assert data.column("rel_error", exponent=e, method="termwise_sb12")[0] < 4 * \
            data.column("rel_error", exponent=e, method="fp32")[0]


def test_import_needs_neither_matplotlib_nor_tqdm():
    code = ("import sys, sgemm_cube, sgemm_cube.cli.accuracy, sgemm_cube.cli.accuracy.cli; "
            "print(sorted(m for m in ('matplotlib', 'tqdm') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_progress_falls_back_to_plain_iteration_without_tqdm(monkeypatch):
    from sgemm_cube.cli.accuracy.progress import progress

    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now raises ImportError
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    assert list(progress(range(4), desc="x")) == [0, 1, 2, 3]
    assert list(progress("ab", enabled=False)) == ["a", "b"]


def test_unavailable_backend_is_a_clear_error(tmp_path, capsys, monkeypatch):
    import sgemm_cube.backends as backends
    from sgemm_cube.backends import cuda

    monkeypatch.setattr(cuda, "unavailable_reason", lambda: "no GPU here (test)")
    # The registry remembers a backend that ran (the Triton interpreter's, after the CUDA tests): forget
    # it, or the study would run in full on the interpreter (order-dependent: it ran for minutes after
    # tests/sgemm_cube/test_torch_switch.py)
    monkeypatch.delitem(backends._ready, "cuda", raising=False)
    assert main(["condition", "--backend", "cuda", "--out", str(tmp_path), "--no-progress"]) == 2
    assert "no GPU here (test)" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_labels_name_the_options_that_ran():
    """The paper's split is never labelled as the package: each label says which options ran."""
    assert Method("termwise", 12).label == "paper's split termwise sb=12 (scale=None, fixup=False)"
    assert Method("elementwise", 0).label == "paper's split elementwise sb=0 (scale=None, fixup=False)"
    assert Method("auto").label == "sgemm_cube sb=12 (default: scaling + fix-up)"


def test_engine_runs_what_the_labels_say(monkeypatch, rng):
    from sgemm_cube.cli.accuracy import methods as methods_module

    calls = []
    monkeypatch.setattr(methods_module, "matmul", lambda a, b, *args, **kw: calls.append((args, kw)) or a @ b)
    engine = Engine("cpu")
    ops = engine.operands(draw(rng, "normal", (4, 8)), draw(rng, "normal", (8, 4)))
    engine.run(Method("termwise", 6), ops)
    engine.run(Method("auto"), ops)
    (paper_args, paper_kw), (default_args, default_kw) = calls
    assert paper_args == (6,) and paper_kw["scale"] is None and paper_kw["fixup"] is False
    assert default_args == () and "scale" not in default_kw and "fixup" not in default_kw  # the defaults


@pytest.mark.parametrize("study, kwargs", [
    (exponent_sweep_study, dict(exp_range=(-4, 0), exp_step=4, m=4, k=16, n=4, sb=(12,), distributions=("symmetric",))),
    (size_sweep_study, dict(mn_sizes=(4,), k_fixed=16, k_sizes=(16,), mn_fixed=4, distributions=("symmetric",))),
    (condition_study, dict(delta_range=(10, 100), delta_count=2, size=8, trials=1)),
    (heatmap_study, dict(exp_range=(0, 0), m=4, k=16, n=4)),
])
def test_studies_of_the_paper_split_show_the_defaults_beside_it(seed, study, kwargs):
    data = study(**kwargs, seed=seed, progress=False)
    keys = data.values("method")
    assert "termwise_sb12" in keys and keys[-1] == "auto"
    assert data.label("auto") == Method("auto").label
    assert data.label("termwise_sb12") == Method("termwise", 12).label


def test_defaults_keep_fp32_accuracy_where_the_paper_split_fails(seed):
    """Below the split's range (e = -20) the paper's split sb=12 loses most bits; the defaults (scaled
    lines) stay within a small factor of native FP32 over the whole sweep, beyond the range included."""
    data = exponent_sweep_study(exp_range=(-20, 16), exp_step=12, m=16, k=64, n=8, sb=(12,),
                                distributions=("symmetric",), seed=seed, progress=False)

    def err(method, e):
        return data.column("rel_error", exponent=e, method=method)[0]

    assert err("termwise_sb12", -20) > 100 * err("fp32", -20)
    assert data.column("status", exponent=16, method="termwise_sb12") == ["out_of_range"]
    for e in (-20, -8, 4, 16):
        assert data.column("status", exponent=e, method="auto") == ["ok"]
        assert err("auto", e) < 2 * err("fp32", e), e


def test_heatmap_without_the_paper_split_compares_the_defaults_alone(seed):
    data = heatmap_study(exp_range=(0, 0), m=4, k=16, n=4, scheme="auto", seed=seed, progress=False)
    assert data.values("method") == ["fp32", "auto"]


def test_summaries_flag_every_cell_where_sgemm_cube_loses_to_native():
    """summary.md must not hide where the defaults lose: each sgemm_cube cell above native FP32's error (same
    data) is marked with the ratio, and the line under the table lists them; baselines are never marked."""
    from sgemm_cube.cli.accuracy.io import StudyData
    from sgemm_cube.cli.accuracy import size_sweep

    rows = []
    for k, native, ours in ((256, 2e-7, 1e-7), (2048, 2e-7, 3e-7), (8192, 1e-7, 3.3e-7)):
        for method, err in (("fp16", 1e-4), ("fp32", native), ("termwise_sb12", ours)):
            rows.append(dict(sweep="k", distribution="nonnegative", m=64, n=64, k=k, method=method,
                             rel_error=err))
    data = StudyData("size-sweep", list(rows[0]), rows, {"labels": {"termwise_sb12": "sgemm_cube defaults"}})
    text = size_sweep.summarize(data)
    line = next(l for l in text.splitlines() if l.startswith("| sgemm_cube defaults"))
    assert line.count("x native") == 2 and "1.50x native" in line and "3.30x native" in line
    assert "1.00e-07 |" in line  # K = 256: better than native, not marked
    assert "exceeds native FP32's** (cells marked): sgemm_cube defaults at K=2048..8192." in text
    assert all("native" not in l for l in text.splitlines() if l.startswith(("| FP16", "| fp16", "| fp32")))
    better = [dict(r, rel_error=r["rel_error"] / 10 if r["method"] == "termwise_sb12" else r["rel_error"])
              for r in rows]
    assert "at most native FP32's at every point" in size_sweep.summarize(StudyData("size-sweep", list(rows[0]),
                                                                                     better, {}))
