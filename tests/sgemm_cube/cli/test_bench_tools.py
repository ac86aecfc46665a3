"""The GPU benchmark tooling, on the CPU: the hybrid-rule fit, the matrix's logic, the model benchmark.

No timing is asserted: only what the tools compute from timings and what
they record (errors, paths taken, call counts, files written).
"""
import itertools
import json
import math
import os
import pathlib
import random
import types

import pytest

torch = pytest.importorskip("torch")

import sgemm_cube  # noqa: E402
from sgemm_cube.cli import bench_gpu  # noqa: E402
from sgemm_cube.cli.bench_gpu import BenchProblem, derive_hybrid_rule, derive_native_rule  # noqa: E402


def _row(m, n, k, sgemm_ms, cuda_ms, batch=1, name=None):
    return {"name": name or f"{batch}x{m}x{n}x{k}", "batch": batch, "m": m, "n": n, "k": k,
            "gpu_ms": {"sgemm": sgemm_ms, "cuda": cuda_ms}}


def _native(rule, r):
    """The rule as sgemm_cube/backends/cuda/hybrid.py applies it."""
    return (2.0 * r["batch"] * r["m"] * r["n"] * r["k"] < rule["min_flops"] or min(r["m"], r["n"]) < rule["min_mn"]
            or r["k"] < rule["min_k"])


def _check_fit(rule, rows, margin=1.0):
    """Every slower problem goes native; the fit lists exactly the faster ones sent native."""
    assert set(rule) == {"min_flops", "min_mn", "min_k", "fit"}
    slower = [r for r in rows if r["gpu_ms"]["cuda"] > margin * r["gpu_ms"]["sgemm"]]
    faster = [r for r in rows if r not in slower]
    assert all(_native(rule, r) for r in slower)
    assert rule["fit"]["slower_but_emulated"] == []
    assert sorted(e["name"] for e in rule["fit"]["faster_but_native"]) == sorted(
        r["name"] for r in faster if _native(rule, r))


# ---- derive_hybrid_rule --------------------------------------------------------------------------

def test_rule_splits_squares_by_flops():
    rows = [_row(s, s, s, 1.0, 1.5 if s <= 1024 else 0.5) for s in (256, 512, 1024, 1536, 2048, 4096)]
    rule = derive_hybrid_rule(rows)
    _check_fit(rule, rows)
    assert 2.0 * 1024 ** 3 < rule["min_flops"] <= 2.0 * 1536 ** 3
    assert rule["fit"]["faster_but_native"] == [] and rule["fit"]["problems"] == 6
    assert rule["fit"]["emulation_slower"] == 3 and rule["fit"]["emulation_faster"] == 3


def test_rule_prefers_flops_when_the_data_allow_either():
    # min_mn = 1025 would separate these squares too, but would also send large skinny products native.
    rows = [_row(s, s, s, 1.0, 1.5 if s <= 1024 else 0.5) for s in (256, 1024, 4096)]
    rule = derive_hybrid_rule(rows)
    assert (rule["min_mn"], rule["min_k"]) == (0, 0) and rule["min_flops"] > 2.0 * 1024 ** 3


def test_rule_sends_skinny_problems_native_by_min_mn():
    rows = [_row(4096, 4096, 4096, 1.0, 0.4), _row(65536, 64, 65536, 1.0, 2.0),  # more flops but skinny: slower
            _row(16384, 256, 8192, 1.0, 0.8), _row(64, 65536, 4096, 1.0, 1.7)]
    rule = derive_hybrid_rule(rows)
    _check_fit(rule, rows)
    assert 64 < rule["min_mn"] <= 256 and rule["fit"]["faster_but_native"] == []


def test_rule_uses_min_k_when_flops_would_cost_a_faster_problem():
    rows = [_row(8192, 8192, 64, 1.0, 1.3),   # 8.6e9 flops, short K: slower
            _row(1536, 1536, 1536, 1.0, 0.7),  # 7.2e9 flops: faster, so min_flops cannot do it
            _row(4096, 4096, 4096, 1.0, 0.5)]
    rule = derive_hybrid_rule(rows)
    _check_fit(rule, rows)
    assert 64 < rule["min_k"] <= 1536 and rule["min_flops"] == 0
    assert rule["fit"]["faster_but_native"] == []


