"""What every benchmark record shares: where results go, the run's environment, the error.

Used by the GPU benchmark (:mod:`.bench_gpu`), the model benchmark
(:mod:`.bench_model`) and the distributed example; one definition each.
"""
from __future__ import annotations

import datetime
import pathlib
import platform
import sys

__all__ = ["RESULTS_DIR", "environment", "rel_error", "synchronize"]

#: Where the JSON records go, relative to where a benchmark runs (the checkout).
RESULTS_DIR = pathlib.Path("benchmarks") / "results"


def environment(device="cuda") -> dict:
    """Device, versions and command line of this run (for the JSON records)."""
    import torch

    import sgemm_cube

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    dev = torch.device(device)
    gpu = dev.type == "cuda"
    return {"device": torch.cuda.get_device_name(dev) if gpu else (platform.processor() or platform.machine()),
            "torch": torch.__version__, "triton": triton_version, "sgemm_cube": sgemm_cube.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version(),
            "sms": torch.cuda.get_device_properties(dev).multi_processor_count if gpu else None,
            "command": " ".join([pathlib.Path(sys.executable).name] + sys.argv),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def rel_error(c, ref) -> float:
    """Relative Frobenius error of ``c`` against the float64 ``ref`` (Eq. 12 of the paper); NaN if ``c`` is not finite."""
    import torch

    c = c.reshape(ref.shape).double()
    if not torch.isfinite(c).all():
        return float("nan")
    return float(torch.linalg.norm((c - ref).flatten()) / torch.linalg.norm(ref.flatten()))


def synchronize(device) -> None:
    """Wait for ``device``'s queued work (nothing to wait for on the CPU)."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
