"""The measured NPU tuning driver's logic with an injected runner (no NPU here)."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tqdm")

from sgemm_cube.backends import npu_schedule as ns  # noqa: E402
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
        if tiling._replace(l0c_stages=1) == ranked[0]:  # either L0C stage count
            raise RuntimeError("kernel rejected the tiling")
        if tiling._replace(l0c_stages=1) == ranked[1]:  # wrong result: must be rejected by the accuracy check
            out.copy_(torch.matmul(a.half().float(), b.half().float()))
            return
        out.copy_(torch.matmul(a.double(), b.double()).float())

    table = npu.tune("910a", [(m, n, k)], top=4, device="cpu", runner=runner, sync=lambda: None, progress=False)
    # both modes are timed, each with one and (where both accumulator sets fit L0C) two L0C stages
    cap = ns.capacity_from_profile("910a")
    fitted = [ns.fit_tiling(cap, t, k=k, terms=3) for t in ranked + per_term]
    two = {t._replace(l0c_stages=2) for t in fitted
           if ns.buffer_plan_status(cap, t.bm, t.bk, t.bn, t.n_fused, 3, t.per_term, 2)[0] == ns.Status.OK}
    assert two and set(seen) == set(fitted) | two
    (entry,) = table.entries
    assert entry.config["bm"] in (ranked[2].bm, ranked[3].bm)
    assert entry.measured["rel_error"] < 1e-6
    T.save(table)
    assert tuple(choose_tiling("910a", m, n, k))[:5] in {tuple(ranked[2])[:5], tuple(ranked[3])[:5]}
    assert entry.config["per_term"] is False


def test_npu_tune_without_backend_says_what_is_missing():
    with pytest.raises(RuntimeError, match="AscendC backend|no tiling ran correctly"):
        npu.tune("910a", [(32, 32, 32)], device="cpu", sync=lambda: None, progress=False)