def test_rule_reports_faster_problems_it_cannot_keep():
    # The faster problem is smaller in every respect than a slower one: no rule of this form keeps it.
    rows = [_row(512, 512, 512, 1.0, 0.9, name="small but faster"),
            _row(1024, 1024, 1024, 1.0, 1.2, name="bigger and slower"),
            _row(4096, 4096, 4096, 1.0, 0.5)]
    rule = derive_hybrid_rule(rows)
    _check_fit(rule, rows)
    assert [e["name"] for e in rule["fit"]["faster_but_native"]] == ["small but faster"]
    assert rule["fit"]["faster_but_native"][0]["speedup"] == pytest.approx(1 / 0.9)


def test_rule_when_the_emulation_always_wins_keeps_everything():
    rows = [_row(s, s, s, 1.0, 0.5) for s in (128, 1024, 8192)]
    rule = derive_hybrid_rule(rows)
    assert (rule["min_flops"], rule["min_mn"], rule["min_k"]) == (0.0, 0, 0)
    assert rule["fit"]["sent_native"] == 0


def test_rule_counts_batches_and_honours_the_margin():
    rows = [_row(512, 512, 512, 1.0, 1.05, batch=64, name="batched"), _row(256, 256, 256, 1.0, 1.5)]
    assert _native(derive_hybrid_rule(rows), rows[0])  # 5% slower: a loss at margin 1
    loose = derive_hybrid_rule(rows, margin=1.1)
    _check_fit(loose, rows, margin=1.1)
    assert not _native(loose, rows[0])  # within the margin: kept on the emulation
    assert 2.0 * 256 ** 3 < loose["min_flops"] <= 2.0 * 64 * 512 ** 3


def test_rule_skips_rows_without_both_times():
    rows = [_row(256, 256, 256, 1.0, 2.0), _row(4096, 4096, 4096, 1.0, 0.5),
            _row(2048, 2048, 2048, 1.0, float("nan"), name="emulation failed"),
            {"name": "skipped", "batch": 1, "m": 8192, "n": 8192, "k": 8192, "skipped": "time budget"}]
    rule = derive_hybrid_rule(rows)
    assert rule["fit"]["skipped"] == ["emulation failed", "skipped"] and rule["fit"]["problems"] == 2
    _check_fit(rule, rows[:2])


def _brute_force_misses(rows):
    """Fewest faster problems any threshold triple (from the measured values) must send native."""
    def key(r):
        return 2.0 * r["batch"] * r["m"] * r["n"] * r["k"], min(r["m"], r["n"]), r["k"]

    slow = [key(r) for r in rows if r["gpu_ms"]["cuda"] > r["gpu_ms"]["sgemm"]]
    fast = [key(r) for r in rows if r["gpu_ms"]["cuda"] <= r["gpu_ms"]["sgemm"]]
    best = len(fast)
    for fl, mn, kk in itertools.product({0.0} | {p[0] * 1.0001 for p in slow}, {0} | {p[1] + 1 for p in slow},
                                        {0} | {p[2] + 1 for p in slow}):
        rule = {"min_flops": fl, "min_mn": mn, "min_k": kk}
        nat = [p[0] < fl or p[1] < mn or p[2] < kk for p in slow + fast]
        if all(nat[:len(slow)]):
            best = min(best, sum(nat[len(slow):]))
    return best


def test_rule_is_optimal_on_random_matrices():
    rnd = random.Random(7)
    for _ in range(60):
        rows = [_row(*(rnd.choice([64, 128, 256, 1000, 1024, 4096]) for _ in range(3)), 1.0, rnd.uniform(0.4, 1.6),
                     batch=rnd.choice([1, 1, 8]), name=f"p{i}") for i in range(rnd.randint(1, 10))]
        rule = derive_hybrid_rule(rows)
        _check_fit(rule, rows)
        assert len(rule["fit"]["faster_but_native"]) == _brute_force_misses(rows)


