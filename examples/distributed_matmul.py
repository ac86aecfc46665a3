"""Sharded FP32 products with sgemm_cube inside torch.distributed (DTensor, tensor parallelism).

Start it with torchrun, one process per device::

    torchrun --nproc-per-node 2 examples/distributed_matmul.py --device cpu            # gloo, CPU model
    torchrun --nproc-per-node 2 examples/distributed_matmul.py --device cuda \\
        --shape 32768 16384 32768 --json benchmarks/results/distributed_h200x2.json   # NCCL, one GPU each

For each sharding it builds the same global ``a`` (M x K) and ``b`` (K x N) on
every rank (same seed), wraps them as ``DTensor``s and computes ``a @ b``
twice on the same sharding: with ``torch.ops.sgemm_cube.matmul`` (sgemm_cube
on every rank's local product, DTensor doing the communication) and with
``torch.matmul`` (native FP32 SGEMM, TF32 off).  Shardings:

* ``rows``: ``a`` Shard(0), ``b`` Replicate -> result Shard(0), no communication;
* ``cols``: ``a`` Replicate, ``b`` Shard(1) -> result Shard(1), no communication;
* ``k``: ``a`` Shard(1), ``b`` Shard(0) -> Partial sums, reduce-scattered in
  FP32 to Shard(0) (part of the timed product);
* ``none``: both replicated (every rank computes the whole product).

It reports the time (the slowest rank's, median of ``--runs``), TFLOP/s,
the relative Frobenius error against float64 over ``--ref-rows`` rows of
every rank's result, and the largest elementwise error in units of SGEMM's
bound ``K 2**-24 (|a| @ |b|)``.  On each rank it checks sgemm_cube's
fingerprint: the local result of a sharding without partial sums is bit for
bit ``sgemm_cube.matmul`` of the local operands.  ``--encoder`` adds the
tensor-parallel TransformerEncoder of ``sgemm-cube bench --model`` (its
feed-forward layers ``ColwiseParallel``/``RowwiseParallel``), native and
under ``sgemm_cube.enabled()``.  ``--json`` writes the record (rank 0).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # a checkout without pip install
import sgemm_cube  # noqa: E402
import sgemm_cube.torch_ops  # noqa: E402,F401 - the operator and its sharding rules
from sgemm_cube.backends.native import true_fp32  # noqa: E402
from sgemm_cube.cli.records import environment, synchronize  # noqa: E402

#: sharding name -> (a's placement, b's placement).
SHARDINGS = {"rows": (Shard(0), Replicate()), "cols": (Replicate(), Shard(1)),
             "k": (Shard(1), Shard(0)), "none": (Replicate(), Replicate())}
UNIT = 2.0 ** -24


def _parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--shape", type=int, nargs=3, metavar=("M", "K", "N"), default=None,
                   help="global product shape (default 512 768 384 on the CPU, 8192 8192 8192 on GPUs)")
    p.add_argument("--sharding", nargs="+", choices=list(SHARDINGS), default=["rows", "k"])
    p.add_argument("--runs", type=int, default=None, help="timed runs per case (default 1 on the CPU, 5 on GPUs)")
    p.add_argument("--ref-rows", type=int, default=64, help="rows of each rank's result checked against float64")
    p.add_argument("--encoder", action="store_true", help="also the tensor-parallel TransformerEncoder")
    p.add_argument("--tiny", action="store_true", help="the encoder at the CPU smoke-test size")
    p.add_argument("--json", type=pathlib.Path, help="write the record here (rank 0)")
    args = p.parse_args(argv)
    gpu = args.device == "cuda"
    args.shape = args.shape or ((8192, 8192, 8192) if gpu else (512, 768, 384))
    args.runs = args.runs or (5 if gpu else 1)
    return args


def _slowest(seconds: float, device) -> float:
    """The largest of every rank's ``seconds``."""
    t = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def _timed(fn, runs: int, device):
    """``fn()``'s result and the slowest rank's median time (s) over ``runs`` synchronised runs, after one warm-up."""
    result = fn()
    times = []
    for _ in range(runs):
        synchronize(device)
        dist.barrier()
        t0 = time.perf_counter()
        result = fn()
        synchronize(device)
        times.append(_slowest(time.perf_counter() - t0, device))
    return result, statistics.median(times)


def _local_rows(c: DTensor, m: int, n: int):
    """Global (row indices, column indices) of this rank's local result ``c``."""
    local = c.to_local()
    rows, cols = torch.arange(m), torch.arange(n)
    rank, size = c.device_mesh.get_local_rank(), c.device_mesh.size()
    for placement in c.placements:
        if isinstance(placement, Shard):
            idx = rows if placement.dim == 0 else cols
            part = idx.chunk(size)[rank]  # DTensor's Shard splits as torch.chunk does
            if placement.dim == 0:
                rows = part
            else:
                cols = part
    assert (len(rows), len(cols)) == tuple(local.shape), (len(rows), len(cols), local.shape)
    return rows, cols


def _errors(c: DTensor, a, b, ref_rows: int, device) -> dict:
    """Relative Frobenius error (float64, over ``ref_rows`` rows of each rank's result) and the bound ratio."""
    m, n = a.shape[0], b.shape[1]
    rows, cols = _local_rows(c, m, n)
    pick = torch.arange(min(ref_rows, len(rows)))
    got = c.to_local()[pick.to(device)].double()
    ga, gb = a[rows[pick].to(device)].double(), b[:, cols.to(device)].double()
    ref = ga @ gb
    bound = a.shape[1] * UNIT * (ga.abs() @ gb.abs())
    sums = torch.tensor([float(((got - ref) ** 2).sum()), float((ref ** 2).sum())], dtype=torch.float64, device=device)
    dist.all_reduce(sums)
    ratio = torch.tensor([float(((got - ref).abs() / bound.clamp_min(1e-300)).max())], dtype=torch.float64,
                         device=device)
    dist.all_reduce(ratio, op=dist.ReduceOp.MAX)
    return {"rel_err": float((sums[0] / sums[1]).sqrt()), "max_err_over_sgemm_bound": float(ratio)}


