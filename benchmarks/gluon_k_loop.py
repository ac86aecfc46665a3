"""The fp16x3 K loop with one wait per K step (Gluon), against the same loop in Triton: a feasibility study.

Issue 33's ceiling (0.85 of three FP16 -> FP32 products at 8192^3; 0.79-0.83 measured). Triton compiles
``gemm_kernel``'s K loop so that each warp group waits for its MMAs to drain twice per K step: after
``A_hi B_hi`` (the flush reads that partial) and between the two correction products (the second takes the
first's accumulator); docs/speed.md. Gluon (``triton.experimental.gluon``) lets the wait be written: each
step here issues the three products asynchronously and waits only until ``A_hi B_hi`` is done
(``warpgroup_mma_wait(num_outstanding=2)``), so the correction products run while the flush's FADDs do.
The same additions in the same order as Triton's loop, so the same bits are expected.

Both kernels are the K loop alone: FP16 planes split beforehand without line scaling (random normal data),
``C = corr 2**-12 + hh``, no line meta, fix-up or overflow check: what the production GEMM would gain, not a
product. Prints, per size: cuBLAS SGEMM (TF32 off), the ceiling (three cuBLAS FP16 -> FP32 products of the
same shape), each loop's time and fraction of the ceiling, their relative errors against float64 (first 256
rows), whether their bits agree, and ``sgemm_cube.matmul``'s fraction; writes a JSON record to
``benchmarks/results/``.

Written for Triton 3.6's Gluon (the GPU machines'; Triton 3.9 renamed ``tma.async_copy_global_to_shared``).
Compiled for sm_90 without a GPU (2026-11-29, Triton 3.6, ptxas of its wheel): 206 registers, no spills,
196 KB of shared memory at 3 stages, and in the SASS of the K loop the twelve HGMMA of a step issued back to
back, then one ``WARPGROUP.DEPBAR.LE gsb0, 0x2``; the Triton loop 208 registers and two
``WARPGROUP.DEPBAR.LE gsb0, 0x0`` per step. Not yet run on a GPU.

    python benchmarks/gluon_k_loop.py [--sizes 4096 8192] [--stages 3]
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (mbarrier, tma, warpgroup_mma, warpgroup_mma_init,
                                                              warpgroup_mma_wait)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._record import add_out_argument, best_ms, cuda_setup, write_record  # noqa: E402
from sgemm_cube.backends.cuda.gemm_tiles import tile_position  # noqa: E402

#: The split's residual exponent (sb).
SB = gl.constexpr(12)


@gluon.jit
def _load_step(a0_desc, a1_desc, b0_desc, b1_desc, a0_s, a1_s, b0_s, b1_s, ready, step, k_steps, off_m, off_n,
               STAGES: gl.constexpr):
    """Start the TMA loads of K step ``step``'s four tiles into stage ``step % STAGES`` (none past the last)."""
    BLOCK_K: gl.constexpr = a0_desc.block_type.shape[1]
    nbytes: gl.constexpr = 2 * a0_desc.block_type.nbytes + 2 * b0_desc.block_type.nbytes
    t = step % STAGES
    bar = ready.index(t)
    k = step * BLOCK_K
    mbarrier.expect(bar, nbytes, pred=step < k_steps)
    tma.async_copy_global_to_shared(a0_desc, [off_m, k], bar, a0_s.index(t), pred=step < k_steps)
    tma.async_copy_global_to_shared(a1_desc, [off_m, k], bar, a1_s.index(t), pred=step < k_steps)
    tma.async_copy_global_to_shared(b0_desc, [k, off_n], bar, b0_s.index(t), pred=step < k_steps)
    tma.async_copy_global_to_shared(b1_desc, [k, off_n], bar, b1_s.index(t), pred=step < k_steps)