def test_native_rule_of_the_classic_benchmark_sends_losses_native():
    rnd = random.Random(3)
    rows = [{"batch": 1, "m": m, "n": n, "k": k, "ms": {"sgemm": 1.0, "cube": rnd.uniform(0.5, 1.5)}}
            for m, n, k in itertools.product((64, 512, 4096), repeat=3)]
    rule = derive_native_rule(rows)
    assert set(rule) == {"min_flops", "min_mn", "min_k"}
    assert all(_native(rule, r) for r in rows if r["ms"]["cube"] > r["ms"]["sgemm"])


# ---- the config table --------------------------------------------------------------------------

def test_write_config_keeps_the_other_keys(tmp_path):
    from sgemm_cube.backends.cuda import configs as C

    path = tmp_path / "h200.json"
    path.write_text(json.dumps({"schema": 2, "kind": C.KIND, "device": "old",
                                "gemm_termwise": [{"config": {"BLOCK_M": 128}}],
                                "hybrid": {"min_flops": 1.0, "min_mn": 1, "min_k": 1, "source": "old.json"}}))
    rule = derive_hybrid_rule([_row(256, 256, 256, 1.0, 2.0), _row(4096, 4096, 4096, 1.0, 0.5)])
    out = bench_gpu.write_hybrid_config(rule, "h200", source="matrix_h200_x.json", device="NVIDIA H200",
                                        config_dir=tmp_path)
    table = C.load(out)  # written through tuning.gpu, in the one schema
    assert out == path and table["gemm_termwise"] == [{"config": {"BLOCK_M": 128}}]
    assert table["device"] == "NVIDIA H200"
    assert {k: table["hybrid"][k] for k in ("min_flops", "min_mn", "min_k")} == \
        {k: rule[k] for k in ("min_flops", "min_mn", "min_k")}
    assert table["hybrid"]["source"] == "matrix_h200_x.json"


def test_write_config_for_a_new_gpu_starts_from_the_table_it_reads_today(tmp_path):
    from sgemm_cube.backends.cuda import configs as C
    from sgemm_cube.backends.cuda.hybrid import load_device_table

    today = load_device_table("h800")  # an H800 without its own table reads the H100's
    assert today["device"].startswith("NVIDIA H100")
    rule = derive_hybrid_rule([_row(256, 256, 256, 1.0, 2.0), _row(4096, 4096, 4096, 1.0, 0.5)])
    table = C.load(bench_gpu.write_hybrid_config(rule, "h800", device="NVIDIA H800", config_dir=tmp_path))
    assert (tmp_path / "h800.json").is_file()
    for mode in C.MODES:  # the kernel configs it reads today, for every shape
        for shape in ((1, 512, 512, 512), (2, 4096, 4096, 8192)):
            assert C.choose(table, mode, *shape) == C.choose(today, mode, *shape)
    assert table["metadata"]["inherited_from"] == "h100.json" and table["device"] == "NVIDIA H800"
    assert table["hybrid"]["min_mn"] == rule["min_mn"]


def test_write_config_outside_matrix_mode_is_refused(tmp_path, monkeypatch, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    bench_gpu._add_arguments(parser)  # imports bench_model (which imports _env) before the patches
    monkeypatch.setattr(bench_gpu, "_torch", lambda: types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_available=lambda: True)))
    monkeypatch.setattr(bench_gpu, "_env", lambda: {"device": "NVIDIA H200"})
    monkeypatch.setattr("sgemm_cube.backends.cuda.hybrid.device_key", lambda device: "h200")
    args = parser.parse_args(["--sweep", "--write-config", "--results-dir", str(tmp_path)])
    assert bench_gpu.run(args) == 2
    assert "python -m sgemm_cube.tuning.gpu" in capsys.readouterr().err


# ---- the matrix --------------------------------------------------------------------------------

