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