@gluon.jit
def gluon_kloop_kernel(a0_desc, a1_desc, b0_desc, b1_desc, c_ptr, M, N, K,
                       STAGES: gl.constexpr, GROUP_M: gl.constexpr, num_warps: gl.constexpr):
    BLOCK_M: gl.constexpr = a0_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a0_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b0_desc.block_type.shape[1]
    dtype: gl.constexpr = a0_desc.dtype
    # grouped tile order, as gemm_tiles.tile_position's (a Gluon kernel calls Gluon functions only)
    pid = gl.program_id(0)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = gl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N

    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BLOCK_N, 16])
    a0_s = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, BLOCK_K], a0_desc.layout)
    a1_s = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, BLOCK_K], a1_desc.layout)
    b0_s = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_K, BLOCK_N], b0_desc.layout)
    b1_s = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_K, BLOCK_N], b1_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
    k_steps = gl.cdiv(K, BLOCK_K)
    for i in gl.static_range(STAGES - 1):  # prologue: the first STAGES - 1 steps' tiles
        _load_step(a0_desc, a1_desc, b0_desc, b1_desc, a0_s, a1_s, b0_s, b1_s, ready, i, k_steps, off_m, off_n, STAGES)

    hh = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, mma)
    part = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, mma)
    corr = warpgroup_mma_init(gl.zeros((BLOCK_M, BLOCK_N), gl.float32, mma))
    for ks in range(k_steps):
        s = ks % STAGES
        mbarrier.wait(ready.index(s), (ks // STAGES) & 1)
        # level 0 into a fresh accumulator, then both correction products into theirs, none waited for
        part = warpgroup_mma(a0_s.index(s), b0_s.index(s), part, use_acc=False, is_async=True)
        corr = warpgroup_mma(a1_s.index(s), b0_s.index(s), corr, is_async=True)
        corr = warpgroup_mma(a0_s.index(s), b1_s.index(s), corr, is_async=True)
        # level 0 done (and every group before it: step ks - 1's corrections); the corrections run on
        part = warpgroup_mma_wait(num_outstanding=2, deps=(part, ))
        hh = gl.fma(part, 1.0, hh)  # the flush: one FP32 rounding, not fused into the MMA
        # step ks - 1's stage is free in this warp group; the barrier makes it free in both
        gl.thread_barrier()
        _load_step(a0_desc, a1_desc, b0_desc, b1_desc, a0_s, a1_s, b0_s, b1_s, ready, ks + STAGES - 1, k_steps,
                   off_m, off_n, STAGES)
    corr = warpgroup_mma_wait(num_outstanding=0, deps=(corr, ))
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))
    acc = corr * (2.0 ** -SB) + hh
    offs_m = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mma))
    offs_n = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
    ptrs = c_ptr + offs_m[:, None].to(gl.int64) * N + offs_n[None, :]
    gl.store(ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def tl_kloop_kernel(a0_desc, a1_desc, b0_desc, b1_desc, c_ptr, M, N, K,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """The same loop as gemm_kernel's (fp16x3, termwise, a flush every step) in Triton."""
    _, pid_m, pid_n = tile_position(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    hh = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    corr = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ks in tl.range(0, tl.cdiv(K, BLOCK_K)):
        k = ks * BLOCK_K
        a0 = a0_desc.load([off_m, k]); a1 = a1_desc.load([off_m, k])
        b0 = b0_desc.load([k, off_n]); b1 = b1_desc.load([k, off_n])
        part = tl.dot(a0, b0, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32))
        corr = tl.dot(a1, b0, corr)
        corr = tl.dot(a0, b1, corr)
        hh = tl.fma(part, 1.0, hh)
    acc = corr * (2.0 ** -12) + hh
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def split(x):
    """The FP16 planes ``(hi, lo)`` of a CUDA tensor by the library's own split (:func:`sgemm_cube.split`, on the
    host), without line scaling: for normal data only."""
    import torch

    import sgemm_cube

    return tuple(torch.from_numpy(p).to(x.device) for p in sgemm_cube.split(x.cpu().numpy(), sb=SB.value))


def gluon_product(planes, m, n, k, *, stages, bm=128, bn=128, bk=64, group_m=8, num_warps=8):
    """A launcher of :func:`gluon_kloop_kernel` on ``planes`` ((A_hi, A_lo), (B_hi, B_lo)) and its output."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    (a0, a1), (b0, b1) = planes
    la = gl.NVMMASharedLayout.get_default_for([bm, bk], gl.float16)
    lb = gl.NVMMASharedLayout.get_default_for([bk, bn], gl.float16)
    descs = [TensorDescriptor(t, list(t.shape), list(t.stride()), blk, lay)
             for t, blk, lay in ((a0, [bm, bk], la), (a1, [bm, bk], la), (b0, [bk, bn], lb), (b1, [bk, bn], lb))]
    c = torch.empty(m, n, device=a0.device, dtype=torch.float32)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), )
    return (lambda: gluon_kloop_kernel[grid](*descs, c, m, n, k, stages, group_m, num_warps=num_warps)), c


def triton_product(planes, m, n, k, *, stages, bm=128, bn=128, bk=64, group_m=8, num_warps=8):
    """A launcher of :func:`tl_kloop_kernel` (the same tiles) and its output."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    (a0, a1), (b0, b1) = planes
    descs = [TensorDescriptor.from_tensor(t, blk)
             for t, blk in ((a0, [bm, bk]), (a1, [bm, bk]), (b0, [bk, bn]), (b1, [bk, bn]))]
    c = torch.empty(m, n, device=a0.device, dtype=torch.float32)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), )
    return (lambda: tl_kloop_kernel[grid](*descs, c, m, n, k, bm, bn, bk, group_m,
                                          num_warps=num_warps, num_stages=stages)), c


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[4096, 8192])
    parser.add_argument("--stages", type=int, default=3)
    add_out_argument(parser)
    args = parser.parse_args(argv)

    import torch

    import sgemm_cube

    gen = cuda_setup()
    us = lambda f: best_ms(f, runs=3, rep=150) * 1e3
    rows = []
    for n in args.sizes:
        a = torch.randn(n, n, device="cuda", generator=gen)
        b = torch.randn(n, n, device="cuda", generator=gen)
        planes = (split(a), split(b))
        ah, bh = a.half(), b.half()
        ref = a[:256].double() @ b.double()
        row = dict(n=n, sgemm_us=us(lambda: a @ b), ceiling_us=3 * us(lambda: ah @ bh))
        outs = {}
        for name, make in (("gluon", gluon_product), ("triton", triton_product)):
            run, c = make(planes, n, n, n, stages=args.stages)
            run()
            torch.cuda.synchronize()
            t = us(run)
            outs[name] = c
            row[name] = dict(us=t, of_ceiling=row["ceiling_us"] / t,
                             rel_err=((c[:256].double() - ref).norm() / ref.norm()).item())
        row["same_bits"] = bool(torch.equal(outs["gluon"].view(torch.int32), outs["triton"].view(torch.int32)))
        row["matmul_of_ceiling"] = row["ceiling_us"] / us(lambda: sgemm_cube.matmul(a, b))
        row["sgemm_rel_err"] = (((a[:256] @ b).double() - ref).norm() / ref.norm()).item()
        rows.append(row)
        print(f"{n}^3: ceiling {row['ceiling_us']:.0f} us; gluon {row['gluon']['of_ceiling']:.3f}, triton "
              f"{row['triton']['of_ceiling']:.3f} of it (sgemm_cube.matmul {row['matmul_of_ceiling']:.3f}); errors "
              f"{row['gluon']['rel_err']:.2e} / {row['triton']['rel_err']:.2e} (SGEMM {row['sgemm_rel_err']:.2e}); "
              f"same bits {row['same_bits']}", flush=True)
        del a, b, ah, bh, planes, outs
    print(f"wrote {write_record(args.out, 'gluon_k_loop', rows, stages=args.stages)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