def test_matrix_covers_the_requested_problems():
    probs = bench_gpu.matrix_problems()
    assert len(probs) >= 40 and len({p.name for p in probs}) == len(probs)
    dims = {(p.batch, p.m, p.n, p.k, p.layout) for p in probs}
    for s in (128, 256, 384, 512, 768, 1000, 1024, 1536, 2048, 3000, 3072, 4096, 6144, 8192, 16384):
        assert (1, s, s, s, "contiguous") in dims
    for shape in [(1, 65536, 64, 4096), (1, 16384, 256, 8192), (1, 32768, 128, 4096), (1, 64, 65536, 4096),
                  (1, 256, 16384, 8192), (1, 1024, 1024, 16384), (1, 2048, 2048, 32768), (1, 1000, 3000, 777),
                  (64, 512, 512, 512), (16, 1024, 1024, 1024)]:
        assert any(d[:4] == shape for d in dims), shape
    assert (8, 2048, 2048, 2048, "b broadcast") in dims
    assert {"a transposed view", "a strided view"} <= {p.layout for p in probs}
    for d_in, d_out in ((768, 768), (768, 3072), (3072, 768), (4096, 4096), (4096, 11008)):
        assert (1, 8192, d_out, d_in, "b = W.t()") in dims  # (8192, d_in) @ (d_in, d_out)
    assert all(p.layout in bench_gpu.LAYOUTS for p in probs)


@pytest.mark.parametrize("layout", bench_gpu.LAYOUTS)
def test_operands_have_the_layout(layout):
    p = BenchProblem("t", 3 if layout == "b broadcast" else 1, 5, 6, 7, "test", layout)
    a, b = bench_gpu.make_operands(p, "cpu", torch.Generator().manual_seed(0))
    lead = (3,) if p.batch > 1 else ()
    assert a.shape == (*lead, 5, 7) and a.dtype == torch.float32 and (a != 0).all()
    assert b.shape == ((7, 6) if layout == "b broadcast" else (*lead, 7, 6))
    assert torch.matmul(a, b).shape == (*lead, 5, 6)
    assert a.is_contiguous() == (layout not in ("a transposed view", "a strided view"))
    assert b.is_contiguous() == (layout != "b = W.t()")
    if layout == "a strided view":
        assert a.stride() == (14, 2)


def test_reference_rows_stay_within_the_flop_limit():
    p = BenchProblem("big", 1, 16384, 16384, 16384, "square")
    rows = bench_gpu.reference_rows(p, 2e12)
    assert 1 <= rows < p.m and 2.0 * rows * p.n * p.k <= 2e12
    assert bench_gpu.reference_rows(BenchProblem("small", 4, 100, 100, 100, "b"), 2e12) == 100


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") != "1",
                    reason="backend='cuda' on CPU tensors needs Triton's interpreter (set by conftest without a GPU)")
