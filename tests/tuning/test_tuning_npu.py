"""The measured NPU tuning driver's logic with an injected runner (no NPU here)."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tqdm")

from sgemm_cube.tuning import choose_tiling, model, npu  # noqa: E402
from sgemm_cube.tuning import table as T  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("SGEMM_CUBE_TUNING_DIR", str(tmp_path / "tables"))


def test_npu_tune_times_model_candidates_and_feeds_choose_tiling():
    m, n, k = 64, 48, 96
    ranked = [model.Tiling(*r[:4]) for r in model.rank("910a", m, n, k, top=4, blocking=model.kernel_blocking("910a"))]
    per_term = [model.Tiling(*r[:4], True) for r in
                model.rank("910a", m, n, k, top=4, blocking=model.kernel_blocking("910a", per_term=True))]
    seen = []

    def runner(a, b, out, tiling):
        seen.append(tiling)
        if tiling.per_term:  # only the fused mode runs here: the winner is one of ranked[2:]
            raise RuntimeError("per-term mode not exercised by this test")
        if tiling == ranked[0]:
            raise RuntimeError("kernel rejected the tiling")
        if tiling == ranked[1]:  # wrong result: must be rejected by the accuracy check
            out.copy_(torch.matmul(a.half().float(), b.half().float()))
            return
        out.copy_(torch.matmul(a.double(), b.double()).float())

    table = npu.tune("910a", [(m, n, k)], top=4, device="cpu", runner=runner, sync=lambda: None, progress=False)
    assert set(seen) == set(ranked) | set(per_term)  # both modes are timed
    (entry,) = table.entries
    assert entry.config["bm"] in (ranked[2].bm, ranked[3].bm)
    assert entry.measured["rel_error"] < 1e-6
    T.save(table)
    assert tuple(choose_tiling("910a", m, n, k)) in {tuple(ranked[2]), tuple(ranked[3])}
    assert entry.config["per_term"] is False


def test_npu_tune_without_backend_says_what_is_missing():
    with pytest.raises(RuntimeError, match="AscendC backend|no tiling ran correctly"):
        npu.tune("910a", [(32, 32, 32)], device="cpu", sync=lambda: None, progress=False)
