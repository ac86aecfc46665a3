"""Run by ``torchrun --nproc-per-node 2 tests/distributed/worker.py OUT.json`` (gloo, CPU): measure, don't judge.

Every rank computes the cases below; rank 0 writes one JSON record that
``test_dtensor.py`` checks (a failure in a rank is recorded with its
traceback, so the test reports it instead of hanging).  Data: fixed seeds,
the same global operands on every rank.
"""
import json
import os
import pathlib
import sys
import traceback

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
import sgemm_cube  # noqa: E402
import sgemm_cube.nn  # noqa: E402
from sgemm_cube.distributed import registered  # noqa: E402
from tests.guarantee_data import fp32_matmul  # noqa: E402

OP = torch.ops.sgemm_cube.matmul.default
UNIT = 2.0 ** -24

#: name -> (a's shape, b's shape, a's placement, b's placement); the CPU model's K >= 16 keeps every local product emulated.
CASES = {
    "rows": ((24, 64), (64, 20), Shard(0), Replicate()),
    "cols": ((24, 64), (64, 20), Replicate(), Shard(1)),
    "k": ((24, 64), (64, 20), Shard(1), Shard(0)),
    "replicated": ((24, 64), (64, 20), Replicate(), Replicate()),
    "batch": ((4, 12, 32), (4, 32, 10), Shard(0), Shard(0)),
    "batch, b 2-D": ((4, 12, 32), (32, 10), Shard(0), Replicate()),
    "rows of a batch": ((3, 12, 32), (32, 10), Shard(1), Replicate()),
    "vector a, cols": ((64,), (64, 20), Replicate(), Shard(1)),
    "vector b, k": ((24, 64), (64,), Shard(1), Shard(0)),
}


def _data(shape, seed, mixed=False):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    if mixed:  # rows mixing huge and tiny entries, as in the single-device guarantee tests
        x = x * torch.exp2(torch.randint(-60, 60, shape, generator=torch.Generator().manual_seed(seed + 1)).float())
    return x


def _accuracy(c, a, b, native):
    """Errors of ``c``, ``native`` (this host's kernels, on the same sharding) and FP32 recursive summation
    (the same on every host: the tests' baseline) against float64, and ``c``'s largest error over SGEMM's bound."""
    ref = torch.matmul(a.double(), b.double())
    bound = a.shape[-1] * UNIT * torch.matmul(a.double().abs(), b.double().abs())
    rel = lambda x: float((x.double() - ref).norm() / ref.norm())  # noqa: E731
    return {"rel_err": rel(c), "native_rel_err": rel(native), "fp32_rel_err": rel(fp32_matmul(a, b)),
            "max_err_over_sgemm_bound": float(((c.double() - ref).abs() / bound.clamp_min(1e-300)).max())}


def sharding_cases(mesh):
    out = {}
    for name, (sa, sb, pa, pb) in CASES.items():
        for mixed in (False, True):
            a, b = _data(sa, 1, mixed), _data(sb, 2, mixed)
            da = distribute_tensor(a, mesh, [pa], src_data_rank=None)
            db = distribute_tensor(b, mesh, [pb], src_data_rank=None)
            c = OP(da, db)
            with sgemm_cube.switch.bypass():
                native = torch.matmul(da, db).full_tensor()
            full = c.full_tensor()
            out[f"{name}{', mixed' if mixed else ''}"] = {
                "placements": str(c.placements), "input_placements": str((da.placements, db.placements)),
                "equals_one_device": bool(torch.equal(full, OP(a, b))),
                "local_equals_local_product": bool(torch.equal(c.to_local(), OP(da.to_local(), db.to_local()))),
                **_accuracy(full, a, b, native)}
    return out