def test_matrix_dry_run_on_the_cpu(monkeypatch):
    probs = [BenchProblem("batched B broadcast", 2, 24, 20, 40, "batched", "b broadcast"),
             BenchProblem("strided", 1, 16, 24, 40, "layout", "a strided view"),
             BenchProblem("short K", 1, 16, 24, 8, "short-K")]  # auto: native (K < 16)
    rows = bench_gpu.run_matrix(probs, device="cpu", rep_ms=1, rounds=1, host_ms=0.01,
                                ref_max_flops=2 * 2 * 20 * 40 * 10, budget_s=None, show_progress=False)
    assert [r["name"] for r in rows] == [p.name for p in probs]
    for r in rows:
        assert set(r["gpu_ms"]) == set(r["host_ms"]) == set(r["submit_ms"]) == set(bench_gpu.MATRIX_METHODS)
        for name in bench_gpu.MATRIX_METHODS:
            assert r["rel_err"][name] < 1e-5, (r["name"], name, r["failed"])
            assert r["gpu_ms"][name] > 0 and r["host_ms"][name] > 0 and r["submit_ms"][name] > 0
            assert r["speedup_gpu"][name] == pytest.approx(r["gpu_ms"]["sgemm"] / r["gpu_ms"][name])
        assert "backend" in r["explain"] or "error" in r["explain"]
        # what the emulation lists, also where auto runs native (backend='cuda''s scheme)
        assert set(r["fixup_listed"]) == {"rows", "cols", "outputs", "scheme"}, r["fixup_listed"]
    assert rows[2]["explain"]["backend"] == "native" and rows[2]["fixup_listed"]["rows"] == 0
    assert rows[0]["err_rows"] == 10 and rows[1]["err_rows"] == 16  # the reference's row limit at work
    table = bench_gpu.format_matrix_table(rows)
    assert all(p.name in table for p in probs)
    summary = bench_gpu.matrix_summary(rows)
    assert summary["failed"] == {} and summary["max_rel_err_sgemm"] < 1e-5
    assert isinstance(summary["auto_host_bound"], list)
    assert set(derive_hybrid_rule(rows)["fit"]) >= {"faster_but_native", "slower_but_emulated"}
    json.dumps(rows)  # the rows go to JSON as they are

    # A failing method is recorded and the others still run; a spent budget skips problems.
    def broken(a, b):
        fns = dict(real(a, b))
        fns["scheme_auto"] = lambda: (_ for _ in ()).throw(RuntimeError("boom"))
        return fns

    real = bench_gpu._matrix_methods
    monkeypatch.setattr(bench_gpu, "_matrix_methods", broken)
    row = bench_gpu.measure_problem(probs[1], device="cpu", rep_ms=1, rounds=1, host_ms=0.01)
    assert "boom" in row["failed"]["scheme_auto"] and math.isnan(row["gpu_ms"]["scheme_auto"])
    assert row["rel_err"]["cuda"] < 1e-5
    skipped = bench_gpu.run_matrix(probs, device="cpu", budget_s=-1, show_progress=False)
    assert all("skipped" in r for r in skipped)


# ---- the model benchmark -----------------------------------------------------------------------

def test_tiny_model_bench_on_the_cpu(tmp_path, capsys):
    import sgemm_cube.product
    from sgemm_cube.cli import main

    original = sgemm_cube.product.compute
    assert main(["bench", "--model", "--tiny", "--device", "cpu", "--runs", "1", "--warmup", "0",
                 "--results-dir", str(tmp_path)]) == 0
    assert sgemm_cube.product.compute is original  # the counters are gone
    (path,) = tmp_path.glob("model_cpu_*.json")
    record = json.loads(path.read_text())
    assert record["config"]["d_model"] == 64 and record["tiny"] and record["torch"] == torch.__version__
    cases = {(e["mode"], e["fastpath_allowed"]): e for e in record["eval"]}
    assert len(cases) == 4
    for (mode, _), e in cases.items():
        assert e["rel_err"] < 1e-4 and e["median_ms"] > 0
        if mode == "native FP32":
            assert not e["sgemm_cube_called"]
    # Without the fused fast path, every linear layer goes through sgemm_cube (4 per layer).
    routed = cases[("sgemm_cube.enabled()", False)]["calls"]
    assert routed["routed"] >= 4 * 2 and routed["products"] >= 4 * 2
    # With it, PyTorch's fused kernel runs, and its products reach the switch at the dispatcher too.
    fused = cases[("sgemm_cube.enabled()", True)]
    assert "fused" in fused["path"] and fused["calls"]["routed"] >= 4 * 2 and fused["sgemm_cube_called"]
    assert cases[("native FP32", True)]["calls"]["routed"] == 0
    train = {e["mode"]: e for e in record["train"]}
    assert train["sgemm_cube.enabled()"]["calls"]["products"] > 8  # forward and backward products
    assert train["native FP32"]["calls"]["products"] == 0
    for e in train.values():
        assert e["grad_rel_err"]["all"] < 1e-4 and e["grad_rel_err"]["weight_matrices"] < 1e-4
    assert "x native" in capsys.readouterr().out


