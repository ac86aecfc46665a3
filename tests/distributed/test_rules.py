"""The sharding rules as placements (no processes), and when they are registered."""
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not built in", allow_module_level=True)
from torch.distributed.tensor import Partial, Replicate, Shard  # noqa: E402

from sgemm_cube.distributed import sharding_rules  # noqa: E402

R = Replicate()


@pytest.mark.parametrize("a, b, expected", [
    ((8, 4), (4, 6), [(Shard(0), [Shard(0), R]), (Shard(1), [R, Shard(1)]), (Partial(), [Shard(1), Shard(0)])]),
    ((4,), (4, 6), [(Shard(0), [R, Shard(1)]), (Partial(), [Shard(0), Shard(0)])]),
    ((8, 4), (4,), [(Shard(0), [Shard(0), R]), (Partial(), [Shard(1), Shard(0)])]),
    ((5, 8, 4), (4, 6), [(Shard(1), [Shard(1), R]), (Shard(2), [R, Shard(1)]), (Partial(), [Shard(2), Shard(0)]),
                         (Shard(0), [Shard(0), R])]),
    ((2, 5, 8, 4), (5, 4, 6), [(Shard(2), [Shard(2), R]), (Shard(3), [R, Shard(2)]),
                               (Partial(), [Shard(3), Shard(1)]), (Shard(0), [Shard(0), R]),
                               (Shard(1), [Shard(1), Shard(0)])]),
    ((1, 8, 4), (3, 4, 6), [(Shard(1), [Shard(1), R]), (Shard(2), [R, Shard(2)]), (Partial(), [Shard(2), Shard(1)])]),
])
def test_rules(a, b, expected):
    rules = sharding_rules(a, b)
    assert rules[0] == ([R], [R, R])  # replicated, always
    assert [(out[0], ins) for out, ins in rules[1:]] == expected


def test_rules_are_registered_when_dtensor_is_imported_after_sgemm_cube():
    code = ("import sys, sgemm_cube.torch_ops\n"
            "from sgemm_cube.distributed import registered\n"
            "assert 'torch.distributed.tensor' not in sys.modules and not registered()\n"
            "import torch.distributed.tensor\n"
            "assert registered()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