def autograd_case(mesh):
    a, b = _data((24, 64), 3), _data((64, 20), 4)
    da = distribute_tensor(a, mesh, [Shard(0)], src_data_rank=None).requires_grad_()
    db = distribute_tensor(b, mesh, [Replicate()], src_data_rank=None).requires_grad_()
    cot = _data((24, 20), 5)
    (OP(da, db) * distribute_tensor(cot, mesh, [Shard(0)], src_data_rank=None)).sum().backward()
    a1, b1 = a.clone().requires_grad_(), b.clone().requires_grad_()
    (OP(a1, b1) * cot).sum().backward()
    a64, b64 = a.double().requires_grad_(), b.double().requires_grad_()
    (torch.matmul(a64, b64) * cot.double()).sum().backward()
    ga, gb = da.grad.full_tensor(), db.grad.full_tensor()
    rel = lambda x, r: float((x.double() - r).norm() / r.norm())  # noqa: E731
    return {"grad_a_equals_one_device": bool(torch.equal(ga, a1.grad)), "grad_a_rel_err": rel(ga, a64.grad),
            "grad_b_rel_err": rel(gb, b64.grad), "grad_b_one_device_rel_err": rel(b1.grad, b64.grad),
            "grad_placements": str((da.grad.placements, db.grad.placements))}


def switch_cases(mesh):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    out = {}
    a, b = _data((24, 64), 6), _data((64, 20), 7)
    da = distribute_tensor(a, mesh, [Shard(0)], src_data_rank=None)
    db = distribute_tensor(b, mesh, [Replicate()], src_data_rank=None)
    with sgemm_cube.enabled(devices=("cpu",)):
        c = torch.matmul(da, db)
        calls = sgemm_cube.switch.routed_calls()
    out["matmul"] = {"routed": calls, "local_equals_sgemm_cube": bool(torch.equal(c.to_local(), sgemm_cube.matmul(
        da.to_local(), db.to_local())))}

    def mlp(linear=torch.nn.Linear):
        torch.manual_seed(0)
        return torch.nn.Sequential(linear(64, 96), torch.nn.ReLU(), linear(96, 20))

    x = _data((16, 64), 8)
    with torch.no_grad():
        ref = mlp().double()(x.double())
        native = parallelize_module(mlp(), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})(x)
    plan = {"0": ColwiseParallel(), "2": RowwiseParallel()}
    rel = lambda y: float((y.double() - ref).norm() / ref.norm())  # noqa: E731
    model = parallelize_module(mlp(), mesh, plan)
    with sgemm_cube.enabled(devices=("cpu",)), torch.no_grad():
        y = model(x).wait()  # an AsyncCollectiveTensor until its all-reduce finished
        calls = sgemm_cube.switch.routed_calls()
    w1, b1, w2, b2 = (p.detach() for p in mlp().parameters())
    fp32 = fp32_matmul(torch.relu(fp32_matmul(x, w1.T) + b1), w2.T) + b2  # recursive sums: the same on every host
    out["tp mlp, switch"] = {"routed": calls, "rel_err": rel(y), "native_rel_err": rel(native),
                             "fp32_rel_err": rel(fp32), "weight_placements": str(model[0].weight.placements)}
    converted = sgemm_cube.nn.convert(mlp())
    model = parallelize_module(converted, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    from sgemm_cube.cli.bench_model import count_calls

    with count_calls() as counts:
        y = model(x)  # used below by autograd, which waits for its all-reduce
    y.sum().backward()
    out["tp mlp, sgemm_cube.nn.Linear"] = {"products": counts["products"], "rel_err": rel(y.detach()),
                                           "native_rel_err": rel(native),
                                           "grad_placements": str(model[0].weight.grad.placements)}
    return out


def main(path):
    mesh = init_device_mesh("cpu", (2,))
    record = {"rank": dist.get_rank(), "world": dist.get_world_size(), "registered": registered()}
    for name, fn in (("sharding", sharding_cases), ("autograd", autograd_case), ("switch", switch_cases)):
        try:
            record[name] = fn(mesh)
        except Exception:  # recorded for the test to report
            record[name] = {"error": traceback.format_exc()}
    records = [None] * dist.get_world_size()
    dist.all_gather_object(records, record)
    if dist.get_rank() == 0:
        pathlib.Path(path).write_text(json.dumps(records, indent=1))
    dist.barrier()  # no rank tears down the group while another still talks in it
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    # Skip interpreter finalization: gloo's threads can abort a process there after the group is gone
    # ("terminate called without an active exception", seen once in about 20 runs on a busy 2-core machine;
    # PyTorch discusses it in pytorch/pytorch#179291).  Everything is written and flushed by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