def _measured_row(p, sgemm_ms, cuda_ms):
    """A row as measure_problem returns it, with made-up times (the other methods at the emulation's)."""
    times = {"sgemm": sgemm_ms, "auto": min(sgemm_ms, cuda_ms), "cuda": cuda_ms, "scheme_auto": cuda_ms}
    row = dict(p._asdict(), flops=2.0 * p.batch * p.m * p.n * p.k, gpu_ms=dict(times), host_ms=dict(times),
               rel_err=dict.fromkeys(times, 1e-7), failed={}, explain={"backend": "cuda", "scheme": "fp16x3"},
               hybrid_native=False)
    bench_gpu._derive_rates(row)
    return row


def test_matrix_summary_lists_the_host_bound_problems():
    """``auto_host_bound``: the problems where auto's host time per call (``submit_ms``) reaches
    ``HOST_BOUND_SHARE`` of its GPU time; rows of records without ``submit_ms`` count as not bound."""
    probs = [BenchProblem(f"square {s}", 1, s, s, s, "square") for s in (256, 512, 1024)]
    rows = [_measured_row(p, 1.0, 0.5) for p in probs]
    rows[0]["submit_ms"] = dict.fromkeys(rows[0]["gpu_ms"], 0.5)                      # = its GPU time
    rows[1]["submit_ms"] = dict.fromkeys(rows[1]["gpu_ms"], 0.5 * bench_gpu.HOST_BOUND_SHARE * 0.99)
    assert bench_gpu.matrix_summary(rows)["auto_host_bound"] == ["square 256"]


def test_matrix_mode_writes_the_record_and_the_config(tmp_path, monkeypatch, capsys):
    import argparse

    probs = [BenchProblem(f"square {s}", 1, s, s, s, "square") for s in range(128, 128 * 25, 128)]
    rows = [_measured_row(p, 1.0, 1.4 if p.m < 1000 else 0.6) for p in probs]
    monkeypatch.setattr(bench_gpu, "run_matrix", lambda problems, **kw: rows)
    from sgemm_cube.backends.cuda import configs

    # --write-config writes where the backend reads (it once wrote to sgemm_cube/sgemm_cube/...)
    assert configs.CONFIG_DIR == pathlib.Path(sgemm_cube.__file__).parent / "backends" / "cuda" / "configs"
    assert (configs.CONFIG_DIR / "default.json").is_file()
    monkeypatch.setattr(configs, "CONFIG_DIR", tmp_path / "configs")  # under tmp_path, not the checkout
    parser = argparse.ArgumentParser()
    bench_gpu._add_arguments(parser)
    args = parser.parse_args(["--matrix", "--write-config", "--results-dir", str(tmp_path)])

    def save(path, doc):
        path.write_text(json.dumps(doc, default=str))

    env = {"device": "NVIDIA H200", "command": "test"}
    assert bench_gpu._run_matrix_mode(args, env, "h200", "stamp", save) == 0
    record = json.loads((tmp_path / "matrix_h200_stamp.json").read_text())
    assert len(record["rows"]) == len(rows) and record["device"] == "NVIDIA H200"
    rule = record["derived_hybrid_rule"]
    assert rule["fit"]["faster_but_native"] == [] and 2.0 * 896 ** 3 < rule["min_flops"] <= 2.0 * 1024 ** 3
    table = json.loads((tmp_path / "configs/h200.json").read_text())
    assert table["hybrid"]["min_flops"] == rule["min_flops"] and table["hybrid"]["source"] == "matrix_h200_stamp.json"
    out = capsys.readouterr().out
    assert "square 128 " in out and "hybrid rule fitted" in out

    # Too few problems (an --only run): no config.
    monkeypatch.setattr(bench_gpu, "run_matrix", lambda problems, **kw: rows[:3])
    monkeypatch.setattr(configs, "CONFIG_DIR", tmp_path / "other")
    assert bench_gpu._run_matrix_mode(args, env, "h200", "stamp2", save) == 0
    assert not (tmp_path / "other").exists()
