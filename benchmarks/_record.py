"""What the benchmark scripts share: their command line's ``--out``, the CUDA setup and timer, and the one
writer of their records, ``<out>/<prefix>_<gpu>_<time>.json``."""
from __future__ import annotations

import datetime
import json
import pathlib
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
