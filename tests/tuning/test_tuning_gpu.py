"""The measured GPU tuning driver, on the CPU: injected backends, and the real Triton
backend under TRITON_INTERPRET=1 at a tiny size."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tqdm")

from sgemm_cube.backends.cuda import configs as C  # noqa: E402
from sgemm_cube.tuning import gpu  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SGEMM_CUBE_TUNING_DIR", str(tmp_path / "tables"))


def test_quick_candidates_are_valid_table_configs():
    cands = gpu.candidate_configs(quick=True)
    assert len(cands) == 24
    for c in cands:
        C.validate_config(c, mode="termwise")
        assert c["flush_k"] == 64  # the backend default (docs/cuda_design.md)


def test_full_grid_respects_the_register_and_smem_limits():
    cands = gpu.candidate_configs(quick=False, smem_limit=232448)
    assert len(cands) > 100
    assert all(c["BLOCK_M"] * c["BLOCK_N"] <= 32768 for c in cands)
    assert all(gpu.smem_bytes(c) <= 232448 for c in cands)
    assert {c["flush_k"] for c in cands} == {64, 128}


def test_smem_estimate():
    # Four FP16 tiles per stage: 2 * 128 * 64 + 2 * 64 * 128 halves = 64 KiB; three stages.
    assert gpu.smem_bytes({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3}) == 3 * 64 * 1024


def _cfg(bm, **kw):
    return dict({"variant": "ptr", "BLOCK_M": bm, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4,
                 "num_stages": 3, "flush_k": 128}, **kw)


def _fake_backend(calls):
    """BLOCK_M picks the behaviour: 16 = FP16-accurate only, 32 = raises, others exact."""

    def matmul(a, b, *, sb, order, keep_lo_lo, out, flush_k=None, config=None):
        assert "flush_k" not in config and flush_k == 128
        calls.append(config["BLOCK_M"])
        if config["BLOCK_M"] == 32:
            raise RuntimeError("out of resources: shared memory")
        if config["BLOCK_M"] == 16:
            out.copy_(torch.matmul(a.half().float(), b.half().float()))
        else:
            out.copy_(torch.matmul(a.double(), b.double()).float())

    def bench(fn):
        fn()
        return {64: 2.0, 128: 1.0, 256: 1.5, 16: 0.1}[calls[-1]]

    return matmul, bench


@pytest.mark.parametrize("shape", [(96, 80, 200), (33, 17, 65)])
def test_tune_picks_the_fastest_accurate_config(shape, rng):
    calls = []
    matmul, bench = _fake_backend(calls)
    cands = [_cfg(64), _cfg(16), _cfg(32), _cfg(128), _cfg(256)]
    doc, results = gpu.tune([shape], cands, device="cpu", device_name="Fake GPU", matmul=matmul, bench=bench,
                            seed=int(rng.integers(2**31)), progress=False)
    status = {r["config"]["BLOCK_M"]: r["status"] for r in results}
    assert status[16].startswith("rejected: error")  # fastest, but only FP16-accurate
    assert status[32].startswith("failed: RuntimeError")
    assert status[64] == status[128] == status[256] == "ok"
    (entry,) = doc["gemm_termwise"]
    assert tuple(entry["bucket"]) == C.bucket(*shape) and entry["config"]["BLOCK_M"] == 128
    assert entry["config"]["flush_k"] == 128
    # The accuracy gate measured both errors against float64 on the same data.
    m = entry["measured"]
    assert 0 < m["rel_error"] <= m["sgemm_rel_error"] < 1e-5
    rejected = next(r for r in results if r["config"]["BLOCK_M"] == 16)
    assert rejected["rel_error"] > 10 * rejected["sgemm_rel_error"]
    assert m["rel_error_uniform01"] <= m["sgemm_rel_error_uniform01"]
    text = gpu.format_results(doc)
    assert "x".join(map(str, shape)) in text and "'BLOCK_M': 128" in text
    # The document saves to the user folder in the one schema, reloads and serves the choice.
    path = gpu.write_measured(doc)
    assert path == C.user_dir() / "fake_gpu.json"
    assert C.choose(C.load(path), "termwise", 1, *shape) == entry["config"]
    assert C.load(path)["metadata"]["commands"] == ["sgemm_cube.tuning.gpu.tune()"]


def test_write_measured_merges_into_the_existing_file(tmp_path):
    shipped = json.loads((C.CONFIG_DIR / "h200.json").read_text())
    (tmp_path / "h200.json").write_text(json.dumps(shipped))
    new = {"schema": 2, "kind": C.KIND, "device": "NVIDIA H200", "metadata": {"commands": ["python -m sgemm_cube.tuning.gpu x"]},
           "gemm_termwise": [{"bucket": [1024, 1024, 1024], "config": _cfg(64), "measured": {"ms": 1.0}},
                             {"bucket": [32, 32, 32], "config": _cfg(128), "measured": {"ms": 1.0}}]}
    doc = C.load(gpu.write_measured(new, tmp_path))
    # The measured buckets replaced or joined the old ones; the hybrid rule, the other modes and buckets stayed.
    assert doc["hybrid"] == shipped["hybrid"] and doc["gemm_bf16x9"] == shipped["gemm_bf16x9"]
    assert C.choose(doc, "termwise", 1, 1024, 1024, 1024)["BLOCK_M"] == 64
    assert C.choose(doc, "termwise", 1, 32, 32, 32)["BLOCK_M"] == 128
    assert C.choose(doc, "termwise", 1, 4096, 4096, 4096) == C.choose(shipped, "termwise", 1, 4096, 4096, 4096)
    assert "python -m sgemm_cube.tuning.gpu x" in doc["metadata"]["commands"] and len(doc["metadata"]["commands"]) > 1


def test_measured_user_file_is_what_the_backend_reads(monkeypatch):
    from sgemm_cube.backends.cuda import launch

    doc = {"schema": 2, "kind": C.KIND, "device": "Fake GPU", "metadata": {},
           "gemm_termwise": [{"bucket": [64, 64, 64], "config": _cfg(64)}]}
    gpu.write_measured(doc)
    monkeypatch.setattr(launch.torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    assert launch._tuned("cuda", 64, 64, 64) == _cfg(64)
    monkeypatch.setattr(launch.torch.cuda, "get_device_name", lambda device=None: "Other GPU")
    assert launch._tuned("cuda", 64, 64, 64) is None


def test_time_budget_keeps_one_result_per_shape():
    calls = []
    matmul, bench = _fake_backend(calls)
    doc, results = gpu.tune([(32, 32, 32), (48, 48, 48)], [_cfg(64), _cfg(128)], device="cpu",
                            device_name="Fake GPU", matmul=matmul, bench=bench, time_budget_s=0.0,
                            progress=False)
    assert len(doc["gemm_termwise"]) == 2
    assert [r["status"] for r in results].count("skipped (time budget)") == 2


def test_no_accepted_config_is_an_error():
    calls = []
    matmul, bench = _fake_backend(calls)
    with pytest.raises(RuntimeError, match="no candidate config ran correctly"):
        gpu.tune([(32, 32, 32)], [_cfg(16), _cfg(32)], device="cpu", device_name="Fake GPU", matmul=matmul,
                 bench=bench, progress=False)


def test_main_without_gpu_exits_with_status_2(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert gpu.main(["--quick", "--no-save"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


# The tuner's accuracy gate compares with the device's SGEMM; on the CPU that would be this host's BLAS,
# whose rounding differs between CPUs: the test gives it FP32 recursive summation instead (the same bits
# everywhere).
_INTERPRETED = """
import json, sys
from sgemm_cube.tuning import gpu
from tests.guarantee_data import fp32_matmul
host_operands = gpu._operands
def operands(m, n, k, gen, dev):
    return {s: (name, a, b, ref, gpu._rel_fro(fp32_matmul(a, b), ref))
            for s, (name, a, b, ref, _) in host_operands(m, n, k, gen, dev).items()}
gpu._operands = operands
cands = [dict(variant="ptr", BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, num_warps=4, num_stages=1, flush_k=32),
         dict(variant="ptr", BLOCK_M=16, BLOCK_N=32, BLOCK_K=16, GROUP_M=1, num_warps=4, num_stages=1, flush_k=64)]
doc, results = gpu.tune([(40, 33, 70)], cands, device="cpu", seed=int(sys.argv[1]), progress=False)
print(json.dumps({"doc": doc, "status": [r["status"] for r in results]}))
"""


def test_real_triton_backend_under_the_interpreter(rng):
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", _INTERPRETED, str(rng.integers(2**31))], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["status"] == ["ok", "ok"]
    (entry,) = doc["doc"]["gemm_termwise"]
    assert entry["bucket"] == [64, 64, 128]
    # FP32-accurate through the real kernels: no worse than native FP32 (recursive summation) on the same data.
    assert 0 < entry["measured"]["rel_error"] <= entry["measured"]["sgemm_rel_error"]
