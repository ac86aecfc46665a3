"""What the benchmark scripts share: their command line's ``--out``, the CUDA setup and timer, and the one
writer of their records, ``<out>/<prefix>_<gpu>_<time>.json``."""
from __future__ import annotations

import contextlib
import datetime
import json
import pathlib
import shutil
import statistics
import subprocess
import sys

#: Where the records go unless ``--out`` says otherwise.
RESULTS = pathlib.Path("benchmarks") / "results"


def add_out_argument(parser) -> None:
    """``--out DIR`` (default :data:`RESULTS`) on an :class:`argparse.ArgumentParser`."""
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS, help="directory of the JSON record")


def cuda_setup(seed: int = 0):
    """cuBLAS SGEMM without TF32 (native FP32, what sgemm_cube is compared with); a seeded CUDA generator."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    return torch.Generator(device="cuda").manual_seed(seed)


def best_ms(fn, *, runs: int, rep: int) -> float:
    """The smallest of ``runs`` ``triton.testing.do_bench`` medians (ms), each over ``rep`` ms."""
    import triton.testing

    return min(triton.testing.do_bench(fn, warmup=10, rep=rep) for _ in range(runs))


@contextlib.contextmanager
def gpu_clocks(period_ms: int = 50):
    """Sample the current GPU's SM clock (MHz) and power draw (W) with ``nvidia-smi`` while the block runs;
    yields a dict that holds, after the block, their medians and minima and the number of samples (empty where
    ``nvidia-smi`` is missing or fails).  ``power.draw`` is what the driver reports, an average over about a
    second on recent drivers, so a block shorter than that under-reads it; the SM clock is instantaneous.  An
    H200 running 8192^3 products back to back sits at its 700 W limit at about 1400-1480 MHz of 1980
    (docs/speed.md), so a ceiling measured in one run is a power-capped rate."""
    import torch

    found: dict = {}
    uuid = str(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", "") or "")
    if shutil.which("nvidia-smi") is None:
        yield found
        return
    gpu = ["-i", uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"] if uuid else []
    command = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
               "-lms", str(period_ms), *gpu]
    sampler = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        yield found
    finally:
        sampler.terminate()
        lines = sampler.communicate()[0].strip().splitlines()
        samples = []
        for line in lines:
            try:
                samples.append([float(x) for x in line.split(",")])
            except ValueError:
                continue
        if samples:
            clocks, watts = [s[0] for s in samples], [s[1] for s in samples]
            found.update(sm_mhz_median=statistics.median(clocks), sm_mhz_min=min(clocks),
                         power_w_median=statistics.median(watts), samples=len(samples))


def write_record(out: pathlib.Path, prefix: str, rows: list, **fields) -> pathlib.Path:
    """Write ``rows`` with the device, torch's and Triton's versions, the command line and any further
    ``fields`` (a ``method``, say); return the path."""
    import torch
    import triton

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    device = torch.cuda.get_device_name()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{prefix}_{device.split()[1].lower()}_{stamp}.json"
    path.write_text(json.dumps(dict(device=device, torch=torch.__version__, triton=triton.__version__,
                                    command=" ".join([sys.executable, *sys.argv]), **fields, rows=rows), indent=1))
    return path
