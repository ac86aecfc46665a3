"""The CUDA path travels one way on a GPU (the rules: ``tests/call_graph.py``)."""
import pytest

from tests.call_graph import CallGraph, cycles, second_entries
from tests.gpu import require_gpu

torch = require_gpu()
import sgemm_cube  # noqa: E402


@pytest.mark.parametrize("case", ["plain", "fix-ups", "switch", "autograd"])
def test_the_cuda_path_travels_one_way(case, torch_gen):
    a = torch.randn(512, 384, generator=torch_gen).cuda()
    b = torch.randn(384, 256, generator=torch_gen).cuda()
    if case == "fix-ups":
        a[0, 0], a[1, 1], a[2, 2] = 1e30, 1e-30, float("inf")

    def call():
        if case == "switch":
            with sgemm_cube.enabled():
                torch.nn.functional.linear(a, b.T)
        elif case == "autograd":
            sgemm_cube.matmul(a.clone().requires_grad_(), b).sum().backward()
        else:
            sgemm_cube.matmul(a, b, backend="cuda")

    call()
    graph = CallGraph(call)
    torch.cuda.synchronize()
    assert any(callee.startswith("sgemm_cube.backends.cuda") for _, callee, _ in graph.data_edges), graph.describe()
    assert not cycles(graph.edges), graph.describe()
    assert not second_entries(graph.data_edges), graph.describe()


@pytest.mark.parametrize("case", ["2-D", "batched", "offset view"])
def test_a_replayed_call_gives_the_full_paths_bits(case, torch_gen):
    """A repeated emulated call replays its remembered launches (:func:`sgemm_cube.product.replay_emulated`)
    on the new operands, into a new result or into ``out``: the bits of the full path (the plan run by the
    backend), for a copy of the operands at other addresses too, on data whose rows span many binades (scaled and
    fix-up lines).  An ``out`` 4 bytes past a 16-byte boundary takes the full path, with the same bits."""
    from sgemm_cube import product
    from sgemm_cube.backends import cuda

    shape_a, shape_b = {"2-D": ((640, 384), (384, 512)), "batched": ((3, 320, 384), (3, 384, 256)),
                        "offset view": ((704, 385), (384, 512))}[case]  # its copy's key is new: 704 rows
    a = (torch.randn(shape_a, generator=torch_gen) * torch.exp(3 * torch.randn(shape_a, generator=torch_gen))).cuda()
    b = torch.randn(shape_b, generator=torch_gen).cuda()
    a[..., 0, 0], a[..., 1, 1] = 1e30, 1e-30
    if case == "offset view":
        a = a[:, 1:]  # rows of 385, 4 bytes past a 16-byte boundary: a key of its own, and its copy another
    shape = a.shape[:-1] + b.shape[-1:]
    expected = torch.empty(shape, device="cuda")
    three = (lambda t: t if t.dim() == 3 else t[None])
    cuda.run(sgemm_cube.explain(a, b, backend="cuda"), three(a), three(b), three(expected))
    before = len(product._emulated_calls)
    first = sgemm_cube.matmul(a, b, backend="cuda")
    assert len(product._emulated_calls) == before + 1  # remembered ...
    again = sgemm_cube.matmul(a, b, backend="cuda")    # ... and replayed
    into = torch.full(shape, float("nan"), device="cuda")
    assert sgemm_cube.matmul(a, b, backend="cuda", out=into) is into  # replayed into out
    buf = torch.full((expected.numel() + 1,), float("nan"), device="cuda")
    unaligned = sgemm_cube.matmul(a, b, backend="cuda", out=buf[1:].view(shape))  # the full path
    assert len(product._emulated_calls) == before + 1
    moved = sgemm_cube.matmul(a.clone(), b.clone(), backend="cuda")
    assert len(product._emulated_calls) == before + (1 if case != "offset view" else 2)
    for name, got in (("first", first), ("again", again), ("into", into), ("unaligned", unaligned), ("moved", moved)):
        assert got.shape == expected.shape, name
        differ = got.view(torch.int32) != expected.view(torch.int32)
        assert not differ.any(), f"{name}: {int(differ.sum())} outputs differ from the full path's"


def test_a_replay_follows_the_plan_state(monkeypatch, torch_gen):
    """``launch.AUTO_MIN_FLOPS`` and ``launch.AUTO_MIN_K`` (the backend's ``plan_state``) are part of a remembered
    call's key: a study that moves them gets the plan it asks for, not the one remembered before."""
    from sgemm_cube import product
    from sgemm_cube.backends.cuda import launch

    a = torch.exp(3 * torch.randn(1024, 1024, generator=torch_gen)).cuda()  # fp16x3 lists most lines here
    b = torch.exp(3 * torch.randn(1024, 1024, generator=torch_gen)).cuda()
    fp16x3 = sgemm_cube.matmul(a, b, backend="cuda", scheme="fp16x3")
    bf16x6 = sgemm_cube.matmul(a, b, backend="cuda", scheme="bf16x6")
    assert not torch.equal(fp16x3, bf16x6)
    monkeypatch.setattr(launch, "AUTO_MIN_K", 2 ** 30)  # 1024^3: under both thresholds now
    for _ in range(2):
        assert torch.equal(sgemm_cube.matmul(a, b, backend="cuda"), fp16x3)  # below the threshold: fp16x3
    monkeypatch.setattr(launch, "AUTO_MIN_FLOPS", 0.0)
    before = len(product._emulated_calls)
    for _ in range(2):
        assert torch.equal(sgemm_cube.matmul(a, b, backend="cuda"), bf16x6)  # the GPU's choice: bf16x6
    assert len(product._emulated_calls) == before + 1