def product_cases(args, mesh, device) -> list:
    """Every sharding, sgemm_cube and native on it: time, TFLOP/s, errors, fingerprint."""
    m, k, n = args.shape
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(m, k, device=device, generator=gen)
    b = torch.randn(k, n, device=device, generator=gen)
    rows = []
    for name in args.sharding:
        pa, pb = SHARDINGS[name]
        da = distribute_tensor(a, mesh, [pa], src_data_rank=None)  # every rank holds the same a: no scatter
        db = distribute_tensor(b, mesh, [pb], src_data_rank=None)
        methods = {"sgemm_cube": lambda: torch.ops.sgemm_cube.matmul(da, db), "native FP32": lambda: torch.matmul(da, db)}
        for method, fn in methods.items():
            def run():
                c = fn()
                if any(isinstance(p, Partial) for p in c.placements):
                    c = c.redistribute(mesh, [Shard(0)])  # the FP32 reduction of the partial sums
                return c
            with true_fp32():
                c, seconds = _timed(run, args.runs, device)
            row = {"sharding": name, "method": method, "world": mesh.size(), "placements": str(c.placements),
                   "seconds": seconds, "tflops": 2 * m * n * k / seconds / 1e12, **_errors(c, a, b, args.ref_rows, device)}
            if method == "sgemm_cube" and name != "k":
                local = sgemm_cube.matmul(da.to_local(), db.to_local())
                row["fingerprint"] = _agree(torch.equal(c.to_local(), local), device)
            rows.append(row)
            del c
    return rows


def _agree(ok: bool, device) -> bool:
    """Whether ``ok`` holds on every rank."""
    t = torch.tensor([0 if ok else 1], device=device)
    dist.all_reduce(t)
    return int(t) == 0


def encoder_cases(args, mesh, device) -> list:
    """The model benchmark's encoder with tensor-parallel feed-forward layers: native and under the switch."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from sgemm_cube.cli.bench_model import FULL, TINY, build_model

    cfg = TINY if args.tiny else FULL
    model, x = build_model(cfg, device, seed=0)
    with torch.no_grad():
        ref = model.double()(x.double())
    model.float()
    if mesh.size() > 1:
        for layer in model.layers:  # attention stays replicated: its projections are one packed weight
            parallelize_module(layer, mesh, {"linear1": ColwiseParallel(), "linear2": RowwiseParallel()})
    rows = []
    for method in ("native FP32", "sgemm_cube.enabled()"):
        switch = sgemm_cube.enabled(devices=(device.type,)) if method != "native FP32" else contextlib.nullcontext()
        with true_fp32(), torch.no_grad(), switch:
            y, seconds = _timed(lambda: _waited(model(x)), args.runs, device)
            calls = sgemm_cube.switch.routed_calls() if method != "native FP32" else {}
        y = y.full_tensor() if isinstance(y, DTensor) else y
        err = float((y.double() - ref).norm() / ref.norm())
        routed = _agree(sum(calls.values()) > 0, device) if method != "native FP32" else None
        rows.append({"case": "encoder forward", "method": method, "world": mesh.size(),
                     "config": dict(layers=cfg.layers, d_model=cfg.d_model, ffn=cfg.ffn, tokens=cfg.batch * cfg.tokens),
                     "seconds": seconds, "rel_err": err, "routed_calls": calls, "routed_on_every_rank": routed})
    return rows


def _waited(y):
    """``y`` with its collective finished: a tensor-parallel output is an ``AsyncCollectiveTensor`` until then."""
    return y.wait() if hasattr(y, "wait") else y


def _table(rows) -> str:
    lines = [f"{'case':18s} {'method':22s} {'world':>5s} {'ms':>10s} {'TFLOP/s':>8s} {'rel err':>9s} {'err/bound':>9s}"]
    for r in rows:
        lines.append(f"{r.get('sharding', r.get('case')):18s} {r['method']:22s} {r['world']:5d} {1e3 * r['seconds']:10.2f} "
                     f"{r.get('tflops', float('nan')):8.2f} {r['rel_err']:9.2e} {r.get('max_err_over_sgemm_bound', float('nan')):9.2e}")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = _parse(argv)
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    mesh = init_device_mesh(args.device, (int(os.environ.get("WORLD_SIZE", 1)),))  # gloo on CPUs, NCCL on GPUs
    device = torch.device(args.device, torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    try:
        rows = product_cases(args, mesh, device)
        if args.encoder:
            rows += encoder_cases(args, mesh, device)
        if dist.get_rank() == 0:
            print(_table(rows), flush=True)
            if args.json:
                record = {"env": environment(device), "backend": dist.get_backend_config(), "world": mesh.size(),
                          "shape": args.shape, "runs": args.runs, "rows": rows}
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(record, indent=1) + "\n")
    finally:
        dist.barrier()  # no rank tears down the group while another still talks in it
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    status = main()
    # Skip interpreter finalization: gloo's threads can abort a process there after the group is gone
    # ("terminate called without an active exception"; pytorch/pytorch#179291).  All output is flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
