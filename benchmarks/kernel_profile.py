"""Dev: per-kernel GPU time of sgemm_cube.matmul (torch profiler)."""
import torch
from torch.profiler import ProfilerActivity, profile

import sgemm_cube


def kernels(a, b, reps=10):
    for _ in range(3):
        sgemm_cube.matmul(a, b, backend="cuda")
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            sgemm_cube.matmul(a, b, backend="cuda")
        torch.cuda.synchronize()
    ev = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            ev.setdefault(e.name[:24], []).append(e.device_time)
    return {k: round(sum(v) / reps, 1) for k, v in ev.items()}


for m in (2048, 4096, 8192):
    a = torch.randn(m, m, device="cuda"); b = torch.randn(m, m, device="cuda")
    print(m, "normal      ", kernels(a, b), flush=True)
    a1 = a.clone(); a1[::100, ::7] *= 2.0 ** -60
    print(m, "1% rows fixed", kernels(a1, b), flush=True)
    print(m, "1e30 (scaled)", kernels(a * 1e30, b), flush=True)
